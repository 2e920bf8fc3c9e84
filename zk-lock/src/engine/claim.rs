//! Our responsibility for one node, from before its `create` is sent until ZooKeeper confirms
//! that it is gone. A [`Claim`] owns an entry in its session's node table; whoever holds it (a waiting
//! acquisition, a hold) gives it up with [`Claim::gone`] only on such a confirmation. Dropped
//! without one (a timeout, a cancellation, a delete that failed, a release while disconnected),
//! it deletes the node in the background and keeps trying for as long as the session may be
//! used; a session that must not be used any more is retired, and its retirement confirms the
//! end of all its nodes at once (`session::retire`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::Error as ZkError;

use crate::background;
use crate::path::ChildPath;
use crate::session::Session;
use crate::zk::{broke_connection, delete_with_retry, find_protected, until_connected};

/// The longest pause between two attempts to delete an abandoned node.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// A node of ours that ZooKeeper has not confirmed gone yet.
#[derive(Debug)]
pub(crate) struct Claim {
    session: Arc<Session>,
    id: u64,
}

impl Claim {
    /// Claims the node about to be created at `prefix` (`parent/_c_<uuid>-`, its protected
    /// prefix): call it before the `create` is sent.
    pub(crate) fn new(session: &Arc<Session>, prefix: &ChildPath) -> Self {
        let id = session.nodes().add(prefix);
        Self { session: session.clone(), id }
    }

    /// Its entry in the session's node table.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The node's name, from the `create` reply or a search by prefix.
    pub(crate) fn named(&self, name: &str) {
        self.session.nodes().named(self.id, name);
    }

    /// The node's path, once its name is known: the node table's copy, for the hold to share.
    pub(crate) fn node_path(&self) -> Option<Arc<str>> {
        self.session.nodes().get(self.id)?.path().cloned()
    }

    /// ZooKeeper confirmed the node is gone: a delete answered OK or `NoNode`, or its `create`
    /// failed without creating it.
    pub(crate) fn gone(self) {
        self.session.nodes().remove(self.id);
    }

    /// [`gone`](Self::gone) if `reply`, the reply to a delete of the node, confirms it.
    pub(crate) fn gone_if_deleted(self, reply: &Result<(), ZkError>) {
        if confirms_gone(reply) {
            self.gone();
        }
    }

    /// Deletes the node, found first by its prefix if its name never reached us, and returns the
    /// reply (`Ok` also when the search found nothing). When the name is known the delete is sent
    /// before this returns, in order with the caller's later requests. Unconfirmed, the claim
    /// goes on in the background.
    pub(crate) fn delete(self) -> impl Future<Output = Result<(), ZkError>> + Send + 'static {
        let path = self.session.nodes().get(self.id).and_then(|node| node.path().cloned());
        let sent = path.map(|path| delete_with_retry(&self.session.zk, path));
        async move {
            let reply = match sent {
                Some(sent) => sent.await,
                None => delete_once(&self.session, self.id).await,
            };
            if confirms_gone(&reply) {
                self.gone();
            }
            reply
        }
    }
}

/// A delete answered OK, or `NoNode` (someone deleted it first): the node is gone.
fn confirms_gone(reply: &Result<(), ZkError>) -> bool {
    matches!(reply, Ok(()) | Err(ZkError::NoNode))
}

/// One attempt (riding out broken connections) to delete the node `id` of `session`, found by its
/// prefix if its name is unknown. `Ok` if it is gone or was never made.
async fn delete_once(session: &Session, id: u64) -> Result<(), ZkError> {
    let Some(node) = session.nodes().get(id).cloned() else { return Ok(()) };
    let path = match node.path() {
        Some(path) => path.clone(),
        // Unnamed: it has a prefix.
        None => match find_protected(&session.zk, node.parent(), node.prefix().unwrap_or_default()).await? {
            Some((name, _)) => {
                session.nodes().named(id, &name);
                format!("{}/{name}", node.parent()).into()
            }
            // Searched after a `sync`, after the `create` in the same session: never made.
            None => return Ok(()),
        },
    };
    delete_with_retry(&session.zk, path).await
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.session.nodes().get(self.id).is_some() {
            background::spawn(reap(self.session.clone(), self.id));
        }
    }
}

/// Deletes the abandoned node `id` of `session`, until ZooKeeper confirms it is gone or the
/// session must not be used any more (its retirement then ends every node of it).
async fn reap(session: Arc<Session>, id: u64) {
    let mut pause = Duration::from_millis(10);
    while session.is_usable() && session.nodes().get(id).is_some() {
        match delete_once(&session, id).await {
            Ok(()) | Err(ZkError::NoNode) => session.nodes().remove(id),
            Err(error) => {
                if broke_connection(&error) && until_connected(&session.zk).await.is_err() {
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}
