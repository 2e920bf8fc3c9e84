//! Lock node names, Curator's layout: `_c_<uuid>-<lock name><10-digit sequence>`.
//!
//! Pure functions over child names, so the ordering rules are tested without a server.

/// Curator's protection marker: a node whose name starts with `_c_<uuid>-` can be found
/// again after a connection loss hid the reply to its `create`.
const PROTECTED_MARKER: &str = "_c_";

/// A lock node and its position in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SequenceNode {
    pub name: String,
    pub sequence: u64,
    /// Which of the queue's lock names it carries (`lock-`, `__READ__`, `__WRIT__`, ...).
    pub kind: &'static str,
}

/// A recipe's queue: the names of its nodes and who must go before whom.
pub(crate) struct QueueRules {
    /// The lock names of every node kind sharing the queue.
    pub names: &'static [&'static str],
    /// The nodes that must be gone before the node at `ours` holds the lock.
    pub blockers: fn(&[SequenceNode], usize) -> Vec<String>,
    /// List the queue once more before granting if a node of this kind went while we waited:
    /// a read lock taken by a writer's downgrade reuses the writer's sequence, so it can appear
    /// ahead of us after our listing.
    pub recheck_after: Option<&'static str>,
    /// Whether a grant needs every node ahead gone (a mutex, a writer), so that a waiter behind
    /// a granted node knows the queue ahead of that node is empty.
    pub exclusive: bool,
}

/// Curator's `InterProcessMutex`: `_c_<uuid>-lock-<seq>`, first come first served.
pub(crate) const MUTEX: QueueRules =
    QueueRules { names: &["lock-"], blockers: all_ahead, recheck_after: None, exclusive: true };

/// Curator's `InterProcessReadWriteLock` read node name.
pub(crate) const READ: &str = "__READ__";
/// Curator's `InterProcessReadWriteLock` write node name.
pub(crate) const WRITE: &str = "__WRIT__";

/// A reader waits for the writers ahead of it only, so readers share the lock, and a queued
/// writer keeps later readers out (no writer starvation).
pub(crate) const RW_READ: QueueRules =
    QueueRules { names: &[READ, WRITE], blockers: writers_ahead, recheck_after: None, exclusive: false };

/// A writer waits for every node ahead. When a writer ahead goes, its task may have downgraded
/// first: a read node at that writer's sequence, created after our listing, so list once more.
pub(crate) const RW_WRITE: QueueRules =
    QueueRules { names: &[READ, WRITE], blockers: all_ahead, recheck_after: Some(WRITE), exclusive: true };

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

/// The sequence number of a node named `..<lock_name><digits>`, as Curator's
/// `StandardLockInternalsDriver.fixForSorting` reads it (after the last `lock_name`).
pub(crate) fn sequence_of(name: &str, lock_name: &str) -> Option<u64> {
    let digits = &name[name.rfind(lock_name)? + lock_name.len()..];
    if digits.len() < 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The lock nodes among `children` whose name carries one of `names`, in queue order. Other
/// children (foreign nodes, another recipe's nodes) take no part in the queue.
pub(crate) fn sorted_nodes(children: impl IntoIterator<Item = String>, names: &[&'static str]) -> Vec<SequenceNode> {
    let mut nodes: Vec<SequenceNode> = children
        .into_iter()
        .filter_map(|name| {
            let (kind, sequence) = names.iter().find_map(|&kind| Some((kind, sequence_of(&name, kind)?)))?;
            Some(SequenceNode { name, sequence, kind })
        })
        .collect();
    // Equal sequences happen after a downgrade (a read node at its writer's sequence); the
    // name keeps the order stable.
    nodes.sort_by(|a, b| a.sequence.cmp(&b.sequence).then_with(|| a.name.cmp(&b.name)));
    nodes
}

/// Mutual exclusion: every node ahead of ours must go before we hold the lock.
pub(crate) fn all_ahead(nodes: &[SequenceNode], ours: usize) -> Vec<String> {
    nodes[..ours].iter().map(|node| node.name.clone()).collect()
}

/// Read/write rule for readers: only writers ahead block.
pub(crate) fn writers_ahead(nodes: &[SequenceNode], ours: usize) -> Vec<String> {
    nodes[..ours].iter().filter(|node| node.kind == WRITE).map(|node| node.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_curator_sequences() {
        assert_eq!(sequence_of("_c_0f8e7d6c-1b2a-4c3d-8e9f-000000000000-lock-0000000042", "lock-"), Some(42));
        assert_eq!(sequence_of("lock-0000000007", "lock-"), Some(7));
        assert_eq!(sequence_of("x-lock-2147483648", "lock-"), Some(2_147_483_648));
        assert_eq!(sequence_of("x-lock-0000000000000000010", "lock-"), Some(10), "19-digit sequences past i32");
        assert_eq!(sequence_of("_c_ab-__READ__0000000003", "__READ__"), Some(3));
        assert_eq!(sequence_of("leases", "lock-"), None);
        assert_eq!(sequence_of("x-lock-12", "lock-"), None, "too short to be a server sequence");
        assert_eq!(sequence_of("x-lock-00000000a1", "lock-"), None);
    }

    #[test]
    fn sorts_by_sequence_not_by_name() {
        let children = ["_c_f-lock-0000000003", "_c_a-lock-0000000010", "foreign", "_c_z-lock-0000000001"];
        let nodes = sorted_nodes(children.map(String::from), &["lock-"]);
        let sequences: Vec<u64> = nodes.iter().map(|n| n.sequence).collect();
        assert_eq!(sequences, [1, 3, 10]);
        assert_eq!(nodes[0].name, "_c_z-lock-0000000001");
    }

    #[test]
    fn mutex_waits_for_everything_ahead() {
        let children = ["a-lock-0000000001", "b-lock-0000000002", "c-lock-0000000003"];
        let nodes = sorted_nodes(children.map(String::from), MUTEX.names);
        assert!((MUTEX.blockers)(&nodes, 0).is_empty());
        assert_eq!((MUTEX.blockers)(&nodes, 2), ["a-lock-0000000001", "b-lock-0000000002"]);
    }

    #[test]
    fn readers_wait_for_writers_ahead_and_writers_for_everyone() {
        let children = [
            "_c_a-__READ__0000000001",
            "_c_b-__WRIT__0000000002",
            "_c_c-__READ__0000000003",
            "_c_d-__WRIT__0000000004",
        ];
        let nodes = sorted_nodes(children.map(String::from), RW_READ.names);
        assert_eq!(nodes.iter().map(|n| n.kind).collect::<Vec<_>>(), [READ, WRITE, READ, WRITE]);
        assert!((RW_READ.blockers)(&nodes, 0).is_empty(), "the first reader holds");
        assert_eq!(
            (RW_READ.blockers)(&nodes, 2),
            ["_c_b-__WRIT__0000000002"],
            "a reader behind a writer waits for it only"
        );
        assert_eq!((RW_WRITE.blockers)(&nodes, 1), ["_c_a-__READ__0000000001"], "a writer waits for readers ahead");
        assert_eq!((RW_WRITE.blockers)(&nodes, 3).len(), 3);
    }

    #[test]
    fn a_downgraded_read_node_sorts_at_its_writers_place() {
        // The writer's task created a read node at the writer's own sequence (CURATOR-621).
        let children = ["_c_w-__WRIT__0000000005", "_c_x-__WRIT__0000000006", "_c_r-__READ__0000000005"];
        let nodes = sorted_nodes(children.map(String::from), RW_WRITE.names);
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["_c_r-__READ__0000000005", "_c_w-__WRIT__0000000005", "_c_x-__WRIT__0000000006"]);
        assert_eq!((RW_WRITE.blockers)(&nodes, 2).len(), 2, "the next writer waits for the read node too");
    }

    #[test]
    fn finds_the_protected_prefix_of_a_name() {
        let prefix = new_protected_prefix();
        assert_eq!(protected_prefix(&format!("{prefix}lock-0000000007")), Some(prefix.as_str()));
        assert_eq!(protected_prefix("_c_short-lock-0000000007"), None);
        assert_eq!(protected_prefix("__lock__0000000007"), None);
        assert_eq!(protected_prefix("lock-0000000007"), None);
    }

    #[test]
    fn protected_prefixes_look_like_curators_and_differ() {
        let a = new_protected_prefix();
        let b = new_protected_prefix();
        assert_ne!(a, b);
        assert_eq!(a.len(), "_c_".len() + 36 + 1);
        assert!(a.starts_with("_c_") && a.ends_with('-'));
        let uuid = &a[3..39];
        let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert_eq!(&uuid[14..15], "4", "version 4");
        assert!("89ab".contains(&uuid[19..20]), "RFC 4122 variant");
    }
}
