//! Cooperative revocation between zk-lock and Apache Curator (real Java peers), both ways: our
//! `revoke_with` reaches Curator locks made revocable with `makeRevocable`, and Curator's
//! `Revoker.attemptRevoke` reaches our guards.

use std::time::Duration;

use tokio::time::Instant;
use zk_lock::testing::wait_for_children;
use zk_lock::{participants_with, revoke_with, Error, Mutex, Role, RwLock};

use crate::support::java_peer::{curator_sequence, held_node, JavaPeer};
use crate::support::{new_client, node_data, node_name, server, unique_name, PATIENCE};

/// Bound of a single acquisition: generous, because JVMs start slowly on a loaded machine.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);
/// What Curator's `Revoker` writes into a lock node, and `revoke_with` too.
const REVOKE: &[u8] = b"__REVOKE__";

fn lock_path(name: &str) -> String {
    format!("/zk-lock-tests/interop-revoke/{}", unique_name(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_revoke_with_makes_a_revocable_curator_mutex_let_go() {
    let connect = server().connect_string();
    let path = lock_path("curator-holds");
    let client = new_client().await;
    let mut peer = JavaPeer::spawn(&connect, &["revocable-hold", &path, "mutex"]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    let java_node = held_node(&peer.expect_line("held ").await);
    let java_sequence = curator_sequence(&java_node, "lock-");

    let waiter_client = new_client().await;
    let waiter = {
        let mutex = Mutex::with_client(&waiter_client, &path);
        tokio::spawn(async move {
            let guard = mutex.lock_timeout(ACQUIRE_TIMEOUT).await;
            (guard, Instant::now())
        })
    };
    let queued = wait_for_children(&client, &path, |children| children.len() == 2).await.unwrap();
    let rust_node = queued.iter().find(|name| **name != java_node).expect("our node").clone();
    assert!(curator_sequence(&rust_node, "lock-") > java_sequence, "{rust_node} queued behind {java_node}");
    let roles: Vec<_> = participants_with(&client, &path)
        .await
        .expect("participants")
        .into_iter()
        .map(|p| (p.node_name, p.role))
        .collect();
    assert_eq!(roles, [(java_node.clone(), Role::Holder), (rust_node.clone(), Role::Waiter)]);
    assert!(!waiter.is_finished(), "lock() returned while Curator holds the lock");
    if let Some(line) = peer.line_already_printed().await {
        panic!("Curator printed {line:?} before anyone revoked its lock");
    }

    let revoking = Instant::now();
    assert_eq!(revoke_with(&client, &path).await.expect("revoke"), 1, "only the holder is asked");
    // The listener ran, and the holder let go because it was asked to.
    peer.expect_line("revoked").await;
    peer.expect_line("released").await;
    peer.wait_success().await;

    let (guard, granted_at) = tokio::time::timeout(ACQUIRE_TIMEOUT, waiter).await.expect("granted").expect("task");
    let guard = guard.expect("lock after the revoked Curator holder let go");
    assert!(granted_at > revoking, "granted before the Curator holder was revoked");
    assert_eq!(node_name(guard.node_path()), rust_node, "granted on the node that queued");
    assert!(guard.is_held());
    assert!(!guard.is_revoked(), "the waiter was asked to let go too");
    assert_ne!(node_data(&client, guard.node_path()).await, REVOKE, "the waiter's node was written to");
    assert_eq!(wait_for_children(&client, &path, |children| children.len() == 1).await.unwrap(), [rust_node]);
    guard.release().await.expect("release");
    wait_for_children(&client, &path, |children| children.is_empty()).await.unwrap();
}

/// Every Curator reader holding a read/write lock is asked; a Rust writer then gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_revoke_with_asks_every_revocable_curator_reader() {
    let connect = server().connect_string();
    let path = lock_path("curator-reads");
    let client = new_client().await;
    let mut readers: Vec<JavaPeer> =
        (0..2).map(|_| JavaPeer::spawn(&connect, &["revocable-hold", &path, "read"])).collect();
    let mut java_nodes = Vec::new();
    for peer in &mut readers {
        peer.expect_line("ready").await;
        peer.send("go").await;
        java_nodes.push(held_node(&peer.expect_line("held ").await));
    }
    for node in &java_nodes {
        curator_sequence(node, "__READ__");
    }

    let writer = {
        let lock = RwLock::with_client(&client, &path);
        tokio::spawn(async move {
            let guard = lock.write_timeout(ACQUIRE_TIMEOUT).await;
            (guard, Instant::now())
        })
    };
    let queued = wait_for_children(&client, &path, |children| children.len() == 3).await.unwrap();
    let rust_node = queued.iter().find(|name| !java_nodes.contains(name)).expect("our node").clone();
    curator_sequence(&rust_node, "__WRIT__");
    assert!(!writer.is_finished(), "write() returned while Curator readers hold the lock");

    let revoking = Instant::now();
    assert_eq!(revoke_with(&client, &path).await.expect("revoke"), 2, "both readers, not the writer");
    for peer in &mut readers {
        peer.expect_line("revoked").await;
        peer.expect_line("released").await;
    }
    let (guard, granted_at) = tokio::time::timeout(ACQUIRE_TIMEOUT, writer).await.expect("granted").expect("task");
    let guard = guard.expect("write lock after the revoked Curator readers let go");
    assert!(granted_at > revoking, "granted before the Curator readers were revoked");
    assert_eq!(node_name(guard.node_path()), rust_node, "granted on the node that queued");
    assert!(!guard.is_revoked(), "the queued writer was asked to let go too");
    for peer in readers {
        peer.wait_success().await;
    }
    guard.release().await.expect("release");
    wait_for_children(&client, &path, |children| children.is_empty()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_revoker_reaches_a_rust_mutex_guard() {
    let connect = server().connect_string();
    let path = lock_path("rust-holds");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock_timeout(ACQUIRE_TIMEOUT).await.expect("lock");
    let rust_node = node_name(guard.node_path()).to_owned();
    let revoked = guard.revoked();
    assert!(!guard.is_revoked());

    // Curator's Revoker, given our node's path as `getParticipantNodes()` would list it.
    let mut revoker = JavaPeer::spawn(&connect, &["revoke", guard.node_path()]);
    revoker.expect_line("ready").await;
    assert!(!guard.is_revoked(), "revoked before Curator's Revoker ran");
    revoker.send("go").await;
    revoker.expect_line("revoke-sent").await;
    revoker.wait_success().await;
    tokio::time::timeout(PATIENCE, revoked).await.expect("revoked() resolves after Curator's Revoker");
    assert!(guard.is_revoked());
    assert!(guard.is_held(), "revocation only asks: the Rust holder keeps the lock");
    assert_eq!(node_data(&client, guard.node_path()).await, REVOKE);

    // Still held: a Curator mutex queues behind it and waits.
    let mut waiter = JavaPeer::spawn(&connect, &["mutex-hold", &path]);
    waiter.expect_line("ready").await;
    waiter.send("go").await;
    let queued = wait_for_children(&client, &path, |children| children.len() == 2).await.unwrap();
    let java_node = queued.iter().find(|name| **name != rust_node).expect("Curator's node").clone();
    assert!(curator_sequence(&java_node, "lock-") > curator_sequence(&rust_node, "lock-"));
    match Mutex::with_client(&new_client().await, &path).try_lock().await {
        Err(Error::Busy { .. }) => {}
        other => panic!("try_lock while the revoked Rust guard holds: expected Busy, got {other:?}"),
    }
    assert!(guard.is_held());
    if let Some(line) = waiter.line_already_printed().await {
        panic!("Curator printed {line:?} while the revoked Rust guard still holds the lock");
    }

    // The holder decides: it releases, and only then does Curator get the lock.
    guard.release().await.expect("release after revocation");
    assert_eq!(waiter.expect_line("held ").await, format!("held {java_node}"));
    waiter.send("release").await;
    waiter.expect_line("released").await;
    waiter.wait_success().await;
    wait_for_children(&client, &path, |children| children.is_empty()).await.unwrap();
}
