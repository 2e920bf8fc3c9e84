//! zk-lock `Mutex` and Apache Curator's `InterProcessMutex` (real Java peers) on the same lock
//! paths: they exclude each other, queue behind each other, and name their nodes alike.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zk_lock::testing::wait_for_children;
use zk_lock::{Error, Mutex};
use zookeeper_client::{Acls, CreateMode};

use crate::support::java_peer::{curator_sequence, held_node, read_counter, JavaPeer};
use crate::support::{new_client, node_name, scratch_dir, server, unique_name};

/// Bound of a single acquisition: generous, because JVMs start slowly on a loaded machine.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);

fn lock_path(name: &str) -> String {
    format!("/zk-lock-tests/interop/{}", unique_name(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_mutexes_share_a_counter_without_lost_updates() {
    const JAVA_PEERS: usize = 2;
    const JAVA_ITERATIONS: u64 = 40;
    const RUST_SESSIONS: usize = 2;
    const RUST_TASKS: usize = 2;
    const RUST_ROUNDS: u64 = 40;
    const TOTAL: u64 = JAVA_PEERS as u64 * JAVA_ITERATIONS + (RUST_SESSIONS * RUST_TASKS) as u64 * RUST_ROUNDS;
    let connect = server().connect_string();
    let path = lock_path("counter");
    let dir = scratch_dir("curator_interop", "counter");
    let counter = dir.join("counter");
    let counter_arg = counter.to_str().expect("UTF-8 temp path").to_owned();
    let iterations = JAVA_ITERATIONS.to_string();

    let mut peers: Vec<JavaPeer> = (0..JAVA_PEERS)
        .map(|_| JavaPeer::spawn(&connect, &["mutex-counter", &path, &iterations, &counter_arg]))
        .collect();
    let mut clients = Vec::new();
    for _ in 0..RUST_SESSIONS {
        clients.push(new_client().await);
    }
    // Everyone is connected before anyone starts, so they really contend.
    for peer in &mut peers {
        peer.expect_line("ready").await;
    }
    let started = Instant::now();
    for peer in &mut peers {
        peer.send("go").await;
    }

    let holders = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for client in &clients {
        for _ in 0..RUST_TASKS {
            let (mutex, counter, holders) = (Mutex::with_client(client, &path), counter.clone(), holders.clone());
            tasks.push(tokio::spawn(async move {
                let mut written = Vec::new();
                for _ in 0..RUST_ROUNDS {
                    let guard = mutex.lock_timeout(ACQUIRE_TIMEOUT).await.expect("lock");
                    assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "two Rust holders at once");
                    // Read, pause so any other holder (Rust or Java) could run, then write.
                    let value = read_counter(&counter);
                    tokio::task::yield_now().await;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    std::fs::write(&counter, (value + 1).to_string()).expect("write counter");
                    written.push(value + 1);
                    holders.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("release");
                }
                written
            }));
        }
    }

    let mut rust_values = Vec::new();
    for task in tasks {
        let written =
            tokio::time::timeout(ACQUIRE_TIMEOUT, task).await.expect("Rust task finishes").expect("Rust task");
        rust_values.extend(written);
    }
    for peer in &mut peers {
        assert_eq!(peer.expect_line("done ").await, format!("done {JAVA_ITERATIONS}"));
    }
    for peer in peers {
        peer.wait_success().await;
    }
    eprintln!("{TOTAL} increments in {:?}", started.elapsed());

    assert_eq!(read_counter(&counter), TOTAL, "lost updates: Rust and Curator holders overlapped");
    rust_values.sort_unstable();
    let rust_count = rust_values.len();
    rust_values.dedup();
    assert_eq!(rust_values.len(), rust_count, "two Rust holders wrote the same value");
    // Java increments landed between Rust ones: the two sides really took turns.
    let (first, last) = (rust_values[0], rust_values[rust_count - 1]);
    assert!(last - first + 1 > rust_count as u64, "Rust wrote {first}..={last} without any Java grant in between");
    let observer = new_client().await;
    wait_for_children(&observer, &path, |children| children.is_empty()).await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_waits_while_curator_holds_and_gets_the_lock_after_its_release() {
    let connect = server().connect_string();
    let path = lock_path("curator-holds");
    let client = new_client().await;
    let mut peer = JavaPeer::spawn(&connect, &["mutex-hold", &path]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    let held = peer.expect_line("held ").await;
    let java_node = held_node(&held);
    let java_sequence = curator_sequence(&java_node, "lock-");
    assert_eq!(
        wait_for_children(&client, &path, |children| !children.is_empty()).await.unwrap(),
        std::slice::from_ref(&java_node),
        "the Curator holder's node is the only one"
    );

    let mutex = Mutex::with_client(&client, &path);
    match mutex.try_lock().await {
        Err(Error::Busy { path: busy }) => assert_eq!(busy, path),
        other => panic!("try_lock while Curator holds: expected Busy, got {other:?}"),
    }
    assert_eq!(
        wait_for_children(&client, &path, |children| children.len() == 1).await.unwrap(),
        std::slice::from_ref(&java_node),
        "try_lock left its node behind"
    );

    let waiter = {
        let mutex = mutex.clone();
        tokio::spawn(async move {
            let guard = mutex.lock_timeout(ACQUIRE_TIMEOUT).await;
            (guard, Instant::now())
        })
    };
    // Our node queues behind Curator's.
    let queued = wait_for_children(&client, &path, |children| children.len() == 2).await.unwrap();
    let rust_node = queued.iter().find(|name| **name != java_node).expect("our node").clone();
    assert!(curator_sequence(&rust_node, "lock-") > java_sequence, "{rust_node} queued behind {java_node}");
    assert!(!waiter.is_finished(), "lock() returned while Curator holds the lock");

    let releasing = Instant::now();
    peer.send("release").await;
    let (guard, granted_at) = tokio::time::timeout(ACQUIRE_TIMEOUT, waiter).await.expect("granted").expect("task");
    let guard = guard.expect("lock after Curator's release");
    assert!(granted_at > releasing, "granted before Curator was told to release");
    assert_eq!(node_name(guard.node_path()), rust_node, "granted on the node that queued");
    assert!(guard.is_held());
    peer.expect_line("released").await;
    peer.wait_success().await;
    assert_eq!(wait_for_children(&client, &path, |children| children.len() == 1).await.unwrap(), [rust_node]);
    guard.release().await.expect("release");
    wait_for_children(&client, &path, |children| children.is_empty()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_waits_while_rust_holds_and_gets_the_lock_after_its_release() {
    let connect = server().connect_string();
    let path = lock_path("rust-holds");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock_timeout(ACQUIRE_TIMEOUT).await.expect("lock");
    let rust_node = node_name(guard.node_path()).to_owned();
    let rust_sequence = curator_sequence(&rust_node, "lock-");

    let mut peer = JavaPeer::spawn(&connect, &["mutex-hold", &path]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    // Curator's node queues behind ours.
    let queued = wait_for_children(&client, &path, |children| children.len() == 2).await.unwrap();
    let java_node = queued.iter().find(|name| **name != rust_node).expect("Curator's node").clone();
    assert!(curator_sequence(&java_node, "lock-") > rust_sequence, "{java_node} queued behind {rust_node}");
    assert!(guard.is_held());
    if let Some(line) = peer.line_already_printed().await {
        panic!("Curator printed {line:?} while Rust holds the lock");
    }

    guard.release().await.expect("release");
    // Only now may Curator hold it, on the node it queued.
    let held = peer.expect_line("held ").await;
    assert_eq!(held, format!("held {java_node}"), "Curator holds the node it queued");
    assert_eq!(wait_for_children(&client, &path, |children| children.len() == 1).await.unwrap(), [java_node]);
    match Mutex::with_client(&client, &path).try_lock().await {
        Err(Error::Busy { .. }) => {}
        other => panic!("try_lock while Curator holds: expected Busy, got {other:?}"),
    }
    peer.send("release").await;
    peer.expect_line("released").await;
    peer.wait_success().await;
    wait_for_children(&client, &path, |children| children.is_empty()).await.unwrap();
}

/// Issue 24: ZooKeeper writes sequences with ten digits; a node made by hand with eleven
/// (`..-lock-00000000000`, 0 by number) used to be taken for the first node of the queue, ahead
/// of ours, and could tie with ours. It is no lock node: zk-lock grants the lock past it and
/// `participants` leaves it out. Curator compares the text after `lock-`, which puts this one
/// first too, so Curator waits behind it (docs/curator-compat.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_an_eleven_digit_sequence_is_ignored_where_curator_waits_behind_it() {
    let connect = server().connect_string();
    let path = lock_path("eleven-digits");
    let client = new_client().await;
    let squatter = new_client().await;
    let zk = squatter.zookeeper();
    zk.mkdir(&path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let foreign = format!("{path}/_c_00000000-0000-4000-8000-000000000000-lock-00000000000");
    zk.create(&foreign, b"", &CreateMode::Ephemeral.with_acls(Acls::anyone_all())).await.unwrap();

    let guard = Mutex::with_client(&client, &path).try_lock().await.expect("granted past the foreign node");
    let seen = zk_lock::participants_with(&client, &path).await.unwrap();
    assert_eq!(seen.iter().map(|p| p.node_path.as_str()).collect::<Vec<_>>(), [guard.node_path()]);
    guard.release().await.unwrap();

    let mut peer = JavaPeer::spawn(&connect, &["mutex-try", &path, "500"]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    assert_eq!(peer.expect_line("").await, "timed-out", "Curator waits behind the eleven-digit node");
    peer.wait_success().await;
    assert!(zk.check_stat(&foreign).await.unwrap().is_some(), "the foreign node is left alone");
    let again = Mutex::with_client(&client, &path).try_lock().await.expect("granted again");
    again.release().await.unwrap();
}
