//! The table of a client's held nodes, by lock path, recipe and holder, for re-entrant
//! acquisition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::holder::Owner;

/// Entries that go when the last share of their value does. The client owns one (of held
/// nodes, `HoldTable`); each held node keeps a share of it to remove itself when let go.
///
/// Each key has an entry per holder: several tasks may hold one read lock, each its own node,
/// and a task looks only at its own entry, so it never holds a share of another's value, not
/// even for a moment (which that holder's release, counting the shares left, would take for a
/// re-entrant one).
pub(crate) struct Table<T>(Mutex<HashMap<Arc<str>, Holders<T>>>);

/// The values at one key, one per holder.
type Holders<T> = Vec<(Owner, Weak<T>)>;

impl<T> Default for Table<T> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<T> Table<T> {
    fn entries(&self) -> MutexGuard<'_, HashMap<Arc<str>, Holders<T>>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `owner`'s value at `key`.
    pub(super) fn get(&self, key: &str, owner: Owner) -> Option<Arc<T>> {
        let entries = self.entries();
        let (_, value) = entries.get(key)?.iter().find(|(holder, _)| *holder == owner)?;
        value.upgrade()
    }

    /// Makes `value` `owner`'s at `key`, in place of any it had.
    pub(super) fn insert(&self, key: Arc<str>, owner: Owner, value: &Arc<T>) {
        let mut entries = self.entries();
        let holders = entries.entry(key).or_default();
        holders.retain(|(holder, _)| *holder != owner);
        holders.push((owner, Arc::downgrade(value)));
    }

    /// Removes `value`'s entry, unless a newer value took its place since.
    pub(super) fn remove(&self, key: &str, value: &T) {
        let mut entries = self.entries();
        let Some(holders) = entries.get_mut(key) else { return };
        holders.retain(|(_, entry)| !std::ptr::eq(entry.as_ptr(), value));
        if holders.is_empty() {
            entries.remove(key);
        }
    }
}
