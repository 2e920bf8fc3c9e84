//! [`Mutex`]: Curator's `InterProcessMutex`, re-entrant for code nested in its holder.

use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::time::Duration;

use futures::FutureExt;

use super::patience::Patience;
use super::target::LockTarget;
use crate::error::Result;
use crate::layout::Recipe;

/// A distributed mutual-exclusion lock at a ZooKeeper path, compatible with Curator's
/// `InterProcessMutex`: Rust and Java processes using the same path exclude each other.
///
/// Waiters are served in the order they queued (fair). The lock is re-entrant for code nested in
/// its holder: the body of an annotated function and what it awaits, or the future given to the
/// guard's [`scope`](MutexGuard::scope). Such code that locks it again through the same
/// [`Client`](crate::Client) gets a new guard without a new node (nested acquisitions borrow it one at a time);
/// the node is deleted when the last of its guards goes. Everything else waits its turn: sibling
/// futures of the same task (`join!`, `select!`, streams), spawned tasks, later code of the
/// task (which would wait for itself), other clients and processes.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// let mutex = zk_lock::Mutex::new("/locks/orders");
/// let guard = mutex.lock().await?;
/// // ... work that must not run twice at once, anywhere ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Mutex {
    target: LockTarget,
}

impl Mutex {
    lock_path_api!(constructors: "mutex");
    lock_path_api!(settings: "mutex", target);
    lock_path_api!(queue_reports: "mutex");

    pub(crate) fn on(target: LockTarget) -> Self {
        Self { target }
    }

    /// The lock this recipe takes (a multi-lock checks its members' paths before taking any).
    pub(crate) fn target(&self) -> &LockTarget {
        &self.target
    }

    /// Where it was made, for lock-order checking's reports (a multi-lock's members: the
    /// multi-lock's own construction).
    pub(crate) fn made_at(mut self, at: &'static Location<'static>) -> Self {
        self.target.made_at = at;
        self
    }

    /// Waits for the lock, for at most the client's default timeout (none unless configured:
    /// then it waits as long as it takes, like Curator's `acquire()`).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidPath`](crate::Error::InvalidPath) if the path is not a valid lock path.
    /// - [`Error::Timeout`](crate::Error::Timeout) if the client's default timeout passed first.
    /// - [`Error::ConnectionDown`](crate::Error::ConnectionDown) if it passed while the connection to ZooKeeper was down: the
    ///   outage, not a holder, ended the wait.
    /// - [`Error::Lost`](crate::Error::Lost) if this code is nested in the lock's holder and the
    ///   lock was lost.
    /// - [`Error::NoAuth`](crate::Error::NoAuth) if the ACL of the nodes at the path refuses this client's credentials
    ///   ([`ClientBuilder::acl`](crate::ClientBuilder::acl)).
    /// - [`Error::Connect`](crate::Error::Connect) or [`Error::Zookeeper`](crate::Error::Zookeeper)
    ///   if ZooKeeper cannot be reached or refuses a request.
    /// - [`Error::ClientClosed`](crate::Error::ClientClosed) once the client is closed
    ///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future at any point removes its queue node (in the background),
    /// and no lock is held.
    pub async fn lock(&self) -> Result<MutexGuard> {
        self.acquire(Patience::client_default()).await
    }

    /// Waits for the lock for at most `timeout`; a zero timeout makes one attempt, like
    /// [`try_lock`](Self::try_lock).
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock), with [`Error::Timeout`](crate::Error::Timeout) after `timeout`
    /// (or [`Error::Busy`](crate::Error::Busy) for a zero timeout). The queue node is deleted
    /// before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<MutexGuard> {
        self.acquire(Patience::timeout(timeout)).await
    }

    /// Takes the lock if nobody holds it or waits for it, in one round trip (two when the lock
    /// path does not exist yet).
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if someone is ahead (the queue node is deleted before
    /// the error is returned), otherwise as [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<MutexGuard> {
        self.acquire(Patience::one_attempt()).await
    }

    /// Not an `async fn`, whose frame would keep `patience` twice in every waiting acquisition.
    pub(crate) fn acquire(&self, patience: Patience) -> impl Future<Output = Result<MutexGuard>> + '_ {
        self.target.acquire(Recipe::Mutex, patience).map(|share| share.map(MutexGuard::new))
    }
}

impl fmt::Debug for Mutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mutex").field("path", &self.target.path).finish_non_exhaustive()
    }
}

crate::holds::guard::lock_guard! {
    /// Proof that its owner holds a [`Mutex`].
    ///
    /// Release it with [`release`](Self::release) to learn whether the lock was still held until
    /// then. Dropping it instead deletes the lock node in the background (the delete request is
    /// sent before `drop` returns), which also covers cancellation and panics.
    MutexGuard
}
