//! Reading and waiting for the children of a node: what a test checks about a lock's queue.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::Error as ZkError;

use super::{Result, TestingError};
use crate::session::Session;
use crate::Client;

/// How long [`wait_for_children`] waits: long enough for a loaded CI machine, short enough for a
/// broken test to fail instead of hanging.
pub const CHILDREN_TIMEOUT: Duration = Duration::from_secs(30);

/// The children of `path` (node names, in the server's order), or none when `path` does not
/// exist.
///
/// A lock's queue is the children of its path (of `<path>/leases` and `<path>/locks` for a
/// semaphore); after a test, there should be none left.
///
/// # Errors
///
/// [`TestingError::Zookeeper`] when the listing fails for another reason than a missing node
/// (no session, say).
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn children(client: &Client, path: &str) -> Result<Vec<String>> {
    match usable_session(client, path).await.zk.list_children(path).await {
        Ok(children) => Ok(children),
        Err(ZkError::NoNode) => Ok(Vec::new()),
        Err(source) => Err(TestingError::Zookeeper { action: format!("list the children of `{path}`"), source }),
    }
}

/// Waits until the children of `path` satisfy `done`, and returns them; at most
/// [`CHILDREN_TIMEOUT`].
///
/// Waits by watching `path`, not by polling: every change of its children (and its creation,
/// while it does not exist, when it has no children) wakes the check. Use it to wait until a
/// contender has queued (`|c| c.len() == 2`), or until a lock left no node (`|c| c.is_empty()`).
///
/// ```no_run
/// # async fn example(client: &zk_lock::Client) -> Result<(), zk_lock::testing::TestingError> {
/// use zk_lock::testing::wait_for_children;
///
/// // The holder and one waiter are queued.
/// let queued = wait_for_children(client, "/orders/42", |c| c.len() == 2).await?;
/// # let _ = queued; Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`TestingError::ChildrenNotReached`], with the children last seen, when `done` is still
/// false after [`CHILDREN_TIMEOUT`]; [`TestingError::Zookeeper`] when a listing or a watch
/// fails.
///
/// # Cancel safety
///
/// Cancel safe: it only reads and watches.
pub async fn wait_for_children(client: &Client, path: &str, done: impl Fn(&[String]) -> bool) -> Result<Vec<String>> {
    wait_for_children_within(client, path, CHILDREN_TIMEOUT, done).await
}

/// [`wait_for_children`] with its own timeout.
///
/// # Errors
///
/// [`TestingError::ChildrenNotReached`] when `done` is still false after `within`;
/// [`TestingError::Zookeeper`] when a listing or a watch fails.
///
/// # Cancel safety
///
/// Cancel safe: it only reads and watches.
pub async fn wait_for_children_within(
    client: &Client,
    path: &str,
    within: Duration,
    done: impl Fn(&[String]) -> bool,
) -> Result<Vec<String>> {
    let watch_failed = |source| TestingError::Zookeeper { action: format!("watch the children of `{path}`"), source };
    let started = tokio::time::Instant::now();
    loop {
        // A session of the client that may still be used: a new one after an expiry, or after
        // the client's previous one was declared lost (and is being closed) while the server was
        // out of reach.
        let session = usable_session(client, path).await;
        let zk = &session.zk;
        let (children, changed) = match zk.get_and_watch_children(path).await {
            Ok((children, _, watcher)) => (children, Some(watcher)),
            Err(ZkError::NoNode) => (Vec::new(), None),
            // The session ended, or was given up, while the request was on its way: ask again on
            // the client's next one, within the same time.
            Err(_) if !session.is_usable() && tokio::time::Instant::now() < started + within => continue,
            Err(source) => return Err(watch_failed(source)),
        };
        if done(&children) {
            return Ok(children);
        }
        let change = async {
            match changed {
                Some(watcher) => {
                    watcher.changed().await;
                    Ok(())
                }
                // Not there yet: wait for it to be created.
                None => match zk.check_and_watch_stat(path).await {
                    Ok((None, watcher)) => {
                        watcher.changed().await;
                        Ok(())
                    }
                    Ok((Some(_), _)) => Ok(()),
                    // Given up meanwhile: the next round asks on the client's next session.
                    Err(_) if !session.is_usable() => Ok(()),
                    Err(source) => Err(watch_failed(source)),
                },
            }
        };
        match tokio::time::timeout_at(started + within, change).await {
            Ok(changed) => changed?,
            Err(_) => {
                return Err(TestingError::ChildrenNotReached {
                    path: path.to_owned(),
                    waited: started.elapsed(),
                    last: children,
                })
            }
        }
    }
}

/// The client's session for `path`, renewed if the current one must not be used any more; the
/// current one when none can be opened (closed, unreachable), whose request then fails with the
/// error that says why.
async fn usable_session(client: &Client, path: &str) -> Arc<Session> {
    client.session(path).await.unwrap_or_else(|_| client.current_session())
}
