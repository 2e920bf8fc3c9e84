//! The node of an attempt that has not been granted yet, and its removal on every way out:
//! timeout, `Busy`, error, or the acquire future being dropped mid-flight.

use std::sync::Arc;

use zookeeper_client::{Client as ZkClient, CreateSequence, Error as ZkError, Stat};

use super::claim::Claim;
use super::local_handoff::{self, LocalHandoff};
use super::not_granted::NotGranted;
use crate::background;
use crate::path::ChildPath;
use crate::session::Session;
use crate::zk::{find_protected, Reconnects};

/// What one `create` of our node came to, once settled.
pub(super) enum Created {
    /// The node exists: its name and creation zxid.
    Made(String, i64),
    /// Its parent is missing: create the parent, then the node again.
    ParentMissing,
    /// Nothing was made (as a search by prefix confirmed): create it again.
    NotMade,
}

/// Tracks our queue node from the moment its `create` is sent until the lock is granted.
pub(super) struct UngrantedNode {
    session: Arc<Session>,
    /// `parent/_c_<uuid>-`: the prefix finds the node when the reply to `create` never arrived.
    /// One string, shared with the node's entry in its session's node table and its registration in [`local_handoff`].
    key: ChildPath,
    /// A `create` was sent, and ZooKeeper has not confirmed that the node is gone. The claim
    /// knows the node's name once the reply to the `create` arrived.
    claim: Option<Claim>,
    /// Whether waiters of this process may follow the node through [`local_handoff`].
    shared_locally: bool,
    local: Option<Arc<LocalHandoff>>,
}

impl UngrantedNode {
    pub(super) fn new(session: Arc<Session>, parent: &str, prefix: String) -> Self {
        let key = ChildPath::new(parent, &prefix);
        Self { session, key, claim: None, shared_locally: false, local: None }
    }

    /// A node in a lock queue, which other waiters on its session may wait behind: they follow
    /// it through [`local_handoff`]. A deletion of it by someone else while it waits settles its
    /// fate only once its owner finds out: from the watch on its own node (behind a node of this
    /// process) or from the listing when the node ahead of it goes (see `queue::wait_in_queue`).
    pub(super) fn in_queue(session: Arc<Session>, parent: &str, prefix: String) -> Self {
        let mut node = Self::new(session, parent, prefix);
        node.shared_locally = true;
        node
    }

    /// The path of our node, named `name`: the node table's copy once it has the name, one string
    /// for the table, the waiter and the hold.
    pub(super) fn node_path(&self, name: &str) -> Arc<str> {
        let table_copy = self.claim.as_ref().and_then(Claim::node_path);
        table_copy.unwrap_or_else(|| self.key.sibling(name).as_arc().clone())
    }

    /// The node's `_c_<uuid>-` prefix.
    pub(super) fn prefix(&self) -> &str {
        self.key.child()
    }

    /// The path to create the node at, for a node named `lock_name` and a sequence.
    pub(super) fn create_path(&self, lock_name: &str) -> String {
        format!("{}{lock_name}", self.key.as_arc())
    }

    /// Settles the `reply` to our node's `create`. A broken connection may have hidden a create
    /// that was applied: then the node is looked for by its prefix before anything else.
    ///
    /// # Errors
    ///
    /// An error that is not a broken connection, or the session's end.
    pub(super) async fn settle_create(
        &mut self,
        zk: &ZkClient,
        reconnects: &mut Reconnects<'_>,
        lock_name: &str,
        reply: Result<(Stat, CreateSequence), ZkError>,
    ) -> Result<Created, NotGranted> {
        match reply {
            Ok((stat, sequence)) => {
                let name = format!("{}{lock_name}{sequence}", self.key.child());
                self.created(&name);
                Ok(Created::Made(name, stat.czxid))
            }
            Err(ZkError::NoNode) => {
                self.not_created();
                Ok(Created::ParentMissing)
            }
            Err(error) => {
                reconnects.wait(error).await?;
                match find_protected(zk, self.key.parent(), self.key.child()).await? {
                    Some((name, token)) => {
                        self.created(&name);
                        Ok(Created::Made(name, token))
                    }
                    None => {
                        self.not_created();
                        Ok(Created::NotMade)
                    }
                }
            }
        }
    }

    /// Call before the `create` is sent: zookeeper-client sends a request when it is made.
    pub(super) fn sent(&mut self) {
        if self.shared_locally {
            // The previous attempt's registration (same prefix) goes first.
            self.local = None;
            let session = self.session.zk.session_id();
            self.local = Some(local_handoff::register(self.key.as_arc().clone(), session));
        }
        if self.claim.is_none() {
            self.claim = Some(Claim::new(&self.session, &self.key));
        }
    }

    fn created(&mut self, name: &str) {
        if let Some(claim) = &self.claim {
            claim.named(name);
        }
    }

    /// ZooKeeper said the `create` made nothing.
    fn not_created(&mut self) {
        if let Some(claim) = self.claim.take() {
            claim.gone();
        }
        self.local = None;
    }

    /// We stop using the node without knowing it is gone (our session must not be used any
    /// more): its claim deletes it, or the session's retirement ends it.
    pub(super) fn let_go(&mut self) {
        self.claim = None;
        self.local = None;
    }

    /// The node was granted exclusively (a mutex, a write lock): the waiters of this process
    /// behind it need not check the queue ahead of it once it goes.
    pub(super) fn granted_exclusively(&self) {
        if let Some(local) = &self.local {
            local.granted_exclusively();
        }
    }

    /// The node is granted: it is no longer ours to remove. Returns its claim, and how whoever
    /// holds it now tells the waiters of this process behind it what becomes of it.
    pub(super) fn grant(&mut self) -> (Option<Claim>, Option<Arc<LocalHandoff>>) {
        (self.claim.take(), self.local.take())
    }

    /// Removes the node now, for the error paths that return to the caller. If ZooKeeper does
    /// not confirm it, the claim goes on trying in the background.
    pub(super) async fn remove(&mut self) {
        if let Some(removal) = self.start_removal() {
            removal.await;
        }
    }

    /// Removes the node in the background; when its name is known the delete is sent before
    /// this returns, in order with the caller's later requests.
    pub(super) fn remove_in_background(&mut self) {
        if let Some(removal) = self.start_removal() {
            background::spawn(removal);
        }
    }

    /// Sends the delete if the node's name is known; the future awaits the reply and tells the
    /// waiters of this process behind the node what became of it.
    fn start_removal(&mut self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let local = self.local.take();
        let delete = self.claim.take()?.delete();
        Some(async move {
            let reply = delete.await;
            if let Some(local) = local {
                local.delete_replied(&reply);
            }
        })
    }
}

impl Drop for UngrantedNode {
    fn drop(&mut self) {
        // The acquire future was dropped mid-flight.
        self.remove_in_background();
    }
}

/// A `create` whose reply was lost is simulated by creating the protected node by hand: the
/// engine must find it by prefix, with its token, and remove it without knowing its name.
#[cfg(all(test, feature = "testing"))]
mod tests {
    use zookeeper_client::{Acls, Client as ZkClient, CreateMode};

    use super::*;
    use crate::layout::new_protected_prefix;
    use crate::testing::shared_server;
    use crate::zk::find_protected;

    #[tokio::test]
    async fn a_node_whose_create_reply_was_lost_is_found_and_removed_by_prefix() {
        let zk = ZkClient::connect(&shared_server().connect_string()).await.unwrap();
        let parent = "/unit-ungranted-protected";
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

        let mut node =
            UngrantedNode::new(Session::new(zk.clone(), None, tokio::time::Instant::now()), parent, prefix.clone());
        node.sent();
        node.remove().await;
        let left = zk.list_children(parent).await.unwrap();
        assert_eq!(left.len(), 1, "only the other contender's node is left: {left:?}");
        assert!(!left[0].starts_with(&prefix));
        assert!(other.czxid > stat.czxid);
        assert_eq!(find_protected(&zk, parent, &prefix).await.unwrap(), None);
    }
}
