//! The one place that tells of a hold's life, from its grant to its end: the tracing events and
//! the metrics (`trace::HoldTrace`), the testing kit's grant recording (`grant_log`), the waiters
//! of this process behind its node (`engine::LocalHandoff`), and lock-order checking (its place
//! among the locks held). The node's status (`session::HeldStatus`) decides which changes
//! happen, and in which order (its opening comment has the diagram); each is told here once.

use std::sync::{Arc, Mutex, PoisonError};

use super::grant_log::{self, Ended, Granted};
use crate::engine::LocalHandoff;
use crate::error::LostReason;
use crate::layout::Recipe;
use crate::lock_order;
use crate::session::{Change, End, HeldNodeEvents};
use crate::trace::{self, HoldTrace};

pub(crate) struct HoldEvents {
    trace: HoldTrace,
    /// The waiters of this process behind our node, if it has any way to tell them.
    local: Option<Arc<LocalHandoff>>,
    /// Its place among the locks its task holds, for lock-order checking, until it is let go.
    order: Mutex<Option<lock_order::Held>>,
}

/// A node just granted, as the hold's events are told of it.
pub(crate) struct Grant<'a> {
    pub recipe: Recipe,
    /// The lock path, and its template for the metrics.
    pub path: &'a str,
    pub template: &'static str,
    pub node: &'a str,
    pub token: i64,
    pub what: Granted<'a>,
}

impl HoldEvents {
    /// Tells of the grant of `grant`: the acquisition's span, the metrics, the grant recording;
    /// `order` is its place among the locks held, `local` its waiters of this process.
    pub(crate) fn granted(grant: Grant<'_>, order: Option<lock_order::Held>, local: Option<Arc<LocalHandoff>>) -> Self {
        let Grant { recipe, path, template, node, token, what } = grant;
        trace::granted(node, token);
        grant_log::granted(recipe, path, node, token, what);
        let trace = HoldTrace::new(recipe, template, path, node);
        Self { trace, local, order: Mutex::new(order) }
    }

    /// The lock path of the hold on `node`.
    pub(crate) fn path<'a>(&self, node: &'a str) -> &'a str {
        self.trace.path(node)
    }

    /// The hold of `node` had its `max_hold` of `limit` extended, `extensions` times so far.
    pub(crate) fn max_hold_extended(&self, node: &str, limit: std::time::Duration, extensions: u32) {
        self.trace.max_hold_extended(node, limit, extensions);
    }

    /// Its place among the locks held, for lock-order checking (`None` while checking is off,
    /// or once let go).
    pub(crate) fn order_key(&self) -> Option<lock_order::HeldKey> {
        self.order.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(lock_order::Held::key)
    }
}

impl HeldNodeEvents for HoldEvents {
    fn told(&self, node: &str, change: Change<'_>) {
        match change {
            Change::Lost(reason) => {
                self.trace.lost(node, reason);
                if let Some(local) = &self.local {
                    match reason {
                        LostReason::NodeDeleted => local.deleted(),
                        // The node may outlive a connection given up for lost.
                        _ => local.unknown(),
                    }
                }
            }
            Change::Revoked => self.trace.revocation_requested(node),
            Change::LettingGo { dropped, lost } => {
                drop(self.order.lock().unwrap_or_else(PoisonError::into_inner).take());
                grant_log::releasing(node);
                // The holder learns how a dropped hold, or one lost before, ended now.
                match (dropped, lost) {
                    (true, lost) => grant_log::ended(node, lost.map_or(Ended::Dropped, Ended::Lost)),
                    (false, Some(reason)) => grant_log::ended(node, Ended::Lost(reason)),
                    (false, None) => {}
                }
            }
            Change::DeleteReplied(reply) => {
                if let Some(local) = &self.local {
                    local.delete_replied(reply);
                }
            }
            Change::Ended { how, dropped } => {
                let ended = match how {
                    End::Released => {
                        self.trace.released(node, dropped);
                        Ended::Released
                    }
                    End::Lost(reason) => {
                        self.trace.lost(node, reason);
                        Ended::Lost(reason)
                    }
                    End::Failed(error) => {
                        self.trace.ended_quietly();
                        Ended::ReleaseFailed(error)
                    }
                };
                // A dropped hold's end was recorded as the holder learnt it: when it let go.
                if !dropped {
                    grant_log::ended(node, ended);
                }
            }
            Change::Finished => grant_log::finished(node),
            Change::NeverEnded => self.trace.ended_quietly(),
        }
    }
}
