//! What a held node's loss or revocation tells, besides its guards: the trace, and the waiters
//! of this process behind the node.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::LocalHandoff;
use crate::error::LostReason;
use crate::session::HeldNodeEvents;
use crate::trace::HoldTrace;

pub(crate) struct HoldEvents {
    pub(super) trace: HoldTrace,
    /// The waiters of this process behind our node, if it has any way to tell them.
    pub(super) local: Option<Arc<LocalHandoff>>,
    /// The `max_hold` that ended the hold, in milliseconds, 0 while none did: the hold's own
    /// limit or that of a call nested in its holder, whichever came first.
    limit_reached_ms: AtomicU32,
}

impl HoldEvents {
    pub(super) fn new(trace: HoldTrace, local: Option<Arc<LocalHandoff>>) -> Self {
        Self { trace, local, limit_reached_ms: AtomicU32::new(0) }
    }

    /// Claims the hold's end for `limit`: false if another limit claimed it first.
    pub(crate) fn claim_limit(&self, limit: Duration) -> bool {
        let ms = u32::try_from(limit.as_millis()).unwrap_or(u32::MAX).max(1);
        self.limit_reached_ms.compare_exchange(0, ms, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// `reason`, with the limit that ended the hold if it is `MaxHoldReached` (the status keeps
    /// only which loss it was).
    pub(crate) fn with_limit(&self, reason: LostReason) -> LostReason {
        match reason {
            LostReason::MaxHoldReached { .. } => {
                let ms = self.limit_reached_ms.load(Ordering::Acquire);
                LostReason::MaxHoldReached { limit: Duration::from_millis(ms.into()) }
            }
            other => other,
        }
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
