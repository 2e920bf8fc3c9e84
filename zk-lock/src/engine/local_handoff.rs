//! Queue nodes of this process. The owner of a node learns of its deletion anyway (the reply to
//! its own delete, or the watch it keeps on its node), so a waiter on the same session whose
//! nearest node ahead is one of them is told by the owner instead of watching that node on the
//! server: one request less per hand-off. When the owner can no longer tell (its session is in
//! trouble, or it let go of the node without seeing it deleted), the node's fate becomes unknown
//! and the waiter watches it on the server, as it does for every other node.
//!
//! Only waiters on the owner's own session follow a node this way. A reply on that session
//! proves the session alive when it arrives, and orders everything the waiter reads afterwards
//! after the deletion (one connection, one server). A waiter on another session has neither: its
//! session may have expired unnoticed, or its server may not have applied the deletion yet, and
//! only an event on its own session settles both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::watch;
use zookeeper_client::SessionId;

use crate::layout::protected_prefix;

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

struct Entry {
    /// Which registration it is: a retried `create` registers the same prefix again.
    id: u64,
    session: SessionId,
    fate: watch::Receiver<NodeFate>,
}

static NODES: LazyLock<Mutex<HashMap<Box<str>, Entry>>> = LazyLock::new(Mutex::default);

fn nodes() -> std::sync::MutexGuard<'static, HashMap<Box<str>, Entry>> {
    NODES.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A queue node of this process, registered while its owner can tell what happens to it.
/// Dropping the last share without [`deleted`](Self::deleted) makes its fate unknown.
#[derive(Debug)]
pub(crate) struct LocalHandoff {
    id: u64,
    path: Box<str>,
    fate: watch::Sender<NodeFate>,
}

/// Registers our node under `parent` on `session`, known by its protected `prefix`
/// (`_c_<uuid>-`), present. Registered before its `create` is sent, so that no listing can
/// show the node to a waiter of this process before the waiter can find it here.
pub(crate) fn register(parent: &str, prefix: &str, session: SessionId) -> Arc<LocalHandoff> {
    static IDS: AtomicU64 = AtomicU64::new(0);
    let id = IDS.fetch_add(1, Ordering::Relaxed);
    let (fate, follower) = watch::channel(NodeFate::Present);
    let path: Box<str> = format!("{parent}/{prefix}").into();
    nodes().insert(path.clone(), Entry { id, session, fate: follower });
    Arc::new(LocalHandoff { id, path, fate })
}

/// What becomes of the node `name` under `parent`, if it is a registered node of this process
/// on `session`. `None` for every other node and for settled ones: the caller watches those on
/// the server.
pub(crate) fn follow(parent: &str, name: &str, session: SessionId) -> Option<watch::Receiver<NodeFate>> {
    let prefix = protected_prefix(name)?;
    let nodes = nodes();
    let entry = nodes.get(format!("{parent}/{prefix}").as_str())?;
    (entry.session == session).then(|| entry.fate.clone())
}

/// Whether the node `name` under `parent` is a registered node of this process, on any session.
pub(crate) fn is_of_this_process(parent: &str, name: &str) -> bool {
    protected_prefix(name).is_some_and(|prefix| nodes().contains_key(format!("{parent}/{prefix}").as_str()))
}

impl LocalHandoff {
    /// ZooKeeper confirmed the node is gone: the waiters behind it may go on.
    pub(crate) fn deleted(&self) {
        self.settle(NodeFate::Deleted);
    }

    /// The reply to the owner's own delete of the node: OK, or `NoNode` (someone deleted it
    /// first), means it is gone; any other error leaves it to the session's end.
    pub(crate) fn delete_replied(&self, reply: &Result<(), zookeeper_client::Error>) {
        if matches!(reply, Ok(()) | Err(zookeeper_client::Error::NoNode)) {
            self.deleted();
        }
    }

    /// The owner cannot tell any more: the waiters behind it watch it on the server.
    pub(crate) fn unknown(&self) {
        self.settle(NodeFate::Unknown);
    }

    /// The first fate settled stays.
    fn settle(&self, fate: NodeFate) {
        // Unregistered first: a waiter that looks it up afterwards watches the server instead of
        // finding a settled entry.
        {
            let mut nodes = nodes();
            if nodes.get(&self.path).is_some_and(|entry| entry.id == self.id) {
                nodes.remove(&self.path);
            }
        }
        self.fate.send_if_modified(|current| {
            let first = *current == NodeFate::Present;
            if first {
                *current = fate;
            }
            first
        });
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

    #[test]
    fn a_follower_finds_the_node_by_its_name_and_sees_the_deletion() {
        let prefix = new_protected_prefix();
        let name = format!("{prefix}lock-0000000001");
        let node = register(PARENT, &prefix, SESSION);
        let follower = follow(PARENT, &name, SESSION).expect("registered");
        assert!(follow("/unit-local-handoff-other", &name, SESSION).is_none(), "another parent");
        assert!(follow(PARENT, &name, SessionId(8)).is_none(), "another session");
        assert_eq!(*follower.borrow(), NodeFate::Present);
        node.deleted();
        assert_eq!(*follower.borrow(), NodeFate::Deleted);
        assert!(follow(PARENT, &name, SESSION).is_none(), "unregistered once settled");
        node.unknown();
        assert_eq!(*follower.borrow(), NodeFate::Deleted, "a settled fate does not change");
    }

    #[test]
    fn dropping_the_owner_without_a_deletion_makes_the_fate_unknown() {
        let prefix = new_protected_prefix();
        let name = format!("{prefix}__WRIT__0000000002");
        let follower = {
            let _node = register(PARENT, &prefix, SESSION);
            follow(PARENT, &name, SESSION).expect("registered")
        };
        assert_eq!(*follower.borrow(), NodeFate::Unknown);
        assert!(follow(PARENT, &name, SESSION).is_none());
        assert!(follow(PARENT, "__lock__0000000003", SESSION).is_none(), "not a protected name");
    }

    #[test]
    fn an_old_registration_of_the_same_prefix_does_not_unregister_the_new_one() {
        let prefix = new_protected_prefix();
        let name = format!("{prefix}lock-0000000004");
        let old = register(PARENT, &prefix, SESSION);
        let new = register(PARENT, &prefix, SESSION);
        drop(old);
        let follower = follow(PARENT, &name, SESSION).expect("the new registration");
        new.deleted();
        assert_eq!(*follower.borrow(), NodeFate::Deleted);
    }
}
