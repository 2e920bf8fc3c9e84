//! The watch on our own lock node: it tells a guard that its node was deleted by someone else,
//! that its session is gone, or that a revocation was requested.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::watch;
use zookeeper_client::{Client as ZkClient, Error as ZkError, EventType, OneshotWatcher, Stat};

use crate::background;
use crate::engine::{LocalNode, Reconnects};
use crate::error::LostReason;
use crate::session::Session;
use crate::trace;

/// Curator's revocation request, written into a holder's node by `Revoker.attemptRevoke`.
pub(crate) const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// What the watch has seen of a held node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NodeState {
    pub lost: Option<LostReason>,
    pub revoked: bool,
}

/// Watches `node_path` until the lock is lost or released, continuing `early` (the watch a
/// waiter set while it waited) or else sending the watch request now, in order with the
/// caller's next requests, so that setting it costs the caller no round trip. Its reply is
/// handled on the background runtime.
pub(crate) fn watch_own_node(
    session: &Arc<Session>,
    node_path: &str,
    losses_seen: u64,
    released: Arc<AtomicBool>,
    trace: &trace::Held,
    early: Option<EarlyWatch>,
    local: Option<Arc<LocalNode>>,
) -> watch::Receiver<NodeState> {
    let (report, state) = watch::channel(NodeState::default());
    let first_watch = match early.and_then(EarlyWatch::take) {
        Some(reply) => reply,
        None => Box::pin(send_watch_now(session.zk.clone(), node_path.to_owned())),
    };
    let node = Followed { node_path: node_path.to_owned(), losses_seen, released, trace: trace.clone(), local };
    background::spawn(follow(session.clone(), first_watch, node, report));
    state
}

/// The held node a watch follows.
struct Followed {
    node_path: String,
    losses_seen: u64,
    /// Set before the holder's own delete is sent.
    released: Arc<AtomicBool>,
    trace: trace::Held,
    /// Told what this watch learns of the node, for the waiters of this process behind it.
    local: Option<Arc<LocalNode>>,
}

/// Reports revocation requests and the first loss: the session's, or the deletion of our node.
async fn follow(
    session: Arc<Session>,
    first_watch: impl Future<Output = WatchReply> + Send,
    node: Followed,
    report: watch::Sender<NodeState>,
) {
    let reason = tokio::select! {
        reason = session.lost_after(node.losses_seen) => reason,
        reason = node_deleted(&session.zk, &node, first_watch, &report) => reason,
    };
    if let Some(local) = &node.local {
        match reason {
            LostReason::NodeDeleted => local.deleted(),
            // The node may outlive a connection given up for lost.
            _ => local.unknown(),
        }
    }
    // The watch runs until our own delete fires it: ending it earlier would cost a request to
    // remove the watch from the server.
    if !node.released.load(Ordering::Acquire) {
        // Traced first, so whoever sees the loss also finds it in the trace.
        node.trace.lost(reason);
        report.send_modify(|state| state.lost = Some(reason));
    }
}

type WatchReply = std::result::Result<(Vec<u8>, Stat, OneshotWatcher), ZkError>;

type PendingWatch = Pin<Box<dyn Future<Output = WatchReply> + Send>>;

/// The watch on our own node, sent while we wait for the lock so that the hand-off to us costs
/// no request of its own; the hold continues it once the lock is granted.
pub(crate) struct EarlyWatch(Option<PendingWatch>);

impl EarlyWatch {
    /// Sends the watch request on `node_path` now.
    pub(crate) fn send(zk: &ZkClient, node_path: String) -> Self {
        Self(Some(Box::pin(send_watch_now(zk.clone(), node_path))))
    }

    fn take(mut self) -> Option<PendingWatch> {
        self.0.take()
    }
}

impl Drop for EarlyWatch {
    /// Not granted after all: let the watch fire on our own delete rather than drop it, which
    /// would cost a request to remove it from the server.
    fn drop(&mut self) {
        if let Some(reply) = self.0.take() {
            background::spawn(async move {
                if let Ok((_, _, watcher)) = reply.await {
                    watcher.changed().await;
                }
            });
        }
    }
}

/// Sends a `getData` with a watch on our node now; the reply is awaited by whoever polls the
/// returned future next.
fn send_watch_now(zk: ZkClient, node_path: String) -> impl Future<Output = WatchReply> + Send {
    let mut reply = Box::pin(async move { zk.get_and_watch_data(&node_path).await });
    // The request is sent during the first poll; nobody needs waking for this one.
    let early = match reply.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    };
    async move {
        match early {
            Some(result) => result,
            None => reply.await,
        }
    }
}

/// Resolves if our node is deleted, reporting revocation requests on the way. Session trouble
/// is left to the session's own watch.
async fn node_deleted(
    zk: &ZkClient,
    node: &Followed,
    first_watch: impl Future<Output = WatchReply>,
    report: &watch::Sender<NodeState>,
) -> LostReason {
    let mut reconnects = Reconnects::new(zk);
    let mut reply = first_watch.await;
    loop {
        match reply {
            Ok((data, _, watcher)) => {
                // Only this task sets `revoked`: nobody can set it between the check and the send.
                if data == REVOKE_MESSAGE && !report.borrow().revoked {
                    node.trace.revocation_requested();
                    report.send_modify(|state| state.revoked = true);
                }
                let event = watcher.changed().await;
                if event.event_type == EventType::NodeDeleted {
                    return LostReason::NodeDeleted;
                }
                if event.session_state.is_terminated() {
                    return std::future::pending().await;
                }
            }
            Err(ZkError::NoNode) => return LostReason::NodeDeleted,
            // A dead session is reported by the session's watch.
            Err(error) => {
                if reconnects.wait(error).await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
        reply = zk.get_and_watch_data(&node.node_path).await;
    }
}
