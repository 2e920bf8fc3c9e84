//! Queue nodes of this process. The owner of a node learns of its deletion anyway (the reply to
//! its own delete, or its session's watch on it), so a waiter on the same session whose nearest
//! node ahead is one of them is told by the owner instead of watching that node on the server:
//! one request less per hand-off. When the owner can no longer tell (its session is in trouble,
//! or it let go of the node without seeing it deleted), the node's fate becomes unknown and the
//! waiter watches it on the server, as it does for every other node.
//!
//! Only waiters on the owner's own session follow a node's fate this way. A reply on that
//! session proves the session alive when it arrives, and orders everything the waiter reads
//! afterwards after the deletion (one connection, one server). A waiter on another session has
//! neither: its session may have expired unnoticed, or its server may not have applied the
//! deletion yet, and only an event on its own session settles both.
//!
//! A node also tells whether it was granted exclusively (a mutex, a write lock): every node
//! ahead of it was gone at that moment, and sequence nodes never come back, so a waiter of this
//! process (on any session) whose nearest blocker was such a grant knows, once that node is
//! deleted, that nothing is left ahead of it, with no request to check.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use zookeeper_client::SessionId;

use crate::layout::protected_prefix;
use crate::state_cell::StateCell;

/// What the owner knows of its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeFate {
    /// Still there, as far as the owner knows.
    Present,
    /// ZooKeeper confirmed that it is gone.
    Deleted,
    /// The owner cannot tell any more.
    Unknown,
}

impl NodeFate {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => Self::Present,
            1 => Self::Deleted,
            _ => Self::Unknown,
        }
    }
}

/// A registered node, as its owner and its followers share it.
#[derive(Debug)]
pub(crate) struct LocalNode {
    /// `parent/_c_<uuid>-`: the node's key in the registry.
    key: Arc<str>,
    session: SessionId,
    fate: StateCell,
    granted_exclusively: AtomicBool,
}

impl LocalNode {
    pub(crate) fn session(&self) -> SessionId {
        self.session
    }

    pub(crate) fn was_granted_exclusively(&self) -> bool {
        self.granted_exclusively.load(Ordering::Acquire)
    }

    #[cfg(test)]
    fn fate(&self) -> NodeFate {
        NodeFate::from_u8(self.fate.get())
    }

    /// Resolves once the owner settled the node's fate: `true` if ZooKeeper confirmed the
    /// deletion, `false` if the owner cannot tell.
    pub(crate) async fn deleted(&self) -> bool {
        let settled = |fate| match NodeFate::from_u8(fate) {
            NodeFate::Present => None,
            fate => Some(fate == NodeFate::Deleted),
        };
        self.fate.wait_for(settled).await
    }
}

static NODES: LazyLock<Mutex<HashMap<Arc<str>, Weak<LocalNode>>>> = LazyLock::new(Mutex::default);

fn nodes() -> MutexGuard<'static, HashMap<Arc<str>, Weak<LocalNode>>> {
    NODES.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The owner's handle on a registered node. Dropping the last share without
/// [`deleted`](Self::deleted) makes its fate unknown.
#[derive(Debug)]
pub(crate) struct LocalHandoff(Arc<LocalNode>);

/// Registers our node on `session`, known by its `key`, `parent/_c_<uuid>-` (its protected
/// prefix), present. Registered before its `create` is sent, so that no listing can show the
/// node to a waiter of this process before the waiter can find it here.
pub(crate) fn register(key: Arc<str>, session: SessionId) -> Arc<LocalHandoff> {
    let node = Arc::new(LocalNode {
        key: key.clone(),
        session,
        fate: StateCell::new(NodeFate::Present as u8),
        granted_exclusively: AtomicBool::new(false),
    });
    nodes().insert(key, Arc::downgrade(&node));
    Arc::new(LocalHandoff(node))
}

/// The node `name` under `parent`, if it is a registered node of this process whose fate is not
/// settled yet. `None` for every other node: the caller watches those on the server.
pub(crate) fn find(parent: &str, name: &str) -> Option<Arc<LocalNode>> {
    let prefix = protected_prefix(name)?;
    nodes().get(format!("{parent}/{prefix}").as_str())?.upgrade()
}

impl LocalHandoff {
    /// The node was granted exclusively: nothing was left ahead of it.
    pub(crate) fn granted_exclusively(&self) {
        self.0.granted_exclusively.store(true, Ordering::Release);
    }

    /// ZooKeeper confirmed the node is gone: the waiters behind it may go on.
    pub(crate) fn deleted(&self) {
        self.settle(NodeFate::Deleted);
    }

    /// The reply to the owner's own delete of the node: OK, or `NoNode` (someone deleted it
    /// first), means it is gone; after any other error the owner cannot tell, and the waiters
    /// behind watch the node on the server (a share of this handle may outlive the release).
    pub(crate) fn delete_replied(&self, reply: &Result<(), zookeeper_client::Error>) {
        match reply {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => self.deleted(),
            Err(_) => self.unknown(),
        }
    }

    /// The owner cannot tell any more: the waiters behind it watch it on the server.
    pub(crate) fn unknown(&self) {
        self.settle(NodeFate::Unknown);
    }

    /// The first fate settled stays.
    fn settle(&self, fate: NodeFate) {
        let node = &self.0;
        // Unregistered first: a waiter that looks it up afterwards watches the server instead of
        // finding a settled entry.
        {
            let mut nodes = nodes();
            // A retried `create` registers the same prefix again: only our own entry goes.
            if nodes.get(&node.key).is_some_and(|entry| std::ptr::eq(entry.as_ptr(), Arc::as_ptr(node))) {
                nodes.remove(&node.key);
            }
        }
        let present = NodeFate::Present as u8;
        node.fate.update(|current| (current == present).then_some(fate as u8), |_| {});
    }
}

impl Drop for LocalHandoff {
    fn drop(&mut self) {
        self.unknown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::layout::new_protected_prefix;

    const PARENT: &str = "/unit-local-handoff";
    const SESSION: SessionId = SessionId(7);

    #[tokio::test]
    async fn a_follower_finds_the_node_by_its_name_and_sees_the_deletion() {
        let prefix = new_protected_prefix();
        let name = format!("{prefix}lock-0000000001");
        let node = register(format!("{PARENT}/{prefix}").into(), SESSION);
        let follower = find(PARENT, &name).expect("registered");
        assert!(find("/unit-local-handoff-other", &name).is_none(), "another parent");
        assert_eq!(follower.session(), SESSION);
        assert_eq!(follower.fate(), NodeFate::Present);
        assert!(!follower.was_granted_exclusively());
        node.granted_exclusively();
        assert!(follower.was_granted_exclusively());
        node.deleted();
        assert!(follower.deleted().await);
        assert!(find(PARENT, &name).is_none(), "unregistered once settled");
        node.unknown();
        assert_eq!(follower.fate(), NodeFate::Deleted, "a settled fate does not change");
    }

    #[tokio::test]
    async fn dropping_the_owner_without_a_deletion_makes_the_fate_unknown() {
        let prefix = new_protected_prefix();
        let name = format!("{prefix}__WRIT__0000000002");
        let follower = {
            let _node = register(format!("{PARENT}/{prefix}").into(), SESSION);
            find(PARENT, &name).expect("registered")
        };
        assert!(!follower.deleted().await);
        assert!(find(PARENT, &name).is_none());
        assert!(find(PARENT, "__lock__0000000003").is_none(), "not a protected name");
    }

    #[test]
    fn an_old_registration_of_the_same_prefix_does_not_unregister_the_new_one() {
        let prefix = new_protected_prefix();
        let name = format!("{prefix}lock-0000000004");
        let old = register(format!("{PARENT}/{prefix}").into(), SESSION);
        let new = register(format!("{PARENT}/{prefix}").into(), SESSION);
        drop(old);
        let follower = find(PARENT, &name).expect("the new registration");
        new.deleted();
        assert_eq!(follower.fate(), NodeFate::Deleted);
    }
}
