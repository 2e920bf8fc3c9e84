//! What a held node's loss or revocation tells, besides its guards: the trace, and the waiters
//! of this process behind the node.

use std::sync::Arc;

use crate::engine::LocalHandoff;
use crate::error::LostReason;
use crate::session::HeldNodeEvents;
use crate::trace::HoldTrace;

pub(crate) struct HoldEvents {
    pub(super) trace: HoldTrace,
    /// The waiters of this process behind our node, if it has any way to tell them.
    pub(super) local: Option<Arc<LocalHandoff>>,
}

impl HoldEvents {
    pub(super) fn new(trace: HoldTrace, local: Option<Arc<LocalHandoff>>) -> Self {
        Self { trace, local }
    }
}

impl HeldNodeEvents for HoldEvents {
    fn lost(&self, node: &str, reason: LostReason) {
        self.trace.lost(node, reason);
        if let Some(local) = &self.local {
            match reason {
                LostReason::NodeDeleted => local.deleted(),
                // The node may outlive a connection given up for lost.
                _ => local.unknown(),
            }
        }
    }

    fn revoked(&self, node: &str) {
        self.trace.revocation_requested(node);
    }
}
