//! [`SemaphoreMutex`]: Curator's `InterProcessSemaphoreMutex`, a mutex that is not re-entrant.

use std::fmt;
use std::time::Duration;

use super::patience::Patience;
use super::reentry::{self, Reentry};
use super::semaphore::Semaphore;
use super::target::LockTarget;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::holds::Share;
use crate::layout::Recipe;

/// A distributed mutex that is not re-entrant, compatible with Curator's
/// `InterProcessSemaphoreMutex`: a [`Semaphore`] with one lease, same node layout
/// (`<path>/locks/..` and `<path>/leases/_c_<uuid>-lease-<sequence>`).
///
/// Use it where the holding code must not take the same lock twice: code nested in its holder
/// (an annotated function's body, a guard's [`scope`](SemaphoreMutexGuard::scope)) that asks
/// again through the same [`Client`](crate::Client) gets [`Error::WouldDeadlock`] at once, where Curator's would
/// block forever. Everyone else, sibling futures of the same task included, waits its turn, in
/// queue order. For a lock that nested code may re-enter, use [`Mutex`](crate::Mutex).
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// let lock = zk_lock::SemaphoreMutex::new("/jobs/nightly-report");
/// let guard = lock.lock().await?;
/// let nested = guard.scope(lock.try_lock()).await;
/// assert!(matches!(nested, Err(zk_lock::Error::WouldDeadlock { .. })));
/// // ... the report ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SemaphoreMutex {
    semaphore: Semaphore,
}

impl SemaphoreMutex {
    lock_path_api!(constructors: "semaphore mutex");
    lock_path_api!(settings: "semaphore mutex", semaphore.target);

    pub(crate) fn on(target: LockTarget) -> Self {
        Self { semaphore: Semaphore::on(target, 1) }
    }

    /// Waits for the lock, for at most the client's default timeout (none unless configured:
    /// then it waits as long as it takes). Uncontended, this is one round trip.
    ///
    /// # Errors
    ///
    /// - [`Error::WouldDeadlock`] if this code is nested in the holder of this lock (through the
    ///   same client): it is not re-entrant. Nothing is sent to ZooKeeper.
    /// - [`Error::InvalidPath`] if the path is not a valid lock path.
    /// - [`Error::Timeout`] if the client's default timeout passed first.
    /// - [`Error::ConnectionDown`] if it passed while the connection to ZooKeeper was down: the
    ///   outage, not a holder, ended the wait.
    /// - [`Error::NoAuth`] if the ACL of the nodes at the path refuses this client's credentials
    ///   ([`ClientBuilder::acl`](crate::ClientBuilder::acl)).
    /// - [`Error::Connect`] or [`Error::Zookeeper`] if ZooKeeper cannot be reached or refuses a
    ///   request.
    /// - [`Error::ClientClosed`] once the client is closed
    ///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future at any point removes every node it made (in the
    /// background), and no lock is held.
    pub async fn lock(&self) -> Result<SemaphoreMutexGuard> {
        self.acquire(Patience::client_default()).await
    }

    /// Waits for the lock for at most `timeout`; a zero timeout makes one attempt, like
    /// [`try_lock`](Self::try_lock).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), with [`Error::Timeout`] after `timeout` ([`Error::Busy`] for
    /// zero). Every node made is deleted before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<SemaphoreMutexGuard> {
        self.acquire(Patience::timeout(timeout)).await
    }

    /// Takes the lock if it is free, in one round trip when nobody else is acquiring it. Of
    /// several tries at the same moment on a free lock, exactly one succeeds: they wait for each
    /// other's brief acquiring step, never for a holder.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if someone holds the lock, or waits for it ahead of this try (every node
    /// made is deleted before the error is returned), otherwise as [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<SemaphoreMutexGuard> {
        self.acquire(Patience::one_attempt()).await
    }

    pub(crate) async fn acquire(&self, patience: Patience) -> Result<SemaphoreMutexGuard> {
        self.semaphore.check_request(1)?;
        let target = &self.semaphore.target;
        let client = target.client_within(patience).await?;
        if let Reentry::Refuse(reason) = reentry::decide(&client, Recipe::SemaphoreMutex, self.path()) {
            return Err(reentry::refused(self.path(), reason));
        }
        let mut holds = self.semaphore.acquire_holds(&client, Recipe::SemaphoreMutex, 1, patience).await?;
        let hold = holds.pop().expect("one lease asked, one granted");
        Ok(SemaphoreMutexGuard::new(Share::new(hold, None)))
    }
}

impl fmt::Debug for SemaphoreMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphoreMutex").field("path", &self.path()).finish_non_exhaustive()
    }
}

crate::holds::guard::lock_guard! {
    /// Proof that its owner holds a [`SemaphoreMutex`].
    ///
    /// Release it with [`release`](Self::release) to learn whether the lock was still held until
    /// then. Dropping it instead deletes the lease node in the background (the delete request is
    /// sent before `drop` returns), which also covers cancellation and panics.
    SemaphoreMutexGuard
}
