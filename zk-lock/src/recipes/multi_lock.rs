//! [`MultiLock`]: several locks taken as one, in an order that cannot deadlock.

use std::future::Future;
use std::panic::Location;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::max_hold;
use super::mutex::Mutex;
use super::patience::Patience;
use super::rwlock::RwLock;
use super::target::LockTarget;
use crate::client::Client;
use crate::error::{Error, LostReason, Result};
use crate::holds::scope::{self, Lending, Lent, Loan};
use crate::holds::{HeldNode, Share};
use crate::lock_order;

/// One lock of a [`MultiLock`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum MultiMember {
    /// A [`Mutex`].
    Mutex(Mutex),
    /// The read side of an [`RwLock`].
    Read(RwLock),
    /// The write side of an [`RwLock`].
    Write(RwLock),
}

impl MultiMember {
    fn with_max_hold(self, limit: std::time::Duration) -> Self {
        match self {
            Self::Mutex(mutex) => Self::Mutex(mutex.with_max_hold(limit)),
            Self::Read(lock) => Self::Read(lock.with_max_hold(limit)),
            Self::Write(lock) => Self::Write(lock.with_max_hold(limit)),
        }
    }

    fn path(&self) -> &str {
        &self.target().path
    }

    fn target(&self) -> &LockTarget {
        match self {
            Self::Mutex(mutex) => mutex.target(),
            Self::Read(lock) | Self::Write(lock) => lock.target(),
        }
    }

    /// Orders members of one path: a write lock before a read lock, so that a task taking both
    /// downgrades instead of asking for an upgrade that would deadlock.
    fn rank(&self) -> u8 {
        match self {
            Self::Mutex(_) => 0,
            Self::Write(_) => 1,
            Self::Read(_) => 2,
        }
    }

    async fn acquire(&self, patience: Patience) -> Result<Share> {
        match self {
            Self::Mutex(mutex) => Ok(mutex.acquire(patience).await?.into_share()),
            Self::Read(lock) => Ok(lock.acquire_read(patience).await?.into_share()),
            Self::Write(lock) => Ok(lock.acquire_write(patience).await?.into_share()),
        }
    }
}

impl From<Mutex> for MultiMember {
    fn from(mutex: Mutex) -> Self {
        Self::Mutex(mutex)
    }
}

/// Several locks acquired as one, like Curator's `InterProcessMultiLock`: all of them or none.
///
/// The locks are sorted by path (and de-duplicated) before any is taken, so two callers asking
/// for `[a, b]` and `[b, a]` take them in the same order and can never deadlock. They are
/// released in the reverse order.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// let accounts = zk_lock::MultiLock::new(["/accounts/17", "/accounts/4"]);
/// let both = accounts.lock().await?; // takes /accounts/17, then /accounts/4
/// // ... move money between the two accounts ...
/// both.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    members: Vec<MultiMember>,
}

impl MultiLock {
    /// Mutexes at `paths`, on the registry's default client.
    #[track_caller]
    pub fn new<P: Into<String>>(paths: impl IntoIterator<Item = P>) -> Self {
        let made_at = Location::caller();
        Self::from_members(paths.into_iter().map(|path| MultiMember::Mutex(Mutex::new(path).made_at(made_at))))
    }

    /// Mutexes at `paths` on `client`.
    #[track_caller]
    pub fn with_client<P: Into<String>>(client: &Client, paths: impl IntoIterator<Item = P>) -> Self {
        let made_at = Location::caller();
        let member = |path| MultiMember::Mutex(Mutex::with_client(client, path).made_at(made_at));
        Self::from_members(paths.into_iter().map(member))
    }

    /// Any mix of locks: mutexes, read and write sides of read/write locks.
    pub fn from_members(members: impl IntoIterator<Item = MultiMember>) -> Self {
        let mut members: Vec<MultiMember> = members.into_iter().collect();
        members.sort_by(|a, b| a.path().cmp(b.path()).then(a.rank().cmp(&b.rank())));
        members.dedup_by(|a, b| a.path() == b.path() && a.rank() == b.rank());
        Self { members }
    }

    /// Limits how long its locks may be held: see [`Mutex::with_max_hold`]. The limit counts from
    /// the whole grant, when the last lock was taken, for every lock.
    #[must_use]
    pub fn with_max_hold(mut self, limit: std::time::Duration) -> Self {
        self.members = self.members.into_iter().map(|member| member.with_max_hold(limit)).collect();
        self
    }

    /// The lock paths, in the order they are taken.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(MultiMember::path)
    }

    /// Waits for every lock, for at most the client's default timeout in all (counted from the
    /// call; each member's client's own).
    ///
    /// # Errors
    ///
    /// The first error of any lock (see [`Mutex::lock`]); the locks already taken are released
    /// before it is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the locks taken so far are released in the background, and the pending one
    /// removes its queue node.
    pub async fn lock(&self) -> Result<MultiGuard> {
        self.acquire(Patience::client_default()).await
    }

    /// Waits for every lock, for at most `timeout` in all; a zero timeout makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`lock`](Self::lock); [`Error::Timeout`] names the lock that was still awaited.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<MultiGuard> {
        self.acquire(Patience::timeout(timeout)).await
    }

    /// Takes every lock if each is free, one attempt each.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] naming the first lock that was taken by someone else, otherwise as
    /// [`lock`](Self::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<MultiGuard> {
        self.acquire(Patience::one_attempt()).await
    }

    /// Takes every lock, a timeout counting for all of them together.
    pub(crate) async fn acquire(&self, patience: Patience) -> Result<MultiGuard> {
        // Every path before the first lock: a bad one is refused with nothing sent, not after the
        // members sorted before it were taken (and released).
        for member in &self.members {
            member.target().check_path()?;
        }
        // Sorted, the members cannot deadlock each other: no lock-order edges among them.
        lock_order::together(self.acquire_members(patience)).await
    }

    async fn acquire_members(&self, patience: Patience) -> Result<MultiGuard> {
        loop {
            let limits = max_hold::DeferredLimits::default();
            // Every member waits within the one patience: counted from this call, its timeout
            // bounds them all together, and their errors report the wait from this call's start.
            let taken = max_hold::deferring(limits.clone(), self.take_members(patience)).await?;
            // All or nothing: a member lost while the others were awaited (its session, its node
            // deleted) makes the grant void; the members are released and taken again.
            match taken.first_lost() {
                None => {
                    // A multi-lock's max_hold counts from the whole grant.
                    let limits = std::mem::take(&mut *limits.lock().unwrap_or_else(PoisonError::into_inner));
                    limits.into_iter().for_each(max_hold::Deferred::start);
                    return Ok(taken);
                }
                Some((path, reason)) => {
                    taken.release().await.ok();
                    if !patience.may_wait() {
                        return Err(Error::Lost { path, reason });
                    }
                }
            }
        }
    }

    /// One pass over the members, in order; on an error the members taken are released.
    async fn take_members(&self, patience: Patience) -> Result<MultiGuard> {
        // Dropping the guard on an early return releases what was taken, in reverse order.
        let mut taken = MultiGuard { members: Vec::with_capacity(self.members.len()), loans: Vec::new() };
        for member in &self.members {
            // Nested in the members taken: one path's read member after its write member is a
            // downgrade, not a reader queued behind its own writer.
            let acquire = scope::nest(taken.lent(), member.acquire(patience));
            match acquire.await {
                Ok(share) => {
                    taken.members.push(Member { hold: share.hold, lending: Lending::default() });
                    taken.loans.extend(share.loan);
                }
                Err(error) => {
                    taken.release().await.ok();
                    return Err(error);
                }
            }
        }
        Ok(taken)
    }
}

/// Proof that its owner holds every lock of a [`MultiLock`]. Dropping it releases them in the
/// background, in reverse order.
#[must_use = "the locks are released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct MultiGuard {
    members: Vec<Member>,
    /// The loans of members borrowed from an enclosing holder, returned after every release.
    loans: Vec<Loan>,
}

/// One lock of a [`MultiGuard`]: its hold, and what the guard's scopes lend of it.
struct Member {
    hold: Arc<HeldNode>,
    lending: Lending,
}

impl MultiGuard {
    /// Runs `work` as code nested inside the holder of every lock: see
    /// [`MutexGuard::scope`](crate::MutexGuard::scope).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe if `work` is.
    pub fn scope<F: Future>(&self, work: F) -> impl Future<Output = F::Output> + use<'_, F> {
        scope::nest(self.lent(), work)
    }

    /// What a scope of this guard lends: each member.
    fn lent(&self) -> Vec<Lent> {
        self.members.iter().map(|member| member.lending.lend(&member.hold)).collect()
    }

    /// The holds, in the order they were taken.
    pub(crate) fn holds(&self) -> impl Iterator<Item = &Arc<HeldNode>> {
        self.members.iter().map(|member| &member.hold)
    }

    /// The first lock already lost, with why.
    fn first_lost(&self) -> Option<(String, LostReason)> {
        self.holds().find_map(|hold| {
            let reason = hold.lost_reason().or_else(|| (!hold.is_held()).then_some(LostReason::ConnectionLost))?;
            Some((hold.path().to_owned(), reason))
        })
    }

    /// Releases every lock, in reverse order, and waits until ZooKeeper confirmed each delete.
    ///
    /// # Errors
    ///
    /// The first [`Error::Lost`] (or other error) among the locks; all are released anyway.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: locks not yet released when the future is dropped are released in the
    /// background.
    pub async fn release(mut self) -> Result<()> {
        let mut first_error = None;
        while let Some(member) = self.members.pop() {
            if let Err(error) = HeldNode::release_shared(member.hold).await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The largest fencing token of the locks: the one granted last. Storage that checks one
    /// token per write should check this one; [`fencing_tokens`](Self::fencing_tokens) gives all.
    pub fn fencing_token(&self) -> i64 {
        self.holds().map(|hold| hold.token).max().unwrap_or_default()
    }

    /// Each lock path with its fencing token, in the order they were taken.
    pub fn fencing_tokens(&self) -> Vec<(&str, i64)> {
        self.holds().map(|hold| (hold.path(), hold.token)).collect()
    }

    /// The lock nodes, in the order they were taken.
    pub fn node_paths(&self) -> Vec<&str> {
        self.holds().map(|hold| &**hold.node_path()).collect()
    }

    /// Whether every lock is still held.
    pub fn is_held(&self) -> bool {
        self.holds().all(|hold| hold.is_held())
    }

    /// Resolves when any of the locks is lost, with its path and the reason; never, if they are
    /// released first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = (String, LostReason)> + Send + 'static {
        let watches: Vec<_> = self
            .holds()
            .map(|hold| {
                let (path, lost) = (hold.path().to_string(), hold.lost());
                Box::pin(async move { (path, lost.await) })
            })
            .collect();
        async move {
            if watches.is_empty() {
                return std::future::pending().await;
            }
            futures::future::select_all(watches).await.0
        }
    }
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiGuard").field("node_paths", &self.node_paths()).field("is_held", &self.is_held()).finish()
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        // Each hold sends its delete as it is dropped: last taken, first released.
        while let Some(member) = self.members.pop() {
            drop(member);
        }
    }
}
