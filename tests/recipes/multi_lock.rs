//! `MultiLock` against a real ZooKeeper: no deadlock in opposite orders, all or nothing.

use std::time::Duration;

use zk_lock::testing::{children, wait_for_children};
use zk_lock::{Error, MultiLock, MultiMember, Mutex, RwLock};

use crate::scenarios;
use crate::support::new_client;

const PATH: &str = "/it-multi";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_orders_never_deadlock() {
    const ROUNDS: usize = 30;
    let (a, b) = (format!("{PATH}/opposite/a"), format!("{PATH}/opposite/b"));
    let mut tasks = Vec::new();
    for paths in [[a.clone(), b.clone()], [b.clone(), a.clone()]] {
        let client = new_client().await;
        tasks.push(tokio::spawn(async move {
            let lock = MultiLock::with_client(&client, paths);
            for _ in 0..ROUNDS {
                let both = lock.lock_timeout(Duration::from_secs(30)).await.expect("no deadlock, no timeout");
                assert!(both.is_held());
                both.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let client = new_client().await;
    wait_for_children(&client, &a, |c| c.is_empty()).await.unwrap();
    wait_for_children(&client, &b, |c| c.is_empty()).await.unwrap();
}

#[tokio::test]
async fn paths_are_sorted_and_de_duplicated_and_taken_in_that_order() {
    let (a, b) = (format!("{PATH}/order/a"), format!("{PATH}/order/b"));
    let client = new_client().await;
    let lock = MultiLock::with_client(&client, [b.clone(), a.clone(), b.clone()]);
    assert_eq!(lock.paths().collect::<Vec<_>>(), [a.as_str(), b.as_str()]);
    let both = lock.lock().await.unwrap();
    let tokens = both.fencing_tokens();
    assert_eq!(tokens.iter().map(|(path, _)| *path).collect::<Vec<_>>(), [a.as_str(), b.as_str()]);
    assert!(tokens[0].1 < tokens[1].1, "a was granted before b: {tokens:?}");
    assert_eq!(both.fencing_token(), tokens[1].1);
    both.release().await.unwrap();
    assert!(children(&client, &a).await.unwrap().is_empty() && children(&client, &b).await.unwrap().is_empty());
}

/// The holder takes only the second path: the contender lets the first go again.
#[tokio::test]
async fn busy_and_timeouts_leave_only_the_holders_nodes() {
    scenarios::busy_and_timeouts_leave_only_the_holders_nodes::<MultiLock>(
        &format!("{PATH}/all-or-nothing"),
        Duration::from_millis(300),
    )
    .await;
}

/// The same with a plain mutex as the holder: a multi-lock's members are ordinary mutexes.
#[tokio::test]
async fn a_member_held_by_a_plain_mutex_leaves_nothing_taken() {
    let (a, b) = (format!("{PATH}/plain-holder/a"), format!("{PATH}/plain-holder/b"));
    let (holder, client) = (new_client().await, new_client().await);
    let held_b = Mutex::with_client(&holder, &b).lock().await.unwrap();
    let lock = MultiLock::with_client(&client, [a.clone(), b.clone()]);
    assert!(matches!(lock.try_lock().await, Err(Error::Busy { path }) if path == b));
    assert!(children(&client, &a).await.unwrap().is_empty(), "a was released again");
    held_b.release().await.unwrap();
    lock.try_lock().await.expect("both free now").release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sessions_of_eight_tasks_never_overlap() {
    scenarios::four_sessions_of_eight_tasks_never_overlap::<MultiLock>(&format!("{PATH}/exclusion"), 10).await;
}

#[tokio::test]
async fn read_and_write_members_of_one_path_downgrade_instead_of_deadlocking() {
    let (shared, other) = (format!("{PATH}/mixed/rw"), format!("{PATH}/mixed/m"));
    let client = new_client().await;
    let rw = RwLock::with_client(&client, &shared);
    let members = [
        MultiMember::Read(rw.clone()),
        MultiMember::Mutex(Mutex::with_client(&client, &other)),
        MultiMember::Write(rw),
    ];
    let guard = MultiLock::from_members(members).lock_timeout(Duration::from_secs(10)).await.expect("no upgrade");
    let nodes = guard.node_paths();
    assert_eq!(nodes.len(), 3);
    assert!(nodes[1].contains("__WRIT__") && nodes[2].contains("__READ__"), "write first, then read: {nodes:?}");
    guard.release().await.unwrap();
    assert!(children(&client, &shared).await.unwrap().is_empty());
}
