//! The grants this process makes, told as they happen to the testing kit's recordings
//! (`History::record_grants_under`): a hold's grant, the moment its holder lets it go (before
//! the delete is sent), and how it ended. Without the feature `testing` the calls are empty.

use crate::error::LostReason;
use crate::layout::Recipe;

/// What was granted.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) enum Granted<'a> {
    /// A lock of the hold's recipe (a semaphore mutex: a semaphore of one lease).
    Lock,
    /// A lease of a semaphore of `leases`.
    Lease { leases: u32 },
    /// A read lock taken by the holder of the write lock `writer` (a downgrade).
    Downgrade { writer: &'a str },
}

/// How a hold ended, as its holder learnt it.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) enum Ended<'a> {
    /// Released, and the release confirmed the lock was still held.
    Released,
    /// Its last guard was dropped while the lock was held.
    Dropped,
    /// The release failed with this error, the lock not known lost.
    ReleaseFailed(&'a str),
    /// Its holder was told it was lost.
    Lost(LostReason),
}

#[cfg(feature = "testing")]
pub(crate) use listening::{subscribe, unsubscribe, GrantLog};

#[cfg(feature = "testing")]
mod listening {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, PoisonError, RwLock};

    use super::{Ended, Granted};
    use crate::layout::Recipe;

    /// A listener: a recording of the testing kit.
    pub(crate) trait GrantLog: Send + Sync {
        fn granted(&self, recipe: Recipe, path: &str, node: &str, token: i64, what: Granted<'_>);
        fn finished(&self, node: &str);
        fn releasing(&self, node: &str);
        fn ended(&self, node: &str, how: Ended<'_>);
    }

    static LOGS: RwLock<Vec<Arc<dyn GrantLog>>> = RwLock::new(Vec::new());
    /// Whether anyone listens: the one load a hold pays when nobody does.
    static LISTENED: AtomicBool = AtomicBool::new(false);

    pub(super) fn each(tell: impl Fn(&dyn GrantLog)) {
        if LISTENED.load(Ordering::Acquire) {
            for log in LOGS.read().unwrap_or_else(PoisonError::into_inner).iter() {
                tell(log.as_ref());
            }
        }
    }

    pub(crate) fn subscribe(log: Arc<dyn GrantLog>) {
        let mut logs = LOGS.write().unwrap_or_else(PoisonError::into_inner);
        logs.push(log);
        LISTENED.store(true, Ordering::Release);
    }

    pub(crate) fn unsubscribe(log: &Arc<dyn GrantLog>) {
        let mut logs = LOGS.write().unwrap_or_else(PoisonError::into_inner);
        logs.retain(|listening| !Arc::ptr_eq(listening, log));
        LISTENED.store(!logs.is_empty(), Ordering::Release);
    }
}

/// The node `node` of a lock of `recipe` at `path` was granted just now, with `token`.
pub(crate) fn granted(recipe: Recipe, path: &str, node: &str, token: i64, what: Granted<'_>) {
    #[cfg(feature = "testing")]
    listening::each(|log| log.granted(recipe, path, node, token, what));
    #[cfg(not(feature = "testing"))]
    let _ = (recipe, path, node, token, what);
}

/// The annotated function holding the last share of `node` finished its body: the drop of its
/// guard that follows is how such a function releases its lock, not a cancellation.
pub(crate) fn finished(node: &str) {
    #[cfg(feature = "testing")]
    listening::each(|log| log.finished(node));
    #[cfg(not(feature = "testing"))]
    let _ = node;
}

/// The holder of `node` lets it go: its delete is about to be sent.
pub(crate) fn releasing(node: &str) {
    #[cfg(feature = "testing")]
    listening::each(|log| log.releasing(node));
    #[cfg(not(feature = "testing"))]
    let _ = node;
}

/// How the hold of `node` ended.
pub(crate) fn ended(node: &str, how: Ended<'_>) {
    #[cfg(feature = "testing")]
    listening::each(|log| log.ended(node, how));
    #[cfg(not(feature = "testing"))]
    let _ = (node, how);
}
