//! The `many-paths` row (issue 22, point 3): the web-service load, per-product locks with little
//! contention. T tasks of one process, each looping acquire + release on a path of its own
//! (`/bench/<client>/many-paths/t<T>/l<i>`), all on ONE session (one client): zk-lock
//! (`zk_lock::Mutex`) and zookeeper-client (`Client::lock`, as the contended rows use it) as
//! tasks of the bench's main runtime (tokio's multi-thread runtime, a worker per core, built in
//! `main`), Curator as T threads of the peer JVM sharing its main `CuratorFramework`, each with
//! its own `InterProcessMutex` (the peer's `many-paths` command).
//!
//! Each case, client after client: one acquire + release on every path, all at once (the lock
//! parents are created before anything is counted); the server's counters; the contended rows'
//! warm-up and window. Over the window: the grants (locks/s), the cycle latencies, and the CPU
//! time of every thread of the client's process with its name, read from `/proc/<pid>/task/*`
//! at both ends of the window (the bench's own process, or the peer JVM): the CPU per grant,
//! and each named thread's share of one core, to show whether one thread is the ceiling (one
//! near 100 % is). The counters again once every task has stopped: requests per grant over
//! warm-up and window, as the contended rows count them. Then the T lock paths are deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};

use crate::native::{self, err, micros, Native, Res, SETTLE};
use crate::peer::{samples, Measured};
use crate::procstat::{Cpu, Threads};
use crate::report::{self, Record};
use crate::stats::{Counters, Server, Summary};
use crate::{ClientId, Ctx};

const SECTION: &str = "many-paths";
/// How long the first cycle on every path may take, all of them.
const SETUP_LIMIT: Duration = Duration::from_secs(120);
/// A thread's share below this (% of one core) is summed into "other" in the table...
const SHOWN_FROM_PCT: f64 = 1.0;
/// ...except these threads', always shown when the process has them: zk-lock's own thread.
const ALWAYS_SHOWN: &[&str] = &["zk-lock-io"];

/// Warm-up, then the measured window.
#[derive(Debug, Clone, Copy)]
struct Window {
    warm: Duration,
    measure: Duration,
}

fn case_name(tasks: usize) -> String {
    format!("T={tasks}")
}

/// Tasks of the unmeasured warm-up case of each client.
const WARM_TASKS: usize = 64;
/// Its warm-up and window.
const WARM_WINDOW: Window = Window { warm: Duration::from_millis(200), measure: Duration::from_secs(1) };

pub async fn row(ctx: &mut Ctx<'_>) {
    // kazoo is not asked for (issue 22: zk-lock, zookeeper-client, Curator).
    let clients: Vec<ClientId> = ctx.opts.clients.iter().copied().filter(|c| *c != ClientId::Kazoo).collect();
    let window = Window { warm: ctx.opts.contended_warm, measure: ctx.opts.contended_measure };
    let server = ctx.server;
    // Unmeasured first, each client runs a short case, so that the server's JIT has compiled
    // what this load makes it do (without it, whichever client comes first paid up to twice the
    // server CPU per grant in trial runs), and Curator's JIT the peer's loop.
    for &client in &clients {
        if let (Err(e), _) | (_, Err(e)) = case(ctx, client, server, WARM_TASKS, "warm-up", WARM_WINDOW).await {
            eprintln!("bench: many-paths warm-up {}: {e}", client.name());
        }
    }
    for tasks in ctx.opts.many_paths.clone() {
        for &client in &clients {
            let (measured, cleaned) = case(ctx, client, server, tasks, &format!("t{tasks}"), window).await;
            let mut record = match measured {
                Ok(m) => record(client.name(), tasks, &m),
                Err(e) => Record::failed(SECTION, case_name(tasks), client.name(), e),
            };
            if !record.metrics.is_empty() {
                record.note_clean_up(cleaned);
            }
            crate::log(
                &record,
                &[
                    ("locks_per_s", 0, "locks/s"),
                    ("requests_per_op", 2, "requests/grant"),
                    ("client_cpu_us_per_grant", 0, "µs client CPU/grant"),
                    ("client_cpu_pct", 0, "% client CPU"),
                    ("busiest_thread_pct", 0, "% busiest thread"),
                ],
            );
            ctx.records.push(record);
        }
    }
}

/// One case of one client on `/bench/<client>/many-paths/<slug>`: the measured result, and
/// whether its lock paths were deleted after it (empty containers the server would otherwise
/// sweep during later rows).
async fn case(
    ctx: &mut Ctx<'_>,
    client: ClientId,
    server: Server,
    tasks: usize,
    slug: &str,
    window: Window,
) -> (Res<Measured>, Res<()>) {
    let root = crate::path_of(client, SECTION, slug);
    let measured = match client.native() {
        Some(kind) => native_case(kind, &ctx.connect, server, &root, tasks, window).await,
        None => peer_case(ctx, client, &root, tasks, window).await,
    };
    let cleaned = crate::idle::delete_lock_paths(&ctx.connect, &root, tasks).await;
    (measured, cleaned)
}

// ---- the in-process clients ----------------------------------------------------------------

/// A lock on one path, on the case's one session.
enum PathLock {
    ZkLock(zk_lock::Mutex),
    ZkClient(zookeeper_client::Client, String),
}

impl PathLock {
    /// One acquire + release; when the lock was granted, `None` if not by `limit`.
    async fn cycle(&self, limit: Instant) -> Res<Option<Instant>> {
        match self {
            PathLock::ZkLock(mutex) => {
                let Ok(guard) = timeout_at(limit, mutex.lock()).await else { return Ok(None) };
                let guard = guard.map_err(err("lock"))?;
                let granted = Instant::now();
                guard.release().await.map_err(err("release"))?;
                Ok(Some(granted))
            }
            PathLock::ZkClient(zk, path) => {
                let Ok(lock) = timeout_at(limit, native::zkc_lock(zk, path)).await else { return Ok(None) };
                let lock = lock?;
                let granted = Instant::now();
                native::zkc_release(lock).await?;
                Ok(Some(granted))
            }
        }
    }

    /// Cycles until `end`: each grant's time and its cycle (lock call to release done), in µs.
    async fn run(self, end: Instant) -> Res<Vec<(Instant, f64)>> {
        // Bounded: a task still waiting long after the end gives up.
        let limit = end + Duration::from_secs(5);
        let mut cycles = Vec::new();
        while Instant::now() < end {
            let t0 = Instant::now();
            let Some(granted) = self.cycle(limit).await? else { break };
            cycles.push((granted, micros(t0.elapsed())));
        }
        Ok(cycles)
    }
}

async fn native_case(
    kind: Native,
    connect: &str,
    server: Server,
    root: &str,
    tasks: usize,
    window: Window,
) -> Res<Measured> {
    // One session: clones of one client, each task with its own lock on its own path.
    let locks: Vec<PathLock> = match kind {
        Native::ZkLock => {
            let client = native::connect_zk_lock(connect).await?;
            (0..tasks).map(|i| PathLock::ZkLock(zk_lock::Mutex::with_client(&client, format!("{root}/l{i}")))).collect()
        }
        Native::ZkClient => {
            let zk = native::connect_zk_client(connect).await?;
            (0..tasks).map(|i| PathLock::ZkClient(zk.clone(), format!("{root}/l{i}"))).collect()
        }
    };
    // The mutexes hold the session: it ends when the last of them is dropped, at the end.
    let outcome = measure(locks, server, window).await;
    tokio::time::sleep(SETTLE).await;
    outcome
}

async fn measure(locks: Vec<PathLock>, server: Server, window: Window) -> Res<Measured> {
    let tasks = locks.len();
    // One cycle on every path, all at once, before the counters: the parents then exist.
    let limit = Instant::now() + SETUP_LIMIT;
    let mut warming = JoinSet::new();
    for lock in locks {
        warming.spawn(async move {
            match lock.cycle(limit).await? {
                Some(_) => Ok(lock),
                None => Err(format!("the first cycles did not finish in {} s", SETUP_LIMIT.as_secs())),
            }
        });
    }
    let mut locks = Vec::with_capacity(tasks);
    while let Some(joined) = warming.join_next().await {
        locks.push(joined.map_err(|e| format!("a task failed: {e}"))??);
    }
    tokio::time::sleep(SETTLE).await;
    let before = Counters::read_async(server.addr).await?;
    let start = Instant::now();
    let (from, end) = (start + window.warm, start + window.warm + window.measure);
    let mut running = JoinSet::new();
    for lock in locks {
        running.spawn(lock.run(end));
    }
    // On this (the main) thread, while the tasks run on the runtime's workers.
    let sampled = sample(std::process::id(), server, from, end).await;
    let mut cycles = Vec::new();
    let mut failure = None;
    loop {
        match timeout_at(end + Duration::from_secs(30), running.join_next()).await {
            Ok(None) => break,
            Ok(Some(Ok(Ok(mine)))) => cycles.extend(mine),
            Ok(Some(Ok(Err(e)))) => failure = failure.or(Some(e)),
            Ok(Some(Err(e))) => failure = failure.or(Some(format!("a task failed: {e}"))),
            // Dropping the set aborts the rest.
            Err(_) => {
                failure = failure.or(Some("a task did not finish in time".to_owned()));
                break;
            }
        }
    }
    drop(running);
    tokio::time::sleep(SETTLE).await;
    let after = Counters::read_async(server.addr).await?;
    if let Some(failure) = failure {
        return Err(failure);
    }
    let sampled = sampled?;
    // The grants inside the CPU window, which is the measured window.
    let in_window: Vec<f64> =
        cycles.iter().filter(|(granted, _)| *granted >= sampled.from && *granted < sampled.to).map(|c| c.1).collect();
    let mut result = json!({
        "tasks": tasks,
        "measure_s": (sampled.to - sampled.from).as_secs_f64(),
        "grants_measured": in_window.len(),
        "grants_total": cycles.len(),
        "cycle_us": in_window,
    });
    sampled.add_to(&mut result);
    result["packets_sent"] = json!(after.sent.saturating_sub(before.sent));
    Ok(Measured { result, requests: after.since(&before), queued: true })
}

// ---- Curator -------------------------------------------------------------------------------

/// The peer sets up (one cycle on every path) and prints `armed`; the bench reads the counters
/// and sends `go`, on which the peer starts its clock; the bench samples the JVM's threads over
/// what is, on its own clock, the same window (the `go` line takes well under a millisecond).
async fn peer_case(ctx: &mut Ctx<'_>, client: ClientId, root: &str, tasks: usize, window: Window) -> Res<Measured> {
    let server = ctx.server;
    let peer = crate::peer_of(ctx, client)?;
    let pid = peer.pid().ok_or_else(|| format!("the {} peer has exited", peer.name))?;
    let command = format!("many-paths {root} {tasks} {} {}", window.warm.as_millis(), window.measure.as_millis());
    peer.arm(&command, SETUP_LIMIT + Duration::from_secs(60)).await?;
    let before = Counters::read_async(server.addr).await?;
    let start = Instant::now();
    let run_limit = window.warm + window.measure + Duration::from_secs(60);
    let (line, sampled) = tokio::join!(
        peer.go(run_limit),
        sample(pid, server, start + window.warm, start + window.warm + window.measure)
    );
    let after = Counters::read_async(server.addr).await?;
    let mut result = peer.finish(&line?).await?;
    sampled?.add_to(&mut result);
    result["packets_sent"] = json!(after.sent.saturating_sub(before.sent));
    Ok(Measured { result, requests: after.since(&before), queued: true })
}

// ---- the threads' CPU ----------------------------------------------------------------------

/// The CPU time each thread of the client's process spent between two readings, and the
/// server's.
struct Sampled {
    from: Instant,
    to: Instant,
    /// Each thread's name and nanoseconds on a CPU.
    threads: Vec<(String, u64)>,
    /// All the server JVM's threads, nanoseconds.
    server_ns: Option<u64>,
}

impl Sampled {
    /// `cpu_ns` (all threads), `cpu_window_s`, `threads` (each thread's name and `cpu_ns`), and
    /// `server_cpu_ns`.
    fn add_to(&self, result: &mut Value) {
        let threads: Vec<Value> = self.threads.iter().map(|(name, ns)| json!({"name": name, "cpu_ns": ns})).collect();
        result["cpu_ns"] = json!(self.threads.iter().map(|(_, ns)| ns).sum::<u64>());
        result["cpu_window_s"] = json!((self.to - self.from).as_secs_f64());
        result["threads"] = Value::from(threads);
        if let Some(ns) = self.server_ns {
            result["server_cpu_ns"] = json!(ns);
        }
    }
}

/// Reads the threads of the client's process `pid`, and the server's CPU, at `from` and at
/// `end` (blocking reads of `/proc`, a fraction of a millisecond for the bench's threads, a few
/// for a JVM's thousand).
async fn sample(pid: u32, server: Server, from: Instant, end: Instant) -> Res<Sampled> {
    tokio::time::sleep_until(from).await;
    let from = Instant::now();
    let server_first = server.pid.map(Cpu::read).transpose()?;
    let first = Threads::read(pid)?;
    tokio::time::sleep_until(end).await;
    let last = Threads::read(pid)?;
    let server_last = server.pid.map(Cpu::read).transpose()?;
    let to = Instant::now();
    let server_ns = server_first.zip(server_last).map(|(first, last)| last.since(&first).as_nanos() as u64);
    Ok(Sampled { from, to, threads: last.since(&first), server_ns })
}

// ---- the report ----------------------------------------------------------------------------

/// A `many-paths` cell. The thread shares are kept by name, in % of one core, as
/// `thread_pct.<name>` (all threads of that name), `thread_max_pct.<name>` (the busiest one)
/// and `thread_count.<name>` (those that ran in the window).
fn record(client: &'static str, tasks: usize, m: &Measured) -> Record {
    let mut record = Record::new(SECTION, case_name(tasks), client);
    let result = &m.result;
    let number = |key: &str| result[key].as_f64();
    let grants = number("grants_measured").unwrap_or(0.0);
    let total = number("grants_total").unwrap_or(0.0);
    let seconds = number("measure_s").unwrap_or(f64::NAN);
    record.set("tasks", tasks as f64);
    record.set("locks_per_s", grants / seconds);
    record.set("grants", grants);
    record.set("grants_total", total);
    record.summary("cycle", Summary::of(&samples(result, "cycle_us")));
    // Requests are counted over warm-up and window, so per grant of both.
    record.requests(m.requests, total);
    // Answers and watch notifications the server sent (`zk_packets_sent`), counted as requests are.
    if let Some(sent) = number("packets_sent") {
        record.set("packets_sent_per_op", sent / total);
    }
    if let (Some(cpu_ns), Some(cpu_seconds)) = (number("cpu_ns"), number("cpu_window_s")) {
        // The peer counts its grants over its own window; the bench's CPU window is as long
        // within a few ms: the grants are scaled to it.
        let cpu_grants = grants * cpu_seconds / seconds;
        record.set("client_cpu_us_per_grant", cpu_ns / 1000.0 / cpu_grants);
        record.set("client_cpu_pct", cpu_ns / 1e7 / cpu_seconds);
        if let Some(server_ns) = number("server_cpu_ns") {
            record.set("server_cpu_us_per_grant", server_ns / 1000.0 / cpu_grants);
            record.set("server_cpu_pct", server_ns / 1e7 / cpu_seconds);
        }
        let mut by_name: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
        for thread in result["threads"].as_array().into_iter().flatten() {
            let name = thread["name"].as_str().unwrap_or("?").to_owned();
            let pct = thread["cpu_ns"].as_f64().unwrap_or(0.0) / 1e7 / cpu_seconds;
            // A thread that did not run is kept too: `zk-lock-io` at 0 % says something.
            let entry = by_name.entry(name).or_default();
            *entry = (entry.0 + pct, entry.1.max(pct), entry.2 + if pct > 0.0 { 1.0 } else { 0.0 });
        }
        let busiest = by_name.values().map(|(_, max, _)| *max).fold(0.0, f64::max);
        record.set("busiest_thread_pct", busiest);
        for (name, (sum, max, count)) in by_name {
            record.set(format!("thread_pct.{name}"), sum);
            record.set(format!("thread_max_pct.{name}"), max);
            record.set(format!("thread_count.{name}"), count);
        }
    }
    record
}

/// The thread names of a record, busiest first: (name, sum, max, count).
fn threads_of(record: &Record) -> Vec<(String, f64, f64, f64)> {
    let mut threads: Vec<(String, f64, f64, f64)> = record
        .metrics
        .iter()
        .filter_map(|(key, sum)| {
            let name = key.strip_prefix("thread_pct.")?;
            let max = record.get(&format!("thread_max_pct.{name}")).unwrap_or(*sum);
            let count = record.get(&format!("thread_count.{name}")).unwrap_or(1.0);
            Some((name.to_owned(), *sum, max, count))
        })
        .collect();
    threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    threads
}

/// The busiest single thread: `name max%`.
fn busiest(record: &Record) -> String {
    threads_of(record)
        .into_iter()
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map_or_else(|| "-".to_owned(), |(name, _, max, _)| format!("{name} {max:.0}%"))
}

/// A share in % of one core: whole percents, tenths below 10 %.
fn pct(share: f64) -> String {
    if share < 10.0 {
        format!("{share:.1}%")
    } else {
        format!("{share:.0}%")
    }
}

/// `zk-lock-io 31%, tokio-rt-worker x2 142% (max 74%), other 2%`.
fn shares(record: &Record) -> String {
    let mut shown = Vec::new();
    let mut other = 0.0;
    for (name, sum, max, count) in threads_of(record) {
        if sum < SHOWN_FROM_PCT && !ALWAYS_SHOWN.contains(&name.as_str()) {
            other += sum;
        } else if count > 1.0 {
            shown.push(format!("{name} x{count:.0} {} (max {})", pct(sum), pct(max)));
        } else {
            shown.push(format!("{name} {}", pct(sum)));
        }
    }
    if other > 0.0 {
        shown.push(format!("other {}", pct(other)));
    }
    if shown.is_empty() {
        "-".to_owned()
    } else {
        shown.join(", ")
    }
}

/// The row's two tables.
pub fn print_tables(records: &[Record]) {
    let section = || records.iter().filter(|r| r.section == SECTION);
    let header = [
        "T",
        "client",
        "locks/s",
        "cycle p50",
        "cycle p99",
        "grants",
        "req/grant",
        "client CPU µs/grant",
        "client CPU %",
        "server CPU µs/grant",
        "server CPU %",
        "busiest thread",
        "note",
    ];
    let rows = report::table_rows(section(), &header, |r| {
        let mut cells = report::whole(r, &["locks_per_s", "cycle_p50_us", "cycle_p99_us", "grants"]);
        cells.push(report::fmt_requests(r));
        cells.extend(report::whole(
            r,
            &["client_cpu_us_per_grant", "client_cpu_pct", "server_cpu_us_per_grant", "server_cpu_pct"],
        ));
        cells.push(busiest(r));
        cells
    });
    report::print_table(
        "many paths: T tasks of one session, each looping acquire + release on a path of its own (cycle in µs; \
         req counted over warm-up too; CPU of the client's process and of the server over the window, % of one \
         core)",
        &header,
        rows,
    );
    let header = ["T", "client", "CPU by thread name over the window, % of one core", "note"];
    let rows = report::table_rows(section(), &header, |r| vec![shares(r)]);
    report::print_table(
        "many paths, the client process's threads (xN: N threads of that name ran; max: the busiest of them; a \
         thread near 100% is a ceiling)",
        &header,
        rows,
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{busiest, record, shares};
    use crate::peer::Measured;
    use crate::stats::Requests;

    #[test]
    fn thread_shares_are_grouped_by_name() {
        let result = json!({
            "grants_measured": 1000, "grants_total": 1500, "measure_s": 2.0, "cycle_us": [100, 200],
            "cpu_ns": 1_600_000_000u64, "cpu_window_s": 2.0,
            "threads": [
                {"name": "zk-lock-io", "cpu_ns": 200_000_000u64},
                {"name": "VM Thread", "cpu_ns": 0},
                {"name": "tokio-rt-worker", "cpu_ns": 800_000_000u64},
                {"name": "tokio-rt-worker", "cpu_ns": 590_000_000u64},
                {"name": "tokio-rt-worker", "cpu_ns": 0},
                {"name": "bench", "cpu_ns": 10_000_000u64},
            ],
        });
        let requests = Requests { packets: 4500, writes: 3000, reads: 1500, at_leader: None };
        let r = record("zk-lock", 64, &Measured { result, requests, queued: true });
        assert_eq!(r.get("locks_per_s"), Some(500.0));
        assert_eq!(r.get("requests_per_op"), Some(3.0));
        assert_eq!(r.get("client_cpu_us_per_grant"), Some(1600.0));
        assert_eq!(r.get("client_cpu_pct"), Some(80.0));
        assert_eq!(r.get("thread_count.tokio-rt-worker"), Some(2.0));
        assert_eq!(busiest(&r), "tokio-rt-worker 40%");
        assert_eq!(shares(&r), "tokio-rt-worker x2 70% (max 40%), zk-lock-io 10%, other 0.5%");
        assert_eq!(r.get("thread_pct.tokio-rt-worker"), Some(69.5));
    }
}
