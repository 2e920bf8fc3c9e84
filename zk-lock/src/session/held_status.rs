//! What the library knows of one held node: held, lost, revoked, let go, ended. The one record
//! of a held node's state: its guards, its session's loss, its follow-up by watch, its
//! `max_hold` and its release all read and write it here, and every change it makes is told,
//! once, to its [`HeldNodeEvents`] (tracing, metrics, the grant recording, the waiters of this
//! process behind it, lock-order checking: `holds::hold_events`).
//!
//! ```text
//!              revoke (a flag, any time before the end; told once)
//!
//!  held ──lose (session, watch, max_hold)──▶ lost+ended ──let go──▶ (its delete, in the background)
//!    │
//!    └──let go (release, drop)──▶ letting go ──end: the delete answered, or a loss revealed,
//!                                                or the release failed──▶ ended
//!
//!  dropped never ended (a release cancelled mid-way): told as such.
//! ```
//!
//! A loss is recorded only while the node is neither let go nor lost (the holder's own delete
//! must not be taken for a loss), and the first one stays.

use std::sync::{Arc, OnceLock};

use zookeeper_client::Error as ZkError;

use crate::error::LostReason;
use crate::state_cell::StateCell;

/// A change of a held node, as its status tells it.
pub(crate) enum Change<'a> {
    /// The lock was lost while held: the node was deleted by someone else, the session lost its
    /// locks, or the hold reached its `max_hold`. Its end, too.
    Lost(LostReason),
    /// Somebody asked the holder to give the lock up.
    Revoked,
    /// The holder let it go (`dropped`: its last guard was dropped, not released), and its
    /// delete is about to be sent; `lost`: the loss recorded before, if any.
    LettingGo { dropped: bool, lost: Option<LostReason> },
    /// The holder's delete was answered (after [`Change::LettingGo`]).
    DeleteReplied(&'a Result<(), ZkError>),
    /// How a node let go while held ended, as its holder learnt it.
    Ended { how: End<'a>, dropped: bool },
    /// The holder's body finished; its guard is released or dropped next.
    Finished,
    /// The status goes without its end ever told (a release cancelled mid-way).
    NeverEnded,
}

/// How a node let go while held ended.
#[derive(Clone, Copy)]
pub(crate) enum End<'a> {
    /// ZooKeeper confirmed the delete.
    Released,
    /// The delete, or the session meanwhile, revealed a loss.
    Lost(LostReason),
    /// The delete failed with this error, the lock not known lost.
    Failed(&'a str),
}

/// Told every change of a held node, once, as it happens.
pub(crate) trait HeldNodeEvents: Send + Sync {
    fn told(&self, node: &str, change: Change<'_>);
}

const LET_GO: u8 = 1;
const REVOKED: u8 = 2;
/// Lost: why is in the status's `reason`, claimed before this bit is set.
const LOST: u8 = 4;
/// Its end was told (lost while held, or the outcome of its release).
const ENDED: u8 = 8;

/// Neither let go nor lost: what is still followed, and what a loss may still reach.
fn followed(state: u8) -> bool {
    state & (LET_GO | LOST) == 0
}

/// What the library knows of one held node. Shared by the hold and its session; its `events`
/// live in the same allocation (the session sees them as `dyn HeldNodeEvents`).
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
    /// Who is told of the node's changes.
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

    /// Neither let go nor lost: held, as far as the library knows.
    pub(crate) fn is_followed(&self) -> bool {
        followed(self.state.get())
    }

    /// The holder lets the node go (`dropped`: by dropping its last guard): its own delete is
    /// about to be sent, and must not be taken for a loss. `false` if it was let go before.
    pub(crate) fn let_go(&self, dropped: bool) -> bool {
        let record = |state| (state & LET_GO == 0).then_some(state | LET_GO);
        let lost = self.lost();
        self.state.update(record, |_| self.tell(Change::LettingGo { dropped, lost }))
    }

    /// Records the loss, unless one is recorded already or the node was let go; returns
    /// whether it did. A loss while held is its end.
    pub(crate) fn lose(&self, reason: LostReason) -> bool {
        // The first loss claims the reason; a release meanwhile still wins (the bit is not set).
        if !self.is_followed() || self.reason.set(reason).is_err() {
            return false;
        }
        let record = |state| followed(state).then_some(state | LOST | ENDED);
        // Told first, so whoever wakes up on the loss also finds it traced.
        self.state.update(record, |_| self.tell(Change::Lost(reason)))
    }

    /// Records a revocation request (once).
    pub(crate) fn revoke(&self) {
        let record = |state| (state & REVOKED == 0).then_some(state | REVOKED);
        self.state.update(record, |_| self.tell(Change::Revoked));
    }

    /// Records how the node let go ended, unless its end was told before (a loss while held, or
    /// an earlier outcome); returns whether it did.
    pub(crate) fn end(&self, how: End<'_>, dropped: bool) -> bool {
        let record = |state| (state & ENDED == 0).then_some(state | ENDED);
        self.state.update(record, |_| self.tell(Change::Ended { how, dropped }))
    }

    /// Tells a change that is no change of state: the delete's reply, the body's end.
    pub(crate) fn tell(&self, change: Change<'_>) {
        self.events.told(&self.node_path, change);
    }

    /// Resolves with the loss once one is recorded. Cancel safe: it only observes.
    pub(crate) async fn until_lost(&self) -> LostReason {
        self.state.wait_for(|state| self.loss_of(state)).await
    }

    /// Resolves once the node is let go or lost. Cancel safe: it only observes.
    pub(crate) async fn until_let_go(&self) {
        self.state.wait_for(|state| (!followed(state)).then_some(())).await
    }

    /// Resolves once a revocation request is recorded. Cancel safe: it only observes.
    pub(crate) async fn until_revoked(&self) {
        self.state.wait_for(|state| (state & REVOKED != 0).then_some(())).await
    }
}

impl<E: ?Sized + HeldNodeEvents> Drop for HeldStatus<E> {
    fn drop(&mut self) {
        if self.state.get() & ENDED == 0 {
            self.tell(Change::NeverEnded);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Every change told, as text.
    #[derive(Default)]
    struct Told(Mutex<Vec<String>>);

    impl HeldNodeEvents for Arc<Told> {
        fn told(&self, _: &str, change: Change<'_>) {
            let said = match change {
                Change::Lost(reason) => format!("lost {reason:?}"),
                Change::Revoked => "revoked".into(),
                Change::LettingGo { dropped, lost } => format!("letting go dropped={dropped} lost={lost:?}"),
                Change::DeleteReplied(reply) => format!("delete replied ok={}", reply.is_ok()),
                Change::Ended { how, dropped } => match how {
                    End::Released => format!("ended released dropped={dropped}"),
                    End::Lost(reason) => format!("ended lost {reason:?} dropped={dropped}"),
                    End::Failed(error) => format!("ended failed {error} dropped={dropped}"),
                },
                Change::Finished => "finished".into(),
                Change::NeverEnded => "never ended".into(),
            };
            self.0.lock().unwrap().push(said);
        }
    }

    fn status() -> (HeldStatus<Arc<Told>>, Arc<Told>) {
        let told = Arc::new(Told::default());
        (HeldStatus::new("/unit/status/n-1".into(), 0, told.clone()), told)
    }

    fn said(told: &Told) -> Vec<String> {
        told.0.lock().unwrap().clone()
    }

    #[test]
    fn a_release_tells_letting_go_then_one_end() {
        let (status, told) = status();
        status.revoke();
        assert!(status.let_go(false));
        assert!(!status.lose(LostReason::NodeDeleted), "its own delete is no loss");
        status.tell(Change::DeleteReplied(&Ok(())));
        assert!(status.end(End::Released, false));
        assert!(!status.end(End::Lost(LostReason::SessionExpired), false), "one end");
        drop(status);
        let expected =
            ["revoked", "letting go dropped=false lost=None", "delete replied ok=true", "ended released dropped=false"];
        assert_eq!(said(&told), expected, "nothing after the end, no 'never ended'");
    }

    #[test]
    fn a_loss_is_the_end_and_the_release_after_it_tells_only_that_it_let_go() {
        let (status, told) = status();
        let limit = LostReason::MaxHoldReached { limit: std::time::Duration::from_millis(7) };
        assert!(status.lose(limit));
        assert!(!status.lose(LostReason::SessionClosed), "the first loss stays");
        assert_eq!(status.lost(), Some(limit), "whole, its limit included");
        assert!(status.let_go(true));
        assert!(!status.end(End::Released, true), "ended at the loss");
        drop(status);
        assert_eq!(said(&told), [format!("lost {limit:?}"), format!("letting go dropped=true lost=Some({limit:?})")]);
    }

    #[test]
    fn a_status_that_goes_without_an_end_says_so() {
        let (status, told) = status();
        assert!(status.let_go(false));
        // The release was cancelled before its delete's reply.
        drop(status);
        assert_eq!(said(&told), ["letting go dropped=false lost=None", "never ended"]);
    }
}
