//! [`participants`]: who holds a lock and who waits for it, read from the lock's nodes.
//!
//! Understands Curator's layouts (and so ours) and kazoo's, so an operator sees a mixed fleet
//! whole. Two round trips for any ordinary queue: a multi-read lists the places nodes live, then
//! the nodes' data is read in replies of bounded size (`bounded_read`); a long queue costs a round
//! trip more, for its nodes' stats.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client::{Client as ZkClient, Stat};

use super::bounded_read::{list_children, read_nodes, NodeRead, MAX_NODE_DATA};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::holder::HolderDescription;
use crate::layout::{classify, ParticipantKind, PLACES};
use crate::path::validate_lock_path;
use crate::registry::default_client;

/// The role of a node of `kind` at `sequence`, given the earliest sequence of each kind under
/// the same parent: it waits if a kind it waits for ([`ParticipantKind::waits_for`], the rule
/// the engine grants by) has a node strictly earlier. Strictly: a read node made by a downgrade
/// shares its writer's sequence and holds alongside it.
fn role(kind: ParticipantKind, sequence: u64, earliest: &HashMap<ParticipantKind, u64>) -> Role {
    match kind {
        // The lease count is not in the nodes: every lease present is taken as granted.
        ParticipantKind::Lease => return Role::Holder,
        // Even the first request only holds the internal mutex while it waits for a lease.
        ParticipantKind::LeaseRequest => return Role::Waiter,
        ParticipantKind::Unknown => return Role::Unknown,
        _ => {}
    }
    let blocked = earliest.iter().any(|(&other, &first)| kind.waits_for(other) && first < sequence);
    if blocked {
        Role::Waiter
    } else {
        Role::Holder
    }
}

/// Whether a participant holds the lock or waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// Holds the lock, or a share of it: one reader among readers, one semaphore lease.
    Holder,
    /// Queued behind a holder.
    Waiter,
    /// A node of a recipe whose rules are unknown ([`ParticipantKind::Unknown`]).
    Unknown,
}

impl Role {
    /// `holder`, `waiter` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Holder => "holder",
            Self::Waiter => "waiter",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One node of a lock: a holder or a waiter, as [`participants`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Participant {
    /// The node's full path (inside the client's namespace), for [`revoke_node`](crate::revoke_node).
    pub node_path: String,
    /// The node's name, the last segment of `node_path`.
    pub node_name: String,
    /// The kind of node, by its name and place.
    pub kind: ParticipantKind,
    /// The server's sequence number, which orders the queue.
    pub sequence: u64,
    /// Whether it holds or waits.
    pub role: Role,
    /// The ZooKeeper session that owns the node (its `ephemeralOwner`).
    pub session_id: i64,
    /// The node's creation zxid: for a holder, the fencing token its guard reports.
    pub fencing_token: i64,
    /// The node's data, as written by its owner; empty if it was too large to read
    /// ([`data_too_large`](Self::data_too_large)).
    pub data: Vec<u8>,
    /// The size of the node's data in bytes, as the server counts it: `data.len()`, unless the
    /// data was too large to read.
    pub data_length: usize,
    /// Whether the node's data is larger than [`MAX_DATA`](Self::MAX_DATA), so was not read (or
    /// not kept): `data` is then empty and `holder` is `None`. zk-lock's own nodes, Curator's
    /// and kazoo's carry a few dozen bytes; anyone who may create nodes under the lock path may
    /// write up to the server's packet limit (`jute.maxbuffer`, 1 MiB by default) into each.
    pub data_too_large: bool,
    /// `data` parsed, if it is zk-lock's holder description.
    pub holder: Option<HolderDescription>,
    /// When the node was created, by the server's clock.
    pub created: SystemTime,
    /// How long the node had existed when it was read, by the local clock; zero if the server's
    /// clock is ahead.
    pub age: Duration,
}

impl Participant {
    /// The most data of one node that [`participants`] reads, in bytes (64 KiB): a node with more
    /// is reported with [`data_too_large`](Self::data_too_large) set, and its data is not read.
    pub const MAX_DATA: usize = MAX_NODE_DATA;
}

/// The holders and waiters of the lock at `path`, on the default client. See
/// [`participants_with`].
///
/// # Errors
///
/// As [`participants_with`], and [`Error::Connect`](crate::Error::Connect) if the default client
/// has to be connected and that fails.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn participants(path: &str) -> Result<Vec<Participant>> {
    participants_with(&default_client().await?, path).await
}

/// The holders and waiters of the lock at `path`, in queue order, with their node data, like
/// Curator's `getParticipantNodes` but with roles and for every recipe at once.
///
/// Nodes are recognised by name: Curator's mutex, read/write lock and semaphore (and so zk-lock's),
/// and kazoo's `Lock`, `WriteLock` and `ReadLock`. Each recipe's rule decides its nodes' roles,
/// among the nodes of that recipe only: a mutex's first node holds; a writer holds when it is
/// first, a reader when no writer is ahead of it. Recipes that ignore each other's nodes (a
/// Curator mutex and a kazoo lock on one path) can show a holder each. The nodes at `path` come
/// first, in sequence order, then semaphore leases, then requests queued for a lease.
///
/// A semaphore's lease count is not stored in its nodes, but only the first request in the
/// semaphore's internal mutex (`P/locks`) ever waits with a lease node: Curator creates the lease
/// while holding that mutex, waits until the count allows it, then lets the mutex go. So a lease
/// of that request's session and holder, created after the request, is reported as a waiter;
/// every other lease as a holder. The holder is told apart by the node data (zk-lock's names the
/// task): when several holders of one session write the same data (`with_data`, or code outside
/// any task), a lease granted to another of them after the request queued is shown as waiting too.
///
/// Every reply the server is asked for is bounded: a queue of at most eight nodes has each node's
/// data read with a read of its own, whose reply is that node's (two round trips in all, as for
/// one node); a longer queue has its nodes' stats read first (a round trip more), then their data
/// in multi-reads that the stats put under 256 KiB each. A node with more than
/// [`Participant::MAX_DATA`] bytes of data (anyone who may create nodes under `path` can write up
/// to 1 MiB into each) is listed with [`data_too_large`](Participant::data_too_large) set and no
/// data.
///
/// A missing `path` has no participants: the result is empty, not an error. Nodes that vanish
/// between the listing and the read of their data are left out. Other ephemeral nodes ending in a
/// sequence number (of ten digits, as ZooKeeper writes them: a node whose sequence has another
/// length is no lock node of any kind) are listed as [`ParticipantKind::Unknown`], since they may block recipes that
/// count every child (Curator's do); non-ephemeral unknown nodes are not participants.
///
/// ```no_run
/// # async fn demo(client: &zk_lock::Client) -> zk_lock::Result<()> {
/// for p in zk_lock::participants_with(client, "/locks/orders").await? {
///     println!("{} {} {:?} for {:?}", p.role, p.kind, p.holder, p.age);
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// - [`Error::InvalidPath`](crate::Error::InvalidPath) if `path` is not a valid lock path.
/// - [`Error::NoAuth`](crate::Error::NoAuth) naming `path` if the ACL of the lock's nodes does
///   not let this client list or read them.
/// - [`Error::Zookeeper`](crate::Error::Zookeeper) if ZooKeeper refuses a read for another
///   reason (session expired).
/// - [`Error::ClientClosed`](crate::Error::ClientClosed) once the client is closed
///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn participants_with(client: &Client, path: &str) -> Result<Vec<Participant>> {
    validate_lock_path(path)?;
    let session = client.session(path).await?;
    let mut found = read_participants(&session.zk, path).await.map_err(|e| e.at_path(path))?;
    mark_waiting_lease(&mut found);
    Ok(found)
}

/// Marks the lease that the semaphore's first queued request made and is still waiting on (see
/// [`participants_with`]). Matching the holder description too keeps the granted lease of
/// another task of the same session from being taken for it; data too large to read matches
/// data too large of the same length.
fn mark_waiting_lease(participants: &mut [Participant]) {
    let Some(request) = participants.iter().find(|p| p.kind == ParticipantKind::LeaseRequest) else { return };
    let (session, after) = (request.session_id, request.fencing_token);
    let (data, length, too_large) = (request.data.clone(), request.data_length, request.data_too_large);
    for lease in participants.iter_mut() {
        if lease.kind == ParticipantKind::Lease
            && lease.session_id == session
            && lease.fencing_token > after
            && (lease.data_length, lease.data_too_large) == (length, too_large)
            && lease.data == data
        {
            lease.role = Role::Waiter;
        }
    }
}

/// A node found by a listing, before its data is read.
struct Listed {
    place: usize,
    node_path: String,
    node_name: String,
    kind: ParticipantKind,
    sequence: u64,
}

/// Lists `path`'s participants on `zk`; `path` must be valid.
pub(crate) async fn read_participants(zk: &ZkClient, path: &str) -> Result<Vec<Participant>> {
    let parents = PLACES.iter().map(|place| match place.child {
        Some(child) => format!("{path}/{child}"),
        None => path.to_owned(),
    });
    let parents: Vec<String> = parents.collect();
    let listings = list_children(zk, &parents).await.map_err(Error::from_zk)?;
    let mut listed = Vec::new();
    for (place, (parent, listing)) in parents.iter().zip(listings).enumerate() {
        for node_name in listing {
            if let Some((kind, sequence)) = classify(PLACES[place].kinds, &node_name) {
                let node_path = format!("{parent}/{node_name}");
                listed.push(Listed { place, node_path, node_name, kind, sequence });
            }
        }
    }

    let node_paths: Vec<String> = listed.iter().map(|node| node.node_path.clone()).collect();
    let reads = read_nodes(zk, &node_paths).await.map_err(Error::from_zk)?;
    let now = SystemTime::now();
    let mut present = Vec::with_capacity(listed.len());
    for (node, read) in listed.into_iter().zip(reads) {
        let (data, stat) = match read {
            NodeRead::Data(data, stat) => (Some(data), stat),
            NodeRead::TooLarge(stat) => (None, stat),
            NodeRead::Gone => continue,
        };
        // A persistent node of unknown use is data kept at the lock path, not a contender.
        if node.kind == ParticipantKind::Unknown && stat.ephemeral_owner == 0 {
            continue;
        }
        present.push((node, data, stat));
    }
    present.sort_by(|(a, ..), (b, ..)| (a.place, a.sequence, &a.node_name).cmp(&(b.place, b.sequence, &b.node_name)));

    // Only kinds living directly under `path` consult this, so one map serves all places.
    let earliest = earliest_by_kind(present.iter().map(|(node, ..)| (node.kind, node.sequence)));
    let participants = present.into_iter().map(|(node, data, stat)| {
        let role = role(node.kind, node.sequence, &earliest);
        participant(node, role, data, &stat, now)
    });
    Ok(participants.collect())
}

/// The smallest sequence of each kind of node.
fn earliest_by_kind(nodes: impl IntoIterator<Item = (ParticipantKind, u64)>) -> HashMap<ParticipantKind, u64> {
    let mut earliest = HashMap::new();
    for (kind, sequence) in nodes {
        let first = earliest.entry(kind).or_insert(sequence);
        *first = (*first).min(sequence);
    }
    earliest
}

/// A participant from its listing, role and read; `data` is `None` if it was too large to read.
fn participant(node: Listed, role: Role, data: Option<Vec<u8>>, stat: &Stat, now: SystemTime) -> Participant {
    let created = UNIX_EPOCH + Duration::from_millis(u64::try_from(stat.ctime).unwrap_or(0));
    let data_too_large = data.is_none();
    let data = data.unwrap_or_default();
    Participant {
        node_path: node.node_path,
        node_name: node.node_name,
        kind: node.kind,
        sequence: node.sequence,
        role,
        session_id: stat.ephemeral_owner,
        fencing_token: stat.czxid,
        holder: if data_too_large { None } else { HolderDescription::parse(&data) },
        data_length: if data_too_large { usize::try_from(stat.data_length).unwrap_or(0) } else { data.len() },
        data_too_large,
        data,
        created,
        age: now.duration_since(created).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ParticipantKind::*;

    fn roles(nodes: &[(ParticipantKind, u64)]) -> Vec<Role> {
        let earliest = earliest_by_kind(nodes.iter().copied());
        nodes.iter().map(|&(kind, sequence)| role(kind, sequence, &earliest)).collect()
    }

    #[test]
    fn a_mutex_is_held_by_its_first_node() {
        use Role::{Holder, Waiter};
        assert_eq!(roles(&[(Mutex, 1), (Mutex, 2), (Mutex, 3)]), [Holder, Waiter, Waiter]);
    }

    #[test]
    fn readers_share_until_a_writer_and_writers_wait_for_everyone() {
        use Role::{Holder, Waiter};
        let nodes = [(Read, 1), (Read, 2), (Write, 3), (Read, 4), (Write, 5)];
        assert_eq!(roles(&nodes), [Holder, Holder, Waiter, Waiter, Waiter]);
        assert_eq!(roles(&[(Write, 1), (Read, 2)]), [Holder, Waiter]);
        let kazoo = [(KazooRead, 1), (KazooRead, 2), (KazooLock, 3), (KazooRead, 4)];
        assert_eq!(roles(&kazoo), [Holder, Holder, Waiter, Waiter]);
    }

    #[test]
    fn a_downgraded_read_node_holds_beside_its_writer() {
        use Role::{Holder, Waiter};
        // The read node reuses the writer's sequence (CURATOR-621).
        assert_eq!(roles(&[(Write, 5), (Read, 5), (Write, 6)]), [Holder, Holder, Waiter]);
    }

    #[test]
    fn recipes_do_not_see_each_others_nodes() {
        use Role::{Holder, Waiter};
        let nodes = [(KazooLock, 1), (Mutex, 2), (Unknown, 3), (Mutex, 4), (Lease, 1), (LeaseRequest, 1)];
        assert_eq!(roles(&nodes), [Holder, Holder, Role::Unknown, Waiter, Holder, Waiter]);
    }
}
