//! A shared counter whose critical section would lose updates, and panic, if two holders ran it
//! at once: the check behind the mutual-exclusion tests.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct GuardedCounter {
    count: Arc<AtomicU64>,
    holders: Arc<AtomicUsize>,
}

impl GuardedCounter {
    /// Call while holding the lock: reads, yields so any other holder could run, then writes. A
    /// second holder inside panics; an update lost to one would show in [`count`](Self::count).
    pub async fn increment(&self) {
        assert_eq!(self.holders.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
        let seen = self.count.load(Ordering::SeqCst);
        tokio::task::yield_now().await;
        self.count.store(seen + 1, Ordering::SeqCst);
        self.holders.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}
