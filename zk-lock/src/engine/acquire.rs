//! Acquire: join the queue in one round trip, then wait with O(1) work per hand-off.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use zookeeper_client::{Acls, Client as ZkClient, CreateMode, Error as ZkError, EventType, MultiReadResult};

use super::claim::Claim;
use super::failed::Failed;
use super::handoff;
use super::local_nodes::{self, Fate, LocalNode};
use super::node_name::{new_protected_prefix, sorted_nodes, QueueRules};
use super::parents::create_containers;
use super::pending::{find_protected, PendingNode};
use super::retry::{broke_connection, until_connected, Reconnects};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::node_watch::OwnWatch;
use crate::session::Session;
use crate::trace;

/// Above this many nodes ahead, checking them one by one in a multi-read costs more than
/// listing the parent.
const MAX_PROBED_AT_ONCE: usize = 256;

/// What a recipe asks of the engine.
pub(crate) struct LockSpec<'a> {
    /// The lock path, already validated.
    pub path: &'a str,
    /// The queue's rules.
    pub rules: &'static QueueRules,
    /// The name our node carries before its sequence: `lock-`, `__READ__`, ...
    pub lock_name: &'static str,
    /// Node data: who holds or waits.
    pub data: &'a [u8],
}

/// How long an acquisition may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// One attempt: `Busy` if anyone is ahead.
    Once,
    Until(Instant),
    Forever,
}

impl Wait {
    pub(crate) fn timeout(timeout: Option<Duration>) -> Self {
        match timeout {
            None => Self::Forever,
            Some(d) if d.is_zero() => Self::Once,
            Some(d) => Self::Until(Instant::now() + d),
        }
    }
}

/// A granted lock node.
pub(crate) struct Granted {
    pub session: Arc<Session>,
    pub node_path: String,
    pub token: i64,
    /// The session's loss count when the lock was granted.
    pub losses_seen: u64,
    /// The watch on our node set while we waited, if we did.
    pub own_watch: Option<OwnWatch>,
    /// How the waiters of this process behind our node learn of its deletion, if they can.
    pub local: Option<Arc<LocalNode>>,
    /// Our responsibility for the node until ZooKeeper confirms it is gone.
    pub claim: Option<Claim>,
}

/// Takes a place in the queue at `spec.path` and waits until the recipe's rule grants it.
///
/// Cancel safe: dropping the future removes our node in the background.
pub(crate) async fn acquire(client: &Client, spec: &LockSpec<'_>, wait: Wait) -> Result<Granted> {
    let started = Instant::now();
    loop {
        let session = session_within(client, wait, spec.path, started).await?;
        let losses_seen = session.health().losses;
        let mut pending = PendingNode::in_queue(session.clone(), spec.path, new_protected_prefix());
        let mut own_watch = None;
        let attempt = attempt(&session.zk, spec, client.node_acls(), &mut pending, &mut own_watch, wait);
        let failed = match until_deadline(wait, while_usable(&session, attempt)).await {
            Some(Ok((node_path, token))) => {
                let (claim, local) = pending.grant();
                return Ok(Granted { session, node_path, token, losses_seen, own_watch, local, claim });
            }
            Some(Err(failed)) => Some(failed),
            None => None,
        };
        if let Some(Failed::SessionGone) = failed {
            // The node goes with the session (ended, or retired and closed by its retirement);
            // queue again on a new one if we can open it.
            pending.let_go();
            renewal(client, &session).await?;
            continue;
        }
        session.unless_terminated(pending.remove()).await;
        if let Some(error) = give_up(failed, spec.path, started) {
            return Err(error);
        }
    }
}

/// The error an acquisition returns after an attempt that ended without the lock (`None`: its
/// wait ran out); `None` if it queues again. Its nodes are removed first either way, a vanished
/// node too: deleting it again costs nothing if it is gone, and leaves nothing behind if not.
pub(super) fn give_up(failed: Option<Failed>, path: &str, started: Instant) -> Option<Error> {
    match failed {
        None => Some(Error::Timeout { path: path.to_owned(), waited: started.elapsed() }),
        Some(Failed::Busy) => Some(Error::Busy { path: path.to_owned() }),
        Some(Failed::Error(error)) => Some(error.at_path(path)),
        Some(Failed::NodeVanished | Failed::SessionGone) => None,
    }
}

/// The outcome of `attempt`, or `None` if `wait`'s deadline passed first.
pub(super) async fn until_deadline<T>(wait: Wait, attempt: impl Future<Output = T>) -> Option<T> {
    match wait {
        Wait::Until(deadline) => tokio::time::timeout_at(deadline, attempt).await.ok(),
        Wait::Once | Wait::Forever => Some(attempt.await),
    }
}

/// `attempt`, given up as `SessionGone` once `session` must not be used any more (it ended, or
/// its locks were declared lost and it is being retired).
pub(super) async fn while_usable<T>(
    session: &Session,
    attempt: impl Future<Output = std::result::Result<T, Failed>>,
) -> std::result::Result<T, Failed> {
    session.unless_terminated(attempt).await.unwrap_or(Err(Failed::SessionGone))
}

/// The longest pause between two attempts to open a session for a waiting acquisition.
const MAX_RENEWAL_PAUSE: Duration = Duration::from_secs(2);

/// After an attempt's session went: `Ok` if the client can open another one.
pub(super) async fn renewal(client: &Client, old: &Session) -> Result<()> {
    if !client.is_renewable() {
        return Err(ZkError::SessionExpired.into());
    }
    if old.is_usable() {
        // An error said the session ended: let its state catch up, so the client renews it.
        let _ = until_connected(&old.zk).await;
    }
    Ok(())
}

/// The session of the next attempt: the client's, or a new one if it ended or was retired. The
/// servers may be out of reach for a while (the partition that made us give the old session
/// up), so opening one is tried again for as long as `wait` allows.
pub(super) async fn session_within(client: &Client, wait: Wait, path: &str, started: Instant) -> Result<Arc<Session>> {
    let timeout = || Error::Timeout { path: path.to_owned(), waited: started.elapsed() };
    let mut pause = Duration::from_millis(50);
    loop {
        let opened = until_deadline(wait, client.session()).await.ok_or_else(timeout)?;
        match opened {
            Err(Error::Connect { .. }) if !matches!(wait, Wait::Once) => {
                let retry_at = match wait {
                    Wait::Until(deadline) if Instant::now() >= deadline => return Err(timeout()),
                    Wait::Until(deadline) => deadline.min(Instant::now() + pause),
                    Wait::Once | Wait::Forever => Instant::now() + pause,
                };
                tokio::time::sleep_until(retry_at).await;
                pause = (pause * 2).min(MAX_RENEWAL_PAUSE);
            }
            opened => return opened,
        }
    }
}

/// One attempt on one session. Returns the granted node's path and fencing token; if it had to
/// wait, `own_watch` holds the watch on our node it set meanwhile.
async fn attempt(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    acls: Acls<'_>,
    pending: &mut PendingNode,
    own_watch: &mut Option<OwnWatch>,
    wait: Wait,
) -> std::result::Result<(String, i64), Failed> {
    let (name, token, children) = join_queue(zk, spec, acls, pending).await?;
    let waiting = Waiting { wait, trace_entry: true, own_watch: Some(own_watch) };
    let node_path = wait_in_queue(zk, spec, &name, children, waiting).await?.ok_or(Failed::NodeVanished)?;
    Ok((node_path, token))
}

/// The path of our node `name`, now granted; an exclusive grant is remembered for the waiters
/// of this process behind it.
fn granted(spec: &LockSpec<'_>, name: &str) -> String {
    let node_path = format!("{}/{name}", spec.path);
    if spec.rules.exclusive {
        handoff::granted_exclusively(&node_path);
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
    pending: &mut PendingNode,
) -> std::result::Result<(String, i64, Vec<String>), Failed> {
    let prefix_path = format!("{}/{}{}", spec.path, pending.prefix(), spec.lock_name);
    let options = CreateMode::EphemeralSequential.with_acls(acls);
    let mut reconnects = Reconnects::new(zk);
    loop {
        pending.sent();
        let create = zk.create(&prefix_path, spec.data, &options);
        let list = zk.list_children(spec.path);
        let (created, listed) = tokio::join!(create, list);
        let (name, token) = match created {
            Ok((stat, sequence)) => {
                let name = format!("{}{}{sequence}", pending.prefix(), spec.lock_name);
                pending.created(&name);
                (name, stat.czxid)
            }
            Err(ZkError::NoNode) => {
                pending.not_created();
                create_containers(zk, spec.path, acls).await?;
                continue;
            }
            // The create may have been applied: look for our node before creating another.
            Err(error) if broke_connection(&error) => {
                reconnects.wait(error).await?;
                match find_protected(zk, spec.path, pending.prefix()).await? {
                    Some((name, token)) => {
                        pending.created(&name);
                        (name, token)
                    }
                    None => continue,
                }
            }
            Err(error) => return Err(error.into()),
        };
        let children = match listed {
            Ok(children) => children,
            Err(_) => list_children(zk, spec.path).await?,
        };
        return Ok((name, token, children));
    }
}

pub(super) async fn list_children(zk: &ZkClient, path: &str) -> std::result::Result<Vec<String>, ZkError> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        match zk.list_children(path).await {
            Err(error) => reconnects.wait(error).await?,
            ok => return ok,
        }
    }
}

/// Waits until every node in `blockers` (ascending queue order) is gone, watching only the
/// nearest one. New nodes always queue behind us, so the set only shrinks: no re-listing.
async fn wait_until_gone(zk: &ZkClient, parent: &str, mut blockers: Vec<String>) -> std::result::Result<(), Failed> {
    while let Some(nearest) = blockers.last() {
        let nearest_path = format!("{parent}/{nearest}");
        until_deleted(zk, parent, nearest, &nearest_path).await?;
        blockers.pop();
        if handoff::was_granted_exclusively(&nearest_path) {
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
async fn until_deleted(zk: &ZkClient, parent: &str, name: &str, path: &str) -> std::result::Result<(), Failed> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        if let Some(fate) = local_nodes::follow(parent, name, zk.session_id()) {
            if deleted_locally(fate).await {
                return Ok(());
            }
        }
        // `get_data` rather than `exists`: a watch on a missing node would never fire or go away.
        match zk.get_and_watch_data(path).await {
            Ok((_, stat, _)) if stat.ephemeral_owner == 0 => return Err(Failed::Error(not_a_lock_node(parent, name))),
            Ok((_, _, watcher)) => {
                let event = watcher.changed().await;
                match event.event_type {
                    EventType::NodeDeleted => return Ok(()),
                    EventType::Session if event.session_state.is_terminated() => return Err(Failed::SessionGone),
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
async fn deleted_locally(mut fate: watch::Receiver<Fate>) -> bool {
    matches!(fate.wait_for(|fate| *fate != Fate::Present).await.map(|fate| *fate), Ok(Fate::Deleted))
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
/// its create (the semaphore): waits, as [`acquire`] does, until the node `name` holds the lock.
/// `children` must be a listing made after the node was created. `Ok(false)` if the node
/// vanished; a dead session is `Err(Error::Zookeeper(SessionExpired))`.
pub(super) async fn wait_for_grant(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    name: &str,
    children: Vec<String>,
) -> Result<bool> {
    let waiting = Waiting { wait: Wait::Forever, trace_entry: false, own_watch: None };
    match wait_in_queue(zk, spec, name, children, waiting).await {
        Ok(granted) => Ok(granted.is_some()),
        Err(Failed::Error(error)) => Err(error),
        Err(Failed::Busy | Failed::NodeVanished | Failed::SessionGone) => Err(ZkError::SessionExpired.into()),
    }
}

/// Resolves once our waiting node is gone, as its watch says and the server confirms after a
/// `sync`: a watch re-set on a server that has not caught up yet can report a deletion that did
/// not happen, and queueing again would then leave the node behind in the queue.
async fn own_node_gone(zk: &ZkClient, own_watch: &mut OwnWatch, path: &str) {
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
    wait: Wait,
    /// Report the node's place in the queue when it is first seen.
    trace_entry: bool,
    /// Where to keep the watch on our own node, sent once we have to wait; `None`: not wanted.
    own_watch: Option<&'a mut Option<OwnWatch>>,
}

/// Waits until the node `name` holds the lock by the recipe's rule. `children` is a listing made
/// after the node was created. Returns the granted node's path, or `None` if the node vanished.
async fn wait_in_queue(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    name: &str,
    mut children: Vec<String>,
    mut waiting: Waiting<'_>,
) -> std::result::Result<Option<String>, Failed> {
    loop {
        // Only the nodes ahead are kept while we wait, not the whole listing.
        let blockers = {
            let nodes = sorted_nodes(children, spec.rules.names);
            let Some(ours) = nodes.iter().position(|node| node.name == name) else { return Ok(None) };
            let blockers = (spec.rules.blockers)(&nodes, ours);
            if std::mem::take(&mut waiting.trace_entry) {
                trace::joined_queue(name, ours, blockers.len());
            }
            blockers
        };
        if blockers.is_empty() {
            return Ok(Some(granted(spec, name)));
        }
        if let Wait::Once = waiting.wait {
            return Err(Failed::Busy);
        }
        if let Some(own_watch) = waiting.own_watch.as_deref_mut().filter(|watch| watch.is_none()) {
            // Sent now, with the watch on the node ahead, rather than after the hand-off.
            *own_watch = Some(OwnWatch::send(zk, format!("{}/{name}", spec.path)));
        }
        let recheck = spec.rules.recheck_after.is_some_and(|kind| blockers.iter().any(|b| b.contains(kind)));
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
