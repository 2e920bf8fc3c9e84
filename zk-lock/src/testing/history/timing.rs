//! Recording as the work happens: the shared clock, a guard that times its grant, a timed
//! fenced write.

use std::future::Future;
use std::ops::Deref;
use std::sync::LazyLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::FutureExt;

use super::record::{FencedWrite, Grant, GrantKind, Outcome};
use super::History;
use crate::{Error, LostReason, MutexGuard, ReadGuard, SemaphoreMutexGuard, SemaphorePermit, WriteGuard};

/// Nanoseconds since the Unix epoch on a clock all processes of the machine share, for the
/// times of a [`Grant`] and a [`FencedWrite`].
///
/// The wall clock is read once per process and advanced with the monotonic clock, so a clock
/// step during the run cannot reorder one process's own times. The reading is taken between two
/// monotonic ones less than 20 µs apart (tried again otherwise), so a preemption between them
/// cannot shift this process's clock against the others'.
pub fn now_ns() -> u64 {
    static ANCHOR: LazyLock<(u64, Instant)> = LazyLock::new(|| {
        const TIGHT: std::time::Duration = std::time::Duration::from_micros(20);
        let mut best = None;
        for _ in 0..100 {
            let before = Instant::now();
            let wall = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
            let after = Instant::now();
            let gap = after - before;
            let anchor = (u64::try_from(wall).unwrap_or(u64::MAX), before + gap / 2);
            if gap < TIGHT {
                return anchor;
            }
            best = match best {
                Some((best_gap, _)) if best_gap <= gap => best,
                _ => Some((gap, anchor)),
            };
        }
        best.map(|(_, anchor)| anchor).expect("tried at least once")
    });
    let elapsed = u64::try_from(ANCHOR.1.elapsed().as_nanos()).unwrap_or(u64::MAX);
    ANCHOR.0.saturating_add(elapsed)
}

/// A lock guard whose grant [`History::time_grant`] can time. The guards of this crate
/// implement it; a test may implement it for its own wrapper (an enum of guards, say) by
/// delegating to the guard's methods of the same names.
pub trait TimedLock: Send {
    /// The lock path.
    fn path(&self) -> &str;

    /// The fencing token.
    fn fencing_token(&self) -> i64;

    /// Whether the lock is still held.
    fn is_held(&self) -> bool;

    /// Resolves when the lock is lost, with the reason; never, if it is released first.
    fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static;

    /// Releases the lock.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] if the lock had been lost before the release.
    fn release(self) -> impl Future<Output = crate::Result<()>> + Send
    where
        Self: Sized;
}

macro_rules! timed_lock {
    ($($guard:ty),*) => {$(
        impl TimedLock for $guard {
            fn path(&self) -> &str {
                <$guard>::path(self)
            }

            fn fencing_token(&self) -> i64 {
                <$guard>::fencing_token(self)
            }

            fn is_held(&self) -> bool {
                <$guard>::is_held(self)
            }

            fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
                <$guard>::lost(self)
            }

            fn release(self) -> impl Future<Output = crate::Result<()>> + Send {
                <$guard>::release(self)
            }
        }
    )*};
}

timed_lock!(MutexGuard, ReadGuard, WriteGuard, SemaphorePermit, SemaphoreMutexGuard);

/// A guard whose grant is being timed: made by [`History::time_grant`] right after the acquire
/// returned, it records the grant when it is released or dropped. It dereferences to the guard.
#[must_use = "the grant is recorded, and the lock released, as soon as it is dropped"]
pub struct TimedGuard<'h, G: TimedLock> {
    history: &'h History,
    holder: String,
    kind: GrantKind,
    path: String,
    token: i64,
    start: u64,
    /// `None` once handed to the release.
    guard: Option<G>,
    /// Set when the release starts: the end of the hold and how the lock stood then. With no
    /// guard either, the grant is recorded.
    ended: Option<(u64, Option<Outcome>)>,
}

impl History {
    /// Starts timing a grant: call it right after the acquire returned. The grant is recorded
    /// when the returned guard is [released](TimedGuard::release) or dropped, with its end
    /// taken before the release is sent.
    ///
    /// A downgrade's read grant overlaps its write grant by design: time it from the write's
    /// release, or leave it out.
    ///
    /// Record only the outermost grant of a re-entrant lock: its inner grants share its node
    /// and token, and would count as holders at once.
    pub fn time_grant<G: TimedLock>(&self, holder: impl Into<String>, kind: GrantKind, guard: G) -> TimedGuard<'_, G> {
        let start = now_ns();
        TimedGuard {
            history: self,
            holder: holder.into(),
            kind,
            path: guard.path().to_owned(),
            token: guard.fencing_token(),
            start,
            guard: Some(guard),
            ended: None,
        }
    }

    /// Runs `write`, a write to a fenced store that answers whether it accepted it, and records
    /// it as a [`FencedWrite`] of `writer` with `token` under the lock `path`. Returns what the
    /// store answered.
    ///
    /// # Errors
    ///
    /// The write's own error, which leaves nothing recorded.
    ///
    /// # Cancel safety
    ///
    /// Cancelled, it records nothing: whether the store took the write is unknown.
    pub async fn time_write<E>(
        &self,
        writer: impl Into<String>,
        path: impl Into<String>,
        token: i64,
        write: impl Future<Output = Result<bool, E>>,
    ) -> Result<bool, E> {
        let sent = now_ns();
        let accepted = write.await?;
        let answered = now_ns();
        self.record(FencedWrite { writer: writer.into(), path: path.into(), token, sent, answered, accepted });
        Ok(accepted)
    }
}

/// How a lock that is no longer held ended, as its guard tells.
fn lost_outcome<G: TimedLock>(guard: &G) -> Outcome {
    let reason = match guard.lost().now_or_never() {
        Some(reason) => reason.to_string(),
        None => "is_held() was false at the end of the critical section".to_owned(),
    };
    Outcome::Lost { reason }
}

impl<G: TimedLock> TimedGuard<'_, G> {
    /// [`now_ns`] when the grant started.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Runs `write` with this grant's path and fencing token, as
    /// [`History::time_write`] does, naming this grant's holder as the writer.
    ///
    /// # Errors
    ///
    /// The write's own error, which leaves nothing recorded.
    ///
    /// # Cancel safety
    ///
    /// Cancelled, it records nothing.
    pub async fn fenced_write<E>(&self, write: impl Future<Output = Result<bool, E>>) -> Result<bool, E> {
        self.history.time_write(self.holder.as_str(), self.path.as_str(), self.token, write).await
    }

    /// Takes the end of the grant, releases the lock and records the grant: released, lost (when
    /// the lock was not held at the end, or the release says [`Error::Lost`]), or release-failed.
    ///
    /// # Errors
    ///
    /// The release's error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the guard's release is, and a cancelled release is recorded as
    /// [`Outcome::Dropped`] (or lost, when the lock was not held at the end).
    pub async fn release(mut self) -> crate::Result<()> {
        let end = now_ns();
        let guard = self.guard.take().expect("a timed guard holds its guard until released");
        let lost = (!guard.is_held()).then(|| lost_outcome(&guard));
        self.ended = Some((end, lost.clone()));
        let released = guard.release().await;
        let outcome = match (&released, lost) {
            (Err(Error::Lost { reason, .. }), _) => Outcome::Lost { reason: reason.to_string() },
            (_, Some(lost)) => lost,
            (Ok(()), None) => Outcome::Released,
            (Err(error), None) => Outcome::ReleaseFailed { error: error.to_string() },
        };
        self.finish(end, outcome);
        released
    }

    fn finish(&mut self, end: u64, outcome: Outcome) {
        self.ended = None;
        self.history.record(Grant {
            holder: std::mem::take(&mut self.holder),
            kind: self.kind,
            path: std::mem::take(&mut self.path),
            token: self.token,
            start: self.start,
            end,
            outcome,
        });
    }
}

impl<G: TimedLock> Deref for TimedGuard<'_, G> {
    type Target = G;

    fn deref(&self) -> &G {
        self.guard.as_ref().expect("a timed guard holds its guard until released")
    }
}

impl<G: TimedLock> Drop for TimedGuard<'_, G> {
    /// Records a grant whose guard was dropped (a panic or a cancellation in the critical
    /// section, or a release cancelled), before the guard itself is dropped.
    fn drop(&mut self) {
        let (end, outcome) = match (self.ended.take(), &self.guard) {
            (Some((end, lost)), _) => (end, lost.unwrap_or(Outcome::Dropped)),
            (None, Some(guard)) => {
                let end = now_ns();
                (end, if guard.is_held() { Outcome::Dropped } else { lost_outcome(guard) })
            }
            // Released: recorded already.
            (None, None) => return,
        };
        self.finish(end, outcome);
    }
}
