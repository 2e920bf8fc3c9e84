//! Recording every grant the process makes under a path, whoever asks for the lock (annotated
//! functions included), without touching the code that takes it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::record::{Grant, GrantKind, Outcome};
use super::timing::now_ns;
use super::History;
use crate::holds::grant_log::{self, Ended, GrantLog, Granted};
use crate::layout::Recipe;

/// The recording of the grants under one path, started by
/// [`History::record_grants_under`]; it stops when dropped.
#[must_use = "the recording stops when it is dropped"]
pub struct GrantRecording {
    log: Arc<dyn GrantLog>,
}

impl Drop for GrantRecording {
    fn drop(&mut self) {
        grant_log::unsubscribe(&self.log);
    }
}

impl std::fmt::Debug for GrantRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantRecording").finish_non_exhaustive()
    }
}

impl History {
    /// Records into this history every grant this process makes of a lock at `prefix` or
    /// under it (a path of the form `prefix/...`), until the returned recording is dropped:
    /// the locks of annotated functions, of recipes and of multi-locks, through any client,
    /// with no change to the code that takes them.
    ///
    /// Each grant is recorded when it ends, as a [`Grant`]:
    ///
    /// - `holder`: the path of the lock's node (what the guard's `node_path()` returns, to name
    ///   the writer of a [`time_write`](Self::time_write));
    /// - `kind`: the recipe ([`GrantKind::Semaphore`] with the semaphore's lease count as it was
    ///   when the lease was granted; a [`SemaphoreMutex`](crate::SemaphoreMutex): one lease);
    /// - `path`, `token`: the lock path and the fencing token;
    /// - `start`: [`now_ns`] once the library has the grant, before it returns it;
    /// - `end`: [`now_ns`] when the holder let it go, before the release was sent;
    /// - `outcome`: [`Outcome::Released`] (released, or an annotated function's body finished),
    ///   [`Outcome::Dropped`] (its last guard was dropped otherwise, as when an annotated
    ///   function's future is cancelled), [`Outcome::ReleaseFailed`], or [`Outcome::Lost`] when
    ///   the holder was told it was lost (the release said so, it was lost before, or an
    ///   annotated function's body was aborted by the loss).
    ///
    /// A re-entered lock is one grant (its node's). A downgrade's read lock is recorded from
    /// the moment its write lock is let go, and not at all if it ends first: until then it
    /// overlaps the write lock by design. Grants still held when the recording stops are not
    /// recorded. Give every test its own prefix: tests of one binary run at once, in one
    /// process.
    pub fn record_grants_under(self: &Arc<Self>, prefix: impl Into<String>) -> GrantRecording {
        let log: Arc<dyn GrantLog> =
            Arc::new(Recorder { history: self.clone(), prefix: prefix.into(), pending: Mutex::new(HashMap::new()) });
        grant_log::subscribe(log.clone());
        GrantRecording { log }
    }
}

/// A grant being held.
struct Pending {
    kind: GrantKind,
    path: String,
    token: i64,
    /// `None` for a downgrade while its write lock is held.
    start: Option<u64>,
    end: Option<u64>,
    /// The write lock's node, for a downgrade.
    writer: Option<String>,
    /// Its annotated function's body finished: the drop of its guard is its release.
    finished: bool,
}

struct Recorder {
    history: Arc<History>,
    prefix: String,
    /// By node path.
    pending: Mutex<HashMap<String, Pending>>,
}

impl Recorder {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn records(&self, path: &str) -> bool {
        path.strip_prefix(self.prefix.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/') || self.prefix.ends_with('/'))
    }
}

impl GrantLog for Recorder {
    fn granted(&self, recipe: Recipe, path: &str, node: &str, token: i64, what: Granted<'_>) {
        if !self.records(path) {
            return;
        }
        let start = now_ns();
        let (kind, start, writer) = match what {
            Granted::Lock => (kind_of(recipe), Some(start), None),
            Granted::Lease { leases } => (GrantKind::Semaphore { leases }, Some(start), None),
            Granted::Downgrade { writer } => (GrantKind::Read, None, Some(writer.to_owned())),
        };
        let pending = Pending { kind, path: path.to_owned(), token, start, end: None, writer, finished: false };
        self.pending().insert(node.to_owned(), pending);
    }

    fn finished(&self, node: &str) {
        if let Some(grant) = self.pending().get_mut(node) {
            grant.finished = true;
        }
    }

    fn releasing(&self, node: &str) {
        let now = now_ns();
        let mut pending = self.pending();
        if let Some(grant) = pending.get_mut(node) {
            grant.end = Some(now);
        }
        // The downgrades of this write lock hold the lock alone from the next instant on.
        for grant in pending.values_mut() {
            if grant.writer.as_deref() == Some(node) {
                grant.start.get_or_insert(now + 1);
            }
        }
    }

    fn ended(&self, node: &str, how: Ended<'_>) {
        let Some(grant) = self.pending().remove(node) else { return };
        // A downgrade let go while its write lock was held: it never held the lock alone.
        let Some(start) = grant.start else { return };
        let outcome = match how {
            Ended::Released => Outcome::Released,
            Ended::Dropped if grant.finished => Outcome::Released,
            Ended::Dropped => Outcome::Dropped,
            Ended::ReleaseFailed(error) => Outcome::ReleaseFailed { error: error.to_owned() },
            Ended::Lost(reason) => Outcome::Lost { reason: reason.to_string() },
        };
        self.history.record(Grant {
            holder: node.to_owned(),
            kind: grant.kind,
            path: grant.path,
            token: grant.token,
            start,
            end: grant.end.unwrap_or_else(now_ns),
            outcome,
        });
    }
}

fn kind_of(recipe: Recipe) -> GrantKind {
    match recipe {
        // A leadership is a mutex's hold on the wire, exclusive as one.
        Recipe::Mutex | Recipe::Leader => GrantKind::Mutex,
        Recipe::Read => GrantKind::Read,
        Recipe::Write => GrantKind::Write,
        Recipe::SemaphoreMutex => GrantKind::Semaphore { leases: 1 },
        // Leases are told with their count; this is not reached.
        Recipe::Semaphore => GrantKind::Semaphore { leases: 1 },
    }
}
