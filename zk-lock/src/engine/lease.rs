//! Semaphore leases, Curator's `InterProcessSemaphoreV2` algorithm and layout: take the
//! semaphore's internal mutex (`P/locks/_c_<uuid>-lock-<seq>`), create lease nodes
//! (`P/leases/_c_<uuid>-lease-<seq>`), wait until every child of `P/leases` fits the limit, let
//! the mutex go.
//!
//! Only the holder of the internal mutex ever waits with a lease node in `P/leases`: that is what
//! keeps waiters from filling the leases with nodes that all wait for each other. Counting is
//! safe without the mutex (a lease node is always created before the listing that counts it, so
//! of two contenders the later one sees both), which allows one shortcut:
//!
//! - Uncontended, everything is one round trip. The lock node and the lease nodes are created
//!   and both parents listed (one multi-read) back to back; the server answers in order, so the
//!   listing of `P/locks` tells whether we held the mutex when our leases were created and
//!   counted. Curator needs five round trips (create, list, create, list, delete).
//! - If someone held the mutex, the leases made ahead of time are deleted at once and this
//!   acquisition waits for the mutex in the engine's queue, like Curator's. The next acquisition
//!   through the same semaphore then creates no lease ahead of time until one finds the mutex
//!   free again, so a busy semaphore does not pay for the shortcut over and over.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;
use zookeeper_client::{
    Acls, Client as ZkClient, CreateMode, Error as ZkError, EventType, MultiReadResult, OneshotWatcher, WatchedEvent,
};

use super::acquire::{give_up, renewal, session_within, until_deadline, wait_for_grant, while_usable, LockSpec, Wait};
use super::claim::Claim;
use super::failed::Failed;
use super::node_name::{new_protected_prefix, sorted_nodes, MUTEX};
use super::parents::create_containers;
use super::pending::{find_protected, PendingNode};
use super::retry::Reconnects;
use crate::background;
use crate::client::Client;
use crate::error::Result;
use crate::session::Session;
use crate::shared_count::VersionedCount;
use crate::trace;

/// Curator's internal mutex of a semaphore: `P/locks`, nodes named `lock-`.
const LOCK_PARENT: &str = "locks";
const LOCK_NAME: &str = "lock-";
/// Curator's lease nodes: `P/leases`, nodes named `lease-`.
const LEASE_PARENT: &str = "leases";
const LEASE_NAME: &str = "lease-";

/// What a semaphore asks for.
pub(crate) struct LeaseSpec<'a> {
    /// The semaphore path `P`, already validated.
    pub path: &'a str,
    /// How many leases, at least one.
    pub count: usize,
    /// Data of the lease nodes (and of the internal lock node).
    pub data: &'a [u8],
    /// Whether the last acquisition through this semaphore found it free: then lease nodes are
    /// created together with the lock node, before we know that we hold the internal mutex.
    pub uncontended: &'a AtomicBool,
}

/// How many leases may exist at once.
pub(crate) enum LeaseLimit {
    Fixed(u32),
    /// Curator's `SharedCountReader`: a change of the count wakes the waiter.
    Shared(watch::Receiver<VersionedCount>),
}

impl LeaseLimit {
    /// The limit now; a negative shared count allows nothing.
    fn current(&mut self) -> usize {
        match self {
            Self::Fixed(max) => *max as usize,
            Self::Shared(count) => usize::try_from(count.borrow_and_update().value).unwrap_or(0),
        }
    }

    /// Resolves when the limit may have changed; never, for a fixed one.
    async fn changed(&mut self) {
        if let Self::Shared(count) = self {
            if count.changed().await.is_ok() {
                return;
            }
        }
        std::future::pending().await
    }
}

/// Granted leases: node paths and creation zxids (fencing tokens).
pub(crate) struct GrantedLeases {
    pub session: Arc<Session>,
    /// The session's loss count when the leases were granted.
    pub losses_seen: u64,
    pub leases: Vec<GrantedLease>,
}

/// One granted lease node.
pub(crate) struct GrantedLease {
    pub node_path: String,
    pub token: i64,
    /// Our responsibility for the node until ZooKeeper confirms it is gone.
    pub claim: Option<Claim>,
}

/// A node this acquisition creates (the lock node or a lease node), removed on every way out
/// until it is granted.
struct OwnNode {
    pending: PendingNode,
    parent: String,
    kind: &'static str,
    /// Name and creation zxid, once the create is known to have been applied.
    made: Option<(String, i64)>,
}

impl OwnNode {
    // Not followed by the waiters behind it (`PendingNode::in_queue`): nothing watches the
    // internal mutex's node while its owner waits for leases, so a deletion by someone else
    // would go unnoticed by them.
    fn new(session: &Arc<Session>, parent: &str, kind: &'static str) -> Self {
        let pending = PendingNode::new(session.clone(), parent, new_protected_prefix());
        Self { pending, parent: parent.to_owned(), kind, made: None }
    }

    fn name(&self) -> Option<&str> {
        self.made.as_ref().map(|(name, _)| name.as_str())
    }

    /// Its full path, token and claim: it is no longer ours to remove.
    fn grant(&mut self) -> Option<GrantedLease> {
        let (claim, _) = self.pending.grant();
        let (name, token) = self.made.take()?;
        Some(GrantedLease { node_path: format!("{}/{name}", self.parent), token, claim })
    }
}

/// Takes `spec.count` leases of the semaphore at `spec.path`, waiting as `wait` allows.
///
/// Cancel safe: dropping the future removes every node it made (in the background).
pub(crate) async fn acquire_leases(
    client: &Client,
    spec: &LeaseSpec<'_>,
    limit: &mut LeaseLimit,
    wait: Wait,
) -> Result<GrantedLeases> {
    let started = Instant::now();
    let parents =
        Parents { locks: format!("{}/{LOCK_PARENT}", spec.path), leases: format!("{}/{LEASE_PARENT}", spec.path) };
    loop {
        let session = session_within(client, wait, spec.path, started).await?;
        let losses_seen = session.health().losses;
        let mut lock = OwnNode::new(&session, &parents.locks, LOCK_NAME);
        let mut leases = Vec::with_capacity(spec.count);
        let attempt = attempt(&session, spec, client.node_acls(), &parents, limit, wait, &mut lock, &mut leases);
        let failed = match until_deadline(wait, while_usable(&session, attempt)).await {
            Some(Ok(())) => {
                // Let the internal mutex go: the delete is sent now, its reply awaited in the
                // background (it is retried there after a connection loss).
                lock.pending.remove_in_background();
                let leases = leases.iter_mut().filter_map(OwnNode::grant).collect();
                return Ok(GrantedLeases { session, losses_seen, leases });
            }
            Some(Err(failed)) => Some(failed),
            None => None,
        };
        if let Some(Failed::SessionGone) = failed {
            // Every node goes with the session (ended, or retired and closed by its retirement);
            // start again on a new one if we can open it.
            lock.pending.let_go();
            leases.iter_mut().for_each(|lease| lease.pending.let_go());
            renewal(client, &session).await?;
            continue;
        }
        session.unless_terminated(remove_all(&mut lock, &mut leases)).await;
        if let Some(error) = give_up(failed, spec.path, started) {
            return Err(error);
        }
    }
}

struct Parents {
    locks: String,
    leases: String,
}

/// One attempt on one session: on success, `lock` is held and `leases` are granted. Every node
/// (and missing parent) gets the client's `acls`.
#[allow(clippy::too_many_arguments)]
async fn attempt(
    session: &Arc<Session>,
    spec: &LeaseSpec<'_>,
    acls: Acls<'_>,
    parents: &Parents,
    limit: &mut LeaseLimit,
    wait: Wait,
    lock: &mut OwnNode,
    leases: &mut Vec<OwnNode>,
) -> std::result::Result<(), Failed> {
    let zk = &session.zk;
    let new_lease = || OwnNode::new(session, &parents.leases, LEASE_NAME);

    // Join the internal mutex's queue; when the semaphore was free last time, create the leases
    // and list both parents in the same round trip.
    let ahead_of_time = spec.uncontended.load(Ordering::Relaxed);
    let (lock_children, mut lease_children) = if ahead_of_time {
        leases.extend((0..spec.count).map(|_| new_lease()));
        let mut nodes: Vec<&mut OwnNode> = std::iter::once(&mut *lock).chain(leases.iter_mut()).collect();
        let mut listed = create_then_list(zk, spec.data, acls, &mut nodes, &[&parents.locks, &parents.leases]).await?;
        let lease_children = listed.pop();
        (listed.pop().unwrap_or_default(), lease_children)
    } else {
        let listed = create_then_list(zk, spec.data, acls, &mut [&mut *lock], &[&parents.locks]).await?;
        (listed.into_iter().next().unwrap_or_default(), None)
    };
    let lock_name = lock.name().unwrap_or_default().to_owned();
    let queue = sorted_nodes(lock_children.iter().cloned(), MUTEX.names);
    let Some(place) = queue.iter().position(|node| node.name == lock_name) else {
        return Err(Failed::NodeVanished);
    };
    // The leases are counted once the internal mutex is ours: its queue is the semaphore's.
    trace::joined_queue(&lock_name, place, place);
    let mutex_was_free = place == 0;
    if !mutex_was_free {
        spec.uncontended.store(false, Ordering::Relaxed);
        // Leases made ahead of time must not wait while we do not hold the mutex: remove them
        // now (in the background, the deletes are sent at once).
        leases.clear();
        lease_children = None;
        if let Wait::Once = wait {
            return Err(Failed::Busy);
        }
        let lock_spec = LockSpec { path: &parents.locks, rules: &MUTEX, lock_name: LOCK_NAME, data: spec.data };
        if !wait_for_grant(zk, &lock_spec, &lock_name, lock_children).await? {
            return Err(Failed::NodeVanished);
        }
    }

    // We hold the internal mutex. `children`: a listing of `P/leases` made after every one of
    // our lease nodes was created.
    let mut children = match lease_children {
        Some(children) => children,
        None => {
            leases.extend((0..spec.count).map(|_| new_lease()));
            let mut nodes: Vec<&mut OwnNode> = leases.iter_mut().collect();
            create_then_list(zk, spec.data, acls, &mut nodes, &[&parents.leases]).await?.pop().unwrap_or_default()
        }
    };
    let mut first_count = true;
    let mut watch: ChildWatch = None;
    loop {
        // A lease node that vanished (deleted by someone, or lost with a connection) is made
        // again, and counted once: only nodes in the listing count (CURATOR-315/335/462).
        let present = |lease: &OwnNode| lease.name().is_some_and(|name| children.iter().any(|c| c == name));
        if !leases.iter().all(present) {
            watch = None;
            for lease in leases.iter_mut().filter(|lease| !present(lease)) {
                // Not in a listing made after its create: gone (its claim checks again).
                *lease = new_lease();
            }
            let mut nodes: Vec<&mut OwnNode> = leases.iter_mut().collect();
            children =
                create_then_list(zk, spec.data, acls, &mut nodes, &[&parents.leases]).await?.pop().unwrap_or_default();
            continue;
        }
        // Curator's rule: every child of `P/leases` counts, ours included.
        let fits = children.len() <= limit.current();
        if first_count {
            first_count = false;
            spec.uncontended.store(mutex_was_free && fits, Ordering::Relaxed);
        }
        if fits {
            if let Some(watch) = watch {
                // Dropping a pending watch costs a request to remove it; it fires on the next
                // change of `P/leases` (at the latest our own release) and ends quietly.
                background::spawn(watch);
            }
            return Ok(());
        }
        if let Wait::Once = wait {
            return Err(Failed::Busy);
        }
        match watch.take() {
            None => (children, watch) = list_and_watch(zk, &parents.leases).await?,
            Some(mut changed) => tokio::select! {
                event = &mut changed => {
                    if event.event_type == EventType::Session && event.session_state.is_terminated() {
                        return Err(Failed::SessionGone);
                    }
                    (children, watch) = list_and_watch(zk, &parents.leases).await?;
                }
                () = limit.changed() => watch = Some(changed),
            },
        }
    }
}

type ChildWatch = Option<Pin<Box<dyn Future<Output = WatchedEvent> + Send>>>;

/// Lists `parent` with a child watch. A missing parent lists as empty, without a watch.
async fn list_and_watch(zk: &ZkClient, parent: &str) -> std::result::Result<(Vec<String>, ChildWatch), Failed> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        match zk.list_and_watch_children(parent).await {
            Ok((children, watcher)) => return Ok((children, Some(Box::pin(OneshotWatcher::changed(watcher))))),
            Err(ZkError::NoNode) => return Ok((Vec::new(), None)),
            Err(error) => reconnects.wait(error).await?,
        }
    }
}

/// Creates every node of `nodes` not made yet, then lists `parents` in one multi-read, all sent
/// before any reply is awaited: the server answers in order, so the listings include the nodes.
/// Missing parents are created (as containers) and the whole batch is sent again.
async fn create_then_list(
    zk: &ZkClient,
    data: &[u8],
    acls: Acls<'_>,
    nodes: &mut [&mut OwnNode],
    parents: &[&str],
) -> std::result::Result<Vec<Vec<String>>, Failed> {
    let options = CreateMode::EphemeralSequential.with_acls(acls);
    let mut reconnects = Reconnects::new(zk);
    loop {
        let paths: Vec<Option<String>> = nodes
            .iter()
            .map(|node| node.made.is_none().then(|| format!("{}/{}{}", node.parent, node.pending.prefix(), node.kind)))
            .collect();
        let mut creates = Vec::with_capacity(nodes.len());
        for (node, path) in nodes.iter_mut().zip(&paths) {
            if path.is_some() {
                node.pending.sent();
            }
            creates.push(path.as_deref().map(|path| zk.create(path, data, &options)));
        }
        let mut reader = zk.new_multi_reader();
        for parent in parents {
            reader.add_get_children(parent)?;
        }
        let listing = reader.commit();

        let mut missing_parents: Vec<String> = Vec::new();
        let mut again = false;
        for (node, create) in nodes.iter_mut().zip(creates) {
            let Some(create) = create else { continue };
            match create.await {
                Ok((stat, sequence)) => {
                    let name = format!("{}{}{sequence}", node.pending.prefix(), node.kind);
                    node.pending.created(&name);
                    node.made = Some((name, stat.czxid));
                }
                Err(ZkError::NoNode) => {
                    node.pending.not_created();
                    if !missing_parents.contains(&node.parent) {
                        missing_parents.push(node.parent.clone());
                    }
                    again = true;
                }
                // The create may have been applied: look for our node before creating another.
                Err(error) => {
                    reconnects.wait(error).await?;
                    match find_protected(zk, &node.parent, node.pending.prefix()).await? {
                        Some((name, token)) => {
                            node.pending.created(&name);
                            node.made = Some((name, token));
                        }
                        None => {
                            node.pending.not_created();
                            again = true;
                        }
                    }
                }
            }
        }
        let listed = listing.await;
        for parent in &missing_parents {
            create_containers(zk, parent, acls).await?;
        }
        if again {
            continue;
        }
        match listed {
            Ok(results) => {
                return results
                    .into_iter()
                    .map(|result| match result {
                        MultiReadResult::Children { children } => Ok(children),
                        MultiReadResult::Error { err: ZkError::NoNode } => Ok(Vec::new()),
                        MultiReadResult::Error { err } => Err(err.into()),
                        _ => Ok(Vec::new()),
                    })
                    .collect();
            }
            // Every node is made: only the listing is sent again.
            Err(error) => reconnects.wait(error).await?,
        }
    }
}

/// Removes every node an acquisition made and still owns, all deletes sent at once.
async fn remove_all(lock: &mut OwnNode, leases: &mut [OwnNode]) {
    let removals = std::iter::once(lock).chain(leases).map(|node| node.pending.remove());
    futures::future::join_all(removals).await;
}
