//! One exclusive lock of any of three recipes (a mutex, the write side of a read/write lock, a
//! one-lease semaphore), or a leadership of an election, its guard, and the wait for a contender to queue behind its holder, for
//! the tests that run one fault against each: the partitions of a client from its server
//! (`partition.rs`, in this binary) and of the servers from each other
//! (`tests/server_partitions.rs`, which includes this file by its path).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use zk_lock::testing::wait_for_children;
use zk_lock::{
    Client, LeaderElection, Leadership, LostReason, Mutex, MutexGuard, RwLock, Semaphore, SemaphorePermit, WriteGuard,
};

/// Which recipe the lock is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipe {
    Mutex,
    Write,
    Semaphore,
    /// A leader election: a mutex on the wire, run against the faults it adds nothing to once.
    #[allow(dead_code, reason = "used by tests/server_partitions.rs, not by this binary")]
    Leader,
}

/// Every lock recipe, for a test that runs its fault against each.
pub const RECIPES: [Recipe; 3] = [Recipe::Mutex, Recipe::Write, Recipe::Semaphore];

impl fmt::Display for Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Mutex => "mutex",
            Self::Write => "rw",
            Self::Semaphore => "semaphore",
            Self::Leader => "leader",
        })
    }
}

impl Recipe {
    /// Takes the lock at `path`, waiting at most `timeout`.
    pub async fn take(self, client: &Client, path: &str, timeout: Duration) -> zk_lock::Result<Held> {
        Ok(match self {
            Self::Mutex => Held::Mutex(Mutex::with_client(client, path).lock_timeout(timeout).await?),
            Self::Write => Held::Write(RwLock::with_client(client, path).write_timeout(timeout).await?),
            Self::Semaphore => Held::Permit(Semaphore::with_client(client, path, 1).acquire_timeout(timeout).await?),
            Self::Leader => Held::Leader(LeaderElection::with_client(client, path).lead_timeout(timeout).await?),
        })
    }

    /// One attempt, for "the lock can be taken at once".
    pub async fn try_take(self, client: &Client, path: &str) -> zk_lock::Result<Held> {
        self.take(client, path, Duration::ZERO).await
    }

    /// Where the queue nodes of a lock at `path` are.
    pub fn queue(self, path: &str) -> String {
        match self {
            Self::Semaphore => format!("{path}/leases"),
            Self::Mutex | Self::Write | Self::Leader => path.to_owned(),
        }
    }

    /// Resolves once a second contender waits behind the holder of the lock at `path`, as
    /// `observer` sees its queue (for a semaphore, the waiter holds the internal lock and has its
    /// lease node counted); `wait_for_children` bounds the wait.
    pub async fn until_someone_waits(self, observer: &Client, path: &str) {
        wait_for_children(observer, &self.queue(path), |nodes| nodes.len() >= 2)
            .await
            .unwrap_or_else(|e| panic!("{self}: nobody queued behind the holder of `{path}`: {e}"));
    }
}

/// A guard of any of the recipes.
#[derive(Debug)]
pub enum Held {
    Mutex(MutexGuard),
    Write(WriteGuard),
    Permit(SemaphorePermit),
    Leader(Leadership),
}

macro_rules! each_guard {
    ($held:expr, $guard:ident => $body:expr) => {
        match $held {
            Held::Mutex($guard) => $body,
            Held::Write($guard) => $body,
            Held::Permit($guard) => $body,
            Held::Leader($guard) => $body,
        }
    };
}

impl Held {
    pub fn lost(&self) -> Pin<Box<dyn Future<Output = LostReason> + Send>> {
        each_guard!(self, guard => Box::pin(guard.lost()))
    }

    pub fn is_held(&self) -> bool {
        each_guard!(self, guard => guard.is_held())
    }

    /// Writes `value` into `store` only if this guard's lock node still exists.
    #[allow(dead_code, reason = "used by tests/server_partitions.rs, not by this binary")]
    pub async fn fenced_write(&self, store: &str, value: &[u8]) -> Result<(), String> {
        let mut writer = each_guard!(self, guard => guard.fenced_writer()).map_err(|e| e.to_string())?;
        writer.add_set_data(store, value, None).map_err(|e| e.to_string())?;
        writer.commit().await.map(drop).map_err(|e| format!("{e:?}"))
    }

    pub async fn release(self) -> zk_lock::Result<()> {
        each_guard!(self, guard => guard.release().await)
    }
}
