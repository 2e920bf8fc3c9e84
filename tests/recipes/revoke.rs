//! `revoke` against a real ZooKeeper: Curator's `__REVOKE__` protocol reaches our guards, and
//! only holders are asked. All tests share one server; each uses its own lock path.

use std::time::Duration;

use zk_lock::testing::{children, wait_for_children};
use zk_lock::{revoke_node, revoke_with, Client, Error, Mutex};
use zookeeper_client::{Acls, CreateMode};

use crate::support::{client_with_fast_heartbeat, new_client, node_data, server, within_the_follow_up_bound, PATIENCE};

const PATH: &str = "/it-revoke";
const REVOKE: &[u8] = b"__REVOKE__";

#[tokio::test]
async fn revoking_a_mutex_asks_its_holder_and_not_its_waiter() {
    let path = format!("{PATH}/mutex");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let revoked = guard.revoked();
    let waiter_client = new_client().await;
    let mutex = Mutex::with_client(&waiter_client, &path);
    let waiter = tokio::spawn(async move { mutex.lock().await.unwrap().release().await.unwrap() });
    let queued = wait_for_children(&client, &path, |c| c.len() == 2).await.unwrap();
    let waiter_node = queued.iter().map(|name| format!("{path}/{name}")).find(|p| p != guard.node_path()).unwrap();
    let waiter_data = node_data(&client, &waiter_node).await;
    assert!(!guard.is_revoked());

    assert_eq!(revoke_with(&client, &path).await.unwrap(), 1);
    tokio::time::timeout(PATIENCE, revoked).await.expect("revoked() resolves");
    assert!(guard.is_revoked());
    assert!(guard.is_held(), "revocation only asks: the holder keeps the lock");
    assert_eq!(node_data(&client, guard.node_path()).await, REVOKE);
    assert_eq!(node_data(&client, &waiter_node).await, waiter_data, "the waiter is not asked");
    assert!(!waiter.is_finished());

    guard.release().await.unwrap();
    waiter.await.unwrap();
}

/// Nobody awaits `revoked()` here: the session's own follow-up (a watch set once the hold lasted
/// one heartbeat period, `T/9`, whose read finds a request made before) tells within two periods
/// and a round trip.
#[tokio::test]
async fn is_revoked_turns_true_within_the_follow_up_bound_without_awaiting_revoked() {
    let path = format!("{PATH}/heartbeat");
    let client = client_with_fast_heartbeat().await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let asker = new_client().await;
    let asked_at = tokio::time::Instant::now();
    assert_eq!(revoke_with(&asker, &path).await.unwrap(), 1);
    let bound = within_the_follow_up_bound();
    // Nothing to await without setting a watch: the flag is polled, within the bound.
    while !guard.is_revoked() {
        assert!(asked_at.elapsed() <= bound, "not seen within {bound:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(guard.is_held());
    guard.release().await.unwrap();
}

#[tokio::test]
async fn every_reader_holding_a_read_write_lock_is_asked() {
    let path = format!("{PATH}/rw");
    let client = new_client().await;
    let zk = client.zookeeper();
    zk.mkdir(&path, &CreateMode::Container.with_acls(Acls::anyone_all())).await.unwrap();
    let mut nodes = Vec::new();
    for lock_name in ["__READ__", "__READ__", "__WRIT__"] {
        let prefix = format!("{path}/_c_0f8e7d6c-1b2a-4c3d-8e9f-0123456789ab-{lock_name}");
        let node = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let (_, sequence) = zk.create(&prefix, b"10.0.0.7", &node).await.unwrap();
        nodes.push(format!("{prefix}{sequence}"));
    }

    assert_eq!(revoke_with(&client, &path).await.unwrap(), 2);
    assert_eq!(node_data(&client, &nodes[0]).await, REVOKE);
    assert_eq!(node_data(&client, &nodes[1]).await, REVOKE);
    assert_eq!(node_data(&client, &nodes[2]).await, b"10.0.0.7", "the queued writer is not asked");
}

#[tokio::test]
async fn a_lock_without_holders_has_nobody_to_ask() {
    let client = new_client().await;
    assert_eq!(revoke_with(&client, &format!("{PATH}/never-created")).await.unwrap(), 0);
    let empty = format!("{PATH}/empty");
    client.zookeeper().mkdir(&empty, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    assert_eq!(revoke_with(&client, &empty).await.unwrap(), 0);
    assert!(matches!(revoke_with(&client, "no-slash").await, Err(Error::InvalidPath { .. })));
}

#[tokio::test]
async fn revoke_node_asks_one_node_and_refuses_missing_or_non_lock_nodes() {
    let path = format!("{PATH}/node");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let revoked = guard.revoked();
    revoke_node(&client, guard.node_path()).await.unwrap();
    tokio::time::timeout(PATIENCE, revoked).await.expect("revoked() resolves");
    assert!(guard.is_revoked() && guard.is_held());

    let missing = format!("{path}/_c_0f8e7d6c-1b2a-4c3d-8e9f-0123456789ab-lock-0000009999");
    match revoke_node(&client, &missing).await {
        Err(Error::Zookeeper(error)) if error.is_no_node() => {}
        other => panic!("expected NoNode for a missing node, got {other:?}"),
    }
    // The lock path itself, or any node not named like a lock node, is never overwritten.
    for not_a_lock_node in [path.as_str(), "/", "relative-0000000001"] {
        match revoke_node(&client, not_a_lock_node).await {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, not_a_lock_node),
            other => panic!("{not_a_lock_node:?}: expected InvalidPath, got {other:?}"),
        }
    }
    assert_ne!(node_data(&client, &path).await, REVOKE);
    assert_eq!(children(&client, &path).await.unwrap().len(), 1);
    guard.release().await.unwrap();
}

#[tokio::test]
async fn the_default_client_revokes_too() {
    let path = format!("{PATH}/default");
    let client = Client::builder(server().connect_string()).install().await.unwrap();
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let revoked = guard.revoked();
    assert_eq!(zk_lock::revoke(&path).await.unwrap(), 1);
    tokio::time::timeout(PATIENCE, revoked).await.expect("revoked() resolves");
    guard.release().await.unwrap();
}
