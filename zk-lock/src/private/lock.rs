//! How an annotated function takes its lock (`Lock`): the named or default client, the
//! patience counted from the call's start, the recipe's target made with the function's
//! declaration, and the recipe's acquisition.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::declared::Declaration;
use crate::engine::QueuePosition;
use crate::error::Result;
use crate::recipes::leader::{LeaderElection, Leadership};
use crate::recipes::multi_lock::{MultiGuard, MultiLock, MultiMember};
use crate::recipes::mutex::{Mutex, MutexGuard};
use crate::recipes::patience::{Limit, Patience};
use crate::recipes::rwlock::{ReadGuard, RwLock, WriteGuard};
use crate::recipes::semaphore::{Semaphore, SemaphorePermit};
use crate::recipes::semaphore_mutex::{SemaphoreMutex, SemaphoreMutexGuard};
use crate::recipes::target::LockTarget;
use crate::registry::named_client;

/// How an annotated function takes its lock: where it is declared, which client, how
/// patiently. Every attribute goes the same way: the rendered path, its declaration and the
/// named (or default) client make the recipe's target, and the recipe acquires it with the
/// attribute's patience.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lock {
    /// The function's declarations, one per path: the sites lock-order checking reports.
    sites: &'static [Declaration],
    client: Option<&'static str>,
    limit: Limit,
    max_hold: Option<Duration>,
    /// `queue_reports = f`: told each waiting acquisition's place, as `with_queue_reports`.
    queue_reports: Option<fn(&QueuePosition)>,
}

impl Lock {
    /// The lock declared at `sites` (one per path), with the default client and timeout.
    #[must_use]
    pub const fn declared(sites: &'static [Declaration]) -> Self {
        Self { sites, client: None, limit: Limit::ClientDefault, max_hold: None, queue_reports: None }
    }

    /// A lock declared nowhere, as one taken through the API, with the default client and
    /// timeout.
    #[must_use]
    pub const fn new() -> Self {
        Self::declared(&[])
    }

    /// `client = "name"`.
    #[must_use]
    pub const fn client(mut self, name: &'static str) -> Self {
        self.client = Some(name);
        self
    }

    /// `timeout = ".."`, as whole seconds and nanoseconds.
    #[must_use]
    pub const fn timeout(mut self, secs: u64, nanos: u32) -> Self {
        self.limit = Limit::Timeout(Duration::new(secs, nanos));
        self
    }

    /// `max_hold = ".."`.
    #[must_use]
    pub const fn max_hold(mut self, secs: u64, nanos: u32) -> Self {
        self.max_hold = Some(Duration::new(secs, nanos));
        self
    }

    /// `queue_reports = f`: `f` is told where each waiting acquisition stands in its lock's
    /// queue, as with [`Mutex::with_queue_reports`] (for a multi-lock, each member's queue, each
    /// position naming its path). A `fn` pointer, so that the lock stays `Copy`; a closure that
    /// captures nothing coerces to one.
    #[must_use]
    pub const fn queue_reports(mut self, report: fn(&QueuePosition)) -> Self {
        self.queue_reports = Some(report);
        self
    }

    /// The lock at the rendered `path` on the attribute's client (`None`: the default one, which
    /// the recipe connects on its first use within the call's timeout), and the patience of its
    /// acquisition, counted from the call's start.
    fn target(self, path: Result<String>) -> Result<(LockTarget, Patience)> {
        let patience = Patience::from_now(self.limit);
        let path = path?;
        let client = self.named_client()?;
        Ok((self.target_at(client.as_ref(), path, 0), patience))
    }

    /// The client the attribute names, if it names one.
    fn named_client(self) -> Result<Option<Client>> {
        self.client.map(named_client).transpose()
    }

    /// The lock at `path`, declared at the function's `index`th site, on `client` (`None`: the
    /// default one).
    fn target_at(self, client: Option<&Client>, path: String, index: usize) -> LockTarget {
        let mut target = LockTarget::new(client, path).declared_at(self.sites.get(index));
        if let Some(limit) = self.max_hold {
            target.set_max_hold(limit);
        }
        if let Some(report) = self.queue_reports {
            target.set_queue_reports(Arc::new(report));
        }
        target
    }

    /// `#[zk_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`Mutex::lock`], the timeout bounding the first connection of
    /// the default client too.
    pub async fn mutex(self, path: Result<String>) -> Result<MutexGuard> {
        let (target, patience) = self.target(path)?;
        Mutex::on(target).acquire(patience).await
    }

    /// `#[zk_read_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`RwLock::read`], the timeout bounding the first connection
    /// of the default client too.
    pub async fn read(self, path: Result<String>) -> Result<ReadGuard> {
        let (target, patience) = self.target(path)?;
        RwLock::on(target).acquire_read(patience).await
    }

    /// `#[zk_write_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`RwLock::write`], the timeout bounding the first connection
    /// of the default client too.
    pub async fn write(self, path: Result<String>) -> Result<WriteGuard> {
        let (target, patience) = self.target(path)?;
        RwLock::on(target).acquire_write(patience).await
    }

    /// `#[zk_semaphore(permits = N)]` with `N > 1`: one lease of `N`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`Semaphore::acquire`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn semaphore(self, path: Result<String>, permits: u32) -> Result<SemaphorePermit> {
        let (target, patience) = self.target(path)?;
        Semaphore::on(target, permits).acquire_one(patience).await
    }

    /// `#[zk_semaphore]` with one permit: the lease of a [`SemaphoreMutex`], so that a call
    /// nested in its body fails at once instead of waiting for itself.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`SemaphoreMutex::lock`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn semaphore_mutex(self, path: Result<String>) -> Result<SemaphoreMutexGuard> {
        let (target, patience) = self.target(path)?;
        SemaphoreMutex::on(target).acquire(patience).await
    }

    /// `#[zk_leader]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`LeaderElection::lead`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn leader(self, path: Result<String>) -> Result<Leadership> {
        let (target, patience) = self.target(path)?;
        LeaderElection::on(target).acquire(patience).await
    }

    /// `#[zk_multi_lock]`.
    ///
    /// # Errors
    ///
    /// The first rendering error, or as [`MultiLock::lock`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn multi(self, paths: Result<Vec<String>>) -> Result<MultiGuard> {
        let patience = Patience::from_now(self.limit);
        let paths = paths?;
        let client = self.named_client()?;
        let members = paths
            .into_iter()
            .enumerate()
            .map(|(i, path)| MultiMember::from(Mutex::on(self.target_at(client.as_ref(), path, i))));
        // The members carry the attribute's max_hold, which a multi-lock counts from the whole grant.
        let lock = MultiLock::from_members(members);
        lock.acquire(patience).await
    }
}
