//! What an acquisition says when it ends for want of ZooKeeper rather than because the lock was
//! busy (issue 34, points 9 and 10): a wait that times out while the connection is down is
//! `Error::ConnectionDown`, naming the servers and how long it was down, not a holder to look
//! for; a host name that does not resolve is named as such. The healthy case keeps its message.

use std::time::Duration;

use zk_lock::testing::{Proxy, TestingServer};
use zk_lock::{zk_lock, Client, Error, Mutex};

use crate::support::{queue_of, server, unique_name, PATIENCE};

/// Bounds a future that should finish, so that a broken acquisition fails the test instead of
/// hanging it.
async fn bounded<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future).await.unwrap_or_else(|_| panic!("{what} did not finish in {PATIENCE:?}"))
}

/// Asserts that `outcome` is the error of a wait that ended with the connection to
/// `connect_string` down, for the lock at `path`, after `timeout`; returns its message.
fn assert_connection_down<T: std::fmt::Debug>(
    outcome: Result<T, Error>,
    path: &str,
    connect_string: &str,
    timeout: Duration,
) -> String {
    let error = outcome.expect_err("the wait cannot succeed with the servers out of reach");
    let message = error.to_string();
    match &error {
        Error::ConnectionDown { path: p, waited, down, connect_string: servers } => {
            assert_eq!(p, path);
            assert_eq!(servers, connect_string);
            assert!(*waited >= timeout, "waited {waited:?} of {timeout:?}");
            assert!(!down.is_zero() && down <= waited, "down for {down:?} of {waited:?}");
        }
        other => panic!("an outage must not read as a busy lock: expected Error::ConnectionDown, got {other:?}"),
    }
    assert!(message.contains(&format!("`{path}`")), "names the lock: {message}");
    assert!(message.contains(&format!("`{connect_string}`")), "names the servers: {message}");
    assert!(message.contains("connection to zookeeper"), "says the connection was down: {message}");
    assert!(!message.contains("find the holder"), "sends nobody looking for a holder: {message}");
    eprintln!("{message}");
    message
}

// --- a partition while the call waits -------------------------------------------------------

/// The client behind the proxy of [`an_annotated_call_cut_off_from_zookeeper_says_so`].
const CUT_OFF: &str = "outage-cut-off";

#[zk_lock(path = "/it-outage/product_<id>", client = "outage-cut-off", timeout = "3s")]
async fn update_product(id: u32) -> Result<u32, Error> {
    Ok(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotated_call_cut_off_from_zookeeper_says_so() {
    let proxy = Proxy::start(server().connect_string()).expect("start a proxy");
    // A short session, so that the partition makes the client give its session up during the
    // wait, and a short connect timeout, so that it tries new ones several times.
    Client::builder(proxy.connect_string())
        .session_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_millis(300))
        .install_as(CUT_OFF)
        .await
        .expect("install a client behind the proxy");
    proxy.cut();
    let outcome = bounded("the call", update_product(1)).await;
    let message =
        assert_connection_down(outcome, "/it-outage/product_1", &proxy.connect_string(), Duration::from_secs(3));
    assert!(message.contains("still down"), "{message}");
    proxy.heal();
}

// --- a server that stops while the call waits behind a holder ------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_behind_a_holder_that_ends_with_the_server_down_says_so_and_a_healthy_one_does_not() {
    let own = TestingServer::start().expect("a server of its own");
    let path = format!("/it-outage/{}", unique_name("stopped"));
    let connect = |timeout| Client::builder(own.connect_string()).session_timeout(timeout).connect();
    let holder_client = connect(Duration::from_secs(10)).await.expect("holder connects");
    let waiter_client = connect(Duration::from_secs(4)).await.expect("waiter connects");
    let _held = Mutex::with_client(&holder_client, &path).lock().await.expect("holder takes the lock");
    let waiter = Mutex::with_client(&waiter_client, &path);

    // The server is up: a plain timeout, with its message as it always was. From a task of its
    // own, as another process would wait: this task holds the lock, so its own wait would be
    // told that it waited for itself.
    let healthy = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.lock_timeout(Duration::from_millis(300)).await })
    };
    let busy = bounded("the healthy wait", async { healthy.await.expect("the healthy wait's task") }).await;
    match &busy {
        Err(error @ Error::Timeout { path: p, .. }) => {
            assert_eq!(p, &path);
            let message = error.to_string();
            assert!(message.starts_with("timed out after "), "{message}");
            assert!(
                message.ends_with(&format!(
                    "waiting for lock `{path}`; raise the timeout or find the holder with `zk-lock inspect {path}`"
                )),
                "{message}"
            );
        }
        other => panic!("expected Error::Timeout behind a holder, got {other:?}"),
    }

    // The server stops while the waiter is queued behind the holder.
    let timeout = Duration::from_secs(3);
    let waiting = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.lock_timeout(timeout).await })
    };
    queue_of(&holder_client, &path, 2).await;
    own.stop().expect("stop the server");
    let outcome = bounded("the wait", waiting).await.expect("the waiting task");
    let message = assert_connection_down(outcome, &path, &own.connect_string(), timeout);
    assert!(message.contains("still down"), "{message}");
}

// --- a host name that does not resolve ------------------------------------------------------

#[tokio::test]
async fn a_host_name_that_does_not_resolve_is_named_not_taken_for_a_stopped_server() {
    let connect_string = "no-such-host.invalid:2181";
    let outcome = Client::builder(connect_string).connect_timeout(Duration::from_secs(1)).connect().await;
    match outcome {
        Err(Error::Connect { connect_string: tried, reason }) => {
            assert_eq!(tried, connect_string);
            assert!(reason.contains("the host name `no-such-host.invalid` could not be resolved"), "{reason}");
            assert!(!reason.contains("is the server running"), "{reason}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
}
