//! [`RwLock`]: Curator's `InterProcessReadWriteLock`, fair, re-entrant, with downgrade.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use futures::FutureExt;

use super::patience::Patience;
use super::target::LockTarget;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::layout::Recipe;

/// A distributed read/write lock at a ZooKeeper path, compatible with Curator's
/// `InterProcessReadWriteLock` (`_c_<uuid>-__READ__<seq>` and `_c_<uuid>-__WRIT__<seq>` nodes).
///
/// Readers share the lock; a writer excludes everyone. It is fair: everyone is served in queue
/// order, so a queued writer keeps later readers waiting and is never starved.
///
/// Both sides are re-entrant for code nested in their holder, as [`Mutex`](crate::Mutex) is.
/// Code nested in the write lock's holder may also take the read lock (a downgrade: release the
/// write lock afterwards and keep reading, with no writer slipping in between); a sibling reader
/// waits for the writer. Code nested in a read lock's holder (and in no write lock's) that asks
/// for the write lock gets [`Error::WouldDeadlock`] at once: it would wait for itself.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// let lock = zk_lock::RwLock::new("/catalog/sku-42");
/// let price = {
///     let _read = lock.read().await?;
///     // ... read the price; other readers may do the same meanwhile ...
/// };
/// let write = lock.write().await?;
/// // ... change the price; nobody reads or writes meanwhile ...
/// write.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    target: LockTarget,
}

impl RwLock {
    lock_path_api!(constructors: "read/write lock");
    lock_path_api!(settings: "read/write lock", target);
    lock_path_api!(queue_reports: "read/write lock");

    pub(crate) fn on(target: LockTarget) -> Self {
        Self { target }
    }

    /// The lock this recipe takes (a multi-lock checks its members' paths before taking any).
    pub(crate) fn target(&self) -> &LockTarget {
        &self.target
    }

    /// Waits for the read lock, for at most the client's default timeout (none unless
    /// configured).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidPath`] if the path is not a valid lock path.
    /// - [`Error::Timeout`] if the client's default timeout passed first.
    /// - [`Error::ConnectionDown`] if it passed while the connection to ZooKeeper was down: the
    ///   outage, not a holder, ended the wait.
    /// - [`Error::Lost`] if this code is nested in the lock's holder and the lock was lost.
    /// - [`Error::NoAuth`] if the ACL of the nodes at the path refuses this client's credentials
    ///   ([`ClientBuilder::acl`](crate::ClientBuilder::acl)).
    /// - [`Error::Connect`] or [`Error::Zookeeper`] if ZooKeeper cannot be reached or refuses a
    ///   request.
    /// - [`Error::ClientClosed`] once the client is closed
    ///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future at any point removes its queue node (in the background).
    pub async fn read(&self) -> Result<ReadGuard> {
        self.acquire_read(Patience::client_default()).await
    }

    /// Waits for the read lock for at most `timeout`; zero makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read), with [`Error::Timeout`] after `timeout` ([`Error::Busy`] for
    /// zero). The queue node is deleted before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn read_timeout(&self, timeout: Duration) -> Result<ReadGuard> {
        self.acquire_read(Patience::timeout(timeout)).await
    }

    /// Takes the read lock if no writer holds it or waits for it, in one round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if a writer is ahead, otherwise as [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn try_read(&self) -> Result<ReadGuard> {
        self.acquire_read(Patience::one_attempt()).await
    }

    /// Waits for the write lock, for at most the client's default timeout (none unless
    /// configured).
    ///
    /// # Errors
    ///
    /// - [`Error::WouldDeadlock`] if this code is nested in a holder of the read lock and in no
    ///   holder of the write lock.
    /// - Otherwise as [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn write(&self) -> Result<WriteGuard> {
        self.acquire_write(Patience::client_default()).await
    }

    /// Waits for the write lock for at most `timeout`; zero makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write), with [`Error::Timeout`] after `timeout` ([`Error::Busy`] for
    /// zero). The queue node is deleted before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn write_timeout(&self, timeout: Duration) -> Result<WriteGuard> {
        self.acquire_write(Patience::timeout(timeout)).await
    }

    /// Takes the write lock if nobody holds it or waits for it, in one round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if anyone is ahead, otherwise as [`write`](Self::write).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn try_write(&self) -> Result<WriteGuard> {
        self.acquire_write(Patience::one_attempt()).await
    }

    /// Not an `async fn`, whose frame would keep `patience` twice in every waiting acquisition.
    pub(crate) fn acquire_read(&self, patience: Patience) -> impl Future<Output = Result<ReadGuard>> + '_ {
        self.target.acquire(Recipe::Read, patience).map(|share| share.map(ReadGuard::new))
    }

    /// Not an `async fn`, whose frame would keep `patience` twice in every waiting acquisition.
    pub(crate) fn acquire_write(&self, patience: Patience) -> impl Future<Output = Result<WriteGuard>> + '_ {
        self.target.acquire(Recipe::Write, patience).map(|share| share.map(WriteGuard::new))
    }
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock").field("path", &self.target.path).finish_non_exhaustive()
    }
}

crate::holds::guard::lock_guard! {
    /// Proof that its owner holds the read side of an [`RwLock`]. Dropping it releases the lock
    /// in the background; [`release`](Self::release) reports whether it was still held.
    ReadGuard
}

crate::holds::guard::lock_guard! {
    /// Proof that its owner holds the write side of an [`RwLock`]. Dropping it releases the
    /// lock in the background; [`release`](Self::release) reports whether it was still held.
    WriteGuard
}
