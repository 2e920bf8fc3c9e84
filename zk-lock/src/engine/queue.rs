//! Waiting in a lock's queue until our node holds the lock, with O(1) work per hand-off: only
//! the nearest node ahead is watched, and nothing else of the queue is kept. What a recipe asks
//! for ([`LockSpec`]); where a node stands in a listing of the queue, and how many are in line
//! ahead of it.

use std::sync::Arc;

use zookeeper_client::{Client as ZkClient, Error as ZkError, EventType, OneshotWatcher, Stat};

use super::local_handoff::{self, LocalNode};
use super::not_granted::NotGranted;
use super::own_watch::OwnNodeWatch;
use super::position::{Positions, QueuePosition};
use crate::error::{Error, Result};
use crate::layout::{Queue, SequenceNode};
use crate::trace;
use crate::zk::{list_children, Reconnects};

/// What a recipe asks of the engine.
pub(crate) struct LockSpec<'a> {
    /// The lock path, already validated.
    pub path: &'a str,
    /// The queue and the kind of node we make in it.
    pub queue: &'static Queue,
    /// Node data: who holds or waits.
    pub data: &'a [u8],
    /// Told the node's place in line each time the waiter learns of a change.
    pub positions: Option<&'a (dyn Fn(&QueuePosition) + Send + Sync)>,
}

/// Waits until the node `name` under `parent` is deleted: told by its owner when it is a node
/// of this process (`local`) on our session, otherwise (or when the owner cannot tell) by a
/// watch on the server.
async fn until_deleted(
    zk: &ZkClient,
    parent: &str,
    name: &str,
    local: Option<&LocalNode>,
    mut positions: Option<&mut Positions<'_>>,
) -> std::result::Result<(), NotGranted> {
    // Our own session ending meanwhile is seen around the whole attempt (`acquire_loop`).
    if let Some(local) = local.filter(|local| local.session() == zk.session_id()) {
        if local.deleted().await {
            return Ok(());
        }
    }
    let mut reconnects = Reconnects::new(zk);
    loop {
        // Boxed: its reply and path would otherwise take room in the waiting future.
        let watcher = match Box::pin(watch_ahead(zk, parent, name, positions.as_deref_mut())).await? {
            Ahead::Watched(watcher) => watcher,
            Ahead::Gone => return Ok(()),
            Ahead::Failed(error) => {
                Box::pin(reconnects.wait(error)).await?;
                continue;
            }
        };
        let event = watcher.changed().await;
        match event.event_type {
            EventType::NodeDeleted => return Ok(()),
            EventType::Session if event.session_state.is_terminated() => return Err(NotGranted::SessionGone),
            // Data changed, or a reconnect: watch again.
            _ => {}
        }
    }
}

/// What reading the node ahead, and setting a watch on it, found.
enum Ahead {
    Watched(OneshotWatcher),
    Gone,
    Failed(ZkError),
}

/// Reads the node `name` under `parent` and sets a watch on it; `positions`, if anyone listens,
/// learns who holds it. `get_data` rather than `exists`: a watch on a missing node would never
/// fire or go away.
async fn watch_ahead(
    zk: &ZkClient,
    parent: &str,
    name: &str,
    positions: Option<&mut Positions<'_>>,
) -> std::result::Result<Ahead, NotGranted> {
    match zk.get_and_watch_data(&format!("{parent}/{name}")).await {
        Ok((_, stat, _)) if never_released(&stat) => {
            Err(NotGranted::Error(not_ephemeral(parent, name, "ahead in the queue")))
        }
        Ok((data, stat, watcher)) => {
            if let Some(positions) = positions {
                positions.nearest_read(name, data, &stat);
            }
            Ok(Ahead::Watched(watcher))
        }
        Err(ZkError::NoNode) => Ok(Ahead::Gone),
        Err(error) => Ok(Ahead::Failed(error)),
    }
}

/// Whether a node named like a lock or lease node is not ephemeral: no session ends it, so
/// waiting for it would never end (Curator would wait forever). Lock and lease nodes are always
/// ephemeral; such a node was made by something else.
pub(super) fn never_released(stat: &Stat) -> bool {
    stat.ephemeral_owner == 0
}

/// What the lock at `path` reports instead of waiting for a node that is [`never_released`]: its
/// `child` (a name relative to `path`), found at `place` ("ahead in the queue").
pub(super) fn not_ephemeral(path: &str, child: &str, place: &str) -> Error {
    Error::invalid_path(
        path,
        format!(
            "the child `{child}` {place} is named like a lock node but is not ephemeral, so no holder will \
             ever release it and the lock could never be granted; the path holds other data: remove that \
             node or choose another lock path"
        ),
    )
}

/// For a recipe that joined the queue at `spec.path` itself, with more requests pipelined behind
/// its create (the semaphore): waits, as a [`LockAttempt`](super::LockAttempt) does, until the
/// node `name` holds the lock. `children` must be a listing made after the node was created.
/// `Ok(false)` if the node vanished; a dead session is `Err(Error::Zookeeper(SessionExpired))`.
pub(super) async fn wait_for_grant(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    name: &str,
    children: Vec<String>,
) -> Result<bool> {
    let waiting = Waiting { may_wait: true, trace_entry: false, watch_own: false };
    let own_path = format!("{}/{name}", spec.path).into();
    match wait_in_queue(zk, spec, name, own_path, children, waiting).await {
        Ok(granted) => Ok(granted.is_some()),
        Err(NotGranted::Error(error)) => Err(error),
        Err(NotGranted::Busy | NotGranted::NodeVanished | NotGranted::SessionGone) => {
            Err(Error::from_zk(ZkError::SessionExpired))
        }
    }
}

/// Resolves once our waiting node is gone, as its watch says and the server confirms after a
/// `sync`: a watch re-set on a server that has not caught up yet can report a deletion that did
/// not happen, and queueing again would then leave the node behind in the queue.
async fn own_node_gone(zk: &ZkClient, own_watch: &mut OwnNodeWatch, path: &str) {
    loop {
        own_watch.until_deleted(zk).await;
        // Boxed: rare, and inline it would swell every waiting acquisition.
        let confirmed = Box::pin(async {
            let synced = matches!(zk.sync(path).await, Ok(()) | Err(ZkError::NoNode));
            synced && matches!(zk.check_stat(path).await, Ok(None))
        });
        if confirmed.await {
            return;
        }
    }
}

/// What a node waiting in the queue does besides waiting.
pub(super) struct Waiting {
    /// `false`: fail with `Busy` rather than wait behind anyone.
    pub(super) may_wait: bool,
    /// Report the node's place in the queue when it is first seen.
    pub(super) trace_entry: bool,
    /// Watch our own node while waiting behind a node of this process (see [`own_watch`]);
    /// `false` for a node whose deletion by someone else does not matter before the grant.
    ///
    /// [`own_watch`]: super::own_watch
    pub(super) watch_own: bool,
}

/// What a listing of the queue says of our node.
enum Place {
    /// Nothing the recipe waits for is ahead of it.
    First,
    /// Waiting behind `nearest`, the closest of the nodes the recipe waits for.
    Behind {
        nearest: String,
        /// Whether the nodes ahead may change kind before our turn (a writer ahead of a reader
        /// may downgrade): when one of them goes, the queue is listed again in any case.
        recheck: bool,
    },
    /// Our node is not in the queue: it was deleted.
    Gone,
}

/// Where the node `name` stands in `children`, a listing of the queue; `positions`, if anyone
/// listens, learns which node heads the queue (the holder) and the node's place in line.
fn place(
    spec: &LockSpec<'_>,
    name: &str,
    children: Vec<String>,
    trace_entry: bool,
    positions: Option<&mut Positions<'_>>,
) -> Place {
    let nodes = spec.queue.sorted(children);
    let Some(ours) = nodes.iter().position(|node| node.name == name) else { return Place::Gone };
    let blockers: Vec<&SequenceNode> = spec.queue.blockers(&nodes, ours).collect();
    if trace_entry && trace::queue_places_observed() {
        // Numbered as its `QueuePosition` is; nothing is in line ahead of a node that waits for none.
        let in_line = if blockers.is_empty() { 0 } else { in_line_ahead(spec.queue, &nodes, ours) };
        trace::joined_queue(name, in_line, blockers.len());
    }
    let recheck = blockers.iter().any(|blocker| spec.queue.rechecks_after(blocker.kind));
    let Some(nearest) = blockers.last() else { return Place::First };
    // The first node of the queue holds, whatever its kind: nothing is ahead of it. It is not
    // always the first blocker: a reader behind a waiting writer waits for the writer, which
    // waits for the readers that hold.
    if let Some(positions) = positions {
        let head = &nodes[0];
        positions.headed_by(&head.name, head.name == nearest.name);
        positions.at(in_line_ahead(spec.queue, &nodes, ours) + 1);
    }
    Place::Behind { nearest: nearest.name.clone(), recheck }
}

/// How many of `nodes` (a queue, in order) must go before the node at `ours` holds, by the
/// blocker rule: the nodes it waits for, the nodes those wait for, and so on. A reader behind a
/// waiting writer is behind the readers holding the lock too; readers waiting for the same
/// writer are not behind each other. The first node of the queue is always among them.
fn in_line_ahead(queue: &Queue, nodes: &[SequenceNode], ours: usize) -> usize {
    // From our node back: a node is in line ahead if a node behind it that is (ours, or in
    // line ahead) waits for its kind. The kinds seen so far decide it: a handful.
    let mut waiting_kinds = vec![queue.ours];
    let mut ahead = 0;
    for node in nodes[..ours].iter().rev() {
        if waiting_kinds.iter().any(|kind| kind.waits_for(node.kind)) {
            ahead += 1;
            if !waiting_kinds.contains(&node.kind) {
                waiting_kinds.push(node.kind);
            }
        }
    }
    ahead
}

/// Waits until the node `name` (at `own_path`) holds the lock by the recipe's rule, watching
/// only the nearest node ahead and keeping nothing else of the queue. `children` is a listing
/// made after the node was created. Returns the granted node's path, or `None` if the node
/// vanished.
///
/// When the nearest node goes, the queue is listed again (as Curator does), which also shows
/// whether our own node is still there; unless that node was granted exclusively in this
/// process: everything ahead of it was gone then, and sequence nodes never come back, so the
/// hand-off costs no request. Behind a node of this process we watch our own node instead, sent
/// before the wait rather than on the hand-off's path.
pub(super) async fn wait_in_queue(
    zk: &ZkClient,
    spec: &LockSpec<'_>,
    name: &str,
    own_path: Arc<str>,
    mut children: Vec<String>,
    mut waiting: Waiting,
) -> std::result::Result<Option<Arc<str>>, NotGranted> {
    let mut own_watch: Option<OwnNodeWatch> = None;
    // Boxed, and only when someone listens: most waiters carry nothing for it.
    let mut positions =
        spec.positions.filter(|_| waiting.may_wait).map(|report| Box::new(Positions::new(spec.path, report)));
    loop {
        let trace_entry = std::mem::take(&mut waiting.trace_entry);
        let (nearest, recheck) = match place(spec, name, children, trace_entry, positions.as_deref_mut()) {
            Place::Gone => {
                trace::deleted_while_waiting(name);
                return Ok(None);
            }
            Place::First => return Ok(Some(own_path)),
            Place::Behind { nearest, recheck } => (nearest, recheck),
        };
        if !waiting.may_wait {
            return Err(NotGranted::Busy);
        }
        let local = local_handoff::find(spec.path, &nearest);
        if waiting.watch_own && own_watch.is_none() && local.is_some() {
            own_watch = Some(OwnNodeWatch::send(zk, own_path.clone()));
        }
        // The read that watches the holder's node tells who holds it, for nothing.
        let ahead_gone = until_deleted(zk, spec.path, &nearest, local.as_deref(), positions.as_deref_mut());
        match own_watch.as_mut() {
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
        // The watch must be set and unfired: one still in flight, being set again or failed
        // proves nothing about our node, and the queue is listed instead.
        let own_node_followed = match &own_watch {
            Some(own_watch) => own_watch.is_armed(),
            None => !waiting.watch_own,
        };
        let nothing_ahead = local.is_some_and(|local| local.was_granted_exclusively());
        if own_node_followed && !recheck && nothing_ahead {
            return Ok(Some(own_path));
        }
        children = match positions.as_deref_mut() {
            // Still behind the same holder: the listing reads its data too.
            // Boxed: a multi-read's future, inline, would swell every waiter.
            Some(positions) => Box::pin(positions.list_with_holder(zk)).await?,
            None => list_children(zk, spec.path).await?,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{ParticipantKind, MUTEX, RW_READ, RW_WRITE};

    /// `in_line_ahead` of the last node of a queue of `kinds`, our node last.
    fn ahead(queue: &Queue, kinds: &[ParticipantKind]) -> usize {
        let nodes: Vec<SequenceNode> = (0u64..)
            .zip(kinds)
            .map(|(sequence, &kind)| SequenceNode { name: format!("n{sequence}"), sequence, kind })
            .collect();
        in_line_ahead(queue, &nodes, nodes.len() - 1)
    }

    #[test]
    fn the_place_in_line_counts_what_the_nodes_ahead_wait_for() {
        use ParticipantKind::{Mutex, Read, Write};
        assert_eq!(ahead(&MUTEX, &[Mutex, Mutex, Mutex]), 2);
        // A reader behind a waiting writer is behind the reader holding the lock too.
        assert_eq!(ahead(&RW_READ, &[Read, Write, Read]), 2);
        assert_eq!(ahead(&RW_READ, &[Read, Read, Write, Read]), 3);
        // Readers waiting for one writer are not behind each other.
        assert_eq!(ahead(&RW_READ, &[Write, Read, Read]), 1);
        assert_eq!(ahead(&RW_READ, &[Read, Write, Read, Read]), 2);
        assert_eq!(ahead(&RW_READ, &[Read, Write, Read, Write, Read]), 4);
        // A writer is behind everyone ahead.
        assert_eq!(ahead(&RW_WRITE, &[Read, Read, Write]), 2);
        assert_eq!(ahead(&RW_WRITE, &[Write, Read, Read, Write]), 3);
    }
}
