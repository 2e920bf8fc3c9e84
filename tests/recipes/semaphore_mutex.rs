//! `SemaphoreMutex` against a real ZooKeeper: exclusion, the refused nested acquire, other tasks
//! waiting, timeouts. All tests share one server; each uses its own path.

use std::time::Duration;

use zk_lock::testing::{children, wait_for_children};
use zk_lock::{Error, SemaphoreMutex};

use crate::scenarios;
use crate::support::{new_client, node_name, PATIENCE};

const PATH: &str = "/it-semaphore-mutex";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sessions_of_eight_tasks_never_overlap() {
    scenarios::four_sessions_of_eight_tasks_never_overlap::<SemaphoreMutex>(&format!("{PATH}/exclusion"), 15).await;
}

#[tokio::test]
async fn a_nested_acquire_is_refused_at_once_and_other_tasks_wait() {
    let path = format!("{PATH}/nested");
    let leases = format!("{path}/leases");
    let client = new_client().await;
    let lock = SemaphoreMutex::with_client(&client, &path);
    let guard = lock.lock().await.unwrap();
    let zk = client.zookeeper();
    // Child versions change with every child created or deleted.
    let cversions = || async {
        let leases = zk.get_children(&leases).await.unwrap().1.cversion;
        let locks = zk.get_children(&format!("{path}/locks")).await.unwrap().1.cversion;
        (leases, locks)
    };
    let before = cversions().await;

    for nested in [
        tokio::time::timeout(PATIENCE, guard.scope(lock.lock())).await.expect("no hang"),
        tokio::time::timeout(PATIENCE, guard.scope(lock.try_lock())).await.expect("no hang"),
        tokio::time::timeout(PATIENCE, guard.scope(lock.lock_timeout(Duration::from_secs(60)))).await.expect("no hang"),
        // Another handle of the same lock on the same client is the same lock.
        tokio::time::timeout(PATIENCE, guard.scope(SemaphoreMutex::with_client(&client, &path).lock()))
            .await
            .expect("no hang"),
    ] {
        match nested {
            Err(Error::WouldDeadlock { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(reason.contains("not re-entrant"), "{reason}");
            }
            other => panic!("expected WouldDeadlock, got {other:?}"),
        }
    }
    // No node was made: the only lease is ours, the internal mutex is free, nothing changed.
    assert_eq!(children(&client, &leases).await.unwrap(), [node_name(guard.node_path())]);
    assert!(children(&client, &format!("{path}/locks")).await.unwrap().is_empty());
    assert_eq!(cversions().await, before, "no node was created or deleted");

    // Another task of the same client is a different holder: it waits.
    let other = {
        let lock = lock.clone();
        move || {
            let lock = lock.clone();
            tokio::spawn(async move { lock.try_lock().await.map(drop) })
        }
    };
    assert!(matches!(other().await.unwrap(), Err(Error::Busy { .. })));
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await })
    };
    wait_for_children(&client, &format!("{path}/locks"), |c| c.len() == 1).await.unwrap();
    assert!(!waiter.is_finished());
    guard.release().await.unwrap();
    let theirs = tokio::time::timeout(PATIENCE, waiter).await.expect("granted").unwrap().expect("the other task");
    theirs.release().await.unwrap();

    // After the release the task may take it again.
    lock.try_lock().await.expect("free").release().await.unwrap();
}

#[tokio::test]
async fn a_lost_lease_does_not_count_as_held() {
    let path = format!("{PATH}/lost");
    let client = new_client().await;
    let lock = SemaphoreMutex::with_client(&client, &path);
    let guard = lock.lock().await.unwrap();
    let lost = guard.lost();
    client.zookeeper().delete(guard.node_path(), None).await.unwrap();
    tokio::time::timeout(PATIENCE, lost).await.expect("lost");
    let again = lock.try_lock().await.expect("the lost lease neither excludes nor deadlocks");
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    again.release().await.unwrap();
}

#[tokio::test]
async fn busy_and_timeouts_leave_only_the_holders_nodes() {
    scenarios::busy_and_timeouts_leave_only_the_holders_nodes::<SemaphoreMutex>(
        &format!("{PATH}/timeout"),
        Duration::from_millis(200),
    )
    .await;
}
