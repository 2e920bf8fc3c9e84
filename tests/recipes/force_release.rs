//! `force_release` (and `zk-lock revoke --force`): an operator deletes the node of a stuck
//! holder; a zk-lock holder is told within the follow-up bound, the waiters move up; Curator and
//! kazoo holders, and a frozen process, are released too (and only fencing guards what a
//! frozen holder writes once it wakes).

use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;
use zk_lock::{force_release, force_release_node, Client, Error, LostReason, Mutex, ParticipantKind, Role, RwLock};

use crate::support::java_peer::{held_node, JavaPeer};
use crate::support::kazoo::{KazooLock, Recipe};
use crate::support::{
    client_with_fast_heartbeat, new_client, queue_of, server, unique_name, within_the_follow_up_bound, PATIENCE,
};

fn lock_path(name: &str) -> String {
    format!("/it-force-release/{}", unique_name(name))
}

/// Waits for the lock on `client`; says when it was granted.
fn waiter(client: &Client, path: &str) -> tokio::task::JoinHandle<(Instant, zk_lock::MutexGuard)> {
    let mutex = Mutex::with_client(client, path);
    tokio::spawn(async move {
        let guard = mutex.lock_timeout(PATIENCE).await.expect("granted after the forced release");
        (Instant::now(), guard)
    })
}

#[tokio::test]
async fn a_zk_lock_holder_is_told_and_its_waiter_granted() {
    let path = lock_path("zk-lock");
    let (holder, other, operator) = (client_with_fast_heartbeat().await, new_client().await, new_client().await);
    let guard = Mutex::with_client(&holder, &path).lock().await.unwrap();
    let lost = guard.lost();
    let next = waiter(&other, &path);
    queue_of(&operator, &path, 2).await;

    let forced_at = Instant::now();
    let released = force_release(&operator, &path).await.unwrap();
    assert_eq!(released.node_path, guard.node_path());
    assert_eq!((released.role, released.fencing_token), (Role::Holder, guard.fencing_token()));
    assert!(released.holder.is_some(), "who held it: {:?}", released.data);

    let reason = tokio::time::timeout(PATIENCE, lost).await.unwrap();
    let told = forced_at.elapsed();
    assert_eq!(reason, LostReason::NodeDeleted);
    assert!(told < within_the_follow_up_bound(), "told after {told:?}");
    let (granted_at, next) = next.await.unwrap();
    assert!(next.fencing_token() > guard.fencing_token());
    eprintln!("forced release: holder told after {told:?}, waiter granted after {:?}", granted_at - forced_at);
    assert!(matches!(guard.release().await, Err(Error::Lost { reason: LostReason::NodeDeleted, .. })));
    next.release().await.unwrap();
}

#[tokio::test]
async fn shared_holders_need_a_node_and_a_wrong_node_is_named() {
    let path = lock_path("readers");
    let (client, operator) = (new_client().await, new_client().await);
    let lock = RwLock::with_client(&client, &path);
    let (first, second) = (lock.read().await.unwrap(), lock.read().await.unwrap());

    let refused = force_release(&operator, &path).await.unwrap_err();
    assert!(
        matches!(&refused, Error::InvalidArgument { path: p, reason } if *p == path && reason.contains("2 holders share the lock")),
        "{refused}"
    );
    let wrong = force_release_node(&operator, &path, "_c_nope-__READ__0000000099").await.unwrap_err();
    assert!(
        matches!(&wrong, Error::InvalidArgument { reason, .. } if reason.contains("is not a node of this lock")),
        "{wrong}"
    );

    let name = first.node_path().rsplit('/').next().unwrap().to_owned();
    let released = force_release_node(&operator, &path, &name).await.unwrap();
    assert_eq!(released.kind, ParticipantKind::Read);
    assert_eq!(tokio::time::timeout(PATIENCE, first.lost()).await.unwrap(), LostReason::NodeDeleted);
    assert!(second.is_held(), "the other reader keeps its lock");
    second.release().await.unwrap();
    let none = force_release(&operator, &path).await.unwrap_err();
    assert!(
        matches!(&none, Error::InvalidArgument { reason, .. } if reason.contains("no one holds the lock")),
        "{none}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_holder_is_released_and_our_waiter_granted() {
    let path = lock_path("curator");
    let mut peer = JavaPeer::spawn(&server().connect_string(), &["mutex-hold", &path]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    let curator_node = held_node(&peer.expect_line("held ").await);
    let (other, operator) = (new_client().await, new_client().await);
    let next = waiter(&other, &path);
    queue_of(&operator, &path, 2).await;

    let released = force_release(&operator, &path).await.unwrap();
    assert_eq!(released.node_name, curator_node);
    assert_eq!(released.kind, ParticipantKind::Mutex);
    eprintln!(
        "forced release of a Curator holder: node {}, session 0x{:x}, data {:?} (Curator writes its IP), held {:?}",
        released.node_path,
        released.session_id,
        String::from_utf8_lossy(&released.data),
        released.age
    );
    let (_, next) = next.await.unwrap();
    next.release().await.unwrap();
    // Curator's release finds its node gone, and says nothing of it.
    peer.send("release").await;
    peer.expect_line("released").await;
    peer.wait_success().await;
}

/// kazoo's `Lock` and ours do not exclude each other (docs/curator-compat.md), so the waiter
/// here is kazoo's too.
#[tokio::test]
async fn a_kazoo_holder_is_released_and_its_kazoo_waiter_granted() {
    let path = lock_path("kazoo");
    let connect = server().connect_string();
    let mut holder = KazooLock::start(&connect, &path, Recipe::Lock, "kazoo-holder");
    let (_, holder_node) = holder.locked().await;
    let mut next = KazooLock::start(&connect, &path, Recipe::Lock, "kazoo-waiter");
    let operator = new_client().await;
    queue_of(&operator, &path, 2).await;

    let released = force_release(&operator, &path).await.unwrap();
    assert_eq!(released.node_name, holder_node);
    assert_eq!(released.data, b"kazoo-holder");
    next.locked().await;
    next.release().await;
    holder.release().await;
}

/// A holder whose process is frozen (SIGSTOP) cannot release anything: the operator's forced
/// release frees the lock, the waiter is granted at once, and when the process wakes its
/// fencing token is older than the new holder's, so a fenced store refuses what it writes.
#[tokio::test]
async fn a_frozen_holder_process_is_released_and_its_late_token_is_older() {
    let path = lock_path("frozen");
    let connect = server().connect_string();
    let mut holder = KazooLock::start(&connect, &path, Recipe::Lock, "frozen-holder");
    holder.locked().await;
    let pid = holder.pid().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let mut next = KazooLock::start(&connect, &path, Recipe::Lock, "next-holder");
    let operator = new_client().await;
    queue_of(&operator, &path, 2).await;

    let forced_at = Instant::now();
    let frozen = force_release(&operator, &path).await.unwrap();
    let (_, next_node) = next.locked().await;
    let granted_after = forced_at.elapsed();
    assert!(granted_after < Duration::from_secs(5), "granted {granted_after:?} after the forced release");
    let now = zk_lock::participants_with(&operator, &path).await.unwrap();
    let new_holder = now.iter().find(|p| p.node_name == next_node).expect("the new holder's node");
    assert_eq!(new_holder.role, Role::Holder);
    // What a fenced store compares: the frozen holder's token is older than the new holder's.
    assert!(
        frozen.fencing_token < new_holder.fencing_token,
        "{} vs {}",
        frozen.fencing_token,
        new_holder.fencing_token
    );
    assert!(Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    next.release().await;
    holder.release().await;
}
