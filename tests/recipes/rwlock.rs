//! `RwLock` against a real ZooKeeper: sharing, exclusion, fairness, re-entrancy, downgrade and
//! the refused upgrade. All tests share one server; each uses its own lock path.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_lock::testing::{children, wait_for_children};
use zk_lock::{Error, RwLock};

use crate::scenarios::{self, Write};
use crate::support::{new_client, node_name};

const PATH: &str = "/it-rwlock";

#[tokio::test]
async fn readers_share_and_a_writer_excludes_everyone() {
    let path = format!("{PATH}/share");
    let (a, b, c) = (new_client().await, new_client().await, new_client().await);
    let read_a = RwLock::with_client(&a, &path).try_read().await.expect("first reader");
    let read_b = RwLock::with_client(&b, &path).try_read().await.expect("readers share");
    assert!(matches!(RwLock::with_client(&c, &path).try_write().await, Err(Error::Busy { .. })));
    read_a.release().await.unwrap();
    read_b.release().await.unwrap();

    let write = RwLock::with_client(&a, &path).try_write().await.expect("free for a writer");
    assert!(matches!(RwLock::with_client(&b, &path).try_read().await, Err(Error::Busy { .. })));
    assert!(matches!(RwLock::with_client(&c, &path).try_write().await, Err(Error::Busy { .. })));
    write.release().await.unwrap();
    assert!(children(&a, &path).await.unwrap().is_empty(), "refused attempts left no node");
}

#[tokio::test]
async fn a_queued_writer_keeps_later_readers_out() {
    let path = format!("{PATH}/fair");
    let (reader_client, writer_client, late_client) = (new_client().await, new_client().await, new_client().await);
    let first_reader = RwLock::with_client(&reader_client, &path).read().await.unwrap();
    let writer = {
        let lock = RwLock::with_client(&writer_client, &path);
        tokio::spawn(async move { lock.write().await })
    };
    wait_for_children(&reader_client, &path, |c| c.len() == 2).await.unwrap();

    let late = RwLock::with_client(&late_client, &path);
    assert!(matches!(late.try_read().await, Err(Error::Busy { .. })), "a reader behind a queued writer waits");
    first_reader.release().await.unwrap();
    let write = writer.await.unwrap().expect("the writer gets the lock after the reader");
    assert!(matches!(late.try_read().await, Err(Error::Busy { .. })));
    write.release().await.unwrap();
    late.try_read().await.expect("free after the writer").release().await.unwrap();
}

#[tokio::test]
async fn both_sides_re_enter_within_a_holders_scope() {
    let path = format!("{PATH}/reenter");
    let client = new_client().await;
    let lock = RwLock::with_client(&client, &path);
    let write = lock.write().await.unwrap();
    let write_again = write.scope(lock.write()).await.unwrap();
    assert_eq!(write.node_path(), write_again.node_path());
    write_again.release().await.unwrap();
    write.release().await.unwrap();

    let read = lock.read().await.unwrap();
    let read_again = read.scope(lock.read()).await.unwrap();
    assert_eq!(read.node_path(), read_again.node_path());
    assert_eq!(children(&client, &path).await.unwrap().len(), 1);
    drop((read, read_again));
    wait_for_children(&client, &path, |c| c.is_empty()).await.unwrap();
}

#[tokio::test]
async fn two_holders_of_the_read_lock_each_re_enter_their_own() {
    let path = format!("{PATH}/reenter-each");
    let client = new_client().await;
    let lock = RwLock::with_client(&client, &path);
    let read_here = lock.read().await.unwrap();
    // Another task of the same client takes the read lock too: a node of its own.
    let elsewhere = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.read().await.unwrap() }).await.unwrap()
    };
    assert_ne!(read_here.node_path(), elsewhere.node_path());
    // Code in this holder's scope re-enters its read lock, not the other task's.
    let read_again = read_here.scope(lock.read()).await.unwrap();
    assert_eq!(read_again.node_path(), read_here.node_path());
    // Outside any scope, the same task's read is another reader: a node of its own.
    let sibling = lock.read().await.unwrap();
    assert_ne!(sibling.node_path(), read_here.node_path());
    drop(sibling);
    assert_eq!(children(&client, &path).await.unwrap().len(), 2, "no third node");
    drop((read_here, read_again, elsewhere));
    wait_for_children(&client, &path, |c| c.is_empty()).await.unwrap();
}

#[tokio::test]
async fn upgrading_a_read_lock_is_refused_at_once() {
    let path = format!("{PATH}/upgrade");
    let client = new_client().await;
    let lock = RwLock::with_client(&client, &path);
    let read = lock.read().await.unwrap();
    match read.scope(lock.write()).await {
        Err(Error::WouldDeadlock { path: p, reason }) => {
            assert_eq!(p, path);
            assert!(reason.contains("read lock"), "{reason}");
        }
        other => panic!("expected WouldDeadlock, got {other:?}"),
    }
    assert_eq!(children(&client, &path).await.unwrap().len(), 1, "the refused upgrade created no node");
    read.release().await.unwrap();
}

/// CURATOR-621: a writer downgrades to a read lock and releases the write lock while another
/// writer waits; the waiting writer must not get the lock until the read lock goes too.
#[tokio::test]
async fn a_downgrade_keeps_the_read_lock_when_the_write_lock_goes() {
    let path = format!("{PATH}/downgrade");
    let (client, other) = (new_client().await, new_client().await);
    let lock = RwLock::with_client(&client, &path);
    let write = lock.write().await.unwrap();

    let reading = Arc::new(AtomicBool::new(false));
    let waiting_writer = {
        let (lock, reading) = (RwLock::with_client(&other, &path), reading.clone());
        tokio::spawn(async move {
            let guard = lock.write().await.unwrap();
            // Granted while the downgraded reader still reads: the lock failed.
            let overlapped = reading.load(Ordering::SeqCst);
            guard.release().await.unwrap();
            overlapped
        })
    };
    wait_for_children(&client, &path, |c| c.len() == 2).await.unwrap();

    let read = write.scope(lock.read()).await.expect("code nested in the writer may take the read lock");
    reading.store(true, Ordering::SeqCst);
    let read_node = node_name(read.node_path()).to_owned();
    let write_node = node_name(write.node_path()).to_owned();
    assert!(read_node.contains("__READ__"));
    assert_eq!(read_node[read_node.len() - 10..], write_node[write_node.len() - 10..], "same sequence as the writer");

    write.release().await.unwrap();
    // The waiting writer has seen the write node go; whatever it decided, the read node and
    // its own node are all that is left, and it has not finished.
    wait_for_children(&client, &path, |c| c.len() == 2 && c.iter().any(|n| n == &read_node)).await.unwrap();
    assert!(!waiting_writer.is_finished());
    // Not synchronisation: a window in which a wrong grant would show. The `reading` flag
    // checked by the writer is what catches an overlap.
    let still_waiting = tokio::time::timeout(Duration::from_millis(300), async {
        while !waiting_writer.is_finished() {
            tokio::task::yield_now().await;
        }
    });
    assert!(still_waiting.await.is_err(), "the queued writer must wait for the downgraded read lock");

    reading.store(false, Ordering::SeqCst);
    read.release().await.unwrap();
    assert!(!waiting_writer.await.unwrap(), "the writer overlapped the downgraded reader");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_of_four_sessions_never_overlap_wrongly() {
    const SESSIONS: usize = 4;
    const TASKS: usize = 8;
    const ROUNDS: u64 = 20;
    let path = format!("{PATH}/stress");
    // Positive: that many readers inside; -1: one writer inside.
    let inside = Arc::new(AtomicI64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for session in 0..SESSIONS {
        let client = new_client().await;
        for task in 0..TASKS {
            let lock = RwLock::with_client(&client, &path);
            let (inside, writes, reads) = (inside.clone(), writes.clone(), reads.clone());
            let writer = (session + task) % 3 == 0;
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    if writer {
                        let guard = lock.write().await.unwrap();
                        assert_eq!(inside.swap(-1, Ordering::SeqCst), 0, "a writer entered an occupied lock");
                        let seen = writes.load(Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        writes.store(seen + 1, Ordering::SeqCst);
                        assert_eq!(inside.swap(0, Ordering::SeqCst), -1);
                        guard.release().await.unwrap();
                    } else {
                        let guard = lock.read().await.unwrap();
                        assert!(inside.fetch_add(1, Ordering::SeqCst) >= 0, "a reader entered while a writer wrote");
                        reads.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        inside.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.unwrap();
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("task panicked");
    }
    let writers = (0..SESSIONS).flat_map(|s| (0..TASKS).map(move |t| (s + t) % 3 == 0)).filter(|w| *w).count() as u64;
    assert_eq!(writes.load(Ordering::SeqCst), writers * ROUNDS, "no write was lost");
    assert_eq!(reads.load(Ordering::SeqCst), (SESSIONS * TASKS) as u64 * ROUNDS - writers * ROUNDS);
    let client = new_client().await;
    wait_for_children(&client, &path, |c| c.is_empty()).await.unwrap();
}

/// A writer keeps readers out as well as writers.
#[tokio::test]
async fn busy_and_timeouts_leave_only_the_holders_nodes() {
    scenarios::busy_and_timeouts_leave_only_the_holders_nodes::<Write>(
        &format!("{PATH}/timeout"),
        Duration::from_millis(200),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_of_four_sessions_of_eight_tasks_never_overlap() {
    scenarios::four_sessions_of_eight_tasks_never_overlap::<Write>(&format!("{PATH}/exclusion"), 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_writes_dropped_at_random_points_leave_no_node() {
    let path = format!("{PATH}/cancel");
    let client = new_client().await;
    let mut rng = crate::support::rng();
    for round in 0..40 {
        // A writer holds in half the rounds, so the dropped acquisitions are waiting there.
        let holder =
            if round % 2 == 0 { Some(RwLock::with_client(&client, &path).write().await.unwrap()) } else { None };
        let (contender, path) = (client.clone(), path.clone());
        let write = round % 4 < 2;
        let acquire = tokio::spawn(async move {
            let lock = RwLock::with_client(&contender, &path);
            if write {
                lock.write().await.map(drop)
            } else {
                lock.read().await.map(drop)
            }
        });
        tokio::time::sleep(Duration::from_micros(rng.u64(..3_000))).await;
        acquire.abort();
        let _ = acquire.await;
        drop(holder);
    }
    wait_for_children(&client, &path, |c| c.is_empty()).await.unwrap();
}
