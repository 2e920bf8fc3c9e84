//! zk-lock `RwLock` and Apache Curator's `InterProcessReadWriteLock` (real Java peers) on the
//! same lock paths: writers exclude everyone across languages, readers share, the queue is fair
//! across languages, and the nodes are named alike.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zk_lock::testing::wait_for_children;
use zk_lock::{participants_with, Error, ParticipantKind, Role, RwLock};

use crate::support::java_peer::{curator_sequence, held_node, read_counter, JavaPeer};
use crate::support::{new_client, node_name, scratch_dir, server, unique_name};

/// Bound of a single acquisition: generous, because JVMs start slowly on a loaded machine.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound of a whole contention run.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

const READ: &str = "__READ__";
const WRITE: &str = "__WRIT__";

fn lock_path(name: &str) -> String {
    format!("/zk-lock-tests/interop-rwlock/{}", unique_name(name))
}

/// The names in a peer's `children <names...>` line.
fn listed_children(line: &str) -> Vec<String> {
    let names = line.strip_prefix("children").unwrap_or_else(|| panic!("not a `children` line: {line:?}"));
    names.split_whitespace().map(str::to_owned).collect()
}

/// What a reader saw: how many read holds, and the distinct counter values.
struct Reads {
    holds: u64,
    values: BTreeSet<u64>,
}

/// Reads the counter under the read lock until it reaches `until`, twice per hold with a pause
/// between: the value must not change while the read lock is held.
async fn rust_reader(lock: RwLock, counter: PathBuf, until: u64, inside: Arc<AtomicI64>) -> Reads {
    let mut reads = Reads { holds: 0, values: BTreeSet::new() };
    loop {
        let guard = lock.read_timeout(ACQUIRE_TIMEOUT).await.expect("read lock");
        assert!(inside.fetch_add(1, Ordering::SeqCst) >= 0, "a Rust reader entered while a Rust writer wrote");
        let value = read_counter(&counter);
        // Give any writer (Rust or Java) that wrongly holds the lock time to write.
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        let again = read_counter(&counter);
        assert_eq!(again, value, "the counter changed while a Rust reader held the read lock");
        inside.fetch_sub(1, Ordering::SeqCst);
        guard.release().await.expect("release read lock");
        reads.holds += 1;
        reads.values.insert(value);
        if value >= until {
            return reads;
        }
    }
}

/// Increments the counter `rounds` times under the write lock; returns the values written.
async fn rust_writer(lock: RwLock, counter: PathBuf, rounds: u64, inside: Arc<AtomicI64>) -> Vec<u64> {
    let mut written = Vec::new();
    for _ in 0..rounds {
        let guard = lock.write_timeout(ACQUIRE_TIMEOUT).await.expect("write lock");
        assert_eq!(inside.swap(-1, Ordering::SeqCst), 0, "a Rust writer entered an occupied lock");
        // Read, pause so any other holder could run, then write.
        let value = read_counter(&counter);
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        std::fs::write(&counter, (value + 1).to_string()).expect("write counter");
        written.push(value + 1);
        assert_eq!(inside.swap(0, Ordering::SeqCst), -1, "someone entered while a Rust writer wrote");
        guard.release().await.expect("release write lock");
    }
    written
}

/// Parses a Java reader's `done <reads> <distinct-values>`.
fn java_reads(line: &str) -> (u64, u64) {
    let fields: Vec<u64> = line
        .strip_prefix("done ")
        .and_then(|rest| rest.split_whitespace().map(|field| field.parse().ok()).collect())
        .unwrap_or_else(|| panic!("not `done <reads> <distinct>`: {line:?}"));
    assert_eq!(fields.len(), 2, "not `done <reads> <distinct>`: {line:?}");
    (fields[0], fields[1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_readers_and_writers_share_a_counter_correctly() {
    const JAVA_WRITERS: usize = 2;
    const JAVA_READERS: usize = 2;
    const JAVA_ROUNDS: u64 = 20;
    const RUST_SESSIONS: usize = 2;
    const RUST_WRITERS_PER_SESSION: usize = 2;
    const RUST_READERS_PER_SESSION: usize = 1;
    const RUST_ROUNDS: u64 = 20;
    const TOTAL: u64 =
        JAVA_WRITERS as u64 * JAVA_ROUNDS + (RUST_SESSIONS * RUST_WRITERS_PER_SESSION) as u64 * RUST_ROUNDS;
    let connect = server().connect_string();
    let path = lock_path("counter");
    let dir = scratch_dir("curator_rwlock", "counter");
    let counter = dir.join("counter");
    let counter_arg = counter.to_str().expect("UTF-8 temp path").to_owned();
    let (rounds, total) = (JAVA_ROUNDS.to_string(), TOTAL.to_string());

    // Java readers read until they see the final value, so they read throughout the writes.
    let mut writers: Vec<JavaPeer> = (0..JAVA_WRITERS)
        .map(|_| JavaPeer::spawn(&connect, &["rw-counter", &path, &rounds, &counter_arg, "writer"]))
        .collect();
    let mut readers: Vec<JavaPeer> = (0..JAVA_READERS)
        .map(|_| JavaPeer::spawn(&connect, &["rw-counter", &path, &total, &counter_arg, "reader"]))
        .collect();
    let mut clients = Vec::new();
    for _ in 0..RUST_SESSIONS {
        clients.push(new_client().await);
    }
    // Everyone is connected before anyone starts, so they really contend.
    for peer in writers.iter_mut().chain(&mut readers) {
        peer.expect_line("ready").await;
    }
    let started = Instant::now();
    for peer in writers.iter_mut().chain(&mut readers) {
        peer.send("go").await;
    }

    // Positive: that many Rust readers inside; -1: a Rust writer inside.
    let inside = Arc::new(AtomicI64::new(0));
    let mut rust_writers = Vec::new();
    let mut rust_readers = Vec::new();
    for client in &clients {
        for _ in 0..RUST_WRITERS_PER_SESSION {
            let lock = RwLock::with_client(client, &path);
            rust_writers.push(tokio::spawn(rust_writer(lock, counter.clone(), RUST_ROUNDS, inside.clone())));
        }
        for _ in 0..RUST_READERS_PER_SESSION {
            let lock = RwLock::with_client(client, &path);
            rust_readers.push(tokio::spawn(rust_reader(lock, counter.clone(), TOTAL, inside.clone())));
        }
    }

    let run = async {
        let mut written = Vec::new();
        for task in rust_writers {
            written.extend(task.await.expect("Rust writer"));
        }
        let mut rust_reads = Vec::new();
        for task in rust_readers {
            rust_reads.push(task.await.expect("Rust reader"));
        }
        (written, rust_reads)
    };
    let (mut written, rust_reads) = tokio::time::timeout(RUN_TIMEOUT, run).await.expect("Rust tasks finish");
    for peer in &mut writers {
        assert_eq!(peer.expect_line("done ").await, format!("done {JAVA_ROUNDS}"));
    }
    let mut java_reads_seen = Vec::new();
    for peer in &mut readers {
        // A reader that saw the counter change under the read lock printed `violation` and failed.
        java_reads_seen.push(java_reads(&peer.expect_line("done ").await));
    }
    for peer in writers.into_iter().chain(readers) {
        peer.wait_success().await;
    }
    eprintln!(
        "{TOTAL} writes in {:?}; Rust reads (holds, distinct values): {:?}; Java reads: {java_reads_seen:?}",
        started.elapsed(),
        rust_reads.iter().map(|reads| (reads.holds, reads.values.len())).collect::<Vec<_>>(),
    );

    assert_eq!(read_counter(&counter), TOTAL, "lost updates: Rust and Curator writers overlapped");
    written.sort_unstable();
    let rust_count = written.len();
    written.dedup();
    assert_eq!(written.len(), rust_count, "two Rust writers wrote the same value");
    let (first, last) = (written[0], written[rust_count - 1]);
    assert!(last - first + 1 > rust_count as u64, "Rust wrote {first}..={last} without any Java write in between");
    // The readers' checks mean something only if they read while the writers wrote.
    for reads in &rust_reads {
        assert!(reads.values.contains(&TOTAL), "a Rust reader stopped before the end");
        assert!(reads.values.len() >= 2, "a Rust reader saw only {:?}: it never read between writes", reads.values);
    }
    for &(holds, distinct) in &java_reads_seen {
        assert!(distinct >= 2 && holds >= distinct, "a Java reader saw {distinct} value(s) in {holds} read(s)");
    }
    let observer = new_client().await;
    wait_for_children(&observer, &path, |children| children.is_empty()).await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_writer_waits_for_a_curator_reader() {
    let connect = server().connect_string();
    let path = lock_path("curator-reads");
    let client = new_client().await;
    let mut peer = JavaPeer::spawn(&connect, &["rw-hold", &path, "read"]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    let java_node = held_node(&peer.expect_line("held ").await);
    let java_sequence = curator_sequence(&java_node, READ);
    assert_eq!(listed_children(&peer.expect_line("children").await), std::slice::from_ref(&java_node));
    assert_eq!(
        wait_for_children(&client, &path, |children| !children.is_empty()).await.unwrap(),
        std::slice::from_ref(&java_node),
        "the Curator reader's node is the only one"
    );

    let lock = RwLock::with_client(&client, &path);
    // Readers share across languages.
    let read = lock.try_read().await.expect("a Rust reader joins the Curator reader");
    assert!(curator_sequence(node_name(read.node_path()), READ) > java_sequence);
    read.release().await.expect("release read lock");
    match lock.try_write().await {
        Err(Error::Busy { path: busy }) => assert_eq!(busy, path),
        other => panic!("try_write while Curator reads: expected Busy, got {other:?}"),
    }
    assert_eq!(
        wait_for_children(&client, &path, |children| children.len() == 1).await.unwrap(),
        std::slice::from_ref(&java_node),
        "the Rust reader and the refused writer left no node behind"
    );

    let writer = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let guard = lock.write_timeout(ACQUIRE_TIMEOUT).await;
            (guard, Instant::now())
        })
    };
    let queued = wait_for_children(&client, &path, |children| children.len() == 2).await.unwrap();
    let rust_node = queued.iter().find(|name| **name != java_node).expect("our node").clone();
    assert!(curator_sequence(&rust_node, WRITE) > java_sequence, "{rust_node} queued behind {java_node}");
    assert!(!writer.is_finished(), "write() returned while Curator reads");

    let releasing = Instant::now();
    peer.send("release").await;
    let (guard, granted_at) = tokio::time::timeout(ACQUIRE_TIMEOUT, writer).await.expect("granted").expect("task");
    let guard = guard.expect("write lock after Curator's release");
    assert!(granted_at > releasing, "granted before the Curator reader was told to release");
    assert_eq!(node_name(guard.node_path()), rust_node, "granted on the node that queued");
    assert!(guard.is_held());
    peer.expect_line("released").await;
    peer.wait_success().await;
    assert_eq!(wait_for_children(&client, &path, |children| children.len() == 1).await.unwrap(), [rust_node]);
    guard.release().await.expect("release write lock");
    wait_for_children(&client, &path, |children| children.is_empty()).await.unwrap();
}

/// Fairness across languages: a Curator writer queued behind a Rust reader waits for it, and a
/// Rust reader that queued behind the Curator writer waits for the writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_writer_waits_for_a_rust_reader_and_keeps_a_later_rust_reader_waiting() {
    let connect = server().connect_string();
    let path = lock_path("rust-reads");
    let (first_client, late_client, probe_client) = (new_client().await, new_client().await, new_client().await);
    let first_read = RwLock::with_client(&first_client, &path).read_timeout(ACQUIRE_TIMEOUT).await.expect("read");
    let first_node = node_name(first_read.node_path()).to_owned();
    let first_sequence = curator_sequence(&first_node, READ);

    let mut peer = JavaPeer::spawn(&connect, &["rw-hold", &path, "write"]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    let queued = wait_for_children(&first_client, &path, |children| children.len() == 2).await.unwrap();
    let java_node = queued.iter().find(|name| **name != first_node).expect("Curator's node").clone();
    let java_sequence = curator_sequence(&java_node, WRITE);
    assert!(java_sequence > first_sequence, "{java_node} queued behind {first_node}");

    // A later Rust reader queues behind the Curator writer, and does not get in.
    let late_reader = {
        let lock = RwLock::with_client(&late_client, &path);
        tokio::spawn(async move {
            let guard = lock.read_timeout(ACQUIRE_TIMEOUT).await;
            (guard, Instant::now())
        })
    };
    let queued = wait_for_children(&first_client, &path, |children| children.len() == 3).await.unwrap();
    let late_node = queued.iter().find(|name| **name != first_node && **name != java_node).expect("late").clone();
    assert!(curator_sequence(&late_node, READ) > java_sequence, "{late_node} queued behind {java_node}");
    let probe = RwLock::with_client(&probe_client, &path);
    match probe.try_read().await {
        Err(Error::Busy { .. }) => {}
        other => panic!("try_read behind a queued Curator writer: expected Busy, got {other:?}"),
    }
    assert!(!late_reader.is_finished(), "a Rust reader got in ahead of the queued Curator writer");
    assert!(first_read.is_held());
    if let Some(line) = peer.line_already_printed().await {
        panic!("Curator printed {line:?} while a Rust reader holds the lock");
    }

    first_read.release().await.expect("release the first read lock");
    // Only now may the Curator writer hold it, on the node it queued; when it was granted the
    // first reader's node was gone.
    assert_eq!(peer.expect_line("held ").await, format!("held {java_node}"));
    let seen_at_grant = listed_children(&peer.expect_line("children").await);
    assert!(!seen_at_grant.contains(&first_node), "Curator was granted while {first_node} held: {seen_at_grant:?}");
    assert_eq!(seen_at_grant.first(), Some(&java_node), "{seen_at_grant:?}");
    match probe.try_read().await {
        Err(Error::Busy { .. }) => {}
        other => panic!("try_read while the Curator writer holds: expected Busy, got {other:?}"),
    }
    assert!(!late_reader.is_finished(), "a Rust reader got in while the Curator writer holds");

    let releasing = Instant::now();
    peer.send("release").await;
    let (guard, granted_at) = tokio::time::timeout(ACQUIRE_TIMEOUT, late_reader).await.expect("granted").expect("task");
    let guard = guard.expect("read lock after the Curator writer's release");
    assert!(granted_at > releasing, "the late reader was granted before the Curator writer was told to release");
    assert_eq!(node_name(guard.node_path()), late_node, "granted on the node that queued");
    peer.expect_line("released").await;
    peer.wait_success().await;
    guard.release().await.expect("release the late read lock");
    wait_for_children(&first_client, &path, |children| children.is_empty()).await.unwrap();
}

/// Curator names its nodes `_c_<uuid>-__WRIT__<seq>` and `_c_<uuid>-__READ__<seq>`, as we do, and
/// `participants()` reads them: a Curator writer holding and a Curator reader waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_read_and_write_nodes_are_named_like_ours() {
    let connect = server().connect_string();
    let path = lock_path("names");
    let client = new_client().await;
    let mut writer = JavaPeer::spawn(&connect, &["rw-hold", &path, "write"]);
    let mut reader = JavaPeer::spawn(&connect, &["rw-hold", &path, "read"]);
    writer.expect_line("ready").await;
    reader.expect_line("ready").await;
    writer.send("go").await;
    let write_node = held_node(&writer.expect_line("held ").await);
    let write_sequence = curator_sequence(&write_node, WRITE);
    reader.send("go").await;
    let queued = wait_for_children(&client, &path, |children| children.len() == 2).await.unwrap();
    let read_node = queued.iter().find(|name| **name != write_node).expect("reader's node").clone();
    assert!(curator_sequence(&read_node, READ) > write_sequence, "{read_node} queued behind {write_node}");

    let found = participants_with(&client, &path).await.expect("participants");
    let summary: Vec<_> = found.iter().map(|p| (p.node_name.as_str(), p.kind, p.role)).collect();
    assert_eq!(
        summary,
        [
            (write_node.as_str(), ParticipantKind::Write, Role::Holder),
            (read_node.as_str(), ParticipantKind::Read, Role::Waiter),
        ]
    );
    assert_eq!(found[0].sequence, write_sequence);

    // Our nodes use the same layout: a Rust writer queues as `__WRIT__`, behind both.
    let lock = RwLock::with_client(&client, &path);
    let rust_writer = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.write_timeout(ACQUIRE_TIMEOUT).await })
    };
    let queued = wait_for_children(&client, &path, |children| children.len() == 3).await.unwrap();
    let rust_node = queued.iter().find(|name| **name != write_node && **name != read_node).expect("ours").clone();
    assert!(curator_sequence(&rust_node, WRITE) > curator_sequence(&read_node, READ));

    writer.send("release").await;
    writer.expect_line("released").await;
    assert_eq!(reader.expect_line("held ").await, format!("held {read_node}"));
    let roles: Vec<_> =
        participants_with(&client, &path).await.expect("participants").iter().map(|p| (p.kind, p.role)).collect();
    assert_eq!(roles, [(ParticipantKind::Read, Role::Holder), (ParticipantKind::Write, Role::Waiter)]);
    assert!(!rust_writer.is_finished(), "the Rust writer got in while the Curator reader reads");
    reader.send("release").await;
    reader.expect_line("released").await;
    let guard = tokio::time::timeout(ACQUIRE_TIMEOUT, rust_writer).await.expect("granted").expect("task");
    let guard = guard.expect("write lock after both Curator peers left");
    assert_eq!(node_name(guard.node_path()), rust_node);
    writer.wait_success().await;
    reader.wait_success().await;
    guard.release().await.expect("release write lock");
    wait_for_children(&client, &path, |children| children.is_empty()).await.unwrap();
}
