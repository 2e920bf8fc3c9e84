//! The node of an acquisition that has not been granted yet, and its removal on every way out:
//! timeout, `Busy`, error, or the acquire future being dropped mid-flight.

use std::sync::Arc;

use zookeeper_client::{Client as ZkClient, Error as ZkError};

use super::acquire::list_children;
use super::local_nodes::{self, LocalNode};
use super::retry::{delete_with_retry, Reconnects};
use crate::background;
use crate::session::Session;
use crate::trace;

/// Tracks our queue node from the moment its `create` is sent until the lock is granted.
pub(super) struct PendingNode {
    session: Arc<Session>,
    parent: String,
    /// `_c_<uuid>-`: finds the node when the reply to `create` never arrived.
    prefix: String,
    state: State,
    /// Whether waiters of this process may follow the node through [`local_nodes`].
    shared_locally: bool,
    local: Option<Arc<LocalNode>>,
}

enum State {
    /// No `create` sent yet, or the node is known to be gone.
    Nothing,
    /// A `create` was sent; the name is known once its reply arrived.
    Sent(Option<String>),
}

impl PendingNode {
    pub(super) fn new(session: Arc<Session>, parent: &str, prefix: String) -> Self {
        Self { session, parent: parent.to_owned(), prefix, state: State::Nothing, shared_locally: false, local: None }
    }

    /// A node in a lock queue, which other waiters on its session may wait behind: they follow
    /// it through [`local_nodes`]. Its owner must watch it while it waits (see
    /// `acquire::wait_in_queue`), so that a deletion by someone else settles its fate.
    pub(super) fn in_queue(session: Arc<Session>, parent: &str, prefix: String) -> Self {
        let mut node = Self::new(session, parent, prefix);
        node.shared_locally = true;
        node
    }

    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Call before the `create` is sent: zookeeper-client sends a request when it is made.
    pub(super) fn sent(&mut self) {
        if self.shared_locally {
            // The previous attempt's registration (same prefix) goes first.
            self.local = None;
            let session = self.session.zk.session_id();
            self.local = Some(local_nodes::register(&self.parent, &self.prefix, session));
        }
        self.state = State::Sent(None);
    }

    pub(super) fn created(&mut self, name: String) {
        self.state = State::Sent(Some(name));
    }

    /// The node is gone (deleted by someone, or with its session) or is now a held lock.
    pub(super) fn forget(&mut self) {
        self.state = State::Nothing;
        self.local = None;
    }

    /// The node is granted: it is no longer ours to remove, and whoever holds it now tells the
    /// waiters of this process behind it what becomes of it.
    pub(super) fn grant(&mut self) -> Option<Arc<LocalNode>> {
        let local = self.local.take();
        self.forget();
        local
    }

    /// Removes the node now, for the error paths that return to the caller.
    pub(super) async fn remove(&mut self) {
        if let State::Sent(name) = std::mem::replace(&mut self.state, State::Nothing) {
            let zk = self.session.zk.clone();
            remove_node(zk, self.parent.clone(), self.prefix.clone(), name, self.local.take()).await;
        }
    }

    /// Removes the node in the background; when its name is known the delete is sent before
    /// this returns, in order with the caller's later requests.
    pub(super) fn remove_in_background(&mut self) {
        let local = self.local.take();
        match std::mem::replace(&mut self.state, State::Nothing) {
            State::Nothing => {}
            State::Sent(Some(name)) => {
                let delete = delete_with_retry(&self.session.zk, format!("{}/{name}", self.parent));
                background::spawn(async move {
                    let reply = delete.await;
                    if let Some(local) = local {
                        local.delete_replied(&reply);
                    }
                });
            }
            State::Sent(None) => {
                let zk = self.session.zk.clone();
                background::spawn(remove_node(zk, self.parent.clone(), self.prefix.clone(), None, local));
            }
        }
    }
}

impl Drop for PendingNode {
    fn drop(&mut self) {
        // The acquire future was dropped mid-flight.
        self.remove_in_background();
    }
}

/// Deletes our node, finding it by its protected prefix if its name never reached us. Gives up
/// only when the session is gone, which removes the ephemeral node anyway.
async fn remove_node(
    zk: ZkClient,
    parent: String,
    prefix: String,
    name: Option<String>,
    local: Option<Arc<LocalNode>>,
) {
    let name = match name {
        Some(name) => name,
        None => match find_protected(&zk, &parent, &prefix).await {
            Ok(Some((name, _))) => name,
            _ => return,
        },
    };
    let reply = delete_with_retry(&zk, format!("{parent}/{name}")).await;
    if let Some(local) = local {
        local.delete_replied(&reply);
    }
}

/// Looks for the node whose name starts with `prefix` under `parent`: the node a `create`
/// made before its reply was lost. Returns its name and creation zxid.
pub(super) async fn find_protected(
    zk: &ZkClient,
    parent: &str,
    prefix: &str,
) -> Result<Option<(String, i64)>, ZkError> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        // After a reconnect we may talk to another server than the one that took the create,
        // and a follower can lag the leader: `sync` makes it catch up before it lists.
        match zk.sync(parent).await {
            Ok(()) | Err(ZkError::NoNode) => {}
            Err(error) => {
                reconnects.wait(error).await?;
                continue;
            }
        }
        let children = match list_children(zk, parent).await {
            Ok(children) => children,
            Err(ZkError::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(name) = children.into_iter().find(|child| child.starts_with(prefix)) else { return Ok(None) };
        match zk.get_data(&format!("{parent}/{name}")).await {
            Ok((_, stat)) => {
                trace::found_again(parent, &name);
                return Ok(Some((name, stat.czxid)));
            }
            Err(ZkError::NoNode) => return Ok(None),
            Err(error) => reconnects.wait(error).await?,
        }
    }
}

/// A `create` whose reply was lost is simulated by creating the protected node by hand: the
/// engine must find it by prefix, with its token, and remove it without knowing its name.
#[cfg(all(test, feature = "testing"))]
mod tests {
    use zookeeper_client::{Acls, CreateMode};

    use super::*;
    use crate::engine::node_name::new_protected_prefix;
    use crate::testing::shared_server;

    #[tokio::test]
    async fn a_node_whose_create_reply_was_lost_is_found_and_removed_by_prefix() {
        let zk = ZkClient::connect(&shared_server().connect_string()).await.unwrap();
        let parent = "/unit-pending-protected";
        let container = CreateMode::Container.with_acls(Acls::anyone_all());
        zk.mkdir(parent, &container).await.unwrap();
        let prefix = new_protected_prefix();
        let sequential = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let (stat, _) = zk.create(&format!("{parent}/{prefix}lock-"), b"", &sequential).await.unwrap();
        let (other, _) =
            zk.create(&format!("{parent}/{}lock-", new_protected_prefix()), b"", &sequential).await.unwrap();

        let (name, token) = find_protected(&zk, parent, &prefix).await.unwrap().expect("found by prefix");
        assert!(name.starts_with(&prefix), "{name}");
        assert_eq!(token, stat.czxid);

        let mut pending = PendingNode::new(Session::new(zk.clone()), parent, prefix.clone());
        pending.sent();
        pending.remove().await;
        let left = zk.list_children(parent).await.unwrap();
        assert_eq!(left.len(), 1, "only the other contender's node is left: {left:?}");
        assert!(!left[0].starts_with(&prefix));
        assert!(other.czxid > stat.czxid);
        assert_eq!(find_protected(&zk, parent, &prefix).await.unwrap(), None);
    }
}
