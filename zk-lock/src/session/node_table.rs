//! Every node the library is responsible for on one session, one entry each, in one table under
//! one lock, with the session's losses. An entry lives from before its node's `create` is sent
//! until ZooKeeper confirms the node is gone (a delete answered OK or `NoNode`, a search by its
//! protected prefix that finds nothing, or the end of the session on the server); whoever owns
//! it (a waiting acquisition, a hold, a background delete: an `engine::Claim`) removes it only
//! on such a confirmation. The nodes the library still owns and the nodes held are two views of
//! the table, not two tables: the fault suite's orphan oracle compares the first with what the
//! server holds, and a loss of the session reaches the second.
//!
//! An entry's life:
//!
//! ```text
//!  claimed ───named───▶ named ───held───▶ held ───let go───▶ named ──┐
//!  (prefix known,       (in its queue,    (its status followed:     (released or lost:
//!   create sent)         or being          a loss reaches it; a     its delete, or the
//!     │                  deleted)          watch after one          retirement, confirms)
//!     │                                    heartbeat period)             │
//!     └──────────────── confirmed gone, or the session ended ◀──────────┘
//! ```
//!
//! Losses and holds share the lock: a node is either held before a loss (and the loss reaches
//! it) or after (and it learns the loss as it is held), so no loss can miss a node.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use super::held_status::HeldStatus;
use crate::error::LostReason;
use crate::path::ChildPath;

/// One node of the table, in one shared string (with the node's queue entry, then its hold): a
/// session may own thousands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnedNode {
    /// `parent/name` once the reply to its `create` (or a search by prefix) told the name;
    /// before, `parent/_c_<uuid>-`, the protected prefix that finds the node when the reply to
    /// its `create` never arrived.
    path: ChildPath,
    named: bool,
    /// Made for a hold that came without a claim: nobody else removes it, so letting the hold
    /// go does. (Here rather than in `Entry`, where it would cost every entry 8 bytes more.)
    unclaimed: bool,
}

impl OwnedNode {
    pub(crate) fn parent(&self) -> &str {
        self.path.parent()
    }

    /// `_c_<uuid>-`, while the node's name is unknown.
    pub(crate) fn prefix(&self) -> Option<&str> {
        (!self.named).then(|| self.path.child())
    }

    /// The node's full path, once its name is known.
    pub(crate) fn path(&self) -> Option<&Arc<str>> {
        self.named.then(|| self.path.as_arc())
    }

    /// Whether `path` is (or could be, while its name is unknown) this node.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn matches(&self, path: &str) -> bool {
        let Some(child) = path.strip_prefix(self.parent()).and_then(|rest| rest.strip_prefix('/')) else {
            return false;
        };
        match self.named {
            true => child == self.path.child(),
            // A prefix has no `/`: a match is a child of the parent.
            false => child.starts_with(self.path.child()) && !child.contains('/'),
        }
    }
}

/// One node's entry: where it is, and its status while it is held.
struct Entry {
    node: OwnedNode,
    held: Option<Arc<HeldStatus>>,
}

/// The table of one session.
#[derive(Default)]
pub(crate) struct NodeTable {
    next_id: u64,
    entries: HashMap<u64, Entry>,
    /// Held nodes not followed by a watch yet, with when they were held (or last failed to be
    /// watched), oldest first.
    unwatched: VecDeque<(Instant, Arc<HeldStatus>)>,
    /// How many times the session lost its locks, and why the last time.
    losses: u64,
    reason: Option<LostReason>,
    /// The session ended on the server: every node went with it.
    ended: bool,
}

/// The table behind its lock, which no panic elsewhere makes unusable.
pub(super) fn lock(table: &Mutex<NodeTable>) -> MutexGuard<'_, NodeTable> {
    table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl NodeTable {
    /// Claims a node about to be created at `prefix` (`parent/_c_<uuid>-`); returns its
    /// entry's id.
    pub(crate) fn add(&mut self, prefix: &ChildPath) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if !self.ended {
            let node = OwnedNode { path: prefix.clone(), named: false, unclaimed: false };
            self.entries.insert(id, Entry { node, held: None });
        }
        id
    }

    /// The node's name is known.
    pub(crate) fn named(&mut self, id: u64, name: &str) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.node.path = entry.node.path.sibling(name);
            entry.node.named = true;
        }
    }

    /// ZooKeeper confirmed that the node is gone.
    pub(crate) fn remove(&mut self, id: u64) {
        self.entries.remove(&id);
    }

    pub(crate) fn get(&self, id: u64) -> Option<&OwnedNode> {
        self.entries.get(&id).map(|entry| &entry.node)
    }

    /// Every node still owned.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn nodes(&self) -> Vec<OwnedNode> {
        self.entries.values().map(|entry| entry.node.clone()).collect()
    }

    /// The session ended on the server, which deleted every ephemeral node of it.
    pub(crate) fn end(&mut self) {
        self.ended = true;
        self.entries.clear();
        self.unwatched.clear();
    }

    pub(crate) fn has_ended(&self) -> bool {
        self.ended
    }

    /// The node of entry `id` (`None`: a node granted without a claim, which gets an entry of
    /// its own), granted after `status.losses_seen()` losses, is held. Returns the entry's id,
    /// and the loss that reached the node already if the session lost its locks since (or
    /// ended), which the caller tells outside the lock.
    #[must_use]
    pub(super) fn hold(&mut self, id: Option<u64>, status: Arc<HeldStatus>) -> (u64, Option<LostReason>) {
        let reason = self.reason.unwrap_or(LostReason::SessionClosed);
        let lost_since = (self.losses > status.losses_seen() || self.ended).then_some(reason);
        let id = match id.filter(|id| self.entries.contains_key(id)) {
            Some(id) => id,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                if !self.ended {
                    let node = OwnedNode { path: ChildPath::of(status.node_path()), named: true, unclaimed: true };
                    self.entries.insert(id, Entry { node, held: None });
                }
                id
            }
        };
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.held = Some(status.clone());
        }
        self.unwatched.push_back((Instant::now(), status));
        (id, lost_since)
    }

    /// The node of entry `id` is held no more: released, or lost and let go.
    pub(super) fn let_go(&mut self, id: u64) {
        match self.entries.get_mut(&id) {
            Some(entry) if entry.node.unclaimed => {
                self.entries.remove(&id);
            }
            Some(entry) => entry.held = None,
            None => {}
        }
    }

    /// The session lost its locks (once more): returns the number of losses so far, and every
    /// node held, each to be told outside the lock.
    pub(super) fn lose_all(&mut self, reason: LostReason) -> (u64, Vec<Arc<HeldStatus>>) {
        self.losses += 1;
        self.reason = Some(reason);
        self.unwatched.clear();
        (self.losses, self.entries.values().filter_map(|entry| entry.held.clone()).collect())
    }

    /// The nodes still held that were held (or put back) at or before `cutoff` and have no
    /// watch yet: they are to be followed by one now.
    pub(super) fn due_for_a_watch(&mut self, cutoff: Instant) -> Vec<Arc<HeldStatus>> {
        let mut due = Vec::new();
        while self.unwatched.front().is_some_and(|(since, _)| *since <= cutoff) {
            let (_, status) = self.unwatched.pop_front().expect("just seen");
            if status.is_followed() {
                due.push(status);
            }
        }
        due
    }

    /// A node whose watch could not be set (the connection broke): it is tried again later.
    pub(super) fn watch_again(&mut self, status: Arc<HeldStatus>) {
        if status.is_followed() {
            self.unwatched.push_back((Instant::now(), status));
        }
    }

    /// How many nodes are held.
    fn held(&self) -> usize {
        self.entries.values().filter(|entry| entry.held.is_some()).count()
    }
}

/// What a session's `Debug` shows of its table.
pub(super) struct Summary<'a>(pub &'a Mutex<NodeTable>);

impl std::fmt::Debug for Summary<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = lock(self.0);
        f.debug_struct("NodeTable")
            .field("owned", &table.entries.len())
            .field("held", &table.held())
            .field("losses", &table.losses)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::session::held_status::{Change, HeldNodeEvents};

    #[derive(Default)]
    struct Counted {
        lost: AtomicUsize,
        revoked: AtomicUsize,
    }

    impl HeldNodeEvents for Arc<Counted> {
        fn told(&self, _: &str, change: Change<'_>) {
            match change {
                Change::Lost(_) => self.lost.fetch_add(1, Ordering::Relaxed),
                Change::Revoked => self.revoked.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
        }
    }

    /// A node claimed at `/unit/held`, named and held after `losses_seen` losses, as
    /// `Session::hold` does it (a loss since told outside the lock).
    fn held(table: &mut NodeTable, losses_seen: u64) -> (Arc<HeldStatus>, Arc<Counted>, u64) {
        let id = table.add(&ChildPath::new("/unit/held", "_c_1-"));
        table.named(id, "_c_1-lock-0000000001");
        let counted = Arc::new(Counted::default());
        let status: Arc<HeldStatus> =
            Arc::new(HeldStatus::new("/unit/held/_c_1-lock-0000000001".into(), losses_seen, counted.clone()));
        let (entry, lost_since) = table.hold(Some(id), status.clone());
        assert_eq!(entry, id);
        if let Some(reason) = lost_since {
            status.lose(reason);
        }
        (status, counted, id)
    }

    fn lose_all(table: &mut NodeTable, reason: LostReason) -> u64 {
        let (losses, held) = table.lose_all(reason);
        for status in held {
            status.lose(reason);
        }
        losses
    }

    #[test]
    fn a_node_matches_by_name_once_known_and_by_prefix_before() {
        let mut table = NodeTable::default();
        let id = table.add(&ChildPath::new("/a/b", "_c_1-"));
        let node = table.get(id).unwrap().clone();
        assert!(node.matches("/a/b/_c_1-lock-0000000001"));
        assert!(!node.matches("/a/b/_c_2-lock-0000000001"));
        assert!(!node.matches("/a/bc/_c_1-lock-0000000001"));
        table.named(id, "_c_1-lock-0000000003");
        let node = table.get(id).unwrap().clone();
        assert!(node.matches("/a/b/_c_1-lock-0000000003"));
        assert!(!node.matches("/a/b/_c_1-lock-0000000001"));
    }

    #[test]
    fn an_ended_table_owns_nothing() {
        let mut table = NodeTable::default();
        let kept = table.add(&ChildPath::new("/p", "_c_1-"));
        let removed = table.add(&ChildPath::new("/p", "_c_2-"));
        table.remove(removed);
        assert_eq!(table.nodes().len(), 1);
        assert!(table.get(kept).is_some());
        table.end();
        assert!(table.nodes().is_empty());
        let after = table.add(&ChildPath::new("/p", "_c_3-"));
        assert!(table.get(after).is_none(), "nothing can be created on an ended session");
    }

    #[test]
    fn a_held_node_stays_owned_until_its_delete_is_confirmed() {
        let mut table = NodeTable::default();
        let (_, _, id) = held(&mut table, 0);
        assert_eq!(table.held(), 1);
        table.let_go(id);
        assert_eq!(table.held(), 0);
        assert_eq!(table.nodes().len(), 1, "let go, not yet confirmed gone");
        table.remove(id);
        assert!(table.nodes().is_empty());
    }

    #[test]
    fn a_hold_without_a_claim_gets_an_entry_that_goes_when_it_is_let_go() {
        let mut table = NodeTable::default();
        let status: Arc<HeldStatus> =
            Arc::new(HeldStatus::new("/unit/bare/n-1".into(), 0, Arc::new(Counted::default())));
        let (id, lost) = table.hold(None, status.clone());
        assert_eq!(lost, None);
        assert!(table.get(id).is_some_and(|node| node.matches("/unit/bare/n-1")));
        assert_eq!(lose_all(&mut table, LostReason::ConnectionLost), 1);
        assert_eq!(status.lost(), Some(LostReason::ConnectionLost), "a loss reaches it too");
        table.let_go(id);
        assert!(table.nodes().is_empty());
    }

    #[test]
    fn the_first_loss_stays_and_is_told_once() {
        let mut table = NodeTable::default();
        let (status, counted, _) = held(&mut table, 0);
        status.lose(LostReason::NodeDeleted);
        status.lose(LostReason::SessionExpired);
        assert_eq!(status.lost(), Some(LostReason::NodeDeleted));
        assert_eq!(counted.lost.load(Ordering::Relaxed), 1);
        assert!(table.due_for_a_watch(Instant::now()).is_empty(), "a lost node is not watched");
    }

    #[test]
    fn a_released_node_is_not_lost_and_not_watched() {
        let mut table = NodeTable::default();
        let (status, counted, _) = held(&mut table, 0);
        assert!(status.let_go(false));
        assert!(!status.let_go(false), "let go once");
        status.lose(LostReason::NodeDeleted);
        assert_eq!(status.lost(), None);
        assert_eq!(counted.lost.load(Ordering::Relaxed), 0);
        assert!(table.due_for_a_watch(Instant::now()).is_empty());
    }

    #[test]
    fn a_session_loss_reaches_nodes_held_before_it_and_those_granted_before_it() {
        let mut table = NodeTable::default();
        let (before, _, _) = held(&mut table, 0);
        assert_eq!(lose_all(&mut table, LostReason::ConnectionLost), 1);
        assert_eq!(before.lost(), Some(LostReason::ConnectionLost));
        // Granted before the loss, held after it: lost as it is held.
        let (late, _, _) = held(&mut table, 0);
        assert_eq!(late.lost(), Some(LostReason::ConnectionLost));
        // Granted after it.
        let (after, _, _) = held(&mut table, 1);
        assert_eq!(after.lost(), None);
    }

    #[test]
    fn only_nodes_held_long_enough_are_due_for_a_watch() {
        let mut table = NodeTable::default();
        let (old, _, _) = held(&mut table, 0);
        let cutoff = Instant::now();
        let (young, _, _) = held(&mut table, 0);
        let due = table.due_for_a_watch(cutoff);
        assert!(due.len() == 1 && Arc::ptr_eq(&due[0], &old));
        assert!(table.due_for_a_watch(cutoff).is_empty(), "taken once");
        table.watch_again(old.clone());
        let due = table.due_for_a_watch(Instant::now());
        assert_eq!(due.len(), 2, "the young one, and the old one put back");
        assert!(due.iter().any(|status| Arc::ptr_eq(status, &young)));
    }

    #[test]
    fn every_loss_reason_round_trips() {
        let mut table = NodeTable::default();
        let reasons = [
            LostReason::SessionExpired,
            LostReason::SessionClosed,
            LostReason::ConnectionLost,
            LostReason::NodeDeleted,
            // Whole, its limit included.
            LostReason::MaxHoldReached { limit: std::time::Duration::from_millis(1234) },
        ];
        for (losses, reason) in reasons.into_iter().enumerate() {
            let (status, _, _) = held(&mut table, losses as u64);
            status.revoke();
            lose_all(&mut table, reason);
            assert_eq!(status.lost(), Some(reason));
            assert!(status.is_revoked());
        }
    }

    #[tokio::test]
    async fn waiters_wake_on_revocation_and_loss() {
        let mut table = NodeTable::default();
        let (status, counted, _) = held(&mut table, 0);
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
