//! A client's `ConnectionState` (issue 36, point 2), for a health check or a listener, against
//! a real server behind a proxy that cuts the connection: a short cut is `Suspended` then
//! `Reconnected` with the lock kept; a cut past the told-first bound is `Suspended` then `Lost`,
//! told no later than the guard's `lost()`, and `ready()` opens a new session once the servers are
//! back (`Connected`); a closed client is `Closed`, the end of its changes. The ensemble's faults
//! (a follower cut from the leader, whose client's connection stays up) are in
//! tests/server_partitions.rs.

use std::time::Duration;

use futures::FutureExt;

use zk_lock::{ConnectionState, ConnectionStates, Error, LostReason, Mutex};

use crate::support::{behind_a_proxy, unique_name, PATIENCE};

/// The next change, which must come within the tests' patience.
async fn next_change(states: &mut ConnectionStates) -> ConnectionState {
    let next = tokio::time::timeout(PATIENCE, states.next()).await;
    next.expect("a change of connection state within the patience").expect("the client is not closed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_cut_is_suspended_then_reconnected_and_the_lock_is_kept() {
    // A 6 s session: zookeeper-client gives a silent server up after 1.8 s, and the locks are
    // lost 4.8 s after the last proof of renewal; the heal comes as soon as the cut is seen.
    let (proxy, client) = behind_a_proxy(Duration::from_secs(6)).await;
    let guard = Mutex::with_client(&client, format!("/it-connection-state/{}", unique_name("flap")))
        .lock()
        .await
        .expect("take the lock");
    let mut states = client.connection_states();
    assert_eq!(client.connection_state(), ConnectionState::Connected);
    assert!(client.is_ready());

    proxy.cut();
    assert_eq!(next_change(&mut states).await, ConnectionState::Suspended);
    assert!(!client.is_ready(), "a suspended client is not ready");
    assert!(guard.is_held(), "a suspended connection keeps its locks until the bound");

    proxy.heal();
    assert_eq!(next_change(&mut states).await, ConnectionState::Reconnected);
    assert!(client.is_ready());
    assert!(guard.is_held(), "reconnected on the same session: the lock was kept");
    guard.release().await.expect("the lock was held throughout");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_past_the_bound_is_lost_and_ready_opens_a_new_session_once_the_server_is_back() {
    let (proxy, client) = behind_a_proxy(Duration::from_secs(2)).await;
    let path = format!("/it-connection-state/{}", unique_name("lost"));
    let guard = Mutex::with_client(&client, &path).lock().await.expect("take the lock");
    let old_session = client.zookeeper().session_id();
    let mut states = client.connection_states();

    proxy.cut();
    assert_eq!(next_change(&mut states).await, ConnectionState::Suspended);
    assert_eq!(next_change(&mut states).await, ConnectionState::Lost);
    // The guard was told first (the loss reaches the held nodes before the session's state).
    let reason = guard.lost().now_or_never();
    assert_eq!(reason, Some(LostReason::ConnectionLost), "told by the time the state says Lost");
    assert!(!client.is_ready());

    // The servers are back: ready() opens a new session.
    proxy.heal();
    tokio::time::timeout(PATIENCE, client.ready()).await.expect("ready within the patience").expect("ready");
    assert_eq!(next_change(&mut states).await, ConnectionState::Connected, "a new session");
    assert!(client.is_ready());
    assert_ne!(client.zookeeper().session_id(), old_session, "ready() opened a new session");
    // Granted once the old session, retired, is ended on the server.
    let again = Mutex::with_client(&client, &path).lock_timeout(PATIENCE).await.expect("the lock is taken again");
    again.release().await.unwrap();
    drop(guard);
    client.close().await;
}

#[tokio::test]
async fn a_closed_client_is_closed_and_its_changes_end() {
    let (_proxy, client) = behind_a_proxy(Duration::from_secs(10)).await;
    let mut states = client.connection_states();
    client.close().await;
    assert_eq!(client.connection_state(), ConnectionState::Closed);
    assert_eq!(next_change(&mut states).await, ConnectionState::Closed);
    assert_eq!(states.next().await, None, "nothing after Closed");
    assert_eq!(client.connection_states().next().await, None, "a listener that comes later");
    assert!(!client.is_ready());
    match client.ready().await {
        Err(Error::ClientClosed { path }) => assert_eq!(path, "/"),
        other => panic!("expected Error::ClientClosed, got {other:?}"),
    }
}
