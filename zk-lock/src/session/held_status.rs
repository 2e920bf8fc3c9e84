//! What the library knows of one held node: lost, revoked, released. The one record of a held
//! node's state: its guards, its session's loss and its follow-up by watch all read and write
//! it here.

use std::sync::{Arc, OnceLock};

use crate::error::LostReason;
use crate::state_cell::StateCell;

/// Told what the session learns of a held node, as it learns it.
pub(crate) trait HeldNodeEvents: Send + Sync {
    /// The lock on `node` was lost: the node was deleted by someone else, or the session lost
    /// its locks.
    fn lost(&self, node: &str, reason: LostReason);
    /// Somebody asked the holder of `node` to give the lock up.
    fn revoked(&self, node: &str);
}

const RELEASED: u8 = 1;
const REVOKED: u8 = 2;
/// Lost: why is in the status's `reason`, claimed before this bit is set.
const LOST: u8 = 4;

/// Neither released nor lost: what is still followed, and what a loss may still reach.
fn followed(state: u8) -> bool {
    state & (RELEASED | LOST) == 0
}

/// What the library knows of one held node: lost, revoked, released. Shared by the hold and
/// its session; the first loss recorded stays, and nothing is recorded once it is released.
/// Its `events` live in the same allocation (the session sees them as `dyn HeldNodeEvents`).
pub(crate) struct HeldStatus<E: ?Sized + HeldNodeEvents = dyn HeldNodeEvents> {
    node_path: Arc<str>,
    /// The session's loss count when the lock was granted.
    losses_seen: u64,
    state: StateCell,
    /// Why it was lost, whole (a `max_hold`'s limit included): claimed by the first loss before
    /// it sets `LOST`, so whoever sees that bit finds it here.
    reason: OnceLock<LostReason>,
    events: E,
}

impl<E: HeldNodeEvents> HeldStatus<E> {
    pub(super) fn new(node_path: Arc<str>, losses_seen: u64, events: E) -> Self {
        Self { node_path, losses_seen, state: StateCell::new(0), reason: OnceLock::new(), events }
    }
}

impl<E: ?Sized + HeldNodeEvents> HeldStatus<E> {
    /// Who hears of the node's loss or revocation.
    pub(crate) fn events(&self) -> &E {
        &self.events
    }

    pub(crate) fn node_path(&self) -> &Arc<str> {
        &self.node_path
    }

    /// The session's loss count when the lock was granted.
    pub(crate) fn losses_seen(&self) -> u64 {
        self.losses_seen
    }

    pub(crate) fn lost(&self) -> Option<LostReason> {
        self.loss_of(self.state.get())
    }

    /// The loss a state shows, whole.
    fn loss_of(&self, state: u8) -> Option<LostReason> {
        (state & LOST != 0).then(|| *self.reason.get().expect("claimed before LOST is set"))
    }

    pub(crate) fn is_revoked(&self) -> bool {
        self.state.get() & REVOKED != 0
    }

    /// Neither released nor lost: held, as far as the library knows.
    pub(crate) fn is_followed(&self) -> bool {
        followed(self.state.get())
    }

    /// Marks the node released by its holder (its own delete is about to be sent, and must not
    /// be taken for a loss); `false` if it was released before.
    pub(crate) fn release(&self) -> bool {
        self.state.update(|state| (state & RELEASED == 0).then_some(state | RELEASED), |_| {})
    }

    /// Records the loss, unless one is recorded already or the node was released; returns
    /// whether it did.
    pub(crate) fn lose(&self, reason: LostReason) -> bool {
        // The first loss claims the reason; a release meanwhile still wins (the bit is not set).
        if !self.is_followed() || self.reason.set(reason).is_err() {
            return false;
        }
        let record = |state| followed(state).then_some(state | LOST);
        // Told first, so whoever wakes up on the loss also finds it traced.
        self.state.update(record, |_| self.events.lost(&self.node_path, reason))
    }

    /// Records a revocation request (once).
    pub(crate) fn revoke(&self) {
        let record = |state| (state & REVOKED == 0).then_some(state | REVOKED);
        self.state.update(record, |_| self.events.revoked(&self.node_path));
    }

    /// Resolves with the loss once one is recorded. Cancel safe: it only observes.
    pub(crate) async fn until_lost(&self) -> LostReason {
        self.state.wait_for(|state| self.loss_of(state)).await
    }

    /// Resolves once the node is released or lost. Cancel safe: it only observes.
    pub(crate) async fn until_let_go(&self) {
        self.state.wait_for(|state| (!followed(state)).then_some(())).await
    }

    /// Resolves once a revocation request is recorded. Cancel safe: it only observes.
    pub(crate) async fn until_revoked(&self) {
        self.state.wait_for(|state| (state & REVOKED != 0).then_some(())).await
    }
}
