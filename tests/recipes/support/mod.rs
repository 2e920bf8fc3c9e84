//! Clients of the shared test server and ways to wait for the lock queue to change.

use std::time::Duration;

use zk_lock::testing::{shared_server, TestingServer};
use zk_lock::Client;
use zookeeper_client::Error as ZkError;

/// How long a test waits for ZooKeeper to show an expected state before failing.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The server shared by all tests of this test binary.
pub fn server() -> &'static TestingServer {
    shared_server()
}

/// A new client (its own session) of the shared server.
pub async fn new_client() -> Client {
    client_with_session_timeout(Duration::from_secs(10)).await
}

/// A new client of the shared server with the given session timeout.
pub async fn client_with_session_timeout(timeout: Duration) -> Client {
    Client::builder(server().connect_string())
        .session_timeout(timeout)
        .connect()
        .await
        .expect("connect to the test server")
}

/// The children of `path`, or none if it does not exist.
pub async fn children(client: &Client, path: &str) -> Vec<String> {
    match client.zookeeper().list_children(path).await {
        Ok(children) => children,
        Err(ZkError::NoNode) => Vec::new(),
        Err(e) => panic!("list {path}: {e}"),
    }
}

/// Waits, by watching `path`, until its children satisfy `done`; panics after [`PATIENCE`].
pub async fn wait_for_children(client: &Client, path: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let zk = client.zookeeper();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (children, changed) = match zk.get_and_watch_children(path).await {
            Ok((children, _, watcher)) => (children, Some(watcher)),
            Err(ZkError::NoNode) => (Vec::new(), None),
            Err(e) => panic!("watch {path}: {e}"),
        };
        if done(&children) {
            return children;
        }
        let wait = async {
            match changed {
                Some(watcher) => drop(watcher.changed().await),
                // Not there yet: wait for it to be created.
                None => match zk.check_and_watch_stat(path).await {
                    Ok((None, watcher)) => drop(watcher.changed().await),
                    Ok((Some(_), _)) => {}
                    Err(e) => panic!("watch {path}: {e}"),
                },
            }
        };
        if tokio::time::timeout_at(deadline, wait).await.is_err() {
            panic!("children of {path} never reached the expected state; last seen: {children:?}");
        }
    }
}

/// A random generator for random cancellation points and delays, with its seed printed, so a
/// failing run can be replayed (`fastrand::Rng::with_seed`).
pub fn rng() -> fastrand::Rng {
    let seed = fastrand::u64(..);
    eprintln!("rng seed {seed}");
    fastrand::Rng::with_seed(seed)
}
