//! A lock attempt on one session: join the queue in one round trip (`join_queue`), then wait in
//! it (`queue`) until our node holds the lock.

use std::sync::Arc;

use zookeeper_client::{Acls, Client as ZkClient, CreateMode, Error as ZkError};

use super::attempt::Attempt;
use super::local_handoff::LocalHandoff;
use super::not_granted::NotGranted;
use super::queue::{wait_in_queue, LockSpec, Waiting};
use super::ungranted::{Created, UngrantedNode};
use crate::layout::new_protected_prefix;
use crate::path::parent_path;
use crate::session::Session;
use crate::zk::{create_containers, list_children, CreatedParents, Reconnects};

/// A granted lock node.
pub(crate) struct Grant {
    pub session: Arc<Session>,
    pub node_path: Arc<str>,
    pub token: i64,
    /// The session's loss count when the lock was granted.
    pub losses_seen: u64,
    /// How the waiters of this process behind our node learn of its deletion, if they can.
    pub local: Option<Arc<LocalHandoff>>,
    /// Our responsibility for the node until ZooKeeper confirms it is gone.
    pub claim: Option<super::Claim>,
}

/// One try at a lock on one session: its node, from the `create` to the grant.
pub(crate) struct LockAttempt<'a> {
    session: Arc<Session>,
    spec: &'a LockSpec<'a>,
    acls: Acls<'a>,
    may_wait: bool,
    losses_seen: u64,
    node: UngrantedNode,
    /// The granted node's path and fencing token.
    granted: Option<(Arc<str>, i64)>,
}

impl<'a> LockAttempt<'a> {
    /// An attempt on `session` whose node gets `acls`; with `may_wait` false it fails with
    /// `Busy` rather than queue behind anyone.
    pub(crate) fn new(session: Arc<Session>, spec: &'a LockSpec<'a>, acls: Acls<'a>, may_wait: bool) -> Self {
        let losses_seen = session.health().losses;
        let node = UngrantedNode::in_queue(session.clone(), spec.path, new_protected_prefix());
        Self { session, spec, acls, may_wait, losses_seen, node, granted: None }
    }
}

impl Attempt for LockAttempt<'_> {
    type Grant = Grant;

    async fn run(&mut self) -> std::result::Result<(), NotGranted> {
        let zk = &self.session.zk;
        // Boxed: done once joined, it would otherwise stay in the future of every waiter.
        let (name, token, children) = Box::pin(join_queue(zk, self.spec, self.acls, &mut self.node)).await?;
        let waiting = Waiting { may_wait: self.may_wait, trace_entry: true, watch_own: true };
        let own_path = self.node.node_path(&name);
        let node_path =
            wait_in_queue(zk, self.spec, &name, own_path, children, waiting).await?.ok_or(NotGranted::NodeVanished)?;
        if self.spec.queue.exclusive() {
            self.node.granted_exclusively();
        }
        self.granted = Some((node_path, token));
        Ok(())
    }

    fn grant(mut self) -> Grant {
        let (node_path, token) = self.granted.take().expect("granted after a successful run");
        let (claim, local) = self.node.grant();
        let Self { session, losses_seen, .. } = self;
        Grant { session, node_path, token, losses_seen, local, claim }
    }

    fn let_go(mut self) {
        self.node.let_go();
    }

    async fn remove(mut self) {
        self.node.remove().await;
    }
}

/// Creates our node and lists the queue in one round trip: both requests are sent before either
/// reply is awaited, and the server answers the listing after the create, so it includes our node.
/// The node (and any missing parent) gets the client's `acls`.
///
/// A lock path found missing (new, or its empty container removed by the server) is created in
/// the next round trip, ahead of the node's create and listing: two round trips in all, and no
/// request more than creating it alone would take. When its parent is missing too, the missing
/// ancestors are created one by one before that.
async fn join_queue(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    acls: Acls<'_>,
    node: &mut UngrantedNode,
) -> std::result::Result<(String, i64, Vec<String>), NotGranted> {
    let create_path = node.create_path(spec.queue.lock_name());
    let options = CreateMode::EphemeralSequential.with_acls(acls);
    let container = CreateMode::Container.with_acls(acls);
    let mut reconnects = Reconnects::new(zk);
    let mut made_parents = CreatedParents::default();
    let mut path_missing = false;
    loop {
        // Each request is sent as it is made, so the server handles them in this order.
        let make_path = path_missing.then(|| zk.create(spec.path, &[], &container));
        node.sent();
        let create = zk.create(&create_path, spec.data, &options);
        let list = zk.list_children(spec.path);
        let path_made = match make_path {
            Some(make_path) => Some(make_path.await.map(drop)),
            None => None,
        };
        if matches!(path_made, Some(Ok(()))) {
            made_parents.push(spec.path);
        }
        let (created, listed) = tokio::join!(create, list);
        let settled = node.settle_create(zk, &mut reconnects, spec.queue.lock_name(), created).await;
        let (name, token) = match remove_refused_parents(zk, &mut made_parents, settled).await? {
            Created::Made(name, token) => (name, token),
            Created::ParentMissing if !path_missing => {
                path_missing = true;
                continue;
            }
            // The lock path could not be made. Its parent is missing too: made now (with any
            // missing ancestor), and the path tried again as above. Otherwise (refused, or a
            // top-level path whose chroot is missing) the walk from the path says why.
            Created::ParentMissing => {
                let from = match path_made {
                    Some(Err(ZkError::NoNode)) => parent_path(spec.path).unwrap_or(spec.path),
                    _ => spec.path,
                };
                let walked = create_containers(zk, from, acls).await;
                let made = remove_refused_parents(zk, &mut made_parents, walked.map_err(NotGranted::from)).await?;
                made_parents.append(made);
                continue;
            }
            Created::NotMade => continue,
        };
        let children = match listed {
            Ok(children) => children,
            Err(_) => list_children(zk, spec.path).await?,
        };
        return Ok((name, token, children));
    }
}

/// Passes `settled` on, the outcome of a create in parents that this attempt may have just made
/// (`made`); if the create was refused for lack of permission, those parents are removed first:
/// their ACL, the client's, does not let it use them, and nobody else could either.
pub(super) async fn remove_refused_parents<T>(
    zk: &ZkClient,
    made: &mut CreatedParents,
    settled: std::result::Result<T, NotGranted>,
) -> std::result::Result<T, NotGranted> {
    if settled.as_ref().is_err_and(NotGranted::is_no_auth) {
        std::mem::take(made).remove(zk).await;
    }
    settled
}
