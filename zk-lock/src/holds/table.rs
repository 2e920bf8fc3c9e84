//! The table of a client's held nodes, by lock path and recipe, for re-entrant acquisition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Entries that go when the last share of their value does. The client owns one (of held
/// nodes, `HoldTable`); each held node keeps a share of it to remove itself when let go.
pub(crate) struct Table<T>(Mutex<HashMap<Arc<str>, Weak<T>>>);

impl<T> Default for Table<T> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<T> Table<T> {
    fn entries(&self) -> MutexGuard<'_, HashMap<Arc<str>, Weak<T>>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn get(&self, key: &str) -> Option<Arc<T>> {
        self.entries().get(key)?.upgrade()
    }

    pub(super) fn insert(&self, key: Arc<str>, value: &Arc<T>) {
        self.entries().insert(key, Arc::downgrade(value));
    }

    /// Removes `value`'s entry, unless a newer value took the key since.
    pub(super) fn remove(&self, key: &str, value: &T) {
        let mut entries = self.entries();
        if entries.get(key).is_some_and(|entry| std::ptr::eq(entry.as_ptr(), value)) {
            entries.remove(key);
        }
    }
}
