//! `Mutex` against a real ZooKeeper: exclusion, order, re-entrancy, timeouts, cancellation,
//! loss. All tests share one server; each uses its own lock path.

use std::sync::Arc;
use std::time::Duration;

use zk_lock::testing::{children, wait_for_children, Proxy};
use zk_lock::{Client, Error, LostReason, Mutex};

use crate::scenarios;
use crate::support::{
    client_with_fast_heartbeat, client_with_session_timeout, new_client, node_name, rng, server, until_watched,
    within_the_follow_up_bound, PATIENCE,
};

const PATH: &str = "/it-mutex";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sessions_of_eight_tasks_never_overlap() {
    scenarios::four_sessions_of_eight_tasks_never_overlap::<Mutex>(&format!("{PATH}/exclusion"), 50).await;
}

#[tokio::test]
async fn waiters_are_served_in_queue_order() {
    const WAITERS: usize = 6;
    let path = format!("{PATH}/fifo");
    let client = new_client().await;
    let holder = Mutex::with_client(&client, &path).lock().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        // Separate sessions, so the order is decided by ZooKeeper alone.
        let waiter_client = new_client().await;
        let order = order.clone();
        let mutex = Mutex::with_client(&waiter_client, &path);
        tasks.push(tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
            drop(waiter_client);
        }));
        // Queue the next waiter only after this one's node exists.
        wait_for_children(&client, &path, |c| c.len() == i + 2).await.unwrap();
    }
    holder.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
}

#[tokio::test]
async fn code_in_a_holders_scope_re_enters_without_a_new_node_and_others_wait_for_the_last_release() {
    let path = format!("{PATH}/reentrant");
    let client = new_client().await;
    let mutex = Mutex::with_client(&client, &path);
    let outer = mutex.lock().await.unwrap();
    let inner = outer.scope(mutex.lock()).await.unwrap();
    assert_eq!(inner.node_path(), outer.node_path());
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!(children(&client, &path).await.unwrap().len(), 1, "re-entry creates no node");

    let other = {
        let mutex = mutex.clone();
        move || {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.try_lock().await.map(drop) })
        }
    };
    assert!(matches!(other().await.unwrap(), Err(Error::Busy { .. })), "another task of the same client must wait");
    inner.release().await.unwrap();
    assert!(outer.is_held());
    assert!(matches!(other().await.unwrap(), Err(Error::Busy { .. })), "one release of two keeps the lock");
    outer.release().await.unwrap();
    other().await.unwrap().expect("free after the last release");
}

#[tokio::test]
async fn busy_and_timeouts_leave_only_the_holders_nodes() {
    scenarios::busy_and_timeouts_leave_only_the_holders_nodes::<Mutex>(
        &format!("{PATH}/timeout"),
        Duration::from_millis(300),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_dropped_at_random_points_leave_no_node() {
    let path = format!("{PATH}/cancel");
    let client = new_client().await;
    let mut rng = rng();
    for round in 0..60 {
        // Half the rounds contend with a holder, half race the uncontended path.
        let holder = if round % 2 == 0 { Some(Mutex::with_client(&client, &path).lock().await.unwrap()) } else { None };
        let contender = client.clone();
        let path = path.clone();
        let acquire = tokio::spawn(async move { Mutex::with_client(&contender, &path).lock().await });
        tokio::time::sleep(Duration::from_micros(rng.u64(..3_000))).await;
        acquire.abort();
        // Whatever the abort interrupted, a guard it produced is dropped too.
        let _ = acquire.await;
        drop(holder);
    }
    wait_for_children(&client, &path, |c| c.is_empty()).await.unwrap();
}

#[tokio::test]
async fn dropping_a_guard_deletes_its_node() {
    let path = format!("{PATH}/drop");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    assert_eq!(children(&client, &path).await.unwrap().len(), 1);
    drop(guard);
    wait_for_children(&client, &path, |c| c.is_empty()).await.unwrap();
}

#[tokio::test]
async fn fencing_tokens_grow_with_every_grant() {
    let path = format!("{PATH}/fencing");
    let client = new_client().await;
    let mutex = Mutex::with_client(&client, &path);
    let mut last = 0;
    for _ in 0..5 {
        let guard = mutex.lock().await.unwrap();
        assert!(guard.fencing_token() > last, "{} after {last}", guard.fencing_token());
        last = guard.fencing_token();
        guard.release().await.unwrap();
    }
}

#[tokio::test]
async fn session_expiry_loses_the_lock_and_a_new_session_serves_new_acquisitions() {
    let path = format!("{PATH}/expiry");
    let holder_client = client_with_session_timeout(Duration::from_secs(4)).await;
    let mutex = Mutex::with_client(&holder_client, &path);
    let guard = mutex.lock().await.unwrap();
    let lost = guard.lost();
    assert!(guard.is_held());

    server().expire_session(&holder_client).await.expect("expire");
    let reason = tokio::time::timeout(Duration::from_secs(30), lost).await.expect("lost() resolves");
    // Closing the session deletes its nodes before the client learns that the session is gone:
    // the watch on our node may report the deletion first.
    assert!(matches!(reason, LostReason::SessionExpired | LostReason::NodeDeleted), "{reason:?}");
    assert!(!guard.is_held());

    let other = new_client().await;
    let taken = Mutex::with_client(&other, &path)
        .lock_timeout(Duration::from_secs(30))
        .await
        .expect("another session acquires");
    assert!(taken.fencing_token() > guard.fencing_token());
    assert!(matches!(guard.release().await, Err(Error::Lost { reason: r, .. }) if r == reason));
    taken.release().await.unwrap();

    // The same client opens a new session for new acquisitions.
    let again = mutex.lock_timeout(Duration::from_secs(30)).await.expect("renewed session");
    assert!(again.is_held());
    again.release().await.unwrap();
}

#[tokio::test]
async fn deleting_the_node_loses_the_lock() {
    let path = format!("{PATH}/deleted");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let lost = guard.lost();
    client.zookeeper().delete(guard.node_path(), None).await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(30), lost).await.expect("lost() resolves");
    assert_eq!(reason, LostReason::NodeDeleted);
    assert!(!guard.is_held());
    assert!(matches!(guard.release().await, Err(Error::Lost { reason: LostReason::NodeDeleted, .. })));
}

/// A hold is followed by a watch once it lasted one heartbeat period (`T/9`): a node deleted
/// before is found gone by the read that sets the watch, within two periods and a round trip
/// (docs/reliability.md states the bound).
#[tokio::test]
async fn a_node_deleted_as_soon_as_it_is_granted_is_seen_within_the_follow_up_bound() {
    let path = format!("{PATH}/deleted-bound");
    let client = client_with_fast_heartbeat().await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let lost = guard.lost();
    let other = new_client().await;
    let deleted_at = tokio::time::Instant::now();
    other.zookeeper().delete(guard.node_path(), None).await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(30), lost).await.expect("lost() resolves");
    let told_after = deleted_at.elapsed();
    assert_eq!(reason, LostReason::NodeDeleted);
    let bound = within_the_follow_up_bound();
    assert!(told_after <= bound, "told {told_after:?} after the deletion; the bound is {bound:?}");
}

/// Once a hold is watched, its deletion is told by the server as it happens, not at a later
/// heartbeat: with a 1 s heartbeat period, well within half of it.
#[tokio::test]
async fn a_watched_hold_is_told_of_its_deletion_at_once() {
    let path = format!("{PATH}/deleted-watched");
    let client = client_with_session_timeout(Duration::from_secs(9)).await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let node = guard.node_path().to_owned();
    until_watched(&node, true).await;
    let lost = guard.lost();
    let other = new_client().await;
    let deleted_at = tokio::time::Instant::now();
    other.zookeeper().delete(&node, None).await.unwrap();
    let reason = tokio::time::timeout(PATIENCE, lost).await.expect("lost() resolves");
    let told_after = deleted_at.elapsed();
    assert_eq!(reason, LostReason::NodeDeleted);
    assert!(told_after < Duration::from_millis(500), "told {told_after:?} after the deletion");
}

/// The session's watch on a hold is set again by the client when it reconnects, and the server
/// then reports what happened meanwhile: a deletion while the connection was down is told as a
/// deletion once it is back, long before the session could be declared lost (3/5 of 9 s).
#[tokio::test]
async fn a_hold_deleted_while_its_connection_is_down_is_told_once_it_reconnects() {
    let path = format!("{PATH}/deleted-while-disconnected");
    let proxy = Proxy::start(server().connect_string()).expect("start proxy");
    let session = Duration::from_secs(9);
    let client = Client::builder(proxy.connect_string()).session_timeout(session).connect().await.unwrap();
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let node = guard.node_path().to_owned();
    until_watched(&node, true).await;
    let lost = guard.lost();
    proxy.cut();
    new_client().await.zookeeper().delete(&node, None).await.unwrap();
    // The notification waits on the cut connection, which the reset then breaks: a new one
    // must bring it.
    proxy.reset();
    proxy.heal();
    let healed_at = tokio::time::Instant::now();
    let reason = tokio::time::timeout(PATIENCE, lost).await.expect("lost() resolves");
    assert_eq!(reason, LostReason::NodeDeleted, "told by the watch, not by the session's loss");
    assert!(healed_at.elapsed() < session * 3 / 5, "told {:?} after the heal", healed_at.elapsed());
}

/// A waiter behind a node of its own session is told of that node's end by its owner, not by a
/// watch of its own; these cover each way the owner learns it, and the one where it cannot tell.
/// Every waiter here shares the owner's client (one session, as a process using the registry
/// does).
mod waiters_behind_a_node_of_their_session {
    use super::*;

    /// Starts a waiter for `path` on `client` in a task of its own and returns once its node is
    /// queued (`queued` nodes in all).
    async fn queue_waiter(
        client: &zk_lock::Client,
        path: &str,
        queued: usize,
    ) -> tokio::task::JoinHandle<Result<i64, Error>> {
        let mutex = Mutex::with_client(client, path);
        let waiter = tokio::spawn(async move {
            let guard = mutex.lock_timeout(Duration::from_secs(30)).await?;
            let token = guard.fencing_token();
            guard.release().await?;
            Ok(token)
        });
        wait_for_children(client, path, |c| c.len() == queued).await.unwrap();
        waiter
    }

    #[tokio::test]
    async fn go_on_when_its_holder_releases() {
        let path = format!("{PATH}/local-release");
        let client = new_client().await;
        let holder = Mutex::with_client(&client, &path).lock().await.unwrap();
        let waiter = queue_waiter(&client, &path, 2).await;
        holder.release().await.unwrap();
        waiter.await.unwrap().expect("granted after the release");
    }

    #[tokio::test]
    async fn go_on_when_someone_else_deletes_the_node_ahead() {
        let path = format!("{PATH}/local-deleted");
        let client = new_client().await;
        let holder = Mutex::with_client(&client, &path).lock().await.unwrap();
        let waiter = queue_waiter(&client, &path, 2).await;
        new_client().await.zookeeper().delete(holder.node_path(), None).await.unwrap();
        let token = waiter.await.unwrap().expect("granted once the node ahead was deleted");
        assert!(token > holder.fencing_token());
        // The holder's guard is still alive: the waiter did not wait for it to be dropped.
        assert!(matches!(holder.release().await, Err(Error::Lost { reason: LostReason::NodeDeleted, .. })));
    }

    #[tokio::test]
    async fn behind_a_waiter_that_gave_up_wait_for_the_holder() {
        let path = format!("{PATH}/local-gave-up");
        let client = new_client().await;
        let holder = Mutex::with_client(&client, &path).lock().await.unwrap();
        let holder_token = holder.fencing_token();
        let gave_up = {
            let mutex = Mutex::with_client(&client, &path);
            tokio::spawn(async move { mutex.lock().await })
        };
        wait_for_children(&client, &path, |c| c.len() == 2).await.unwrap();
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let patient = {
            let mutex = Mutex::with_client(&client, &path);
            let released = released.clone();
            tokio::spawn(async move {
                let guard = mutex.lock_timeout(Duration::from_secs(30)).await.unwrap();
                assert!(released.load(std::sync::atomic::Ordering::SeqCst), "granted while the holder held the lock");
                guard.fencing_token()
            })
        };
        wait_for_children(&client, &path, |c| c.len() == 3).await.unwrap();
        // Cancelled while it waits: its node goes, but it was never granted, so the holder is
        // still ahead of the patient waiter.
        gave_up.abort();
        assert!(gave_up.await.unwrap_err().is_cancelled());
        wait_for_children(&client, &path, |c| c.len() == 2).await.unwrap();
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        holder.release().await.expect("still held when released");
        assert!(patient.await.unwrap() > holder_token);
    }
}

/// A waiter on another session of the same process cannot rely on the owner's word (its own
/// session may be gone, its server behind): it watches the node on the server, and still goes on
/// when the holder's session expires while the holder keeps its guard.
#[tokio::test]
async fn a_waiter_of_another_session_goes_on_when_the_holders_session_expires() {
    let path = format!("{PATH}/other-session-expired");
    let holder_client = client_with_session_timeout(Duration::from_secs(4)).await;
    let holder = Mutex::with_client(&holder_client, &path).lock().await.unwrap();
    let client = new_client().await;
    let mutex = Mutex::with_client(&client, &path);
    let waiter =
        tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(30)).await.map(|g| g.fencing_token()) });
    wait_for_children(&client, &path, |c| c.len() == 2).await.unwrap();
    server().expire_session(&holder_client).await.expect("expire");
    let token = waiter.await.unwrap().expect("granted after the holder's session expired");
    assert!(token > holder.fencing_token());
    assert!(!holder.is_held());
}

/// Starts a waiter on a session of its own behind `holder` and returns it once queued, with the
/// name of its node.
async fn queue_behind(
    client: &zk_lock::Client,
    holder: &zk_lock::MutexGuard,
) -> (tokio::task::JoinHandle<Result<zk_lock::MutexGuard, Error>>, String) {
    let path = holder.node_path().rsplit_once('/').unwrap().0.to_owned();
    let mutex = Mutex::with_client(&new_client().await, &path);
    let waiter = tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(30)).await });
    let queued = wait_for_children(client, &path, |c| c.len() == 2).await.unwrap();
    let holder_node = node_name(holder.node_path());
    let waiting = queued.into_iter().find(|node| node != holder_node).unwrap();
    (waiter, waiting)
}

#[tokio::test]
async fn a_revocation_written_to_a_waiting_node_is_seen_once_it_is_granted() {
    let path = format!("{PATH}/revoked-while-waiting");
    let client = new_client().await;
    let holder = Mutex::with_client(&client, &path).lock().await.unwrap();
    let (waiter, waiting) = queue_behind(&client, &holder).await;
    client.zookeeper().set_data(&format!("{path}/{waiting}"), b"__REVOKE__", None).await.unwrap();
    holder.release().await.unwrap();
    let guard = waiter.await.unwrap().expect("granted");
    tokio::time::timeout(Duration::from_secs(30), guard.revoked()).await.expect("revocation seen");
    assert!(guard.is_revoked());
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_waiter_whose_node_is_deleted_queues_again_instead_of_taking_a_lost_lock() {
    let path = format!("{PATH}/waiter-deleted");
    let client = new_client().await;
    let holder = Mutex::with_client(&client, &path).lock().await.unwrap();
    let (waiter, deleted) = queue_behind(&client, &holder).await;

    client.zookeeper().delete(&format!("{path}/{deleted}"), None).await.unwrap();
    wait_for_children(&client, &path, |c| c.len() == 2 && !c.contains(&deleted)).await.unwrap();
    holder.release().await.unwrap();

    let guard = waiter.await.unwrap().expect("granted on its new node");
    assert!(!guard.node_path().ends_with(&deleted));
    assert!(guard.is_held());
    assert!(client.zookeeper().check_stat(guard.node_path()).await.unwrap().is_some());
    guard.release().await.expect("still held when released");
}

#[tokio::test]
async fn invalid_paths_are_refused_before_any_request() {
    let client = new_client().await;
    for path in ["relative", "/trailing/", "/a//b", "/a/./b", "/a/..", "/zookeeper/x", "/bad\u{1}char", ""] {
        match Mutex::with_client(&client, path).try_lock().await {
            Err(Error::InvalidPath { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(!reason.is_empty());
            }
            other => panic!("{path:?}: expected InvalidPath, got {other:?}"),
        }
    }
}
