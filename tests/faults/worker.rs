//! The worker processes: the test binary run again (see [`super::fleet`]), contending on the
//! locks and recording every grant and fenced write into a printing `zk_lock::testing::History`,
//! which reports each as a line on stdout.
//!
//! A worker reads its settings from [`ENV`]. Its stdin is the parent's control channel: a line
//! `stop` ends the work (the worker then reports `idle`, with nothing held or queued, and waits),
//! end of input lets it exit.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::watch;
use zk_lock::testing::{now_ns, Grant, GrantKind, History, Outcome, TimedLock};
use zk_lock::{
    zk_lock, Client, Error, LostReason, MutexGuard, ReadGuard, RwLock, Semaphore, SemaphorePermit, WriteGuard,
};
use zookeeper_client::SessionState;

use super::line::Line;
use super::store::StoreClient;
use crate::rng;

/// The environment variable carrying a worker's settings; without it the worker test returns.
pub const ENV: &str = "ZK_LOCK_FAULTS_WORKER";

/// Name of the client the annotated functions use (`client = "faults"`).
const CLIENT_NAME: &str = "faults";

/// Generous: an election or a whole-ensemble restart stalls every acquisition for a while.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);

/// Permits of the semaphore every worker shares.
pub const SEMAPHORE_LEASES: u32 = 2;

/// The lock paths of a run: `/faults/<run>/...`.
pub fn base_path(run: &str) -> String {
    format!("/faults/{run}")
}

/// What a worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Acquires and releases in a loop, `tasks` at a time.
    Contend,
    /// As `Contend`, and also cancels acquisitions at random points and panics while holding.
    Chaos,
    /// Takes `gc` in an `on_lost = "abort"` function and holds it until the lock is lost.
    GcHolder,
    /// Takes `gc` once.
    Once,
    /// Reports grants without taking any lock, to show that the checker catches a broken lock.
    Cheat,
}

/// A worker's settings, passed as `key=value` words in [`ENV`].
#[derive(Debug, Clone)]
pub struct Config {
    pub id: String,
    pub role: Role,
    pub connect: String,
    pub store: SocketAddr,
    pub run: String,
    pub session: Duration,
    pub tasks: usize,
    /// The recipes to use: `mutex`, `read`, `write`, `sem`.
    pub ops: Vec<String>,
    /// Upper bound of the random time a holder keeps the lock.
    pub hold: Duration,
}

impl Config {
    pub fn encode(&self) -> String {
        let role = match self.role {
            Role::Contend => "contend",
            Role::Chaos => "chaos",
            Role::GcHolder => "gc-holder",
            Role::Once => "once",
            Role::Cheat => "cheat",
        };
        format!(
            "id={} role={role} connect={} store={} run={} session_ms={} tasks={} ops={} hold_us={}",
            self.id,
            self.connect,
            self.store,
            self.run,
            self.session.as_millis(),
            self.tasks,
            self.ops.join(","),
            self.hold.as_micros()
        )
    }

    fn decode(spec: &str) -> Config {
        let fields: HashMap<&str, &str> = spec.split_whitespace().filter_map(|word| word.split_once('=')).collect();
        let get = |key: &str| *fields.get(key).unwrap_or_else(|| panic!("`{key}` missing in {ENV}={spec}"));
        let number = |key: &str| get(key).parse::<u64>().unwrap_or_else(|_| panic!("bad `{key}` in {spec}"));
        Config {
            id: get("id").to_owned(),
            role: match get("role") {
                "contend" => Role::Contend,
                "chaos" => Role::Chaos,
                "gc-holder" => Role::GcHolder,
                "once" => Role::Once,
                "cheat" => Role::Cheat,
                other => panic!("unknown role {other}"),
            },
            connect: get("connect").to_owned(),
            store: get("store").parse().expect("the store's address"),
            run: get("run").to_owned(),
            session: Duration::from_millis(number("session_ms")),
            tasks: number("tasks") as usize,
            ops: get("ops").split(',').map(str::to_owned).collect(),
            hold: Duration::from_micros(number("hold_us")),
        }
    }
}

fn emit(line: Line) {
    println!("{line}");
}

/// The worker's entry point: does nothing unless [`ENV`] is set.
pub fn run_if_worker() {
    let Ok(spec) = std::env::var(ENV) else { return };
    let config = Config::decode(&spec);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(run(config));
}

/// The parent's orders, read from stdin.
#[derive(Debug, Clone, Copy, Default)]
struct Orders {
    stop: bool,
    exit: bool,
    /// The last audit round asked for (`audit <round>`).
    audit: u64,
}

fn read_orders() -> watch::Receiver<Orders> {
    let (send, orders) = watch::channel(Orders::default());
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            match line {
                Ok(line) if line.trim() == "stop" => send.send_modify(|o| o.stop = true),
                Ok(line) if line.starts_with("audit ") => {
                    if let Ok(round) = line["audit ".len()..].trim().parse() {
                        send.send_modify(|o| o.audit = round);
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        // End of input: the parent is done with us, or gone.
        send.send_modify(|o| {
            o.stop = true;
            o.exit = true;
        });
    });
    orders
}

/// What a worker counts besides grants.
#[derive(Default)]
struct Stats {
    /// Acquisitions that were under way while the connection dropped, and granted afterwards.
    spanned: AtomicU64,
    cancels: AtomicU64,
    panics: AtomicU64,
    failures: AtomicU64,
    disconnects: AtomicU64,
    /// The session id last reported: a retired session is replaced, and the test finds the
    /// workers' servers by their current sessions.
    session: AtomicI64,
}

struct Worker {
    config: Config,
    client: Client,
    /// Prints each grant and fenced write for the parent, which checks them all together.
    history: History,
    stats: Stats,
    orders: watch::Receiver<Orders>,
}

async fn run(config: Config) {
    let orders = read_orders();
    // Chaos panics on purpose; keep stderr for the unexpected ones.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let chaos = info.payload().downcast_ref::<&str>().is_some_and(|msg| msg.starts_with("chaos panic"));
        if !chaos {
            default_hook(info);
        }
    }));
    let client = Client::builder(config.connect.clone())
        .session_timeout(config.session)
        .install_as(CLIENT_NAME)
        .await
        .unwrap_or_else(|e| panic!("worker {}: connect: {e}", config.id));
    let zk = client.zookeeper();
    let worker = Arc::new(Worker { config, client, history: History::printing(), stats: Stats::default(), orders });
    worker.report_session();
    count_disconnects(&worker, zk.state_watcher());
    drop(zk);
    answer_audits(&worker);

    match worker.config.role {
        Role::Contend | Role::Chaos | Role::Cheat => {
            let tasks: Vec<_> = (0..worker.config.tasks)
                .map(|task| tokio::spawn(worker.clone().contend(task, worker.config.role == Role::Chaos)))
                .collect();
            for task in tasks {
                task.await.expect("a contending task panicked");
            }
        }
        Role::GcHolder => worker.gc_holder().await,
        Role::Once => {
            let mut store = StoreClient::new(worker.config.store);
            let op = Op { kind: GrantKind::Mutex, path: format!("{}/gc", base_path(&worker.config.run)) };
            match worker.acquire(&op, "once").await {
                Ok(guard) => {
                    worker.hold(&format!("{}/once", worker.config.id), &op, guard, &mut store, Ending::Release).await
                }
                Err(e) => panic!("worker {}: lock {}: {e}", worker.config.id, op.path),
            }
        }
    }

    let stats = &worker.stats;
    emit(
        Line::new("idle")
            .with("proc", &worker.config.id)
            .with("spanned", stats.spanned.load(Ordering::SeqCst))
            .with("cancels", stats.cancels.load(Ordering::SeqCst))
            .with("panics", stats.panics.load(Ordering::SeqCst))
            .with("failures", stats.failures.load(Ordering::SeqCst))
            .with("disconnects", stats.disconnects.load(Ordering::SeqCst)),
    );
    let mut orders = worker.orders.clone();
    let _ = orders.wait_for(|o| o.exit).await;
}

/// How long an audit may wait for the worker's sessions to be listable and retired ones closed.
const AUDIT_PATIENCE: Duration = Duration::from_secs(30);

/// Runs the orphan oracle for every `audit <round>` order: every ephemeral node of the worker's
/// sessions under the run's root must be one the library holds, waits with or is deleting.
/// Reports `audit round=.. orphans=.. ephemerals=.. retiring=.. msg=<the orphans>`.
fn answer_audits(worker: &Arc<Worker>) {
    let worker = worker.clone();
    tokio::spawn(async move {
        let mut orders = worker.orders.clone();
        let mut answered = 0;
        loop {
            let Ok(asked) = orders.wait_for(|o| o.audit > answered || o.exit).await.map(|o| *o) else { return };
            if asked.audit <= answered {
                return;
            }
            answered = asked.audit;
            let root = base_path(&worker.config.run);
            let deadline = tokio::time::Instant::now() + AUDIT_PATIENCE;
            // Right after a fault the session may be reconnecting, or a retired one not closed yet.
            let found = loop {
                let found = zk_lock::testing::audit(&worker.client, &root).await;
                let settled = matches!(&found, Ok(audit) if audit.retiring.is_empty());
                if settled || tokio::time::Instant::now() >= deadline {
                    break found;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            let line = Line::new("audit").with("proc", &worker.config.id).with("round", answered);
            emit(match found {
                Ok(audit) => {
                    let orphans: Vec<String> = audit.orphans.iter().map(ToString::to_string).collect();
                    line.with("orphans", audit.orphans.len())
                        .with("ephemerals", audit.ephemerals)
                        .with("retiring", audit.retiring.len())
                        .with("msg", orphans.join("; "))
                }
                Err(e) => line.with("orphans", "?").with("msg", format!("audit failed: {e}")),
            });
        }
    });
}

/// Counts the first session's disconnections, to tell acquisitions that rode one out.
fn count_disconnects(worker: &Arc<Worker>, mut states: zookeeper_client::StateWatcher) {
    let worker = worker.clone();
    tokio::spawn(async move {
        loop {
            match states.changed().await {
                SessionState::Disconnected => {
                    worker.stats.disconnects.fetch_add(1, Ordering::SeqCst);
                }
                state if state.is_terminated() => return,
                _ => {}
            }
        }
    });
}

/// One acquisition to make.
#[derive(Debug, Clone)]
struct Op {
    kind: GrantKind,
    path: String,
}

/// How a critical section ends.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Release,
    /// Panics instead of releasing: the guard is dropped while unwinding.
    Panic,
    /// Drops the release future after its first poll.
    CancelRelease,
}

/// Any of the guards a worker holds.
enum AnyGuard {
    Mutex(MutexGuard),
    Read(ReadGuard),
    Write(WriteGuard),
    Permit(SemaphorePermit),
}

macro_rules! each_guard {
    ($guard:expr, $g:ident => $body:expr) => {
        match $guard {
            AnyGuard::Mutex($g) => $body,
            AnyGuard::Read($g) => $body,
            AnyGuard::Write($g) => $body,
            AnyGuard::Permit($g) => $body,
        }
    };
}

/// A user's own guard type, timed like the library's guards.
impl TimedLock for AnyGuard {
    fn path(&self) -> &str {
        each_guard!(self, g => g.path())
    }

    fn fencing_token(&self) -> i64 {
        each_guard!(self, g => g.fencing_token())
    }

    fn is_held(&self) -> bool {
        each_guard!(self, g => g.is_held())
    }

    fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let lost: Pin<Box<dyn Future<Output = LostReason> + Send>> = each_guard!(self, g => Box::pin(g.lost()));
        lost
    }

    async fn release(self) -> zk_lock::Result<()> {
        each_guard!(self, g => g.release().await)
    }
}

impl Worker {
    fn stopped(&self) -> bool {
        self.orders.borrow().stop
    }

    /// Reports the client's current session when it is not the one reported last.
    fn report_session(&self) {
        let id = self.client.zookeeper().session_id().0;
        if self.stats.session.swap(id, Ordering::SeqCst) != id {
            emit(Line::new("session").with("proc", &self.config.id).with("id", id));
        }
    }

    fn pick(&self, rng: &mut fastrand::Rng) -> Op {
        let base = base_path(&self.config.run);
        let ops = &self.config.ops;
        match ops[rng.u64(..ops.len() as u64) as usize].as_str() {
            "mutex" => Op { kind: GrantKind::Mutex, path: format!("{base}/m{}", rng.u64(..2)) },
            "read" => Op { kind: GrantKind::Read, path: format!("{base}/rw") },
            "write" => Op { kind: GrantKind::Write, path: format!("{base}/rw") },
            "sem" => Op { kind: GrantKind::Semaphore { leases: SEMAPHORE_LEASES }, path: format!("{base}/sem") },
            other => panic!("unknown op {other}"),
        }
    }

    /// Acquires `op`, with node data naming this acquisition, so a leaked node tells whose it is.
    async fn acquire(&self, op: &Op, data: &str) -> zk_lock::Result<AnyGuard> {
        let data = format!("{}/{data}", self.config.id).into_bytes();
        let client = &self.client;
        match op.kind {
            GrantKind::Mutex => {
                let mutex = zk_lock::Mutex::with_client(client, &op.path).with_data(data);
                mutex.lock_timeout(ACQUIRE_TIMEOUT).await.map(AnyGuard::Mutex)
            }
            GrantKind::Read => {
                let lock = RwLock::with_client(client, &op.path).with_data(data);
                lock.read_timeout(ACQUIRE_TIMEOUT).await.map(AnyGuard::Read)
            }
            GrantKind::Write => {
                let lock = RwLock::with_client(client, &op.path).with_data(data);
                lock.write_timeout(ACQUIRE_TIMEOUT).await.map(AnyGuard::Write)
            }
            GrantKind::Semaphore { leases } => {
                let semaphore = Semaphore::with_client(client, &op.path, leases).with_data(data);
                semaphore.acquire_timeout(ACQUIRE_TIMEOUT).await.map(AnyGuard::Permit)
            }
        }
    }

    /// The critical section: a fenced write for exclusive locks, a random hold, the release;
    /// the history records the grant and the writes.
    async fn hold(&self, proc: &str, op: &Op, guard: AnyGuard, store: &mut StoreClient, ending: Ending) {
        let guard = self.history.time_grant(proc, op.kind, guard);
        let token = guard.fencing_token();
        if op.kind.is_exclusive() {
            if let Err(e) = guard.fenced_write(store.write(&op.path, token)).await {
                panic!("{proc}: the fenced store failed: {e}");
            }
        }
        let hold_us = self.config.hold.as_micros() as u64;
        if hold_us > 0 {
            let pause = now_ns() % hold_us;
            tokio::time::sleep(Duration::from_micros(pause)).await;
        }
        let lost = !guard.is_held();
        let released = match ending {
            Ending::Release => guard.release().await,
            // The timed guard records the grant as dropped while unwinding.
            Ending::Panic => panic!("chaos panic while holding {}", op.path),
            // Dropped after its first poll: the delete is sent by then and must still happen.
            Ending::CancelRelease => match polled_at_most(1, guard.release()).await {
                Some(released) => released,
                None => return,
            },
        };
        let lost = match released {
            Ok(()) => lost,
            Err(Error::Lost { .. }) => true,
            Err(e) => {
                eprintln!("{proc}: release of {}: {e}", op.path);
                lost
            }
        };
        // A holder that learnt of its loss tries its old token once more: the store must refuse
        // it if a newer holder has written since.
        if lost && op.kind.is_exclusive() {
            if let Err(e) = self.history.time_write(proc, &op.path, token, store.write(&op.path, token)).await {
                panic!("{proc}: the fenced store failed: {e}");
            }
        }
    }

    fn failed(&self, proc: &str, op: &Op, error: impl std::fmt::Display) {
        self.stats.failures.fetch_add(1, Ordering::SeqCst);
        emit(Line::new("fail").with("proc", proc).with("path", &op.path).with("msg", error));
    }

    /// One contending task: acquire, hold, release until told to stop.
    async fn contend(self: Arc<Self>, task: usize, chaos: bool) {
        let proc = format!("{}/t{task}", self.config.id);
        let mut rng = rng();
        let mut store = StoreClient::new(self.config.store);
        let mut seq = 0u64;
        while !self.stopped() {
            self.report_session();
            seq += 1;
            let op = self.pick(&mut rng);
            let data = format!("t{task}/{seq}");
            if self.config.role == Role::Cheat {
                let start = now_ns();
                tokio::time::sleep(self.config.hold).await;
                let (holder, kind, path) = (proc.clone(), op.kind, op.path);
                let (token, end, outcome) = (-(seq as i64), now_ns(), Outcome::Released);
                self.history.record(Grant { holder, kind, path, token, start, end, outcome });
                continue;
            }
            let disconnects = self.stats.disconnects.load(Ordering::SeqCst);
            let dice = if chaos { rng.u64(..100) } else { 100 };
            let acquired = match dice {
                // Cancel with a timer at a random moment: mid-create, queued, or just granted.
                0..25 => {
                    let within = Duration::from_micros(rng.u64(..4_000));
                    match tokio::time::timeout(within, self.acquire(&op, &data)).await {
                        Ok(acquired) => acquired,
                        Err(_) => {
                            self.stats.cancels.fetch_add(1, Ordering::SeqCst);
                            continue;
                        }
                    }
                }
                // Cancel after a random number of polls, whatever the clock says.
                25..45 => match polled_at_most(rng.u64(..8) as usize, self.acquire(&op, &data)).await {
                    Some(acquired) => acquired,
                    None => {
                        self.stats.cancels.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                },
                // The attribute's path, cancelled at a random point of the acquire or the body.
                45..55 => {
                    let n = rng.u64(..2);
                    let within = Duration::from_micros(rng.u64(..6_000));
                    let call = annotated(&self.config.run, n, &proc, &self.history, &mut store, false);
                    if tokio::time::timeout(within, call).await.is_err() {
                        self.stats.cancels.fetch_add(1, Ordering::SeqCst);
                    }
                    continue;
                }
                // Panic while holding, in a task of its own: its guard is dropped unwinding.
                55..65 => {
                    let worker = self.clone();
                    let (task_proc, op, data, annotate) = (proc.clone(), op.clone(), data.clone(), rng.u64(..2) == 0);
                    let proc = &proc;
                    let run = self.config.run.clone();
                    let addr = self.config.store;
                    let task = tokio::spawn(async move {
                        let mut store = StoreClient::new(addr);
                        if annotate {
                            let _ = annotated(&run, 0, &task_proc, &worker.history, &mut store, true).await;
                        } else {
                            match worker.acquire(&op, &data).await {
                                Ok(guard) => worker.hold(&task_proc, &op, guard, &mut store, Ending::Panic).await,
                                Err(e) => worker.failed(&task_proc, &op, e),
                            }
                        }
                    });
                    match task.await {
                        Err(e) if e.is_panic() => {
                            self.stats.panics.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => panic!("{proc}: the panicking task: {e}"),
                        Ok(()) => {}
                    }
                    continue;
                }
                _ => self.acquire(&op, &data).await,
            };
            match acquired {
                Ok(guard) => {
                    if self.stats.disconnects.load(Ordering::SeqCst) != disconnects {
                        self.stats.spanned.fetch_add(1, Ordering::SeqCst);
                    }
                    // Chaos also cancels some releases.
                    let ending = if (65..75).contains(&dice) { Ending::CancelRelease } else { Ending::Release };
                    self.hold(&proc, &op, guard, &mut store, ending).await;
                }
                Err(e) => self.failed(&proc, &op, e),
            }
        }
    }

    /// Holds `gc` in an `on_lost = "abort"` function until the lock is lost, then tries a late
    /// write with the old token. Also holds `manual` with a plain guard and reports its loss.
    async fn gc_holder(&self) {
        let base = base_path(&self.config.run);
        let id = &self.config.id;
        let manual = zk_lock::Mutex::with_client(&self.client, format!("{base}/manual"));
        let manual = manual.lock_timeout(ACQUIRE_TIMEOUT).await.expect("lock `manual`");
        let lost = manual.lost();
        let proc = id.clone();
        let manual_lost = tokio::spawn(async move {
            let reason = lost.await;
            emit(Line::new("event").with("proc", proc).with("name", "manual-lost").with("msg", reason));
        });

        let mut store = StoreClient::new(self.config.store);
        let mut record = None;
        let outcome = gc_body(&self.config.run, id, &self.history, &mut store, &mut record).await;
        let end = now_ns();
        emit(Line::new("event").with("proc", id).with("name", "returned").with("msg", format!("{outcome:?}")));
        let (token, start) = record.expect("the body started");
        let path = format!("{base}/gc");
        let outcome = match outcome {
            Err(Error::Lost { reason, .. }) => Outcome::Lost { reason: reason.to_string() },
            _ => Outcome::Released,
        };
        let (holder, kind) = (id.clone(), GrantKind::Mutex);
        self.history.record(Grant { holder, kind, path: path.clone(), token, start, end, outcome });

        // The write of a holder that came back from a pause and has not checked yet: it must bounce.
        let late = self.history.time_write(id, &path, token, store.write(&path, token));
        late.await.expect("the fenced store");
        // Its loss is known by now: let the task report it before this worker reports its end
        // (and may be told to exit). If `lost()` never resolves, the parent's check fails.
        let _ = tokio::time::timeout(ACQUIRE_TIMEOUT, manual_lost).await;
        emit(Line::new("event").with("proc", id).with("name", "manual-held").with("held", manual.is_held()));
        let released = manual.release().await;
        emit(Line::new("event").with("proc", id).with("name", "manual-released").with("msg", format!("{released:?}")));
    }
}

/// Polls `future` at most `polls` times, yielding in between; `None` if it was not ready by then
/// (it is dropped there, at whatever point it had reached).
async fn polled_at_most<F: Future>(polls: usize, future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    for _ in 0..polls {
        let poll = std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
        if let Poll::Ready(output) = poll {
            return Some(output);
        }
        tokio::task::yield_now().await;
    }
    None
}

/// A critical section written with the attribute. Records its grant by hand (the body holds a
/// reference to the guard, not the guard) before any later await, so the recorded interval ends
/// before a cancellation can drop the guard.
#[zk_lock(path = "/faults/<run>/m<n>", client = "faults", guard = g)]
async fn annotated(
    run: &str,
    n: u64,
    proc: &str,
    history: &History,
    store: &mut StoreClient,
    panic: bool,
) -> Result<(), Error> {
    let (holder, path) = (format!("{proc}/attr"), format!("{}/m{n}", base_path(run)));
    let token = g.fencing_token();
    let start = now_ns();
    if let Err(e) = history.time_write(&holder, &path, token, store.write(&path, token)).await {
        panic!("{proc}: the fenced store failed: {e}");
    }
    let end = now_ns();
    let outcome = match g.is_held() {
        true => Outcome::Dropped,
        false => Outcome::Lost { reason: "is_held() was false at the end of the body".to_owned() },
    };
    history.record(Grant { holder, kind: GrantKind::Mutex, path, token, start, end, outcome });
    if panic {
        panic!("chaos panic in an annotated body");
    }
    // A cancellation point inside the body, after the report.
    tokio::task::yield_now().await;
    Ok(())
}

/// The GC-pause victim's body: writes, announces it holds, then works "forever"; the attribute
/// must drop it when the lock is lost.
#[zk_lock(path = "/faults/<run>/gc", client = "faults", guard = g)]
async fn gc_body(
    run: &str,
    proc: &str,
    history: &History,
    store: &mut StoreClient,
    record: &mut Option<(i64, u64)>,
) -> Result<(), Error> {
    let path = format!("{}/gc", base_path(run));
    let token = g.fencing_token();
    let start = now_ns();
    history.time_write(proc, &path, token, store.write(&path, token)).await.expect("the fenced store");
    *record = Some((token, start));
    let lost = g.lost();
    let who = proc.to_owned();
    tokio::spawn(async move {
        let reason = lost.await;
        emit(Line::new("event").with("proc", who).with("name", "body-lost").with("msg", reason));
    });
    emit(Line::new("event").with("proc", proc).with("name", "holding").with("token", token));
    tokio::time::sleep(Duration::from_secs(120)).await;
    emit(Line::new("event").with("proc", proc).with("name", "body-finished"));
    Ok(())
}
