//! How an annotated function takes its lock (`Lock`): the named or default client, the
//! patience counted from the call's start, the recipe's target made with the function's
//! declaration, and the recipe's acquisition.

use std::time::Duration;

use crate::client::Client;
use crate::declared::Declaration;
use crate::error::Result;
use crate::path::validate_lock_path;
use crate::recipes::multi_lock::{MultiGuard, MultiLock, MultiMember};
use crate::recipes::mutex::{Mutex, MutexGuard};
use crate::recipes::patience::Patience;
use crate::recipes::rwlock::{ReadGuard, RwLock, WriteGuard};
use crate::recipes::semaphore::{Semaphore, SemaphorePermit};
use crate::recipes::semaphore_mutex::{SemaphoreMutex, SemaphoreMutexGuard};
use crate::recipes::target::LockTarget;
use crate::registry::{self, named_client};

/// How an annotated function takes its lock: where it is declared, which client, how
/// patiently. Every attribute goes the same way: the rendered path, its declaration and the
/// named (or default) client make the recipe's target, and the recipe acquires it with the
/// attribute's patience.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lock {
    /// The function's declarations, one per path: the sites lock-order checking reports.
    sites: &'static [Declaration],
    client: Option<&'static str>,
    patience: Patience,
    max_hold: Option<Duration>,
}

impl Lock {
    /// The lock declared at `sites` (one per path), with the default client and timeout.
    #[must_use]
    pub const fn declared(sites: &'static [Declaration]) -> Self {
        Self { sites, client: None, patience: Patience::Default, max_hold: None }
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
        self.patience = Patience::Timeout(Duration::new(secs, nanos));
        self
    }

    /// `max_hold = ".."`.
    #[must_use]
    pub const fn max_hold(mut self, secs: u64, nanos: u32) -> Self {
        self.max_hold = Some(Duration::new(secs, nanos));
        self
    }

    /// The client of a call that takes the locks at `paths` with `patience`: the one the
    /// attribute names, or else the default client, connected on its first use before the
    /// call's timeout passes (`patience` counts from the call's start: the timeout is the call's
    /// whole deadline). The paths are checked first, so a bad one is reported before anything
    /// is connected.
    async fn call_client(self, patience: Patience, paths: &[&str]) -> Result<Client> {
        if let Some(name) = self.client {
            return named_client(name);
        }
        for path in paths {
            validate_lock_path(path)?;
        }
        registry::default_client_by(patience.call_deadline(paths)).await
    }

    /// The lock at the rendered `path` on the call's client, and the patience of its
    /// acquisition, counted from the call's start.
    async fn target(self, path: Result<String>) -> Result<(LockTarget, Patience)> {
        let path = path?;
        let patience = self.patience.counted_from_now();
        let client = self.call_client(patience, &[&path]).await?;
        let mut target = LockTarget::new(Some(&client), path).declared_at(self.sites.first());
        if let Some(limit) = self.max_hold {
            target.set_max_hold(limit);
        }
        Ok((target, patience))
    }

    /// `#[zk_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`Mutex::lock`], the timeout bounding the first connection of
    /// the default client too.
    pub async fn mutex(self, path: Result<String>) -> Result<MutexGuard> {
        let (target, patience) = self.target(path).await?;
        Mutex::on(target).acquire(patience).await
    }

    /// `#[zk_read_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`RwLock::read`], the timeout bounding the first connection
    /// of the default client too.
    pub async fn read(self, path: Result<String>) -> Result<ReadGuard> {
        let (target, patience) = self.target(path).await?;
        RwLock::on(target).acquire_read(patience).await
    }

    /// `#[zk_write_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`RwLock::write`], the timeout bounding the first connection
    /// of the default client too.
    pub async fn write(self, path: Result<String>) -> Result<WriteGuard> {
        let (target, patience) = self.target(path).await?;
        RwLock::on(target).acquire_write(patience).await
    }

    /// `#[zk_semaphore(permits = N)]` with `N > 1`: one lease of `N`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`Semaphore::acquire`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn semaphore(self, path: Result<String>, permits: u32) -> Result<SemaphorePermit> {
        let (target, patience) = self.target(path).await?;
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
        let (target, patience) = self.target(path).await?;
        SemaphoreMutex::on(target).acquire(patience).await
    }

    /// `#[zk_multi_lock]`.
    ///
    /// # Errors
    ///
    /// The first rendering error, or as [`MultiLock::lock`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn multi(self, paths: Result<Vec<String>>) -> Result<MultiGuard> {
        let paths = paths?;
        let (patience, max_hold) = (self.patience.counted_from_now(), self.max_hold);
        let client = self.call_client(patience, &paths.iter().map(String::as_str).collect::<Vec<_>>()).await?;
        let targets = paths
            .into_iter()
            .enumerate()
            .map(|(i, path)| Mutex::on(LockTarget::new(Some(&client), path).declared_at(self.sites.get(i))));
        let lock = MultiLock::from_members(targets.map(MultiMember::from));
        let lock = match max_hold {
            Some(limit) => lock.with_max_hold(limit),
            None => lock,
        };
        lock.acquire(patience).await
    }
}
