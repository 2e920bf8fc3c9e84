//! The nodes held on a session, read by its heartbeat. A held node deleted by someone else, or
//! asked to be given up (Curator's `__REVOKE__` written into it), is seen within one heartbeat
//! period and the round trip of the read, with no watch and no request of its own per grant; a
//! loss of the whole session reaches every held node at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use zookeeper_client::{Client as ZkClient, Error as ZkError, MultiReadResult};

use crate::error::LostReason;
use crate::layout::REVOKE_MESSAGE;
use crate::state_cell::StateCell;

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

/// Neither released nor lost: what the heartbeat reads, and what a loss may still reach.
fn followed(state: u8) -> bool {
    state & RELEASED == 0 && loss_of(state).is_none()
}

/// What the library knows of one held node: lost, revoked, released. Shared by the hold and
/// its session; the first loss recorded stays, and nothing is recorded once it is released.
pub(crate) struct HeldStatus {
    node_path: Arc<str>,
    /// The session's loss count when the lock was granted.
    losses_seen: u64,
    state: StateCell,
    events: Box<dyn HeldNodeEvents>,
}

impl HeldStatus {
    pub(super) fn new(node_path: Arc<str>, losses_seen: u64, events: Box<dyn HeldNodeEvents>) -> Self {
        Self { node_path, losses_seen, state: StateCell::new(0), events }
    }

    pub(crate) fn node_path(&self) -> &Arc<str> {
        &self.node_path
    }

    /// The session's loss count when the lock was granted.
    pub(crate) fn losses_seen(&self) -> u64 {
        self.losses_seen
    }

    pub(crate) fn lost(&self) -> Option<LostReason> {
        loss_of(self.state.get())
    }

    pub(crate) fn is_revoked(&self) -> bool {
        self.state.get() & REVOKED != 0
    }

    pub(crate) fn is_released(&self) -> bool {
        self.state.get() & RELEASED != 0
    }

    /// Marks the node released by its holder (its own delete is about to be sent, and must not
    /// be taken for a loss); `false` if it was released before.
    pub(crate) fn release(&self) -> bool {
        self.state.update(|state| (state & RELEASED == 0).then_some(state | RELEASED), |_| {})
    }

    /// Records the loss, unless one is recorded already or the node was released.
    pub(crate) fn lose(&self, reason: LostReason) {
        let record = |state| followed(state).then_some(state | loss_code(reason));
        // Told first, so whoever wakes up on the loss also finds it traced.
        self.state.update(record, |_| self.events.lost(reason));
    }

    /// Records a revocation request (once).
    pub(crate) fn revoke(&self) {
        let record = |state| (state & REVOKED == 0).then_some(state | REVOKED);
        self.state.update(record, |_| self.events.revoked());
    }

    /// Resolves with the loss once one is recorded. Cancel safe: it only observes.
    pub(crate) async fn until_lost(&self) -> LostReason {
        self.state.wait_for(loss_of).await
    }

    /// Resolves once a revocation request is recorded. Cancel safe: it only observes.
    pub(crate) async fn until_revoked(&self) {
        self.state.wait_for(|state| (state & REVOKED != 0).then_some(())).await
    }
}

/// The held nodes of one session that its heartbeat reads, by the address of their status.
#[derive(Default)]
pub(super) struct HeldNodes(Mutex<HashMap<usize, Arc<HeldStatus>>>);

/// A status's key in the set: its address, unique while it is in the set.
fn key(status: &HeldStatus) -> usize {
    std::ptr::from_ref(status) as usize
}

impl HeldNodes {
    fn nodes(&self) -> MutexGuard<'_, HashMap<usize, Arc<HeldStatus>>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn insert(&self, status: &Arc<HeldStatus>) {
        self.nodes().insert(key(status), status.clone());
    }

    pub(super) fn remove(&self, status: &HeldStatus) {
        self.nodes().remove(&key(status));
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
        self.nodes().values().filter(|status| followed(status.state.get())).cloned().collect()
    }
}

/// Nodes read in one request; more take one request per this many.
const NODES_PER_READ: usize = 512;

/// Reads the nodes `held` and records what it finds: a node gone, a revocation request. Every
/// request is sent before any reply is awaited, so it takes one round trip.
pub(super) async fn read(zk: &ZkClient, held: &[Arc<HeldStatus>]) -> Result<(), ZkError> {
    let mut reads = Vec::new();
    for chunk in held.chunks(NODES_PER_READ) {
        let mut reader = zk.new_multi_reader();
        for status in chunk {
            reader.add_get_data(status.node_path())?;
        }
        reads.push(reader.commit());
    }
    for (chunk, read) in held.chunks(NODES_PER_READ).zip(reads) {
        for (status, result) in chunk.iter().zip(read.await?) {
            match result {
                MultiReadResult::Data { data, .. } if data == REVOKE_MESSAGE => status.revoke(),
                // Answered on the session that created the node: it is gone for good.
                MultiReadResult::Error { err: ZkError::NoNode } => status.lose(LostReason::NodeDeleted),
                _ => {}
            }
        }
    }
    Ok(())
}

impl std::fmt::Debug for HeldNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldNodes").field("held", &self.nodes().len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

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
        let status = Arc::new(HeldStatus::new("/unit/held".into(), losses_seen, Box::new(counted.clone())));
        nodes.insert(&status);
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
