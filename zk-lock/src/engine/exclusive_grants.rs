//! Hand-offs inside one process. A node granted exclusively (a mutex, a write lock) had every
//! node ahead of it gone at that moment, and sequence nodes never come back. So a waiter whose
//! nearest blocker was such a grant of this process knows, once that node is deleted, that every
//! node ahead of it is gone too: it needs no request to check them.

use std::collections::{HashSet, VecDeque};
use std::sync::{LazyLock, Mutex};

/// How many grants are remembered. A waiter whose predecessor was forgotten checks the queue
/// with one request, as it would for a predecessor of another process.
const REMEMBERED: usize = 4096;

#[derive(Default)]
struct Grants {
    nodes: HashSet<Box<str>>,
    order: VecDeque<Box<str>>,
}

static EXCLUSIVE_GRANTS: LazyLock<Mutex<Grants>> = LazyLock::new(Mutex::default);

/// Records that `node_path` was granted exclusively in this process.
pub(crate) fn granted_exclusively(node_path: &str) {
    let mut grants = EXCLUSIVE_GRANTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if grants.order.len() == REMEMBERED {
        if let Some(oldest) = grants.order.pop_front() {
            grants.nodes.remove(&oldest);
        }
    }
    let node: Box<str> = node_path.into();
    if grants.nodes.insert(node.clone()) {
        grants.order.push_back(node);
    }
}

/// Whether `node_path` was granted exclusively in this process (as far as remembered).
pub(crate) fn was_granted_exclusively(node_path: &str) -> bool {
    EXCLUSIVE_GRANTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).nodes.contains(node_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_recent_grants_and_forgets_the_oldest() {
        granted_exclusively("/unit-exclusive-grants/a");
        assert!(was_granted_exclusively("/unit-exclusive-grants/a"));
        assert!(!was_granted_exclusively("/unit-exclusive-grants/b"));
        for i in 0..REMEMBERED {
            granted_exclusively(&format!("/unit-exclusive-grants/filler-{i}"));
        }
        assert!(!was_granted_exclusively("/unit-exclusive-grants/a"), "the oldest grant is forgotten");
        assert!(was_granted_exclusively(&format!("/unit-exclusive-grants/filler-{}", REMEMBERED - 1)));
    }
}
