//! [`Semaphore`]: Curator's `InterProcessSemaphoreV2`, a limited number of leases shared by every
//! process that uses the same path.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::patience::Patience;
use super::shared_count::{SharedCount, VersionedCount};
use super::target::LockTarget;
use crate::client::Client;
use crate::engine::{Grant, LeaseAttempt, LeaseGrant, LeaseLimit, LeaseSpec};
use crate::error::{Error, Result};
use crate::holds::grant_log::Granted;
use crate::holds::{HeldNode, Share};
use crate::layout::Recipe;

/// A distributed counting semaphore at a ZooKeeper path, compatible with Curator's
/// `InterProcessSemaphoreV2`: at most `max_leases` leases exist at once across every process
/// (Rust or Java) using the path.
///
/// Each lease is a node `<path>/leases/_c_<uuid>-lease-<sequence>`; requests queue for the
/// semaphore's internal mutex `<path>/locks` and are served in that order (fair). Every process
/// must use the same limit, as with Curator, or drive it with a [`SharedCount`]
/// ([`with_count`](Self::with_count)): raising the count wakes a waiting request.
///
/// Leases are not re-entrant: every acquisition takes new leases, even in code nested in the
/// holder of some. Each [`SemaphorePermit`] is one lease, released on its own.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// // At most 4 transcoding jobs at once, in the whole fleet.
/// let slots = zk_lock::Semaphore::new("/workers/transcode", 4);
/// let permit = slots.acquire().await?;
/// // ... transcode ...
/// permit.release().await?;
///
/// // A big job takes two slots, and gives them back one by one.
/// let mut two = slots.acquire_many(2).await?;
/// two.pop().unwrap().release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    pub(crate) target: LockTarget,
    limit: Limit,
    /// Whether the last acquisition through this semaphore (or a clone) found it free, so the
    /// next one creates its leases in the same round trip as its place in the queue.
    uncontended: Arc<AtomicBool>,
}

#[derive(Clone)]
enum Limit {
    Fixed(u32),
    Shared(SharedCount),
}

impl Semaphore {
    /// A semaphore at `path` allowing `max_leases` leases at once, on the registry's default
    /// client.
    ///
    /// The path and the limit are checked when acquiring: an invalid path fails with
    /// [`Error::InvalidPath`], a limit of 0 with [`Error::InvalidArgument`].
    #[track_caller]
    pub fn new(path: impl Into<String>, max_leases: u32) -> Self {
        Self::on(LockTarget::new(None, path.into()), max_leases)
    }

    /// A semaphore at `path` allowing `max_leases` leases at once, on `client`.
    #[track_caller]
    pub fn with_client(client: &Client, path: impl Into<String>, max_leases: u32) -> Self {
        Self::on(LockTarget::new(Some(client), path.into()), max_leases)
    }

    pub(crate) fn on(target: LockTarget, max_leases: u32) -> Self {
        Self::build(target, Limit::Fixed(max_leases))
    }

    /// A semaphore at `path` whose limit is the current value of `count` (Curator's
    /// `SharedCountReader` constructor), on the registry's default client. A change of the count
    /// is seen at once by waiting requests; a count of 0 or less grants nothing until it rises.
    /// The count is started by the first acquisition if it was not started yet.
    #[track_caller]
    pub fn with_count(path: impl Into<String>, count: SharedCount) -> Self {
        Self::build(LockTarget::new(None, path.into()), Limit::Shared(count))
    }

    /// As [`with_count`](Self::with_count), on `client` (the count may use another client).
    #[track_caller]
    pub fn with_client_and_count(client: &Client, path: impl Into<String>, count: SharedCount) -> Self {
        Self::build(LockTarget::new(Some(client), path.into()), Limit::Shared(count))
    }

    fn build(target: LockTarget, limit: Limit) -> Self {
        Self { target, limit, uncontended: Arc::new(AtomicBool::new(true)) }
    }

    lock_path_api!(settings: "semaphore", target);

    /// The limit: the fixed one, or the latest value seen of the shared count (negative counts
    /// read as 0).
    pub fn max_leases(&self) -> u32 {
        match &self.limit {
            Limit::Fixed(max) => *max,
            Limit::Shared(count) => u32::try_from(count.get()).unwrap_or(0),
        }
    }

    /// Waits for one lease, for at most the client's default timeout (none unless configured:
    /// then it waits as long as it takes, like Curator's `acquire()`).
    ///
    /// Uncontended, this is one round trip.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidPath`] if the path is not a valid lock path.
    /// - [`Error::InvalidArgument`] if the semaphore allows 0 leases.
    /// - [`Error::Timeout`] if the client's default timeout passed first.
    /// - [`Error::ConnectionDown`] if it passed while the connection to ZooKeeper was down: the
    ///   outage, not a holder, ended the wait.
    /// - [`Error::NoAuth`] if the ACL of the nodes at the path refuses this client's credentials
    ///   ([`ClientBuilder::acl`](crate::ClientBuilder::acl)).
    /// - [`Error::Connect`] or [`Error::Zookeeper`] if ZooKeeper cannot be reached or refuses a
    ///   request; for a [`with_count`](Self::with_count) semaphore also the errors of
    ///   [`SharedCount::start`].
    /// - [`Error::ClientClosed`] once the client is closed
    ///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future at any point removes every node it made (in the
    /// background), and no lease is held.
    pub async fn acquire(&self) -> Result<SemaphorePermit> {
        self.acquire_one(Patience::client_default()).await
    }

    /// Waits for `n` leases at once, for at most the client's default timeout. They are granted
    /// together, when `n` fit; `n = 0` returns no permit at once.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); [`Error::InvalidArgument`] if `n` exceeds a fixed limit.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire): no lease is kept unless all `n` are granted.
    pub async fn acquire_many(&self, n: u32) -> Result<Vec<SemaphorePermit>> {
        self.acquire_permits(n, Patience::client_default()).await
    }

    /// Takes one lease if one is free (Curator's `acquire(0, unit)`), in one round trip when
    /// nobody else is acquiring. Requests that arrive at the same moment wait for each other while
    /// they take free leases: of three tries at the same instant on a free semaphore of two
    /// leases, two succeed.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if the leases are taken: held, or waited for by a request ahead of this one
    /// (every node made is deleted before the error is returned). Otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<SemaphorePermit> {
        self.acquire_one(Patience::one_attempt()).await
    }

    /// Takes `n` leases if they are free, one attempt, as [`try_acquire`](Self::try_acquire).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire) and [`acquire_many`](Self::acquire_many).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire_many(&self, n: u32) -> Result<Vec<SemaphorePermit>> {
        self.acquire_permits(n, Patience::one_attempt()).await
    }

    /// Waits for one lease for at most `timeout`; a zero timeout makes one attempt, like
    /// [`try_acquire`](Self::try_acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), with [`Error::Timeout`] after `timeout` ([`Error::Busy`]
    /// for zero). Every node made is deleted before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<SemaphorePermit> {
        self.acquire_one(Patience::timeout(timeout)).await
    }

    /// Waits for `n` leases for at most `timeout`; a zero timeout makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many), with [`Error::Timeout`] after `timeout`
    /// ([`Error::Busy`] for zero). Every node made is deleted before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn acquire_many_timeout(&self, n: u32, timeout: Duration) -> Result<Vec<SemaphorePermit>> {
        self.acquire_permits(n, Patience::timeout(timeout)).await
    }

    pub(crate) async fn acquire_one(&self, patience: Patience) -> Result<SemaphorePermit> {
        let mut permits = self.acquire_permits(1, patience).await?;
        Ok(permits.pop().expect("one lease asked, one granted"))
    }

    async fn acquire_permits(&self, n: u32, patience: Patience) -> Result<Vec<SemaphorePermit>> {
        self.check_request(n)?;
        let client = self.target.client_within(patience).await?;
        let holds = self.acquire_holds(&client, Recipe::Semaphore, n, patience).await?;
        Ok(holds.into_iter().map(|hold| SemaphorePermit::new(Share::new(hold, None))).collect())
    }

    /// Refuses, before any client is looked up or connected, a request that could never be
    /// granted: an invalid path, a semaphore with no leases, more leases than it allows.
    pub(crate) fn check_request(&self, n: u32) -> Result<()> {
        let path = &self.target.path;
        self.target.check_path()?;
        self.target.check_max_hold()?;
        if let Limit::Fixed(max) = self.limit {
            if max == 0 {
                return Err(never_granted(
                    path,
                    "the semaphore allows 0 leases, so no lease can ever be granted; give it at least 1",
                ));
            }
            if n > max {
                return Err(never_granted(
                    path,
                    &format!("{n} leases were asked for at once, but the semaphore allows only {max}; ask for fewer"),
                ));
            }
        }
        Ok(())
    }

    /// Takes `n` leases, once [`check_request`](Self::check_request) accepted them; each becomes
    /// a hold of its own (leases are never re-entered).
    pub(crate) async fn acquire_holds(
        &self,
        client: &Client,
        recipe: Recipe,
        n: u32,
        patience: Patience,
    ) -> Result<Vec<Arc<HeldNode>>> {
        let path = &self.target.path;
        if n == 0 {
            return Ok(Vec::new());
        }
        let limit = match &self.limit {
            Limit::Fixed(max) => CurrentLimit::Fixed(*max),
            Limit::Shared(count) => {
                count.start().await?;
                CurrentLimit::Shared(count.subscribe())
            }
        };
        let data = self.target.node_data();
        let spec = LeaseSpec { path, count: n as usize, data: &data, uncontended: &self.uncontended };
        let start = |session, may_wait, acls| LeaseAttempt::new(session, &spec, acls, limit.clone(), may_wait);
        let hold = |granted: LeaseGrant| {
            // The count the leases were granted under (a shared count may have changed while
            // the request waited), for the grant recording.
            let leases = self.max_leases();
            let holds = granted.leases.into_iter().map(|lease| {
                let lease = Grant {
                    session: granted.session.clone(),
                    node_path: lease.node_path,
                    token: lease.token,
                    losses_seen: granted.losses_seen,
                    local: None,
                    claim: lease.claim,
                };
                self.target.hold(client, recipe, lease, Granted::Lease { leases })
            });
            holds.collect()
        };
        self.target.run_attempts(client, recipe, patience, start, hold).await
    }
}

/// The limit an acquisition counts leases against.
#[derive(Clone)]
enum CurrentLimit {
    Fixed(u32),
    /// Curator's `SharedCountReader`: a change of the count wakes the waiter.
    Shared(watch::Receiver<VersionedCount>),
}

impl LeaseLimit for CurrentLimit {
    /// A negative shared count allows nothing.
    fn current(&mut self) -> usize {
        match self {
            Self::Fixed(max) => *max as usize,
            Self::Shared(count) => usize::try_from(count.borrow_and_update().value).unwrap_or(0),
        }
    }

    async fn changed(&mut self) {
        if let Self::Shared(count) = self {
            if count.changed().await.is_ok() {
                return;
            }
        }
        std::future::pending().await
    }
}

/// An acquisition that could never succeed: it would wait forever.
fn never_granted(path: &str, reason: &str) -> Error {
    Error::invalid_argument(path, reason)
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Semaphore");
        debug.field("path", &self.target.path);
        match &self.limit {
            Limit::Fixed(max) => debug.field("max_leases", max),
            Limit::Shared(count) => debug.field("count", count),
        };
        debug.finish_non_exhaustive()
    }
}

crate::holds::guard::lock_guard! {
    /// One lease of a [`Semaphore`].
    ///
    /// Release it with [`release`](Self::release) to learn whether the lease was still held
    /// until then. Dropping it instead deletes the lease node in the background (the delete
    /// request is sent before `drop` returns), which also covers cancellation and panics.
    /// [`lost`](Self::lost) resolves if someone else deletes the lease node or the session ends.
    SemaphorePermit
}
