//! The nodes held on a session, and the count of its losses, under one lock: a node is either
//! added before a loss (and the loss reaches it) or after (and it learns the loss as it is
//! added), so no loss can miss a node. The nodes not yet followed by a watch wait here, oldest
//! first, until they have been held for one heartbeat period (`follow` takes them then).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use super::held_status::HeldStatus;
use crate::error::LostReason;

#[derive(Default)]
struct Held {
    /// Every node held, by the address of its status (unique while it is in the set).
    all: HashMap<usize, Arc<HeldStatus>>,
    /// Nodes not followed by a watch yet, with when they were added (or last failed to be).
    unwatched: VecDeque<(Instant, Arc<HeldStatus>)>,
    /// How many times the session lost its locks, and why the last time.
    losses: u64,
    reason: Option<LostReason>,
}

/// The held nodes of one session.
#[derive(Default)]
pub(super) struct HeldNodes(Mutex<Held>);

fn key(status: &HeldStatus) -> usize {
    std::ptr::from_ref(status).cast::<()>() as usize
}

impl HeldNodes {
    fn held(&self) -> MutexGuard<'_, Held> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a node granted after `status.losses_seen()` losses; one the session lost since is
    /// lost at once.
    pub(super) fn insert(&self, status: Arc<HeldStatus>) {
        let lost_since = {
            let mut held = self.held();
            held.all.insert(key(&status), status.clone());
            let reason = held.reason.unwrap_or(LostReason::SessionClosed);
            let lost_since = (held.losses > status.losses_seen()).then(|| (reason, status.clone()));
            held.unwatched.push_back((Instant::now(), status));
            lost_since
        };
        // Told outside the lock: a loss's events run code of the hold's.
        if let Some((reason, status)) = lost_since {
            status.lose(reason);
        }
    }

    pub(super) fn remove(&self, status: &HeldStatus) {
        self.held().all.remove(&key(status));
    }

    /// The session lost its locks (once more): every node held is lost. Returns the number of
    /// losses so far.
    pub(super) fn lose_all(&self, reason: LostReason) -> u64 {
        let (losses, lost) = {
            let mut held = self.held();
            held.losses += 1;
            held.reason = Some(reason);
            held.unwatched.clear();
            (held.losses, held.all.values().cloned().collect::<Vec<_>>())
        };
        for status in lost {
            status.lose(reason);
        }
        losses
    }

    /// The nodes still held that were added (or put back) at or before `cutoff` and have no
    /// watch yet: they are to be followed by one now.
    pub(super) fn due_for_a_watch(&self, cutoff: Instant) -> Vec<Arc<HeldStatus>> {
        let mut held = self.held();
        let mut due = Vec::new();
        while held.unwatched.front().is_some_and(|(since, _)| *since <= cutoff) {
            let (_, status) = held.unwatched.pop_front().expect("just seen");
            if status.is_followed() {
                due.push(status);
            }
        }
        due
    }

    /// A node whose watch could not be set (the connection broke): it is tried again later.
    pub(super) fn watch_again(&self, status: Arc<HeldStatus>) {
        if status.is_followed() {
            self.held().unwatched.push_back((Instant::now(), status));
        }
    }
}

impl std::fmt::Debug for HeldNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.held();
        f.debug_struct("HeldNodes").field("held", &held.all.len()).field("losses", &held.losses).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::session::held_status::HeldNodeEvents;

    #[derive(Default)]
    struct Counted {
        lost: AtomicUsize,
        revoked: AtomicUsize,
    }

    impl HeldNodeEvents for Arc<Counted> {
        fn lost(&self, _: &str, _: LostReason) {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        fn revoked(&self, _: &str) {
            self.revoked.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn held(nodes: &HeldNodes, losses_seen: u64) -> (Arc<HeldStatus>, Arc<Counted>) {
        let counted = Arc::new(Counted::default());
        let status: Arc<HeldStatus> = Arc::new(HeldStatus::new("/unit/held".into(), losses_seen, counted.clone()));
        nodes.insert(status.clone());
        (status, counted)
    }

    #[test]
    fn the_first_loss_stays_and_is_told_once() {
        let nodes = HeldNodes::default();
        let (status, counted) = held(&nodes, 0);
        status.lose(LostReason::NodeDeleted);
        status.lose(LostReason::SessionExpired);
        assert_eq!(status.lost(), Some(LostReason::NodeDeleted));
        assert_eq!(counted.lost.load(Ordering::Relaxed), 1);
        assert!(nodes.due_for_a_watch(Instant::now()).is_empty(), "a lost node is not watched");
    }

    #[test]
    fn a_released_node_is_not_lost_and_not_watched() {
        let nodes = HeldNodes::default();
        let (status, counted) = held(&nodes, 0);
        assert!(status.release());
        assert!(!status.release(), "released once");
        status.lose(LostReason::NodeDeleted);
        assert_eq!(status.lost(), None);
        assert_eq!(counted.lost.load(Ordering::Relaxed), 0);
        assert!(nodes.due_for_a_watch(Instant::now()).is_empty());
    }

    #[test]
    fn a_session_loss_reaches_nodes_added_before_it_and_those_granted_before_it() {
        let nodes = HeldNodes::default();
        let (before, _) = held(&nodes, 0);
        assert_eq!(nodes.lose_all(LostReason::ConnectionLost), 1);
        assert_eq!(before.lost(), Some(LostReason::ConnectionLost));
        // Granted before the loss, added after it: lost as it is added.
        let (late, _) = held(&nodes, 0);
        assert_eq!(late.lost(), Some(LostReason::ConnectionLost));
        // Granted after it.
        let (after, _) = held(&nodes, 1);
        assert_eq!(after.lost(), None);
    }

    #[test]
    fn only_nodes_held_long_enough_are_due_for_a_watch() {
        let nodes = HeldNodes::default();
        let (old, _) = held(&nodes, 0);
        let cutoff = Instant::now();
        let (young, _) = held(&nodes, 0);
        let due = nodes.due_for_a_watch(cutoff);
        assert!(due.len() == 1 && Arc::ptr_eq(&due[0], &old));
        assert!(nodes.due_for_a_watch(cutoff).is_empty(), "taken once");
        nodes.watch_again(old.clone());
        let due = nodes.due_for_a_watch(Instant::now());
        assert_eq!(due.len(), 2, "the young one, and the old one put back");
        assert!(due.iter().any(|status| Arc::ptr_eq(status, &young)));
    }

    #[test]
    fn every_loss_reason_round_trips() {
        let nodes = HeldNodes::default();
        for (losses, reason) in
            [LostReason::SessionExpired, LostReason::SessionClosed, LostReason::ConnectionLost, LostReason::NodeDeleted]
                .into_iter()
                .enumerate()
        {
            let (status, _) = held(&nodes, losses as u64);
            status.revoke();
            nodes.lose_all(reason);
            assert_eq!(status.lost(), Some(reason));
            assert!(status.is_revoked());
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
