//! The nodes the library is responsible for on one session: every node from before its `create`
//! is sent until ZooKeeper confirms it is gone (a delete answered OK or `NoNode`, a search by its
//! protected prefix that finds nothing, or the end of the session on the server). Whoever owns
//! an entry (a waiting acquisition, a hold, a background delete) removes it only on such a
//! confirmation; the fault suite's orphan oracle compares it with what the server holds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The ledger behind its lock, which no panic elsewhere makes unusable.
pub(super) fn lock(ledger: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One node of the ledger, in one string (shared with the node's hold): a session may own
/// thousands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnedNode {
    /// `parent/name` once the reply to its `create` (or a search by prefix) told the name;
    /// before, `parent/_c_<uuid>-`, the protected prefix that finds the node when the reply to
    /// its `create` never arrived.
    path: Arc<str>,
    /// Where the name (or the prefix) starts in `path`.
    name_at: usize,
    named: bool,
}

impl OwnedNode {
    fn new(parent: &str, prefix: &str) -> Self {
        Self { path: format!("{parent}/{prefix}").into(), name_at: parent.len() + 1, named: false }
    }

    /// The parent node's path.
    pub(crate) fn parent(&self) -> &str {
        &self.path[..self.name_at - 1]
    }

    /// `_c_<uuid>-`, while the node's name is unknown.
    pub(crate) fn prefix(&self) -> Option<&str> {
        (!self.named).then(|| &self.path[self.name_at..])
    }

    /// The node's full path, once its name is known.
    pub(crate) fn path(&self) -> Option<&Arc<str>> {
        self.named.then_some(&self.path)
    }

    fn name(&mut self, name: &str) {
        self.path = format!("{}{name}", &self.path[..self.name_at]).into();
        self.named = true;
    }

    /// Whether `path` is (or could be, while its name is unknown) this node.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn matches(&self, path: &str) -> bool {
        match self.named {
            true => path == &*self.path,
            // A prefix has no `/`: a match is a child of the parent.
            false => path.starts_with(&*self.path) && !path[self.name_at..].contains('/'),
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
    /// Records a node about to be created under `parent` with `prefix`; returns its entry's id.
    pub(crate) fn add(&mut self, parent: &str, prefix: &str) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if !self.ended {
            self.nodes.insert(id, OwnedNode::new(parent, prefix));
        }
        id
    }

    /// The node's name is known.
    pub(crate) fn named(&mut self, id: u64, name: &str) {
        if let Some(node) = self.nodes.get_mut(&id) {
            node.name(name);
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
        let id = ledger.add("/a/b", "_c_1-");
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
        let kept = ledger.add("/p", "_c_1-");
        let removed = ledger.add("/p", "_c_2-");
        ledger.remove(removed);
        assert_eq!(ledger.nodes().len(), 1);
        assert!(ledger.get(kept).is_some());
        ledger.end();
        assert!(ledger.nodes().is_empty());
        let after = ledger.add("/p", "_c_3-");
        assert!(ledger.get(after).is_none(), "nothing can be created on an ended session");
    }
}
