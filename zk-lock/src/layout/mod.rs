//! Curator's layout: what a lock looks like in ZooKeeper, and who blocks whom.
//!
//! Every node is `<parent>/_c_<uuid>-<lock name><10-digit sequence>`: a mutex's and a read/write
//! lock's nodes are children of the lock path `P`; a semaphore keeps its leases in `P/leases` and
//! queues requests for them in an internal mutex at `P/locks`. kazoo's names are known too, so
//! that `participants` shows a mixed fleet whole. The engine's queues, `participants`' roles,
//! `revoke`, the CLI and the attributes' declarations all read the layout here, so the inspector
//! cannot report roles differently from how the engine grants them.
//!
//! Pure functions over names; it uses nothing else of the crate.

use std::fmt;

/// Curator's protection marker: a node whose name starts with `_c_<uuid>-` can be found
/// again after a connection loss hid the reply to its `create`.
const PROTECTED_MARKER: &str = "_c_";

/// What Curator's `Revoker` writes into a holder's node to ask for the lock.
pub(crate) const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// The child of a semaphore's path holding its leases.
pub(crate) const SEMAPHORE_LEASES: &str = "leases";
/// The child of a semaphore's path holding its internal mutex, where requests for leases queue.
pub(crate) const SEMAPHORE_REQUESTS: &str = "locks";

/// A lock recipe of this crate, as the attributes and the re-entrancy of a client know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Recipe {
    /// [`Mutex`](crate::Mutex), `#[zk_lock]` and `#[zk_multi_lock]`: Curator's `InterProcessMutex`.
    Mutex,
    /// The read side of an [`RwLock`](crate::RwLock), `#[zk_read_lock]`.
    Read,
    /// The write side of an [`RwLock`](crate::RwLock), `#[zk_write_lock]`.
    Write,
    /// [`Semaphore`](crate::Semaphore), `#[zk_semaphore(permits = N)]`: Curator's
    /// `InterProcessSemaphoreV2`.
    Semaphore,
    /// [`SemaphoreMutex`](crate::SemaphoreMutex), `#[zk_semaphore]` with one permit: Curator's
    /// `InterProcessSemaphoreMutex`.
    SemaphoreMutex,
    /// [`LeaderElection`](crate::LeaderElection), `#[zk_leader]`: Curator's `LeaderSelector`,
    /// whose leader holds an `InterProcessMutex` at the election's path.
    Leader,
}

impl Recipe {
    /// `mutex`, `read`, `write`, `semaphore`, `semaphore-mutex` or `leader`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Read => "read",
            Self::Write => "write",
            Self::Semaphore => "semaphore",
            Self::SemaphoreMutex => "semaphore-mutex",
            Self::Leader => "leader",
        }
    }

    /// Recipes that may share a lock path have the same family: the read and write sides of one
    /// read/write lock; a mutex and a leader election, which share one queue.
    pub(crate) fn family(self) -> &'static str {
        match self {
            Self::Read | Self::Write => "read/write lock",
            Self::Mutex | Self::Leader => "mutex",
            other => other.as_str(),
        }
    }

    /// The queue a lock of this recipe waits in (for a semaphore: its internal mutex).
    pub(crate) fn queue(self) -> &'static Queue {
        match self {
            // A leader election is a mutex on the wire, as Curator's `LeaderSelector` is.
            Self::Mutex | Self::Leader => &MUTEX,
            Self::Read => &RW_READ,
            Self::Write => &RW_WRITE,
            Self::Semaphore | Self::SemaphoreMutex => &SEMAPHORE_REQUEST,
        }
    }
}

impl fmt::Display for Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of a lock node, told by its name and place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParticipantKind {
    /// `P/_c_<uuid>-lock-<seq>`: a [`Mutex`](crate::Mutex), Curator's `InterProcessMutex`.
    Mutex,
    /// `P/_c_<uuid>-__READ__<seq>`: the read side of a read/write lock (Curator's
    /// `InterProcessReadWriteLock`).
    Read,
    /// `P/_c_<uuid>-__WRIT__<seq>`: the write side of a read/write lock.
    Write,
    /// `P/leases/_c_<uuid>-lease-<seq>`: a semaphore lease (Curator's `InterProcessSemaphoreV2`,
    /// also behind `InterProcessSemaphoreMutex`).
    Lease,
    /// `P/locks/_c_<uuid>-lock-<seq>`: a request for a semaphore lease, queued in the semaphore's
    /// internal mutex.
    LeaseRequest,
    /// `P/<uuid>__lock__<seq>`: kazoo's `Lock`, or its `WriteLock`, which uses the same name.
    KazooLock,
    /// `P/<uuid>__rlock__<seq>`: kazoo's `ReadLock`.
    KazooRead,
    /// An ephemeral node whose name ends in a server sequence but follows no known layout:
    /// another recipe's contender, whose rules are unknown.
    Unknown,
}

impl ParticipantKind {
    /// A short lowercase name: `mutex`, `read`, `write`, `lease`, `lease-request`, `kazoo-lock`,
    /// `kazoo-read` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Read => "read",
            Self::Write => "write",
            Self::Lease => "lease",
            Self::LeaseRequest => "lease-request",
            Self::KazooLock => "kazoo-lock",
            Self::KazooRead => "kazoo-read",
            Self::Unknown => "unknown",
        }
    }

    /// The kind of lock a node of this kind is part of: `mutex`, `rwlock`, `semaphore`,
    /// `kazoo-lock`, `kazoo-rwlock` (a kazoo read node) or `unknown`. A kazoo write node is named
    /// like a kazoo lock's, so it shows as `kazoo-lock`.
    pub fn lock_kind(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Read | Self::Write => "rwlock",
            Self::Lease | Self::LeaseRequest => "semaphore",
            Self::KazooLock => "kazoo-lock",
            Self::KazooRead => "kazoo-rwlock",
            Self::Unknown => "unknown",
        }
    }

    /// The name a node of this kind carries before its sequence.
    pub(crate) fn lock_name(self) -> &'static str {
        match self {
            Self::Mutex | Self::LeaseRequest => "lock-",
            Self::Read => READ,
            Self::Write => WRITE,
            Self::Lease => "lease-",
            Self::KazooLock => "__lock__",
            Self::KazooRead => "__rlock__",
            Self::Unknown => "",
        }
    }

    /// Whether a node of kind `other` ahead in the same queue keeps a node of this kind from
    /// holding the lock. A reader waits for writers only, so readers share the lock and a queued
    /// writer keeps later readers out; kazoo's plain `Lock` ignores `__rlock__` nodes, but only a
    /// `WriteLock` (same name) shares a path with readers, so the write rule is used. Leases are
    /// not a queue: the count decides, and it is not in the nodes.
    pub(crate) fn waits_for(self, other: Self) -> bool {
        use ParticipantKind::*;
        match self {
            Mutex => other == Mutex,
            LeaseRequest => other == LeaseRequest,
            Read => other == Write,
            Write => matches!(other, Read | Write),
            KazooLock => matches!(other, KazooLock | KazooRead),
            KazooRead => other == KazooLock,
            Lease | Unknown => false,
        }
    }
}

impl fmt::Display for ParticipantKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a lock's nodes live: the lock path itself, or a child of it; and the kinds of node
/// found there.
pub(crate) struct Place {
    pub child: Option<&'static str>,
    pub kinds: &'static [ParticipantKind],
}

/// Every place of a lock path's nodes, in the order `participants` reports them.
pub(crate) const PLACES: [Place; 3] = [
    Place {
        child: None,
        kinds: &[
            ParticipantKind::Mutex,
            ParticipantKind::Read,
            ParticipantKind::Write,
            ParticipantKind::KazooLock,
            ParticipantKind::KazooRead,
        ],
    },
    Place { child: Some(SEMAPHORE_LEASES), kinds: &[ParticipantKind::Lease] },
    Place { child: Some(SEMAPHORE_REQUESTS), kinds: &[ParticipantKind::LeaseRequest] },
];

/// A lock node and its position in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SequenceNode {
    pub name: String,
    pub sequence: u64,
    pub kind: ParticipantKind,
}

/// A queue the engine waits in: the kinds of node sharing it, and the kind ours is.
pub(crate) struct Queue {
    pub kinds: &'static [ParticipantKind],
    pub ours: ParticipantKind,
}

/// Curator's `InterProcessMutex`: first come first served.
pub(crate) const MUTEX: Queue = Queue { kinds: &[ParticipantKind::Mutex], ours: ParticipantKind::Mutex };
/// The read side of Curator's `InterProcessReadWriteLock`.
pub(crate) const RW_READ: Queue =
    Queue { kinds: &[ParticipantKind::Read, ParticipantKind::Write], ours: ParticipantKind::Read };
/// The write side of Curator's `InterProcessReadWriteLock`.
pub(crate) const RW_WRITE: Queue =
    Queue { kinds: &[ParticipantKind::Read, ParticipantKind::Write], ours: ParticipantKind::Write };
/// A semaphore's internal mutex (`P/locks`), where requests for leases queue.
pub(crate) const SEMAPHORE_REQUEST: Queue =
    Queue { kinds: &[ParticipantKind::LeaseRequest], ours: ParticipantKind::LeaseRequest };

impl Queue {
    /// The name our node carries before its sequence.
    pub(crate) fn lock_name(&self) -> &'static str {
        self.ours.lock_name()
    }

    /// The nodes that must be gone before ours, at `ours` in `nodes` (queue order), holds.
    pub(crate) fn blockers<'n>(
        &self,
        nodes: &'n [SequenceNode],
        ours: usize,
    ) -> impl DoubleEndedIterator<Item = &'n SequenceNode> + use<'n> {
        let ours_kind = self.ours;
        nodes[..ours].iter().filter(move |node| ours_kind.waits_for(node.kind))
    }

    /// Whether a grant needs every node ahead gone (a mutex, a writer), so that a waiter behind a
    /// granted node knows the queue ahead of that node is empty.
    pub(crate) fn exclusive(&self) -> bool {
        self.kinds.iter().all(|&kind| self.ours.waits_for(kind))
    }

    /// Whether a blocker of kind `blocker` going means the queue must be listed once more before
    /// we hold the lock: a writer's task may have downgraded first, leaving a read node at the
    /// writer's sequence that our listing did not have (see [`downgraded_read_name`]).
    pub(crate) fn rechecks_after(&self, blocker: ParticipantKind) -> bool {
        blocker == ParticipantKind::Write && self.ours.waits_for(ParticipantKind::Read)
    }

    /// The lock nodes among `children` of this queue's kinds, in queue order.
    pub(crate) fn sorted(&self, children: impl IntoIterator<Item = String>) -> Vec<SequenceNode> {
        sorted_nodes(children, self.kinds)
    }
}

/// Curator's `InterProcessReadWriteLock` read node name.
const READ: &str = "__READ__";
/// Curator's `InterProcessReadWriteLock` write node name.
const WRITE: &str = "__WRIT__";

/// The read node a writer's downgrade creates (as Curator does since CURATOR-621): at the
/// writer's own sequence, its ten digits as the server wrote them, so that writers queued behind
/// keep waiting once the write lock is released. `None` if `writer_name` is not a write node's
/// name.
pub(crate) fn downgraded_read_name(prefix: &str, writer_name: &str) -> Option<String> {
    sequence_of(writer_name, WRITE)?;
    let digits = &writer_name[writer_name.rfind(WRITE)? + WRITE.len()..];
    Some(format!("{prefix}{READ}{digits}"))
}

/// The `_c_<uuid>-` prefix of a new node: a fresh random (version 4) UUID each time.
pub(crate) fn new_protected_prefix() -> String {
    format!("{PROTECTED_MARKER}{}-", uuid::Uuid::new_v4())
}

/// The `_c_<uuid>-` prefix of a protected node's name; `None` for other names (kazoo's).
pub(crate) fn protected_prefix(name: &str) -> Option<&str> {
    const LEN: usize = PROTECTED_MARKER.len() + 36 + 1;
    let prefix = name.get(..LEN)?;
    (prefix.starts_with(PROTECTED_MARKER) && prefix.ends_with('-')).then_some(prefix)
}

/// How much of a protected name a semaphore request shares with the leases it creates ahead of
/// time: the marker and the uuid up to its last group.
const REQUEST_KEY_LEN: usize = PROTECTED_MARKER.len() + 24;

/// The prefix of the `index`th lease a semaphore request creates ahead of time, before it knows
/// whether it holds the internal mutex: the request's own `request_prefix` with the last group of
/// its uuid replaced by the index. Still a protected prefix, unique in its parent, and it tells
/// whoever lists both parents which request the lease belongs to ([`request_key`]).
pub(crate) fn lease_prefix_ahead_of_time(request_prefix: &str, index: usize) -> String {
    format!("{}{index:012x}-", &request_prefix[..REQUEST_KEY_LEN])
}

/// What a request node and the leases it made ahead of time have in common; `None` for names
/// that are not protected.
pub(crate) fn request_key(name: &str) -> Option<&str> {
    protected_prefix(name).map(|prefix| &prefix[..REQUEST_KEY_LEN])
}

/// How many digits ZooKeeper writes for a sequential node (`%010d` of the parent's child
/// version), and so the only length of sequence that Curator's nodes have.
const SEQUENCE_DIGITS: usize = 10;

/// The number in `digits` if it is a sequence as ZooKeeper writes it: exactly ten decimal
/// digits. Curator orders nodes by the text after the lock name, which agrees with the numeric
/// order only for sequences of the same length; a longer or shorter one (never written by
/// ZooKeeper, so made by hand) would tie with ours or sort elsewhere than Curator sorts it, so
/// it is not a sequence: such a node takes no part in any queue.
fn server_sequence(digits: &str) -> Option<u64> {
    if digits.len() != SEQUENCE_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The sequence number of a node named `..<lock_name><ten digits>`, read where Curator's
/// `StandardLockInternalsDriver.fixForSorting` reads it (after the last `lock_name`).
pub(crate) fn sequence_of(name: &str, lock_name: &str) -> Option<u64> {
    server_sequence(&name[name.rfind(lock_name)? + lock_name.len()..])
}

/// The sequence number a name ends in (a run of exactly ten digits), as every lock node of every
/// known recipe does; `None` for other names.
pub(crate) fn trailing_sequence(name: &str) -> Option<u64> {
    server_sequence(&name[name.trim_end_matches(|c: char| c.is_ascii_digit()).len()..])
}

/// The kind and sequence of a child named like one of `kinds`, or like some other recipe's
/// sequential node ([`ParticipantKind::Unknown`]).
pub(crate) fn classify(kinds: &[ParticipantKind], name: &str) -> Option<(ParticipantKind, u64)> {
    kinds
        .iter()
        .find_map(|&kind| Some((kind, sequence_of(name, kind.lock_name())?)))
        .or_else(|| Some((ParticipantKind::Unknown, trailing_sequence(name)?)))
}

/// The lock nodes among `children` of one of `kinds`, in queue order. Other children (foreign
/// nodes, another recipe's nodes) take no part in the queue.
pub(crate) fn sorted_nodes(children: impl IntoIterator<Item = String>, kinds: &[ParticipantKind]) -> Vec<SequenceNode> {
    let mut nodes: Vec<SequenceNode> = children
        .into_iter()
        .filter_map(|name| {
            let (kind, sequence) =
                kinds.iter().find_map(|&kind| Some((kind, sequence_of(&name, kind.lock_name())?)))?;
            Some(SequenceNode { name, sequence, kind })
        })
        .collect();
    // Equal sequences happen after a downgrade (a read node at its writer's sequence); the
    // name keeps the order stable.
    nodes.sort_by(|a, b| a.sequence.cmp(&b.sequence).then_with(|| a.name.cmp(&b.name)));
    nodes
}

#[cfg(test)]
mod tests;
