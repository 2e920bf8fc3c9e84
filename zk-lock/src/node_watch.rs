//! The watch on our own lock node: it tells a guard that its node was deleted by someone else,
//! that its session is gone, or that a revocation was requested.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::watch;
use zookeeper_client::{Client as ZkClient, Error as ZkError, EventType, OneshotWatcher, Stat, WatchedEvent};

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
    early: Option<OwnWatch>,
    local: Option<Arc<LocalNode>>,
) -> watch::Receiver<NodeState> {
    let (report, state) = watch::channel(NodeState::default());
    let own = early.unwrap_or_else(|| OwnWatch::send(&session.zk, node_path.to_owned()));
    let node = Followed { losses_seen, released, trace: trace.clone(), local };
    background::spawn(follow(session.clone(), own, node, report));
    state
}

/// The held node a watch follows.
struct Followed {
    losses_seen: u64,
    /// Set before the holder's own delete is sent.
    released: Arc<AtomicBool>,
    trace: trace::Held,
    /// Told what this watch learns of the node, for the waiters of this process behind it.
    local: Option<Arc<LocalNode>>,
}

/// Reports revocation requests and the first loss: the session's, or the deletion of our node.
async fn follow(session: Arc<Session>, mut own: OwnWatch, node: Followed, report: watch::Sender<NodeState>) {
    let revocation = |data: &[u8]| {
        // Only this task sets `revoked`: nobody can set it between the check and the send.
        if data == REVOKE_MESSAGE && !report.borrow().revoked {
            node.trace.revocation_requested();
            report.send_modify(|state| state.revoked = true);
        }
    };
    let reason = tokio::select! {
        reason = session.lost_after(node.losses_seen) => reason,
        () = own.until_deleted(revocation) => LostReason::NodeDeleted,
    };
    if let Some(local) = &node.local {
        match reason {
            LostReason::NodeDeleted => local.deleted(),
            // The node may outlive a connection given up for lost.
            _ => local.unknown(),
        }
    }
    // The watch runs until our own delete fires it (dropping `own` keeps it in the background):
    // ending it earlier would cost a request to remove it from the server.
    if !node.released.load(Ordering::Acquire) {
        // Traced first, so whoever sees the loss also finds it in the trace.
        node.trace.lost(reason);
        report.send_modify(|state| state.lost = Some(reason));
    }
}

type WatchReply = std::result::Result<(Vec<u8>, Stat, OneshotWatcher), ZkError>;

type PendingWatch = Pin<Box<dyn Future<Output = WatchReply> + Send>>;

type PendingEvent = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// The watch on our own node. A waiter sends it while it waits, so that the hand-off to it costs
/// no request of its own, and learns from it that its node was deleted before the lock was
/// granted; the hold continues it once the lock is granted.
pub(crate) struct OwnWatch {
    zk: ZkClient,
    node_path: String,
    stage: Stage,
    /// The node's data when the watch was last set, if it was.
    data: Option<Vec<u8>>,
}

enum Stage {
    /// The watch request is sent; its reply has not been seen.
    Sent(PendingWatch),
    /// The watch is set on the server and has not fired.
    Set(PendingEvent),
    /// Not set: it fired, or its request failed. The next step sends it again.
    Unset,
}

/// What [`OwnWatch::next`] saw.
enum Seen {
    /// The watch is set; `data` holds the node's.
    Set,
    Deleted,
    /// It fired for something else (data written, a reconnect).
    Fired,
    /// Our session ended: the session's own watch reports that.
    SessionEnded,
    Failed(ZkError),
}

impl OwnWatch {
    /// Sends the watch request on `node_path` now, in order with the caller's later requests.
    pub(crate) fn send(zk: &ZkClient, node_path: String) -> Self {
        let stage = Stage::Sent(send_watch_now(zk.clone(), node_path.clone()));
        Self { zk: zk.clone(), node_path, stage, data: None }
    }

    /// Follows the node until it is deleted; `on_data` sees its data each time the watch is set.
    /// Never returns once the watch cannot go on (a dead session is for the session's watch to
    /// report). Cancel safe: the watch stays in `self`.
    pub(crate) async fn until_deleted(&mut self, mut on_data: impl FnMut(&[u8])) {
        // Data read before this call (while waiting for the lock) is seen too: a revocation
        // request may have been written to a waiting node.
        if let Some(data) = &self.data {
            on_data(data);
        }
        let zk = self.zk.clone();
        let mut reconnects = Reconnects::new(&zk);
        loop {
            match self.next().await {
                Seen::Set => on_data(self.data.as_deref().unwrap_or_default()),
                Seen::Deleted => return,
                Seen::Fired => {}
                Seen::SessionEnded => std::future::pending().await,
                Seen::Failed(error) => {
                    if reconnects.wait(error).await.is_err() {
                        std::future::pending().await
                    }
                }
            }
        }
    }

    /// The next step of the watch. Cancel safe: every future it waits on is kept in `stage`.
    async fn next(&mut self) -> Seen {
        match &mut self.stage {
            Stage::Sent(reply) => {
                let reply = reply.await;
                self.stage = Stage::Unset;
                match reply {
                    Ok((data, _, watcher)) => {
                        self.data = Some(data);
                        self.stage = Stage::Set(Box::pin(watcher.changed()));
                        Seen::Set
                    }
                    Err(ZkError::NoNode) => Seen::Deleted,
                    Err(error) => Seen::Failed(error),
                }
            }
            Stage::Set(event) => {
                let event = event.await;
                self.stage = Stage::Unset;
                if event.event_type == EventType::NodeDeleted {
                    Seen::Deleted
                } else if event.session_state.is_terminated() {
                    Seen::SessionEnded
                } else {
                    Seen::Fired
                }
            }
            Stage::Unset => {
                self.stage = Stage::Sent(send_watch_now(self.zk.clone(), self.node_path.clone()));
                Box::pin(self.next()).await
            }
        }
    }
}

impl Drop for OwnWatch {
    /// Let the watch fire (on our own delete at the latest) rather than drop it, which would
    /// cost a request to remove it from the server.
    fn drop(&mut self) {
        match std::mem::replace(&mut self.stage, Stage::Unset) {
            Stage::Sent(reply) => {
                background::spawn(async move {
                    if let Ok((_, _, watcher)) = reply.await {
                        watcher.changed().await;
                    }
                });
            }
            Stage::Set(event) => {
                background::spawn(event);
            }
            Stage::Unset => {}
        }
    }
}

/// Sends a `getData` with a watch on our node now; the reply is awaited by whoever polls the
/// returned future next.
fn send_watch_now(zk: ZkClient, node_path: String) -> PendingWatch {
    let mut reply = Box::pin(async move { zk.get_and_watch_data(&node_path).await });
    // The request is sent during the first poll; nobody needs waking for this one.
    let early = match reply.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    };
    Box::pin(async move {
        match early {
            Some(result) => result,
            None => reply.await,
        }
    })
}
