//! The nodes held on a session, read by its heartbeat. A held node deleted by someone else, or
//! asked to be given up (Curator's `__REVOKE__` written into it), is seen within one heartbeat
//! period and the round trip of the read, with no watch and no request of its own per grant; a
//! loss of the whole session reaches every held node at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::error::LostReason;

/// Told what the session learns of a held node, as it learns it.
pub(crate) trait HeldNodeEvents: Send + Sync {
    /// The lock was lost: the node was deleted by someone else, or the session lost its locks.
    fn lost(&self, reason: LostReason);
    /// Somebody asked the holder to give the lock up.
    fn revoked(&self);
}

const RELEASED: u8 = 1;
const REVOKED: u8 = 2;
/// The loss, if any, is kept in the bits above these flags.
const LOSS_SHIFT: u32 = 2;

fn loss_code(reason: LostReason) -> u8 {
    let code = match reason {
        LostReason::SessionExpired => 1,
        LostReason::SessionClosed => 2,
        LostReason::ConnectionLost => 3,
        LostReason::NodeDeleted => 4,
    };
    code << LOSS_SHIFT
}

fn loss_of(state: u8) -> Option<LostReason> {
    match state >> LOSS_SHIFT {
        0 => None,
        1 => Some(LostReason::SessionExpired),
        2 => Some(LostReason::SessionClosed),
        3 => Some(LostReason::ConnectionLost),
        _ => Some(LostReason::NodeDeleted),
    }
}

/// What the library knows of one held node: lost, revoked, released. Shared by the hold and
/// its session; the first loss recorded stays, and nothing is recorded once it is released.
pub(crate) struct HeldStatus {
    id: u64,
    node_path: Arc<str>,
    /// The session's loss count when the lock was granted.
    losses_seen: u64,
    state: AtomicU8,
    changed: Notify,
    events: Box<dyn HeldNodeEvents>,
}

impl HeldStatus {
    pub(crate) fn node_path(&self) -> &Arc<str> {
        &self.node_path
    }

    pub(crate) fn lost(&self) -> Option<LostReason> {
        loss_of(self.state.load(Ordering::Acquire))
    }

    pub(crate) fn is_revoked(&self) -> bool {
        self.state.load(Ordering::Acquire) & REVOKED != 0
    }

    pub(crate) fn is_released(&self) -> bool {
        self.state.load(Ordering::Acquire) & RELEASED != 0
    }

    /// Marks the node released by its holder (its own delete is about to be sent, and must not
    /// be taken for a loss); `false` if it was released before.
    pub(crate) fn release(&self) -> bool {
        self.state.fetch_or(RELEASED, Ordering::AcqRel) & RELEASED == 0
    }

    /// Records the loss, unless one is recorded already or the node was released.
    pub(crate) fn lose(&self, reason: LostReason) {
        let recorded = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |state| {
            (state & RELEASED == 0 && loss_of(state).is_none()).then_some(state | loss_code(reason))
        });
        if recorded.is_ok() {
            // Told first, so whoever wakes up on the loss also finds it traced.
            self.events.lost(reason);
            self.changed.notify_waiters();
        }
    }

    /// Records a revocation request (once).
    pub(crate) fn revoke(&self) {
        if self.state.fetch_or(REVOKED, Ordering::AcqRel) & REVOKED == 0 {
            self.events.revoked();
            self.changed.notify_waiters();
        }
    }

    /// Resolves with the loss once one is recorded. Cancel safe: it only observes.
    pub(crate) async fn until_lost(&self) -> LostReason {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change between the two still wakes us.
            changed.as_mut().enable();
            if let Some(reason) = self.lost() {
                return reason;
            }
            changed.await;
        }
    }

    /// Resolves once a revocation request is recorded. Cancel safe: it only observes.
    pub(crate) async fn until_revoked(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.is_revoked() {
                return;
            }
            changed.await;
        }
    }
}

/// The held nodes of one session that its heartbeat reads.
#[derive(Default)]
pub(super) struct HeldNodes {
    next_id: AtomicU64,
    nodes: Mutex<HashMap<u64, Arc<HeldStatus>>>,
}

impl HeldNodes {
    fn nodes(&self) -> MutexGuard<'_, HashMap<u64, Arc<HeldStatus>>> {
        self.nodes.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts following a node granted after `losses_seen` losses of the session.
    pub(super) fn add(
        &self,
        node_path: Arc<str>,
        losses_seen: u64,
        events: Box<dyn HeldNodeEvents>,
    ) -> Arc<HeldStatus> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let status = Arc::new(HeldStatus {
            id,
            node_path,
            losses_seen,
            state: AtomicU8::new(0),
            changed: Notify::new(),
            events,
        });
        self.nodes().insert(id, status.clone());
        status
    }

    pub(super) fn remove(&self, status: &HeldStatus) {
        self.nodes().remove(&status.id);
    }

    /// The session lost its locks for the `losses`-th time: every node granted before is lost.
    pub(super) fn lose_all(&self, losses: u64, reason: LostReason) {
        for status in self.snapshot() {
            if status.losses_seen < losses {
                status.lose(reason);
            }
        }
    }

    /// The nodes still held and not known lost, to be read by the heartbeat.
    pub(super) fn snapshot(&self) -> Vec<Arc<HeldStatus>> {
        let nodes = self.nodes();
        let followed = |status: &&Arc<HeldStatus>| {
            let state = status.state.load(Ordering::Acquire);
            state & RELEASED == 0 && loss_of(state).is_none()
        };
        nodes.values().filter(followed).cloned().collect()
    }
}

impl std::fmt::Debug for HeldNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldNodes").field("held", &self.nodes().len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[derive(Default)]
    struct Counted {
        lost: AtomicUsize,
        revoked: AtomicUsize,
    }

    impl HeldNodeEvents for Arc<Counted> {
        fn lost(&self, _: LostReason) {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        fn revoked(&self) {
            self.revoked.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn held(nodes: &HeldNodes, losses_seen: u64) -> (Arc<HeldStatus>, Arc<Counted>) {
        let counted = Arc::new(Counted::default());
        (nodes.add("/unit/held".into(), losses_seen, Box::new(counted.clone())), counted)
    }

    #[test]
    fn the_first_loss_stays_and_is_told_once() {
        let nodes = HeldNodes::default();
        let (status, counted) = held(&nodes, 0);
        status.lose(LostReason::NodeDeleted);
        status.lose(LostReason::SessionExpired);
        assert_eq!(status.lost(), Some(LostReason::NodeDeleted));
        assert_eq!(counted.lost.load(Ordering::Relaxed), 1);
        assert!(nodes.snapshot().is_empty(), "a lost node is not read again");
    }

    #[test]
    fn a_released_node_is_not_lost_and_not_read() {
        let nodes = HeldNodes::default();
        let (status, counted) = held(&nodes, 0);
        assert!(status.release());
        assert!(!status.release(), "released once");
        status.lose(LostReason::NodeDeleted);
        assert_eq!(status.lost(), None);
        assert_eq!(counted.lost.load(Ordering::Relaxed), 0);
        assert!(nodes.snapshot().is_empty());
    }

    #[test]
    fn a_session_loss_reaches_only_nodes_granted_before_it() {
        let nodes = HeldNodes::default();
        let (before, _) = held(&nodes, 0);
        let (after, _) = held(&nodes, 1);
        nodes.lose_all(1, LostReason::ConnectionLost);
        assert_eq!(before.lost(), Some(LostReason::ConnectionLost));
        assert_eq!(after.lost(), None);
    }

    #[test]
    fn every_loss_reason_round_trips() {
        for reason in
            [LostReason::SessionExpired, LostReason::SessionClosed, LostReason::ConnectionLost, LostReason::NodeDeleted]
        {
            assert_eq!(loss_of(loss_code(reason) | REVOKED), Some(reason));
        }
    }

    #[tokio::test]
    async fn waiters_wake_on_revocation_and_loss() {
        let nodes = HeldNodes::default();
        let (status, counted) = held(&nodes, 0);
        let (revoked, lost) = (status.clone(), status.clone());
        let revoked = tokio::spawn(async move { revoked.until_revoked().await });
        let lost = tokio::spawn(async move { lost.until_lost().await });
        tokio::task::yield_now().await;
        status.revoke();
        status.revoke();
        revoked.await.unwrap();
        assert_eq!(counted.revoked.load(Ordering::Relaxed), 1);
        status.lose(LostReason::SessionClosed);
        assert_eq!(lost.await.unwrap(), LostReason::SessionClosed);
    }
}
