//! Queue nodes of this process. The owner of a node learns of its deletion anyway (the reply to
//! its own delete, or the watch it keeps on its node), so a waiter of this process whose nearest
//! node ahead is one of them is told by the owner instead of watching that node on the server:
//! one request less per hand-off. When the owner can no longer tell (its session is in trouble,
//! or it let go of the node without seeing it deleted), the node's fate becomes unknown and the
//! waiter watches it on the server, as it does for the nodes of other processes.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::watch;

use super::node_name::protected_prefix;

/// What the owner knows of its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Still there, as far as the owner knows.
    Present,
    /// ZooKeeper confirmed that it is gone.
    Deleted,
    /// The owner cannot tell any more.
    Unknown,
}

type Nodes = HashMap<Box<str>, watch::Receiver<Fate>>;

static NODES: LazyLock<Mutex<Nodes>> = LazyLock::new(Mutex::default);

fn nodes() -> std::sync::MutexGuard<'static, Nodes> {
    NODES.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A queue node of this process, registered while its owner can tell what happens to it.
/// Dropping the last share without [`deleted`](Self::deleted) makes its fate unknown.
#[derive(Debug)]
pub(crate) struct LocalNode {
    path: Box<str>,
    fate: watch::Sender<Fate>,
}

/// Registers our node under `parent`, known by its protected `prefix` (`_c_<uuid>-`), present.
/// Registered before its `create` is sent, so that no listing can show the node to a waiter of
/// this process before the waiter can find it here.
pub(crate) fn register(parent: &str, prefix: &str) -> Arc<LocalNode> {
    let (fate, follower) = watch::channel(Fate::Present);
    let path: Box<str> = format!("{parent}/{prefix}").into();
    nodes().insert(path.clone(), follower);
    Arc::new(LocalNode { path, fate })
}

/// What becomes of the node `name` under `parent`, if it is a registered node of this process.
/// `None` for the nodes of other processes and for settled ones: the caller watches those on
/// the server.
pub(crate) fn follow(parent: &str, name: &str) -> Option<watch::Receiver<Fate>> {
    let prefix = protected_prefix(name)?;
    nodes().get(format!("{parent}/{prefix}").as_str()).cloned()
}

impl LocalNode {
    /// ZooKeeper confirmed the node is gone: the waiters behind it may go on.
    pub(crate) fn deleted(&self) {
        self.settle(Fate::Deleted);
    }

    /// The owner cannot tell any more: the waiters behind it watch it on the server.
    pub(crate) fn unknown(&self) {
        self.settle(Fate::Unknown);
    }

    fn settle(&self, fate: Fate) {
        if *self.fate.borrow() != Fate::Present {
            return;
        }
        // Unregistered first: a waiter that looks it up afterwards watches the server instead of
        // finding a settled entry.
        nodes().remove(&self.path);
        self.fate.send_replace(fate);
    }
}

impl Drop for LocalNode {
    fn drop(&mut self) {
        self.unknown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::node_name::new_protected_prefix;

    const PARENT: &str = "/unit-local-nodes";

    #[test]
    fn a_follower_finds_the_node_by_its_name_and_sees_the_deletion() {
        let prefix = new_protected_prefix();
        let name = format!("{prefix}lock-0000000001");
        let node = register(PARENT, &prefix);
        let follower = follow(PARENT, &name).expect("registered");
        assert!(follow("/unit-local-nodes-other", &name).is_none(), "another parent");
        assert_eq!(*follower.borrow(), Fate::Present);
        node.deleted();
        assert_eq!(*follower.borrow(), Fate::Deleted);
        assert!(follow(PARENT, &name).is_none(), "unregistered once settled");
        node.unknown();
        assert_eq!(*follower.borrow(), Fate::Deleted, "a settled fate does not change");
    }

    #[test]
    fn dropping_the_owner_without_a_deletion_makes_the_fate_unknown() {
        let prefix = new_protected_prefix();
        let name = format!("{prefix}__WRIT__0000000002");
        let follower = {
            let _node = register(PARENT, &prefix);
            follow(PARENT, &name).expect("registered")
        };
        assert_eq!(*follower.borrow(), Fate::Unknown);
        assert!(follow(PARENT, &name).is_none());
        assert!(follow(PARENT, "__lock__0000000003").is_none(), "not a protected name");
    }
}
