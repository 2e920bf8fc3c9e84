//! `Client::close`: the session ends at once on the server, so a waiter in another process (a
//! kazoo script) is granted the lock without waiting out the session timeout; the closed
//! client's guards are lost, its waiting acquisitions fail with `Error::ClientClosed`, and so
//! does everything asked of it afterwards. Closing a client cut off from its server reports the
//! loss at once and ends the session once the server is reachable again.
//! (`zk_lock::shutdown`, which closes the registry's clients, is `tests/shutdown.rs`.)

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant};
use zk_lock::testing::children;
use zk_lock::{Client, Error, LostReason, Mutex, MutexGuard, RwLock, Semaphore, SharedCount};

use crate::support::kazoo::{KazooLock, Recipe};
use crate::support::{
    behind_a_proxy, client_with_session_timeout, new_client, queue_of, server, unique_name, PATIENCE,
};

/// Long, so that a grant within a fraction of it can only come from the close.
const LONG_SESSION: Duration = Duration::from_secs(20);

fn lock_path(name: &str) -> String {
    format!("/it-close/{}", unique_name(name))
}

/// An acquisition of the mutex at `path` through `client`, waiting in a task of its own.
fn waiting_for(client: &Client, path: &str) -> JoinHandle<zk_lock::Result<MutexGuard>> {
    let (client, path) = (client.clone(), path.to_owned());
    tokio::spawn(async move { Mutex::with_client(&client, path).lock_timeout(PATIENCE).await })
}

#[tokio::test]
async fn closing_hands_the_lock_to_a_waiter_in_another_process_at_once() {
    let path = lock_path("handoff");
    let observer = new_client().await;
    let holder = client_with_session_timeout(LONG_SESSION).await;
    let guard = Mutex::with_client(&holder, &path).lock().await.unwrap();
    let mut kazoo = KazooLock::start(&server().connect_string(), &path, Recipe::Lock, "kazoo-waiter");
    queue_of(&observer, &path, 2).await;

    let closing = Instant::now();
    holder.clone().close().await;
    let closed_after = closing.elapsed();
    // Told before `close` returns, which is after the server deleted the node.
    assert!(!guard.is_held(), "a guard of a closed client is not held");
    assert_eq!(timeout(Duration::ZERO, guard.lost()).await, Ok(LostReason::SessionClosed));
    kazoo.locked().await;
    let granted_after = closing.elapsed();
    println!("close() returned after {closed_after:?}; the kazoo process was granted {granted_after:?} after close()");
    assert!(
        granted_after < Duration::from_secs(1),
        "the waiter was granted {granted_after:?} after close(); the session timeout is {LONG_SESSION:?}"
    );
    assert!(holder.is_closed());
    kazoo.release().await;
}

#[tokio::test]
async fn a_closed_client_ends_its_waiting_acquisitions_and_refuses_later_ones() {
    let path = lock_path("waiting");
    let observer = new_client().await;
    let other = new_client().await;
    let held_elsewhere = Mutex::with_client(&other, &path).lock().await.unwrap();
    let closing = new_client().await;
    let waiting = waiting_for(&closing, &path);
    queue_of(&observer, &path, 2).await;

    closing.close().await;
    let outcome = timeout(PATIENCE, waiting).await.expect("the waiting acquisition ends").unwrap();
    match outcome {
        Err(Error::ClientClosed { path: named }) => assert_eq!(named, path),
        other => panic!("expected Error::ClientClosed, got {other:?}"),
    }
    // The server ended the session before `close` returned: its queue node is gone.
    assert_eq!(children(&observer, &path).await.unwrap().len(), 1, "only the other client's node is left");

    let later = lock_path("later");
    let refusals = [
        Mutex::with_client(&closing, &later).try_lock().await.map(drop),
        RwLock::with_client(&closing, &later).read().await.map(drop),
        Semaphore::with_client(&closing, &later, 3).acquire().await.map(drop),
        SharedCount::with_client(&closing, &later, 0).read().await.map(drop),
        zk_lock::participants_with(&closing, &path).await.map(drop),
    ];
    for refusal in refusals {
        let error = refusal.expect_err("a closed client refuses");
        assert!(matches!(error, Error::ClientClosed { .. }), "{error:?}");
        assert!(error.to_string().contains("client was closed"), "{error}");
    }
    assert!(children(&observer, &later).await.unwrap_or_default().is_empty(), "no node made after the close");

    // Closing again is harmless and quick.
    timeout(Duration::from_secs(1), closing.close()).await.expect("a second close returns at once");
    held_elsewhere.release().await.unwrap();
}

/// The partitioned client's session: closing while cut off waits at most this long.
const PARTITIONED_SESSION: Duration = Duration::from_secs(3);

#[tokio::test]
async fn closing_a_cut_off_client_tells_its_holders_at_once_and_ends_the_session_after_the_heal() {
    let path = lock_path("cut-off");
    let observer = new_client().await;
    let (proxy, cut_off) = behind_a_proxy(PARTITIONED_SESSION).await;
    let guard = Mutex::with_client(&cut_off, &path).lock().await.unwrap();

    proxy.cut();
    let closing = tokio::spawn({
        let client = cut_off.clone();
        async move {
            let started = Instant::now();
            client.close().await;
            started.elapsed()
        }
    });
    let reason = timeout(Duration::from_secs(1), guard.lost()).await.expect("told at once, not after a timeout");
    assert_eq!(reason, LostReason::SessionClosed);
    assert_eq!(children(&observer, &path).await.unwrap().len(), 1, "the server still has the node");

    proxy.heal();
    let took = timeout(PATIENCE, closing).await.expect("close returns").unwrap();
    // Healed well within the session timeout: `close` returned on the server's confirmation,
    // not on its patience, so the node is gone already.
    assert!(took < PARTITIONED_SESSION, "close took {took:?}");
    assert_eq!(children(&observer, &path).await.unwrap(), Vec::<String>::new(), "the session's node went with it");
}

/// A session whose locks were declared lost is closed by its retirement only once the server
/// could have expired it: this long after the last answered request.
const RETIRED_SESSION: Duration = Duration::from_secs(6);

#[tokio::test]
async fn closing_ends_a_session_in_retirement_without_waiting_for_its_expiry() {
    let path = lock_path("retiring");
    let observer = new_client().await;
    let (proxy, cut_off) = behind_a_proxy(RETIRED_SESSION).await;
    let guard = Mutex::with_client(&cut_off, &path).lock().await.unwrap();
    let waiter = waiting_for(&new_client().await, &path);
    queue_of(&observer, &path, 2).await;

    proxy.cut();
    let reason = timeout(RETIRED_SESSION, guard.lost()).await.expect("the loss is declared within the timeout");
    assert_eq!(reason, LostReason::ConnectionLost);
    // Declared lost 3/5 of the timeout after the last answer: the retirement would wait 2/5 more.
    let closing = Instant::now();
    proxy.heal();
    cut_off.close().await;
    let granted = timeout(PATIENCE, waiter).await.expect("the waiter is granted").unwrap().unwrap();
    let granted_after = closing.elapsed();
    println!("the waiter was granted {granted_after:?} after close() of a client whose session was in retirement");
    assert!(
        granted_after < RETIRED_SESSION * 2 / 5 - Duration::from_millis(500),
        "granted {granted_after:?} after close(): the retirement waited for the expiry"
    );
    granted.release().await.unwrap();
}

#[tokio::test]
async fn closing_a_wrapped_session_removes_its_waiting_nodes() {
    let path = lock_path("wrapped");
    let observer = new_client().await;
    let holder = new_client().await;
    let held = Mutex::with_client(&holder, &path).lock().await.unwrap();
    let zk = zookeeper_client::Client::connect(&server().connect_string()).await.unwrap();
    let wrapped = Client::from_zookeeper(zk.clone());
    let waiting = waiting_for(&wrapped, &path);
    queue_of(&observer, &path, 2).await;

    wrapped.close().await;
    let outcome = timeout(PATIENCE, waiting).await.expect("the waiting acquisition ends").unwrap();
    assert!(matches!(outcome, Err(Error::ClientClosed { .. })), "{outcome:?}");
    // The library cannot end a session the user opened: it removed the waiting node instead,
    // which would otherwise block the lock for as long as the user keeps the session.
    assert_eq!(children(&observer, &path).await.unwrap().len(), 1, "only the holder's node is left");
    assert!(!zk.state().is_terminated(), "the user's session is the user's to end");
    held.release().await.unwrap();
}

#[tokio::test]
async fn closing_ends_an_acquisition_that_is_opening_a_new_session() {
    // Each attempt to connect through the cut link waits 3/10 of this (1.8 s) for an answer, a
    // few ms apart: the close comes while one is under way, almost always.
    const SESSION: Duration = Duration::from_secs(6);
    let path = lock_path("renewing");
    let observer = new_client().await;
    let holder = new_client().await;
    let held = Mutex::with_client(&holder, &path).lock().await.unwrap();
    let (proxy, cut_off) = behind_a_proxy(SESSION).await;
    let waiting = waiting_for(&cut_off, &path);
    queue_of(&observer, &path, 2).await;

    proxy.cut();
    // The server expires the cut-off session (its node goes), long after the client gave it up
    // and began to open another one, through the cut link, for up to its connect timeout.
    queue_of(&observer, &path, 1).await;
    let closing = Instant::now();
    tokio::spawn(async move { cut_off.close().await });
    let outcome =
        timeout(Duration::from_millis(500), waiting).await.expect("ended by the close, not by a connect attempt");
    assert!(matches!(outcome.unwrap(), Err(Error::ClientClosed { .. })));
    println!("the acquisition opening a session ended {:?} after close()", closing.elapsed());
    held.release().await.unwrap();
}
