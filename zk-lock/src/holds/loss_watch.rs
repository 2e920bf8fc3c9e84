//! The loss watch of a held node: it tells the guards that their node was deleted by someone
//! else, that their session is gone, or that a revocation was requested.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::background;
use crate::engine::{LocalHandoff, OwnNodeWatch};
use crate::error::LostReason;
use crate::layout::REVOKE_MESSAGE;
use crate::session::Session;
use crate::trace;

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
pub(crate) fn watch_for_loss(
    session: &Arc<Session>,
    node_path: &str,
    losses_seen: u64,
    released: Arc<AtomicBool>,
    trace: &trace::HoldTrace,
    early: Option<OwnNodeWatch>,
    local: Option<Arc<LocalHandoff>>,
) -> watch::Receiver<NodeState> {
    let (report, state) = watch::channel(NodeState::default());
    let own = early.unwrap_or_else(|| OwnNodeWatch::send(&session.zk, node_path.to_owned()));
    let node = WatchedNode { losses_seen, released, trace: trace.clone(), local };
    background::spawn(report_loss(session.clone(), own, node, report));
    state
}

/// The held node a watch follows.
struct WatchedNode {
    losses_seen: u64,
    /// Set before the holder's own delete is sent.
    released: Arc<AtomicBool>,
    trace: trace::HoldTrace,
    /// Told what this watch learns of the node, for the waiters of this process behind it.
    local: Option<Arc<LocalHandoff>>,
}

/// Reports revocation requests and the first loss: the session's, or the deletion of our node.
async fn report_loss(
    session: Arc<Session>,
    mut own: OwnNodeWatch,
    node: WatchedNode,
    report: watch::Sender<NodeState>,
) {
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
