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

/// The values at one key, one per holder: almost always one, kept without an allocation of its
/// own (a held guard's bytes count).
enum Holders<T> {
    One([(Owner, Weak<T>); 1]),
    Many(Vec<(Owner, Weak<T>)>),
}

impl<T> Holders<T> {
    fn entries(&self) -> &[(Owner, Weak<T>)] {
        match self {
            Self::One(one) => one,
            Self::Many(many) => many,
        }
    }

    /// The entries but those `leave` picks, or `None` if none is left.
    fn without(self, leave: impl Fn(&(Owner, Weak<T>)) -> bool) -> Option<Self> {
        match self {
            Self::One([entry]) if leave(&entry) => None,
            Self::One(one) => Some(Self::One(one)),
            Self::Many(mut many) => {
                many.retain(|entry| !leave(entry));
                match many.len() {
                    0 => None,
                    1 => many.pop().map(|entry| Self::One([entry])),
                    _ => Some(Self::Many(many)),
                }
            }
        }
    }

    /// These entries and `entry`.
    fn with(self, entry: (Owner, Weak<T>)) -> Self {
        let mut many = match self {
            Self::One(one) => Vec::from(one),
            Self::Many(many) => many,
        };
        many.push(entry);
        Self::Many(many)
    }
}

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
        let (_, value) = entries.get(key)?.entries().iter().find(|(holder, _)| *holder == owner)?;
        value.upgrade()
    }

    /// Makes `value` `owner`'s at `key`, in place of any it had.
    pub(super) fn insert(&self, key: Arc<str>, owner: Owner, value: &Arc<T>) {
        let mut entries = self.entries();
        let entry = (owner, Arc::downgrade(value));
        let others = entries.remove(&key).and_then(|holders| holders.without(|(holder, _)| *holder == owner));
        let holders = match others {
            None => Holders::One([entry]),
            Some(others) => others.with(entry),
        };
        entries.insert(key, holders);
    }

    /// Removes `value`'s entry, unless a newer value took its place since.
    pub(super) fn remove(&self, key: &str, value: &T) {
        let mut entries = self.entries();
        let Some((key, holders)) = entries.remove_entry(key) else { return };
        if let Some(left) = holders.without(|(_, entry)| std::ptr::eq(entry.as_ptr(), value)) {
            entries.insert(key, left);
        }
    }
}
