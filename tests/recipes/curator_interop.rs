//! zk-lock `Mutex` and Apache Curator's `InterProcessMutex` (real Java peers) on the same lock
//! paths: they exclude each other, queue behind each other, and name their nodes alike.

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::java_peer::JavaPeer;
use support::zk::{new_client, server, wait_for_children};
use tokio::time::Instant;
use zk_lock::{Error, Mutex};

/// Bound of a single acquisition: generous, because JVMs start slowly on a loaded machine.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);

/// A name no earlier run used, so a reused ZooKeeper or target directory cannot interfere.
fn unique(name: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

fn lock_path(name: &str) -> String {
    format!("/zk-lock-tests/interop/{}", unique(name))
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("curator_interop").join(unique(name));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// The counter file's value, as the Java peer reads it: missing or empty is 0.
fn read_counter(file: &Path) -> u64 {
    match std::fs::read_to_string(file) {
        Ok(text) if text.trim().is_empty() => 0,
        Ok(text) => text.trim().parse().unwrap_or_else(|e| panic!("counter file holds {text:?}: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => panic!("read {}: {e}", file.display()),
    }
}

/// Checks Curator's protected lock node layout, `_c_<uuid>-lock-<10 digits>`, and returns the
/// sequence number.
fn curator_sequence(name: &str) -> u64 {
    let fail = |why: &str| -> ! { panic!("{name:?} is not `_c_<uuid>-lock-<10 digits>`: {why}") };
    let Some(rest) = name.strip_prefix("_c_") else { fail("no `_c_` prefix") };
    let Some((uuid, sequence)) = rest.split_once("-lock-") else { fail("no `-lock-`") };
    let groups: Vec<&str> = uuid.split('-').collect();
    if groups.iter().map(|group| group.len()).collect::<Vec<_>>() != [8, 4, 4, 4, 12] {
        fail("the uuid is not 8-4-4-4-12");
    }
    if !groups.iter().all(|group| group.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())) {
        fail("the uuid is not lowercase hex");
    }
    if sequence.len() != 10 || !sequence.bytes().all(|b| b.is_ascii_digit()) {
        fail("the sequence is not 10 digits");
    }
    sequence.parse().expect("10 digits fit in u64")
}

/// The last segment of a node path.
fn node_name(node_path: &str) -> &str {
    node_path.rsplit('/').next().expect("rsplit yields at least one item")
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
    let dir = fresh_dir("counter");
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
    wait_for_children(&observer, &path, |children| children.is_empty()).await;
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
    let java_node = held.strip_prefix("held ").expect("prefix checked").to_owned();
    let java_sequence = curator_sequence(&java_node);
    assert_eq!(
        wait_for_children(&client, &path, |children| !children.is_empty()).await,
        std::slice::from_ref(&java_node),
        "the Curator holder's node is the only one"
    );

    let mutex = Mutex::with_client(&client, &path);
    match mutex.try_lock().await {
        Err(Error::Busy { path: busy }) => assert_eq!(busy, path),
        other => panic!("try_lock while Curator holds: expected Busy, got {other:?}"),
    }
    assert_eq!(
        wait_for_children(&client, &path, |children| children.len() == 1).await,
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
    let queued = wait_for_children(&client, &path, |children| children.len() == 2).await;
    let rust_node = queued.iter().find(|name| **name != java_node).expect("our node").clone();
    assert!(curator_sequence(&rust_node) > java_sequence, "{rust_node} queued behind {java_node}");
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
    assert_eq!(wait_for_children(&client, &path, |children| children.len() == 1).await, [rust_node]);
    guard.release().await.expect("release");
    wait_for_children(&client, &path, |children| children.is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_waits_while_rust_holds_and_gets_the_lock_after_its_release() {
    let connect = server().connect_string();
    let path = lock_path("rust-holds");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock_timeout(ACQUIRE_TIMEOUT).await.expect("lock");
    let rust_node = node_name(guard.node_path()).to_owned();
    let rust_sequence = curator_sequence(&rust_node);

    let mut peer = JavaPeer::spawn(&connect, &["mutex-hold", &path]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    // Curator's node queues behind ours.
    let queued = wait_for_children(&client, &path, |children| children.len() == 2).await;
    let java_node = queued.iter().find(|name| **name != rust_node).expect("Curator's node").clone();
    assert!(curator_sequence(&java_node) > rust_sequence, "{java_node} queued behind {rust_node}");
    assert!(guard.is_held());
    if let Some(line) = peer.line_already_printed().await {
        panic!("Curator printed {line:?} while Rust holds the lock");
    }

    guard.release().await.expect("release");
    // Only now may Curator hold it, on the node it queued.
    let held = peer.expect_line("held ").await;
    assert_eq!(held, format!("held {java_node}"), "Curator holds the node it queued");
    assert_eq!(wait_for_children(&client, &path, |children| children.len() == 1).await, [java_node]);
    match Mutex::with_client(&client, &path).try_lock().await {
        Err(Error::Busy { .. }) => {}
        other => panic!("try_lock while Curator holds: expected Busy, got {other:?}"),
    }
    peer.send("release").await;
    peer.expect_line("released").await;
    peer.wait_success().await;
    wait_for_children(&client, &path, |children| children.is_empty()).await;
}
