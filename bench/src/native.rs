//! The in-process clients: zk-lock and zookeeper-client's own `Client::lock`. Each workload
//! returns the same JSON shape as the peers print, so every client goes through the same
//! statistics code.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zookeeper_client::{Acls, CreateMode, LockClient, LockOptions, LockPrefix};

use crate::alloc::live_bytes;
use crate::peer::{wait_queued, Measured, Queued};
use crate::stats::{Counters, Servers};

/// Session timeout of every benchmark session: long, so that pings stay out of the counts.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// Time for requests sent in the background (a dropped guard's delete, a session's close) to
/// reach the server before the counters are read or the next row starts.
pub const SETTLE: Duration = Duration::from_millis(100);

/// Which in-process client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Native {
    ZkLock,
    ZkClient,
}

/// What one uncontended cycle takes and how it lets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipe {
    /// Mutex, release awaited until the server confirmed the delete.
    Mutex,
    /// Mutex, guard dropped: the delete is sent and its reply handled in the background, as the
    /// attribute macro does (design 5.5).
    MutexDrop,
    Write,
    Read,
    /// A semaphore of [`SEMAPHORE_LEASES`] leases, one lease per cycle.
    Semaphore,
    /// An empty `async fn` under `#[zk_lock]`: the whole call is the cycle.
    Annotated,
    /// The same calls, apart: after each call, and outside the timed window, one request on the
    /// same session waits until the server has processed the call's delete, so no call queues
    /// behind the previous call's release (the latency a caller sees when calls are not back to
    /// back on one path).
    AnnotatedApart,
    /// The same function written by hand: `Mutex::with_client(..).lock()`, then drop the guard.
    HandWritten,
}

/// The named client the annotated benchmark function uses.
const ANNOTATED_CLIENT: &str = "zk-lock-bench";

#[zk_lock::zk_lock(path = "/zk-lock-bench/fn/<tag>", client = "zk-lock-bench")]
async fn annotated(tag: &str) -> zk_lock::Result<()> {
    std::hint::black_box(tag);
    Ok(())
}

/// What `annotated` does, written by hand with a guard.
async fn hand_written(client: &zk_lock::Client, tag: &str) -> zk_lock::Result<()> {
    let guard = zk_lock::Mutex::with_client(client, format!("/zk-lock-bench/fn/{tag}")).lock().await?;
    std::hint::black_box(tag);
    drop(guard);
    Ok(())
}

/// The client both forms of the benchmark function share, installed under the name the
/// attribute uses, and the function's path argument for `path`.
async fn annotated_client(connect: &str, path: &str) -> Res<(zk_lock::Client, String)> {
    let client = zk_lock::Client::builder(connect)
        .session_timeout(SESSION_TIMEOUT)
        .install_as(ANNOTATED_CLIENT)
        .await
        .map_err(err("connect"))?;
    Ok((client, path.rsplit('/').next().unwrap_or("fn").to_owned()))
}

/// `#[zk_lock]` calls and the same function with a hand-written guard, called in turn in one
/// loop on one session, so that both see the same server and machine at the same time (the
/// attribute's overhead is a few percent at most, less than the drift between two loops run one
/// after the other). Returns the hand-written calls, then the annotated ones; the server's
/// request count of the loop is split evenly between them (both send the same requests).
pub async fn annotated_and_by_hand(connect: &str, server: Servers, path: &str, plan: Plan) -> Res<[Measured; 2]> {
    let (client, tag) = annotated_client(connect, path).await?;
    for _ in 0..plan.warm {
        annotated(&tag).await.map_err(err("call"))?;
        hand_written(&client, &tag).await.map_err(err("call"))?;
    }
    tokio::time::sleep(SETTLE).await;
    let (mut by_hand, mut attribute) = (Vec::with_capacity(plan.n), Vec::with_capacity(plan.n));
    let before = Counters::read_async(server).await?;
    let start = Instant::now();
    let deadline = start + plan.budget;
    while by_hand.len() < plan.n && Instant::now() < deadline {
        // Each goes first in every other iteration, so neither always follows the other.
        let annotated_first = by_hand.len() % 2 == 0;
        let t0 = Instant::now();
        if annotated_first { annotated(&tag).await } else { hand_written(&client, &tag).await }.map_err(err("call"))?;
        let t1 = Instant::now();
        if annotated_first { hand_written(&client, &tag).await } else { annotated(&tag).await }.map_err(err("call"))?;
        let t2 = Instant::now();
        let (first, second) = (micros(t1 - t0), micros(t2 - t1));
        let (a, h) = if annotated_first { (first, second) } else { (second, first) };
        attribute.push(a);
        by_hand.push(h);
    }
    let elapsed = start.elapsed() / 2;
    tokio::time::sleep(SETTLE).await;
    let after = Counters::read_async(server).await?;
    drop(client);
    tokio::time::sleep(SETTLE).await;
    let half = after.since(&before).divided(2);
    let measured = |calls: Vec<f64>| Measured {
        result: json!({
            "ops": calls.len(),
            "elapsed_s": elapsed.as_secs_f64(),
            "acquire_us": calls,
            "cycle_us": calls,
        }),
        requests: half,
        queued: true,
    };
    Ok([measured(by_hand), measured(attribute)])
}

/// Leases of the uncontended semaphore case, for every client.
pub const SEMAPHORE_LEASES: u32 = 4;

pub type Res<T> = Result<T, String>;

pub fn err(context: &str) -> impl Fn(zk_lock::Error) -> String + '_ {
    move |e| format!("{context}: {e}")
}

fn zerr(context: &str) -> impl Fn(zookeeper_client::Error) -> String + '_ {
    move |e| format!("{context}: {e}")
}

pub async fn connect_zk_lock(connect: &str) -> Res<zk_lock::Client> {
    zk_lock::Client::builder(connect).session_timeout(SESSION_TIMEOUT).connect().await.map_err(err("connect"))
}

pub async fn connect_zk_client(connect: &str) -> Res<zookeeper_client::Client> {
    zookeeper_client::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(connect)
        .await
        .map_err(zerr("connect"))
}

/// zookeeper-client's lock options: container parents created on demand, as zk-lock and
/// Curator do.
fn lock_options() -> LockOptions<'static> {
    LockOptions::new(Acls::anyone_all())
        .with_ancestor_options(CreateMode::Container.with_acls(Acls::anyone_all()))
        .expect("container options are valid")
}

/// One zookeeper-client `Client::lock` with a Curator-compatible prefix (`_c_<uuid>-lock-`).
pub async fn zkc_lock<'a>(zk: &'a zookeeper_client::Client, path: &str) -> Res<LockClient<'a>> {
    let prefix = LockPrefix::new_curator(path, "lock-").map_err(zerr("lock prefix"))?;
    zk.lock(prefix, b"", lock_options()).await.map_err(zerr("lock"))
}

/// Releases a zookeeper-client lock and waits for the server's answer. `LockClient` only
/// deletes in the background on drop, so we delete ourselves and forget it (which leaks its
/// path string, some 60 bytes) rather than send a second delete.
pub async fn zkc_release(lock: LockClient<'_>) -> Res<()> {
    let result = lock.client().delete(lock.lock_path(), None).await;
    std::mem::forget(lock);
    result.map_err(zerr("unlock"))
}

/// A parent for raw nodes.
async fn ensure_persistent(zk: &zookeeper_client::Client, path: &str) -> Res<()> {
    match zk.mkdir(path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await {
        Ok(()) | Err(zookeeper_client::Error::NodeExists) => Ok(()),
        Err(e) => Err(format!("create {path}: {e}")),
    }
}

pub fn micros(d: Duration) -> f64 {
    (d.as_nanos() as f64 / 100.0).round() / 10.0
}

// ---- floor ---------------------------------------------------------------------------------

/// Raw create (ephemeral), delete and list_children on the client's session.
pub async fn floor(kind: Native, connect: &str, server: SocketAddr, path: &str, plan: Plan) -> Res<Measured> {
    // zk-lock's raw requests go through its own session, which lives on zk-lock's I/O thread.
    let (zk, _keep) = match kind {
        Native::ZkLock => {
            let client = connect_zk_lock(connect).await?;
            (client.zookeeper(), Some(client))
        }
        Native::ZkClient => (connect_zk_client(connect).await?, None),
    };
    ensure_persistent(&zk, path).await?;
    let node = format!("{path}/n");
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let sequential = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let prefix = format!("{path}/s-");
    let mut samples: [Vec<f64>; 5] = Default::default();
    let op = async |samples: &mut [Vec<f64>; 5]| -> Res<()> {
        let t0 = Instant::now();
        zk.create(&node, b"", &ephemeral).await.map_err(zerr("create"))?;
        let t1 = Instant::now();
        zk.delete(&node, None).await.map_err(zerr("delete"))?;
        let t2 = Instant::now();
        zk.list_children(path).await.map_err(zerr("list"))?;
        let t3 = Instant::now();
        // zk-lock's acquire: a sequential create and a listing sent back to back.
        let (created, listed) = tokio::join!(zk.create(&prefix, b"", &sequential), zk.list_children(path));
        let t4 = Instant::now();
        let (_, sequence) = created.map_err(zerr("create"))?;
        listed.map_err(zerr("list"))?;
        // zk-lock's grant and release with nothing in between: the watch on its own node (for
        // `lost()`) sent without waiting, then the delete.
        let sequential_node = format!("{prefix}{sequence}");
        let t5 = Instant::now();
        let (watched, deleted) =
            tokio::join!(zk.get_and_watch_data(&sequential_node), zk.delete(&sequential_node, None));
        let t6 = Instant::now();
        deleted.map_err(zerr("delete"))?;
        let (_, _, watcher) = watched.map_err(zerr("watch"))?;
        watcher.changed().await;
        for (samples, took) in samples.iter_mut().zip([t1 - t0, t2 - t1, t3 - t2, t4 - t3, t6 - t5]) {
            samples.push(micros(took));
        }
        Ok(())
    };
    for _ in 0..plan.warm {
        op(&mut samples).await?;
    }
    let mut samples: [Vec<f64>; 5] = std::array::from_fn(|_| Vec::with_capacity(plan.n));
    let before = Counters::read_async(server).await?;
    let start = Instant::now();
    let deadline = start + plan.budget;
    while samples[0].len() < plan.n && Instant::now() < deadline {
        op(&mut samples).await?;
    }
    let elapsed = start.elapsed();
    tokio::time::sleep(SETTLE).await;
    let after = Counters::read_async(server).await?;
    let [create, delete, list, pipelined, watch_delete] = samples;
    let result = json!({
        "ops": create.len(),
        "elapsed_s": elapsed.as_secs_f64(),
        "create_us": create,
        "delete_us": delete,
        "list_us": list,
        "create_list_pipelined_us": pipelined,
        "watch_delete_pipelined_us": watch_delete,
    });
    Ok(Measured { result, requests: after.since(&before), queued: true })
}

/// Counts and bounds of a measured loop.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub warm: usize,
    pub n: usize,
    pub budget: Duration,
}

// ---- uncontended ---------------------------------------------------------------------------

/// Acquire + release cycles on one path with nobody else around.
async fn cycles<T>(
    server: Servers,
    plan: Plan,
    acquire: impl AsyncFn() -> Res<T>,
    release: impl AsyncFn(T) -> Res<()>,
) -> Res<Measured> {
    cycles_apart(server, plan, acquire, release, async || Ok(())).await
}

/// [`cycles`] with an untimed step between two cycles.
async fn cycles_apart<T>(
    server: Servers,
    plan: Plan,
    acquire: impl AsyncFn() -> Res<T>,
    release: impl AsyncFn(T) -> Res<()>,
    between: impl AsyncFn() -> Res<()>,
) -> Res<Measured> {
    for _ in 0..plan.warm {
        release(acquire().await?).await?;
        between().await?;
    }
    tokio::time::sleep(SETTLE).await;
    let mut acquired = Vec::with_capacity(plan.n);
    let mut cycle = Vec::with_capacity(plan.n);
    let before = Counters::read_async(server).await?;
    let start = Instant::now();
    let deadline = start + plan.budget;
    while cycle.len() < plan.n && Instant::now() < deadline {
        let t0 = Instant::now();
        let held = acquire().await?;
        let t1 = Instant::now();
        release(held).await?;
        let t2 = Instant::now();
        acquired.push(micros(t1 - t0));
        cycle.push(micros(t2 - t0));
        between().await?;
    }
    let elapsed = start.elapsed();
    tokio::time::sleep(SETTLE).await;
    let after = Counters::read_async(server).await?;
    let result = json!({
        "ops": cycle.len(),
        "elapsed_s": elapsed.as_secs_f64(),
        "acquire_us": acquired,
        "cycle_us": cycle,
    });
    Ok(Measured { result, requests: after.since(&before), queued: true })
}

pub async fn uncontended(
    kind: Native,
    recipe: Recipe,
    connect: &str,
    server: Servers,
    path: &str,
    plan: Plan,
) -> Res<Measured> {
    match kind {
        Native::ZkLock => {
            let client = connect_zk_lock(connect).await?;
            let measured = match recipe {
                Recipe::Mutex | Recipe::MutexDrop => {
                    let mutex = zk_lock::Mutex::with_client(&client, path);
                    let drop_guard = recipe == Recipe::MutexDrop;
                    cycles(
                        server,
                        plan,
                        async || mutex.lock().await.map_err(err("lock")),
                        async |guard| {
                            if drop_guard {
                                drop(guard);
                                Ok(())
                            } else {
                                guard.release().await.map_err(err("release"))
                            }
                        },
                    )
                    .await
                }
                Recipe::Write => {
                    let lock = zk_lock::RwLock::with_client(&client, path);
                    cycles(
                        server,
                        plan,
                        async || lock.write().await.map_err(err("write")),
                        async |guard| guard.release().await.map_err(err("release")),
                    )
                    .await
                }
                Recipe::Read => {
                    let lock = zk_lock::RwLock::with_client(&client, path);
                    cycles(
                        server,
                        plan,
                        async || lock.read().await.map_err(err("read")),
                        async |guard| guard.release().await.map_err(err("release")),
                    )
                    .await
                }
                Recipe::Annotated | Recipe::AnnotatedApart | Recipe::HandWritten => {
                    // The benchmark measures `HandWritten` and `Annotated` together, in turn
                    // (`annotated_and_by_hand`); this measures either alone.
                    let (client, tag) = annotated_client(connect, path).await?;
                    let by_hand = recipe == Recipe::HandWritten;
                    let apart = recipe == Recipe::AnnotatedApart;
                    let zk = client.zookeeper();
                    cycles_apart(
                        server,
                        plan,
                        async || {
                            if by_hand { hand_written(&client, &tag).await } else { annotated(&tag).await }
                                .map_err(err("call"))
                        },
                        async |()| Ok(()),
                        // Answered after the call's delete: the session's requests are in order.
                        async || {
                            if apart {
                                zk.check_stat("/").await.map_err(zerr("check_stat"))?;
                            }
                            Ok(())
                        },
                    )
                    .await
                }
                Recipe::Semaphore => {
                    let semaphore = zk_lock::Semaphore::with_client(&client, path, SEMAPHORE_LEASES);
                    cycles(
                        server,
                        plan,
                        async || semaphore.acquire().await.map_err(err("acquire")),
                        async |permit| permit.release().await.map_err(err("release")),
                    )
                    .await
                }
            };
            drop(client);
            tokio::time::sleep(SETTLE).await;
            measured
        }
        Native::ZkClient => {
            let zk = connect_zk_client(connect).await?;
            let measured = match recipe {
                Recipe::Mutex => cycles(server, plan, async || zkc_lock(&zk, path).await, zkc_release).await,
                Recipe::MutexDrop => {
                    cycles(
                        server,
                        plan,
                        async || zkc_lock(&zk, path).await,
                        async |lock| {
                            drop(lock);
                            Ok(())
                        },
                    )
                    .await
                }
                Recipe::Write
                | Recipe::Read
                | Recipe::Semaphore
                | Recipe::Annotated
                | Recipe::AnnotatedApart
                | Recipe::HandWritten => {
                    Err("zookeeper-client has no read/write lock, semaphore nor attribute".to_owned())
                }
            };
            drop(zk);
            tokio::time::sleep(SETTLE).await;
            measured
        }
    }
}

// ---- contended -----------------------------------------------------------------------------

/// What the contenders share: the holder counter that checks mutual exclusion.
#[derive(Default)]
struct Shared {
    holders: AtomicUsize,
    max_holders: AtomicUsize,
    violations: AtomicU64,
    grants_total: AtomicU64,
}

impl Shared {
    /// Called right after a grant, before the release: counts overlapping holders.
    fn critical_section(&self) {
        let now = self.holders.fetch_add(1, Ordering::SeqCst) + 1;
        if now != 1 {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        self.max_holders.fetch_max(now, Ordering::SeqCst);
        self.holders.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One contender: its own session and lock handle.
enum Contender {
    ZkLock(zk_lock::Mutex),
    ZkClient(zookeeper_client::Client, String),
}

impl Contender {
    /// One grant and release; `None` if still waiting long after `end`. Returns when the lock
    /// was granted.
    async fn cycle(&self, shared: &Shared, end: Instant) -> Res<Option<Instant>> {
        // Bounded: a contender still waiting long after the end gives up.
        let limit = end + Duration::from_secs(5);
        match self {
            Contender::ZkLock(mutex) => {
                let Ok(guard) = tokio::time::timeout_at(limit, mutex.lock()).await else { return Ok(None) };
                let guard = guard.map_err(err("lock"))?;
                let granted = Instant::now();
                shared.critical_section();
                guard.release().await.map_err(err("release"))?;
                Ok(Some(granted))
            }
            Contender::ZkClient(zk, path) => {
                let Ok(lock) = tokio::time::timeout_at(limit, zkc_lock(zk, path)).await else { return Ok(None) };
                let lock = lock?;
                let granted = Instant::now();
                shared.critical_section();
                zkc_release(lock).await?;
                Ok(Some(granted))
            }
        }
    }

    /// Loops until `end`; returns the waits of the grants that fall in `[from, end)`.
    async fn run(self, shared: Arc<Shared>, from: Instant, end: Instant) -> Res<Vec<f64>> {
        let mut waits = Vec::new();
        while Instant::now() < end {
            let t0 = Instant::now();
            let Some(granted) = self.cycle(&shared, end).await? else { break };
            shared.grants_total.fetch_add(1, Ordering::Relaxed);
            if granted >= from && granted < end {
                waits.push(micros(granted - t0));
            }
        }
        Ok(waits)
    }
}

/// `sessions` contenders, one session each, loop on one mutex for `warm + measure`.
#[allow(clippy::too_many_arguments)]
pub async fn contended(
    kind: Native,
    connect: &str,
    server: SocketAddr,
    path: &str,
    sessions: usize,
    warm: Duration,
    measure: Duration,
    one_session: bool,
) -> Res<Measured> {
    let shared = Arc::new(Shared::default());
    let mut zk_lock_clients = Vec::new();
    let mut zk_clients = Vec::new();
    for i in 0..sessions {
        // With `one_session`, every contender gets a handle on the first session.
        match (kind, one_session && i > 0) {
            (Native::ZkLock, false) => zk_lock_clients.push(connect_zk_lock(connect).await?),
            (Native::ZkLock, true) => zk_lock_clients.push(zk_lock_clients[0].clone()),
            (Native::ZkClient, false) => zk_clients.push(connect_zk_client(connect).await?),
            (Native::ZkClient, true) => zk_clients.push(zk_clients[0].clone()),
        }
    }
    tokio::time::sleep(SETTLE).await;
    let before = Counters::read_async(server).await?;
    let start = Instant::now();
    let from = start + warm;
    let end = from + measure;
    let mut tasks: Vec<JoinHandle<Res<Vec<f64>>>> = Vec::new();
    let contenders = zk_lock_clients
        .iter()
        .map(|client| Contender::ZkLock(zk_lock::Mutex::with_client(client, path)))
        .chain(zk_clients.iter().map(|zk| Contender::ZkClient(zk.clone(), path.to_owned())));
    for contender in contenders {
        tasks.push(tokio::spawn(contender.run(shared.clone(), from, end)));
    }
    let mut waits = Vec::new();
    let mut failure = None;
    for task in tasks {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(end + Duration::from_secs(30), task).await {
            Ok(Ok(Ok(mine))) => waits.extend(mine),
            Ok(Ok(Err(e))) => failure = Some(e),
            Ok(Err(e)) => failure = Some(format!("contender panicked: {e}")),
            Err(_) => {
                abort.abort();
                failure = Some("a contender did not finish in time".to_owned());
            }
        }
    }
    tokio::time::sleep(SETTLE).await;
    let after = Counters::read_async(server).await?;
    drop(zk_lock_clients);
    drop(zk_clients);
    tokio::time::sleep(SETTLE).await;
    if let Some(failure) = failure {
        return Err(failure);
    }
    let result = json!({
        "sessions": sessions,
        "measure_s": measure.as_secs_f64(),
        "grants_measured": waits.len(),
        "grants_total": shared.grants_total.load(Ordering::Relaxed),
        "violations": shared.violations.load(Ordering::Relaxed),
        "max_holders": shared.max_holders.load(Ordering::Relaxed),
        "wait_us": waits,
    });
    Ok(Measured { result, requests: after.since(&before), queued: true })
}

// ---- queue drain ---------------------------------------------------------------------------

/// A holder and `waiters` queued tasks on one session; after the counters are read the holder
/// releases and every waiter takes and releases the lock in turn.
pub async fn drain(
    kind: Native,
    connect: &str,
    server: SocketAddr,
    path: &str,
    waiters: usize,
    timeout: Duration,
) -> Res<Measured> {
    let zl = match kind {
        Native::ZkLock => Some(connect_zk_lock(connect).await?),
        Native::ZkClient => None,
    };
    let zk = match kind {
        Native::ZkLock => None,
        Native::ZkClient => Some(connect_zk_client(connect).await?),
    };
    let outcome = drain_on(zl.as_ref(), zk.as_ref(), server, path, waiters, timeout).await;
    drop((zl, zk));
    tokio::time::sleep(SETTLE).await;
    outcome
}

async fn drain_on(
    zl: Option<&zk_lock::Client>,
    zk: Option<&zookeeper_client::Client>,
    server: SocketAddr,
    path: &str,
    waiters: usize,
    timeout: Duration,
) -> Res<Measured> {
    let shared = Arc::new(Shared::default());
    let limit = timeout + Duration::from_secs(60);
    let base = Counters::read_async(server).await?;
    let mut tasks: Vec<JoinHandle<Res<Instant>>> = Vec::with_capacity(waiters);
    let holder = match (zl, zk) {
        (Some(client), _) => {
            let mutex = zk_lock::Mutex::with_client(client, path);
            let holder = mutex.lock().await.map_err(err("holder lock"))?;
            for _ in 0..waiters {
                let (mutex, shared) = (mutex.clone(), shared.clone());
                tasks.push(tokio::spawn(async move {
                    let guard = tokio::time::timeout(limit, mutex.lock())
                        .await
                        .map_err(|_| "waiter timed out".to_owned())?
                        .map_err(err("lock"))?;
                    shared.critical_section();
                    guard.release().await.map_err(err("release"))?;
                    Ok(Instant::now())
                }));
            }
            Holder::ZkLock(holder)
        }
        (None, Some(zk)) => {
            let holder = zkc_lock(zk, path).await?;
            for _ in 0..waiters {
                let (zk, shared, path) = (zk.clone(), shared.clone(), path.to_owned());
                tasks.push(tokio::spawn(async move {
                    let lock = tokio::time::timeout(limit, zkc_lock(&zk, &path))
                        .await
                        .map_err(|_| "waiter timed out".to_owned())??;
                    shared.critical_section();
                    zkc_release(lock).await?;
                    Ok(Instant::now())
                }));
            }
            Holder::ZkClient(holder)
        }
        (None, None) => return Err("no client".to_owned()),
    };
    let queued = Queued { ephemerals: waiters as u64 + 1, watches: waiters as u64, timeout: limit };
    let all_queued = wait_queued(server, &base, queued).await?;
    let before = Counters::read_async(server).await?;
    let start = Instant::now();
    match holder {
        Holder::ZkLock(guard) => guard.release().await.map_err(err("holder release"))?,
        Holder::ZkClient(lock) => zkc_release(lock).await?,
    }
    let mut last = start;
    let mut completed = 0usize;
    let mut failure = None;
    let deadline = start + timeout;
    for task in tasks {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(Ok(finished))) => {
                completed += 1;
                last = last.max(finished);
            }
            Ok(Ok(Err(e))) => failure = Some(e),
            Ok(Err(e)) => failure = Some(format!("waiter panicked: {e}")),
            Err(_) => abort.abort(),
        }
    }
    let end = if completed == waiters { last } else { Instant::now() };
    tokio::time::sleep(SETTLE).await;
    let after = Counters::read_async(server).await?;
    if let Some(failure) = failure {
        return Err(failure);
    }
    let result = json!({
        "waiters": waiters,
        "completed": completed,
        "violations": shared.violations.load(Ordering::Relaxed),
        "drain_s": (end - start).as_secs_f64(),
    });
    Ok(Measured { result, requests: after.since(&before), queued: all_queued })
}

/// The first holder of a drain.
enum Holder<'a> {
    ZkLock(zk_lock::MutexGuard),
    ZkClient(LockClient<'a>),
}

// ---- memory --------------------------------------------------------------------------------

/// Lets background work finish, then reads the live bytes.
async fn settled_live_bytes() -> isize {
    tokio::time::sleep(Duration::from_millis(300)).await;
    live_bytes()
}

/// Waits (bounded) until the server holds no more ephemeral nodes than `count`.
async fn wait_ephemerals_at_most(server: SocketAddr, count: u64, timeout: Duration) -> Res<()> {
    let deadline = Instant::now() + timeout;
    while Counters::read_async(server).await?.ephemerals > count && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The memory result: `count` things took `bytes_each` bytes of this process each.
fn memory_result(count: usize, bytes: isize, setup: Duration, complete: bool) -> Value {
    json!({
        "count": count,
        "bytes_each": bytes as f64 / count.max(1) as f64,
        "setup_s": setup.as_secs_f64(),
        "complete": complete,
    })
}

/// `paths` holders, then `paths * per_path` tasks waiting behind them, all on one session; the
/// bytes this process holds per waiting task (its future, lock handle and client state).
pub async fn memory_waiting(
    kind: Native,
    connect: &str,
    server: SocketAddr,
    root: &str,
    (paths, per_path): (usize, usize),
    timeout: Duration,
) -> Res<Value> {
    let n = paths * per_path;
    let names: Vec<String> = (0..paths).map(|p| format!("{root}/wait-{p}")).collect();
    let zl = match kind {
        Native::ZkLock => Some(connect_zk_lock(connect).await?),
        Native::ZkClient => None,
    };
    let zk = match kind {
        Native::ZkClient => Some(connect_zk_client(connect).await?),
        Native::ZkLock => None,
    };
    // Before the holders: they may watch their own nodes, which their first waiter watches too.
    let base = Counters::read_async(server).await?;
    let mut zl_holders = Vec::new();
    let mut zk_holders = Vec::new();
    for name in &names {
        if let Some(client) = &zl {
            zl_holders.push(zk_lock::Mutex::with_client(client, name.as_str()).lock().await.map_err(err("holder"))?);
        }
        if let Some(zk) = &zk {
            zk_holders.push(zkc_lock(zk, name).await?.into_owned());
        }
    }
    let mut tasks: Vec<JoinHandle<()>> = Vec::with_capacity(n);
    let live_before = settled_live_bytes().await;
    let start = Instant::now();
    for i in 0..n {
        let path = names[i % paths].clone();
        if let Some(client) = &zl {
            let mutex = zk_lock::Mutex::with_client(client, path);
            tasks.push(tokio::spawn(async move {
                let _guard = mutex.lock().await;
            }));
        } else if let Some(zk) = &zk {
            let zk = zk.clone();
            tasks.push(tokio::spawn(async move {
                let _lock = zkc_lock(&zk, &path).await;
            }));
        }
    }
    let queued = Queued { ephemerals: (n + paths) as u64, watches: n as u64, timeout };
    let all_queued = wait_queued(server, &base, queued).await?;
    let setup = start.elapsed();
    let live_after = settled_live_bytes().await;
    // Cancel every waiter (their nodes are deleted in the background), then let the holders go.
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
    drop(zl_holders);
    drop(zk_holders);
    wait_ephemerals_at_most(server, base.ephemerals, timeout).await?;
    drop((zl, zk));
    tokio::time::sleep(SETTLE).await;
    Ok(memory_result(n, live_after - live_before, setup, all_queued))
}

/// `held` guards at once, each on its own path, on one session; the bytes this process holds
/// per guard.
pub async fn memory_held(
    kind: Native,
    connect: &str,
    server: SocketAddr,
    root: &str,
    held: usize,
    timeout: Duration,
) -> Res<Value> {
    /// Acquisitions in flight at once while setting up.
    const IN_FLIGHT: usize = 64;
    let zl = match kind {
        Native::ZkLock => Some(connect_zk_lock(connect).await?),
        Native::ZkClient => None,
    };
    let zk = match kind {
        Native::ZkClient => Some(connect_zk_client(connect).await?),
        Native::ZkLock => None,
    };
    // Warm the code paths (lazy statics, parent creation) before the baseline.
    if let Some(client) = &zl {
        let warm = zk_lock::Mutex::with_client(client, format!("{root}/held-warm"));
        warm.lock().await.map_err(err("lock"))?.release().await.map_err(err("release"))?;
    }
    if let Some(zk) = &zk {
        zkc_release(zkc_lock(zk, &format!("{root}/held-warm")).await?).await?;
    }
    let mut zl_guards: Vec<zk_lock::MutexGuard> = Vec::with_capacity(held);
    let mut zk_guards: Vec<zookeeper_client::OwnedLockClient> = Vec::with_capacity(held);
    let base = Counters::read_async(server).await?;
    let live_before = settled_live_bytes().await;
    let start = Instant::now();
    let deadline = start + timeout;
    let mut next = 0;
    while next < held && Instant::now() < deadline {
        let batch = (held - next).min(IN_FLIGHT);
        let mut zl_batch = Vec::with_capacity(batch);
        let mut zk_batch = Vec::with_capacity(batch);
        for i in next..next + batch {
            let path = format!("{root}/held-{i}");
            if let Some(client) = &zl {
                let mutex = zk_lock::Mutex::with_client(client, path);
                zl_batch.push(tokio::spawn(async move { mutex.lock().await.map_err(err("lock")) }));
            } else if let Some(zk) = &zk {
                let zk = zk.clone();
                zk_batch.push(tokio::spawn(async move { Ok::<_, String>(zkc_lock(&zk, &path).await?.into_owned()) }));
            }
        }
        for task in zl_batch {
            zl_guards.push(task.await.map_err(|e| e.to_string())??);
        }
        for task in zk_batch {
            zk_guards.push(task.await.map_err(|e| e.to_string())??);
        }
        next += batch;
    }
    let setup = start.elapsed();
    let live_after = settled_live_bytes().await;
    let count = zl_guards.len() + zk_guards.len();
    drop(zl_guards);
    drop(zk_guards);
    wait_ephemerals_at_most(server, base.ephemerals, timeout).await?;
    drop((zl, zk));
    tokio::time::sleep(SETTLE).await;
    Ok(memory_result(count, live_after - live_before, setup, count == held))
}

// ---- server warm-up ------------------------------------------------------------------------

/// Runs every kind of request the rows use (sequential creates pipelined with listings, data
/// watches, multi-reads, deletes) for a while, so that the server's JIT has compiled them before
/// the first client is measured: otherwise whoever goes first pays for it.
pub async fn warm_server(connect: &str, ops: usize, budget: Duration) -> Res<()> {
    const PARALLEL: usize = 16;
    let zk = connect_zk_client(connect).await?;
    let parent = "/bench/server-warm-up";
    ensure_persistent(&zk, "/bench").await?;
    ensure_persistent(&zk, parent).await?;
    let deadline = Instant::now() + budget;
    let mut done = 0;
    while done < ops && Instant::now() < deadline {
        let mut tasks = Vec::with_capacity(PARALLEL);
        for _ in 0..PARALLEL {
            let zk = zk.clone();
            tasks.push(tokio::spawn(async move {
                let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
                let prefix = format!("{parent}/n-");
                let create = zk.create(&prefix, b"", &options);
                let list = zk.list_children(parent);
                let (created, _) = tokio::join!(create, list);
                let (_, sequence) = created.map_err(zerr("create"))?;
                let node = format!("{parent}/n-{sequence}");
                let _ = zk.get_and_watch_data(&node).await;
                let mut reader = zk.new_multi_reader();
                reader.add_get_data(&node).map_err(zerr("multi-read"))?;
                reader.commit().await.map_err(zerr("multi-read"))?;
                zk.delete(&node, None).await.map_err(zerr("delete"))
            }));
        }
        for task in tasks {
            task.await.map_err(|e| e.to_string())??;
        }
        done += PARALLEL;
    }
    drop(zk);
    tokio::time::sleep(SETTLE).await;
    Ok(())
}
