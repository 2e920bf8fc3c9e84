//! The scenarios every exclusive recipe passes alike, written once over [`Exclusive`]: "acquire,
//! release, and the single and timed attempts that a holder must refuse", implemented below for
//! `Mutex`, the write side of `RwLock`, a `Semaphore` of N leases, `SemaphoreMutex` and
//! `MultiLock`. Each recipe's module runs them under its own paths, next to the tests of what
//! only that recipe does.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zk_lock::testing::{children, wait_for_children};
use zk_lock::{
    Client, Error, MultiGuard, MultiLock, Mutex, MutexGuard, RwLock, Semaphore, SemaphoreMutex, SemaphoreMutexGuard,
    SemaphorePermit, WriteGuard,
};

use crate::support::{new_client, PATIENCE};

/// One attempt to take a lock, named for failure messages; its guard, if any, is dropped.
pub type Attempt<'a> = (&'static str, Pin<Box<dyn Future<Output = zk_lock::Result<()>> + Send + 'a>>);

fn attempt<'a, T>(name: &'static str, taking: impl Future<Output = zk_lock::Result<T>> + Send + 'a) -> Attempt<'a> {
    (name, Box::pin(async move { taking.await.map(drop) }))
}

/// A recipe that lets one holder in at a time (or, for a semaphore, a fixed number of them).
pub trait Exclusive: Clone + Send + Sync + 'static {
    type Guard: Guard;

    /// How many guards of other holders keep a contender out: a semaphore's leases, else 1.
    const HOLDERS: usize = 1;

    /// The lock at `path`, for a contender.
    fn new(client: &Client, path: &str) -> Self;

    /// The lock another holder takes to keep the contender out: the same lock, or the part of
    /// it that a multi-lock must find busy.
    fn holder(client: &Client, path: &str) -> Self {
        Self::new(client, path)
    }

    /// The lock path that `Busy` and `Timeout` name when the holder keeps a contender out.
    fn contended(path: &str) -> String {
        path.to_owned()
    }

    /// The nodes holders and waiters make live in the children of these paths.
    fn queues(path: &str) -> Vec<String> {
        vec![path.to_owned()]
    }

    /// Waits as long as it takes.
    fn acquire(&self) -> impl Future<Output = zk_lock::Result<Self::Guard>> + Send;

    /// Tries once.
    fn try_acquire(&self) -> impl Future<Output = zk_lock::Result<Self::Guard>> + Send;

    /// Waits at most `within`; a zero timeout tries once.
    fn acquire_timeout(&self, within: Duration) -> impl Future<Output = zk_lock::Result<Self::Guard>> + Send;

    /// Every single attempt that a holder must refuse.
    fn single_attempts(&self) -> Vec<Attempt<'_>> {
        vec![
            attempt("try_acquire", self.try_acquire()),
            attempt("acquire_timeout(0)", self.acquire_timeout(Duration::ZERO)),
        ]
    }

    /// Every wait of at most `within` that a holder must make time out.
    fn timed_attempts(&self, within: Duration) -> Vec<Attempt<'_>> {
        vec![attempt("acquire_timeout", self.acquire_timeout(within))]
    }
}

/// What a guard of any of the recipes does.
pub trait Guard: Send + 'static {
    fn release(self) -> impl Future<Output = zk_lock::Result<()>> + Send;

    /// The nodes held, as full paths.
    fn node_paths(&self) -> Vec<String>;
}

// --- the scenarios ---------------------------------------------------------------------------

/// A shared counter whose critical section would lose updates, and panic, if two holders ran it
/// at once.
#[derive(Clone, Default)]
struct GuardedCounter {
    count: Arc<AtomicU64>,
    holders: Arc<AtomicUsize>,
}

impl GuardedCounter {
    /// Call while holding the lock: reads, yields so any other holder could run, then writes. A
    /// second holder inside panics; an update lost to one would show in `count`.
    async fn increment(&self) {
        assert_eq!(self.holders.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
        let seen = self.count.load(Ordering::SeqCst);
        tokio::task::yield_now().await;
        self.count.store(seen + 1, Ordering::SeqCst);
        self.holders.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Four sessions of eight tasks each take the lock at `path` `rounds` times and increment a
/// counter that two holders at once would break: no update is lost, and no node is left.
pub async fn four_sessions_of_eight_tasks_never_overlap<R: Exclusive>(path: &str, rounds: u64) {
    const SESSIONS: usize = 4;
    const TASKS: usize = 8;
    let counter = GuardedCounter::default();
    let mut tasks = Vec::new();
    for _ in 0..SESSIONS {
        let client = new_client().await;
        for _ in 0..TASKS {
            let (lock, counter) = (R::new(&client, path), counter.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..rounds {
                    let guard = lock.acquire().await.expect("lock");
                    counter.increment().await;
                    guard.release().await.expect("release");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("task panicked");
    }
    assert_eq!(counter.count.load(Ordering::SeqCst), SESSIONS as u64 * TASKS as u64 * rounds);
    let client = new_client().await;
    for queue in R::queues(path) {
        wait_for_children(&client, &queue, |c| c.is_empty()).await.unwrap();
    }
}

/// While another session holds the lock at `path`: every timed attempt of a contender gives up
/// with `Timeout` after `within` (and not much later), every single attempt is `Busy`, each
/// naming the lock; none of them leaves a node behind, only the holders' nodes are there. Once
/// the holders release, a single attempt succeeds at once and leaves no node when released;
/// once they drop their guards instead, the contender is granted the lock.
pub async fn busy_and_timeouts_leave_only_the_holders_nodes<R: Exclusive>(path: &str, within: Duration) {
    let (holder_client, contender_client) = (new_client().await, new_client().await);
    let holder = R::holder(&holder_client, path);
    let mut held = Vec::new();
    for _ in 0..R::HOLDERS {
        held.push(holder.acquire().await.expect("the holder takes the lock"));
    }
    let contender = R::new(&contender_client, path);
    let contended = R::contended(path);
    let holders_nodes: Vec<String> = held.iter().flat_map(Guard::node_paths).collect();
    // Else the checks below would look at queues where none of the nodes are, and pass.
    let queues = R::queues(path);
    for node in &holders_nodes {
        let parent = node.rsplit_once('/').map_or("", |(parent, _)| parent);
        assert!(queues.iter().any(|queue| queue == parent), "{node} is in none of the queues {queues:?}");
    }
    // Listed through the contender's own session: after its deletes.
    let only_the_holders_nodes_are_left = || async {
        for queue in R::queues(path) {
            let mut left = children(&contender_client, &queue).await.unwrap();
            left.sort();
            let mut expected: Vec<&str> = holders_nodes
                .iter()
                .filter_map(|node| node.rsplit_once('/').filter(|(parent, _)| *parent == queue).map(|(_, name)| name))
                .collect();
            expected.sort();
            assert_eq!(left, expected, "only the holders' nodes are left in {queue}");
        }
    };

    for (name, timed) in contender.timed_attempts(within) {
        let started = Instant::now();
        match timed.await {
            Err(Error::Timeout { path: p, waited, .. }) => {
                assert_eq!(p, contended, "{name}");
                assert!(waited >= within, "{name} waited {waited:?}");
            }
            other => panic!("{name}: expected a timeout, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{name} returned after {:?}", started.elapsed());
        only_the_holders_nodes_are_left().await;
    }

    // Again and again: refused attempts leave nothing behind, however many.
    for _ in 0..3 {
        for (name, single) in contender.single_attempts() {
            match single.await {
                Err(Error::Busy { path: p }) => assert_eq!(p, contended, "{name}"),
                other => panic!("{name}: expected Busy, got {other:?}"),
            }
        }
    }
    only_the_holders_nodes_are_left().await;

    for guard in held {
        guard.release().await.expect("the holder releases");
    }
    let guard = contender.try_acquire().await.expect("free again");
    guard.release().await.unwrap();
    for queue in R::queues(path) {
        assert!(children(&contender_client, &queue).await.unwrap().is_empty(), "a node left in {queue}");
    }

    // Taken again and dropped instead of released: the nodes go in the background, and the
    // contender is granted once they are gone.
    let mut again = Vec::new();
    for _ in 0..R::HOLDERS {
        again.push(holder.acquire().await.expect("the holder takes the lock again"));
    }
    drop(again);
    let guard = tokio::time::timeout(PATIENCE, contender.acquire()).await.expect("free after the drop").unwrap();
    guard.release().await.unwrap();
    for queue in R::queues(path) {
        wait_for_children(&contender_client, &queue, |c| c.is_empty()).await.unwrap();
    }
}

// --- the recipes -----------------------------------------------------------------------------

/// `acquire`, `try_acquire` and `acquire_timeout` of the recipes that name them `lock`,
/// `try_lock` and `lock_timeout`.
macro_rules! lock_methods {
    () => {
        async fn acquire(&self) -> zk_lock::Result<Self::Guard> {
            self.lock().await
        }

        async fn try_acquire(&self) -> zk_lock::Result<Self::Guard> {
            self.try_lock().await
        }

        async fn acquire_timeout(&self, within: Duration) -> zk_lock::Result<Self::Guard> {
            self.lock_timeout(within).await
        }
    };
}

impl Exclusive for Mutex {
    type Guard = MutexGuard;

    fn new(client: &Client, path: &str) -> Self {
        Mutex::with_client(client, path)
    }

    lock_methods!();
}

impl Exclusive for SemaphoreMutex {
    type Guard = SemaphoreMutexGuard;

    fn new(client: &Client, path: &str) -> Self {
        SemaphoreMutex::with_client(client, path)
    }

    fn queues(path: &str) -> Vec<String> {
        vec![format!("{path}/leases"), format!("{path}/locks")]
    }

    lock_methods!();
}

/// The paths `<path>/a` and `<path>/b` taken together. Its holder takes only `b`: a contender
/// finds `b` busy after taking `a`, and must let `a` go again.
impl Exclusive for MultiLock {
    type Guard = MultiGuard;

    fn new(client: &Client, path: &str) -> Self {
        MultiLock::with_client(client, [format!("{path}/a"), format!("{path}/b")])
    }

    fn holder(client: &Client, path: &str) -> Self {
        MultiLock::with_client(client, [format!("{path}/b")])
    }

    fn contended(path: &str) -> String {
        format!("{path}/b")
    }

    fn queues(path: &str) -> Vec<String> {
        vec![format!("{path}/a"), format!("{path}/b")]
    }

    lock_methods!();
}

/// The write side of a read/write lock: a writer keeps readers out too.
#[derive(Clone)]
pub struct Write(pub RwLock);

impl Exclusive for Write {
    type Guard = WriteGuard;

    fn new(client: &Client, path: &str) -> Self {
        Write(RwLock::with_client(client, path))
    }

    async fn acquire(&self) -> zk_lock::Result<WriteGuard> {
        self.0.write().await
    }

    async fn try_acquire(&self) -> zk_lock::Result<WriteGuard> {
        self.0.try_write().await
    }

    async fn acquire_timeout(&self, within: Duration) -> zk_lock::Result<WriteGuard> {
        self.0.write_timeout(within).await
    }

    fn single_attempts(&self) -> Vec<Attempt<'_>> {
        vec![
            attempt("try_write", self.0.try_write()),
            attempt("write_timeout(0)", self.0.write_timeout(Duration::ZERO)),
            attempt("try_read", self.0.try_read()),
            attempt("read_timeout(0)", self.0.read_timeout(Duration::ZERO)),
        ]
    }

    fn timed_attempts(&self, within: Duration) -> Vec<Attempt<'_>> {
        vec![
            attempt("read_timeout", self.0.read_timeout(within)),
            attempt("write_timeout", self.0.write_timeout(within)),
        ]
    }
}

/// A semaphore of `LEASES` leases, held whole by `LEASES` permits.
#[derive(Clone)]
pub struct Leases<const LEASES: u32>(pub Semaphore);

impl<const LEASES: u32> Exclusive for Leases<LEASES> {
    type Guard = SemaphorePermit;
    const HOLDERS: usize = LEASES as usize;

    fn new(client: &Client, path: &str) -> Self {
        Leases(Semaphore::with_client(client, path, LEASES))
    }

    fn queues(path: &str) -> Vec<String> {
        vec![format!("{path}/leases"), format!("{path}/locks")]
    }

    async fn acquire(&self) -> zk_lock::Result<SemaphorePermit> {
        self.0.acquire().await
    }

    async fn try_acquire(&self) -> zk_lock::Result<SemaphorePermit> {
        self.0.try_acquire().await
    }

    async fn acquire_timeout(&self, within: Duration) -> zk_lock::Result<SemaphorePermit> {
        self.0.acquire_timeout(within).await
    }

    fn single_attempts(&self) -> Vec<Attempt<'_>> {
        vec![
            attempt("try_acquire", self.0.try_acquire()),
            attempt("acquire_timeout(0)", self.0.acquire_timeout(Duration::ZERO)),
            attempt("try_acquire_many(1)", self.0.try_acquire_many(1)),
        ]
    }
}

/// The guards that hold one node each.
macro_rules! one_node_guards {
    ($($guard:ty),*) => {$(
        impl Guard for $guard {
            async fn release(self) -> zk_lock::Result<()> {
                <$guard>::release(self).await
            }

            fn node_paths(&self) -> Vec<String> {
                vec![self.node_path().to_owned()]
            }
        }
    )*};
}

one_node_guards!(MutexGuard, SemaphoreMutexGuard, WriteGuard, SemaphorePermit);

impl Guard for MultiGuard {
    async fn release(self) -> zk_lock::Result<()> {
        MultiGuard::release(self).await
    }

    fn node_paths(&self) -> Vec<String> {
        MultiGuard::node_paths(self).into_iter().map(str::to_owned).collect()
    }
}
