//! The nodes the library is responsible for on one session: every node from before its `create`
//! is sent until ZooKeeper confirms it is gone (a delete answered OK or `NoNode`, a search by its
//! protected prefix that finds nothing, or the end of the session on the server). Whoever owns
//! an entry (a waiting acquisition, a hold, a background delete) removes it only on such a
//! confirmation; the fault suite's orphan oracle compares it with what the server holds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::path::ChildPath;

/// The ledger behind its lock, which no panic elsewhere makes unusable.
pub(super) fn lock(ledger: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One node of the ledger, in one shared string (with the node's queue entry, then its hold): a
/// session may own thousands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnedNode {
    /// `parent/name` once the reply to its `create` (or a search by prefix) told the name;
    /// before, `parent/_c_<uuid>-`, the protected prefix that finds the node when the reply to
    /// its `create` never arrived.
    path: ChildPath,
    named: bool,
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

/// The ledger of one session.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    next_id: u64,
    nodes: HashMap<u64, OwnedNode>,
    /// The session ended on the server: every node went with it.
    ended: bool,
}

impl Ledger {
    /// Records a node about to be created at `prefix` (`parent/_c_<uuid>-`); returns its
    /// entry's id.
    pub(crate) fn add(&mut self, prefix: &ChildPath) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if !self.ended {
            self.nodes.insert(id, OwnedNode { path: prefix.clone(), named: false });
        }
        id
    }

    /// The node's name is known.
    pub(crate) fn named(&mut self, id: u64, name: &str) {
        if let Some(node) = self.nodes.get_mut(&id) {
            node.path = node.path.sibling(name);
            node.named = true;
        }
    }

    /// ZooKeeper confirmed that the node is gone.
    pub(crate) fn remove(&mut self, id: u64) {
        self.nodes.remove(&id);
    }

    pub(crate) fn get(&self, id: u64) -> Option<&OwnedNode> {
        self.nodes.get(&id)
    }

    /// Every node still owned.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn nodes(&self) -> Vec<OwnedNode> {
        self.nodes.values().cloned().collect()
    }

    /// The session ended on the server, which deleted every ephemeral node of it.
    pub(crate) fn end(&mut self) {
        self.ended = true;
        self.nodes.clear();
    }

    pub(crate) fn has_ended(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_matches_by_name_once_known_and_by_prefix_before() {
        let mut ledger = Ledger::default();
        let id = ledger.add(&ChildPath::new("/a/b", "_c_1-"));
        let node = ledger.get(id).unwrap().clone();
        assert!(node.matches("/a/b/_c_1-lock-0000000001"));
        assert!(!node.matches("/a/b/_c_2-lock-0000000001"));
        assert!(!node.matches("/a/bc/_c_1-lock-0000000001"));
        ledger.named(id, "_c_1-lock-0000000003");
        let node = ledger.get(id).unwrap().clone();
        assert!(node.matches("/a/b/_c_1-lock-0000000003"));
        assert!(!node.matches("/a/b/_c_1-lock-0000000001"));
    }

    #[test]
    fn an_ended_ledger_owns_nothing() {
        let mut ledger = Ledger::default();
        let kept = ledger.add(&ChildPath::new("/p", "_c_1-"));
        let removed = ledger.add(&ChildPath::new("/p", "_c_2-"));
        ledger.remove(removed);
        assert_eq!(ledger.nodes().len(), 1);
        assert!(ledger.get(kept).is_some());
        ledger.end();
        assert!(ledger.nodes().is_empty());
        let after = ledger.add(&ChildPath::new("/p", "_c_3-"));
        assert!(ledger.get(after).is_none(), "nothing can be created on an ended session");
    }
}
