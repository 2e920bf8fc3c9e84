//! A lock attempt on one session: join the queue in one round trip, then wait with O(1) work
//! per hand-off.

use std::sync::Arc;

use tokio::sync::watch;
use zookeeper_client::{Acls, Client as ZkClient, CreateMode, Error as ZkError, EventType, MultiReadResult};

use super::attempt::Attempt;
use super::exclusive_grants;
use super::local_handoff::{self, LocalHandoff, NodeFate};
use super::not_granted::NotGranted;
use super::own_watch::OwnNodeWatch;
use super::ungranted::{Created, UngrantedNode};
use crate::error::{Error, Result};
use crate::layout::{new_protected_prefix, Queue};
use crate::session::Session;
use crate::trace;
use crate::zk::{create_containers, list_children, Reconnects};

/// Above this many nodes ahead, checking them one by one in a multi-read costs more than
/// listing the parent.
const MAX_PROBED_AT_ONCE: usize = 256;

/// What a recipe asks of the engine.
pub(crate) struct LockSpec<'a> {
    /// The lock path, already validated.
    pub path: &'a str,
    /// The queue and the kind of node we make in it.
    pub queue: &'static Queue,
    /// Node data: who holds or waits.
    pub data: &'a [u8],
}

/// A granted lock node.
pub(crate) struct Grant {
    pub session: Arc<Session>,
    pub node_path: String,
    pub token: i64,
    /// The session's loss count when the lock was granted.
    pub losses_seen: u64,
    /// The watch on our node set while we waited, if we did.
    pub own_watch: Option<OwnNodeWatch>,
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
    own_watch: Option<OwnNodeWatch>,
    /// The granted node's path and fencing token.
    granted: Option<(String, i64)>,
}

impl<'a> LockAttempt<'a> {
    /// An attempt on `session` whose node gets `acls`; with `may_wait` false it fails with
    /// `Busy` rather than queue behind anyone.
    pub(crate) fn new(session: Arc<Session>, spec: &'a LockSpec<'a>, acls: Acls<'a>, may_wait: bool) -> Self {
        let losses_seen = session.health().losses;
        let node = UngrantedNode::in_queue(session.clone(), spec.path, new_protected_prefix());
        Self { session, spec, acls, may_wait, losses_seen, node, own_watch: None, granted: None }
    }
}

impl Attempt for LockAttempt<'_> {
    type Grant = Grant;

    async fn run(&mut self) -> std::result::Result<(), NotGranted> {
        let zk = &self.session.zk;
        let (name, token, children) = join_queue(zk, self.spec, self.acls, &mut self.node).await?;
        let waiting = Waiting { may_wait: self.may_wait, trace_entry: true, own_watch: Some(&mut self.own_watch) };
        let node_path =
            wait_in_queue(zk, self.spec, &name, children, waiting).await?.ok_or(NotGranted::NodeVanished)?;
        self.granted = Some((node_path, token));
        Ok(())
    }

    fn grant(mut self) -> Grant {
        let (node_path, token) = self.granted.take().expect("granted after a successful run");
        let (claim, local) = self.node.grant();
        let Self { session, losses_seen, own_watch, .. } = self;
        Grant { session, node_path, token, losses_seen, own_watch, local, claim }
    }

    fn let_go(mut self) {
        self.node.let_go();
    }

    async fn remove(mut self) {
        self.node.remove().await;
    }
}

/// The path of our node `name`, now granted; an exclusive grant is remembered for the waiters
/// of this process behind it.
fn granted(spec: &LockSpec<'_>, name: &str) -> String {
    let node_path = format!("{}/{name}", spec.path);
    if spec.queue.exclusive() {
        exclusive_grants::granted_exclusively(&node_path);
    }
    node_path
}

/// Creates our node and lists the queue in one round trip: both requests are sent before either
/// reply is awaited, and the server answers the listing after the create, so it includes our node.
/// The node (and any missing parent) gets the client's `acls`.
async fn join_queue(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    acls: Acls<'_>,
    node: &mut UngrantedNode,
) -> std::result::Result<(String, i64, Vec<String>), NotGranted> {
    let create_path = node.create_path(spec.queue.lock_name());
    let options = CreateMode::EphemeralSequential.with_acls(acls);
    let mut reconnects = Reconnects::new(zk);
    loop {
        node.sent();
        let create = zk.create(&create_path, spec.data, &options);
        let list = zk.list_children(spec.path);
        let (created, listed) = tokio::join!(create, list);
        let (name, token) = match node.settle_create(zk, &mut reconnects, spec.queue.lock_name(), created).await? {
            Created::Made(name, token) => (name, token),
            Created::ParentMissing => {
                create_containers(zk, spec.path, acls).await?;
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

/// Waits until every node in `blockers` (ascending queue order) is gone, watching only the
/// nearest one. New nodes always queue behind us, so the set only shrinks: no re-listing.
async fn wait_until_gone(
    zk: &ZkClient,
    parent: &str,
    mut blockers: Vec<String>,
) -> std::result::Result<(), NotGranted> {
    while let Some(nearest) = blockers.last() {
        let nearest_path = format!("{parent}/{nearest}");
        until_deleted(zk, parent, nearest, &nearest_path).await?;
        blockers.pop();
        if exclusive_grants::was_granted_exclusively(&nearest_path) {
            // Every node ahead of it was gone when it was granted.
            blockers.clear();
        } else {
            drop_vanished(zk, parent, &mut blockers).await?;
        }
    }
    Ok(())
}

/// Waits until the node `name` at `path` is deleted: told by its owner when it is a node of
/// this process on our session, otherwise (or when the owner cannot tell) by a watch on the
/// server.
async fn until_deleted(zk: &ZkClient, parent: &str, name: &str, path: &str) -> std::result::Result<(), NotGranted> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        if let Some(fate) = local_handoff::follow(parent, name, zk.session_id()) {
            if deleted_locally(fate).await {
                return Ok(());
            }
        }
        // `get_data` rather than `exists`: a watch on a missing node would never fire or go away.
        match zk.get_and_watch_data(path).await {
            Ok((_, stat, _)) if stat.ephemeral_owner == 0 => {
                return Err(NotGranted::Error(not_a_lock_node(parent, name)))
            }
            Ok((_, _, watcher)) => {
                let event = watcher.changed().await;
                match event.event_type {
                    EventType::NodeDeleted => return Ok(()),
                    EventType::Session if event.session_state.is_terminated() => return Err(NotGranted::SessionGone),
                    // Data changed, or a reconnect: watch again.
                    _ => {}
                }
            }
            Err(ZkError::NoNode) => return Ok(()),
            Err(error) => reconnects.wait(error).await?,
        }
    }
}

/// Waits until the owner of a node of this process settles its fate: `true` if ZooKeeper
/// confirmed the deletion, `false` if the owner cannot tell. Our own session ending meanwhile is
/// seen around the whole attempt (`while_usable`).
async fn deleted_locally(mut fate: watch::Receiver<NodeFate>) -> bool {
    matches!(fate.wait_for(|fate| *fate != NodeFate::Present).await.map(|fate| *fate), Ok(NodeFate::Deleted))
}

/// A node named like a lock node but not ephemeral: no session ends it, so waiting for it would
/// never end (Curator would wait forever). Lock and lease nodes are always ephemeral.
fn not_a_lock_node(parent: &str, name: &str) -> Error {
    Error::invalid_path(
        parent,
        format!(
            "the child `{name}` ahead in the queue is named like a lock node but is not ephemeral, so no \
             holder will ever release it and the lock could never be granted; the path holds other data: \
             remove that node or choose another lock path"
        ),
    )
}

/// After the nearest node went, checks all the others in one request. When a queue drains in
/// order they are all gone already, so each hand-off costs one request, not one per node ahead.
async fn drop_vanished(zk: &ZkClient, parent: &str, blockers: &mut Vec<String>) -> std::result::Result<(), ZkError> {
    if blockers.is_empty() {
        return Ok(());
    }
    if blockers.len() > MAX_PROBED_AT_ONCE {
        let children = list_children(zk, parent).await?;
        let present: std::collections::HashSet<&str> = children.iter().map(String::as_str).collect();
        blockers.retain(|name| present.contains(name.as_str()));
        return Ok(());
    }
    let mut reconnects = Reconnects::new(zk);
    let results = loop {
        let mut reader = zk.new_multi_reader();
        for name in blockers.iter() {
            reader.add_get_data(&format!("{parent}/{name}"))?;
        }
        match reader.commit().await {
            Err(error) => reconnects.wait(error).await?,
            Ok(results) => break results,
        }
    };
    let mut results = results.into_iter();
    blockers.retain(|_| !matches!(results.next(), Some(MultiReadResult::Error { err: ZkError::NoNode })));
    Ok(())
}

/// For a recipe that joined the queue at `spec.path` itself, with more requests pipelined behind
/// its create (the semaphore): waits, as a [`LockAttempt`] does, until the node `name` holds the lock.
/// `children` must be a listing made after the node was created. `Ok(false)` if the node
/// vanished; a dead session is `Err(Error::Zookeeper(SessionExpired))`.
pub(super) async fn wait_for_grant(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    name: &str,
    children: Vec<String>,
) -> Result<bool> {
    let waiting = Waiting { may_wait: true, trace_entry: false, own_watch: None };
    match wait_in_queue(zk, spec, name, children, waiting).await {
        Ok(granted) => Ok(granted.is_some()),
        Err(NotGranted::Error(error)) => Err(error),
        Err(NotGranted::Busy | NotGranted::NodeVanished | NotGranted::SessionGone) => {
            Err(ZkError::SessionExpired.into())
        }
    }
}

/// Resolves once our waiting node is gone, as its watch says and the server confirms after a
/// `sync`: a watch re-set on a server that has not caught up yet can report a deletion that did
/// not happen, and queueing again would then leave the node behind in the queue.
async fn own_node_gone(zk: &ZkClient, own_watch: &mut OwnNodeWatch, path: &str) {
    loop {
        own_watch.until_deleted(|_| {}).await;
        let synced = matches!(zk.sync(path).await, Ok(()) | Err(ZkError::NoNode));
        if synced && matches!(zk.check_stat(path).await, Ok(None)) {
            return;
        }
    }
}

/// What a node waiting in the queue does besides waiting.
struct Waiting<'a> {
    /// `false`: fail with `Busy` rather than wait behind anyone.
    may_wait: bool,
    /// Report the node's place in the queue when it is first seen.
    trace_entry: bool,
    /// Where to keep the watch on our own node, sent once we have to wait; `None`: not wanted.
    own_watch: Option<&'a mut Option<OwnNodeWatch>>,
}

/// Waits until the node `name` holds the lock by the recipe's rule. `children` is a listing made
/// after the node was created. Returns the granted node's path, or `None` if the node vanished.
async fn wait_in_queue(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    name: &str,
    mut children: Vec<String>,
    mut waiting: Waiting<'_>,
) -> std::result::Result<Option<String>, NotGranted> {
    loop {
        // Only the nodes ahead are kept while we wait, not the whole listing.
        let blockers = {
            let nodes = spec.queue.sorted(children);
            let Some(ours) = nodes.iter().position(|node| node.name == name) else { return Ok(None) };
            let blockers = spec.queue.blockers(&nodes, ours);
            if std::mem::take(&mut waiting.trace_entry) {
                trace::joined_queue(name, ours, blockers.len());
            }
            blockers
        };
        if blockers.is_empty() {
            return Ok(Some(granted(spec, name)));
        }
        if !waiting.may_wait {
            return Err(NotGranted::Busy);
        }
        if let Some(own_watch) = waiting.own_watch.as_deref_mut().filter(|watch| watch.is_none()) {
            // Sent now, with the watch on the node ahead, rather than after the hand-off.
            *own_watch = Some(OwnNodeWatch::send(zk, format!("{}/{name}", spec.path)));
        }
        let recheck = spec.queue.recheck_after().is_some_and(|kind| blockers.iter().any(|b| b.contains(kind)));
        let ahead_gone = wait_until_gone(zk, spec.path, blockers);
        let own_path = format!("{}/{name}", spec.path);
        match waiting.own_watch.as_deref_mut().and_then(Option::as_mut) {
            Some(own_watch) => tokio::select! {
                // Our node's deletion first: granting it would hand out a lock already lost.
                biased;
                () = own_node_gone(zk, own_watch, &own_path) => {
                    trace::deleted_while_waiting(name);
                    return Ok(None);
                }
                gone = ahead_gone => gone?,
            },
            None => ahead_gone.await?,
        }
        if !recheck {
            return Ok(Some(granted(spec, name)));
        }
        children = list_children(zk, spec.path).await?;
    }
}
