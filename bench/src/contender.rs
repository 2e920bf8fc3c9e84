//! The `contended-processes` row: each contender in its own OS process with its own session:
//! this binary re-run as `bench --contender <client> <runtime> <connect> <path>` for the Rust
//! clients (`<runtime>`: `current-thread`, or `multi-thread` for the `contended-processes-mt`
//! row, tokio's runtime as `#[tokio::main]` builds it), one
//! JVM running `CuratorBench --contender <connect> <path>` for Curator, one interpreter running
//! `kazoo_bench.py --contender <connect> <path>` for kazoo. zk-lock skips a read when the node it
//! waited for was granted in the same process (zk-lock/src/engine/local_handoff.rs); across processes
//! it cannot, and this row measures what a hand-off costs then, next to the peers' figures for
//! the deployment users actually run (one process per session).
//!
//! Protocol on the worker's stdin/stdout: it connects, takes and releases the lock once (as the
//! peers' warm-up does: the lock's parent then exists before the counters are read, so its
//! creation is not counted against the grants) and prints `ready`; it reads
//! `go <base> <warm> <measure>` (Unix-time nanoseconds, nanoseconds, nanoseconds) and loops on
//! the mutex until `base + warm + measure`; it prints `result <json>` and closes its session
//! when its stdin closes, so that the session's close falls outside the parent's counters.
//! `error <message>` instead of either line when something failed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout_at, Instant};

use crate::native::{self, err, micros, Native, Res, SETTLE};
use crate::peer::{samples, Measured};
use crate::procstat::Cpu;
use crate::stats::{Counters, Servers};

/// The hidden first argument that turns this binary into a contender.
pub const FLAG: &str = "--contender";

fn name(kind: Native) -> &'static str {
    match kind {
        Native::ZkLock => "zk-lock",
        Native::ZkClient => "zookeeper-client",
    }
}

/// Nanoseconds since `base` (Unix-time nanoseconds) on the wall clock, the one clock that every
/// process reads alike.
fn wall_since(base: i128) -> f64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
    (now - base) as f64
}

// ---- worker --------------------------------------------------------------------------------

/// The tokio runtime a Rust contender process runs on, chosen by the parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `Builder::new_current_thread()`: one thread, the contender's whole process.
    CurrentThread,
    /// `Builder::new_multi_thread()` with its defaults (a worker per core), what
    /// `#[tokio::main]` builds and axum services run on.
    MultiThread,
}

impl Flavour {
    fn arg(self) -> &'static str {
        match self {
            Flavour::CurrentThread => "current-thread",
            Flavour::MultiThread => "multi-thread",
        }
    }

    fn build(self) -> std::io::Result<tokio::runtime::Runtime> {
        match self {
            Flavour::CurrentThread => tokio::runtime::Builder::new_current_thread().enable_all().build(),
            Flavour::MultiThread => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
        }
    }
}

/// `bench --contender <client> <runtime> <connect> <path>`.
pub fn worker(args: &[String]) -> ExitCode {
    let [client, flavour, connect, path] = args else {
        println!("error usage: bench {FLAG} <zk-lock|zookeeper-client> <current-thread|multi-thread> <connect> <path>");
        return ExitCode::from(2);
    };
    let Some(flavour) = [Flavour::CurrentThread, Flavour::MultiThread].into_iter().find(|f| f.arg() == flavour) else {
        println!("error unknown runtime `{flavour}`");
        return ExitCode::from(2);
    };
    let kind = match client.as_str() {
        "zk-lock" => Native::ZkLock,
        "zookeeper-client" => Native::ZkClient,
        other => {
            println!("error unknown client `{other}`");
            return ExitCode::from(2);
        }
    };
    // One contender needs one thread; services run on the multi-thread runtime. zk-lock runs the
    // session's I/O on this runtime either way, its own thread only the session's monitor.
    let runtime = match flavour.build() {
        Ok(runtime) => runtime,
        Err(e) => {
            println!("error cannot build the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(work(kind, connect, path)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("error {}", e.replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

/// One session and its lock handle.
enum Lock {
    /// The handle holds its client, and so the session.
    ZkLock(zk_lock::Mutex),
    ZkClient(zookeeper_client::Client, String),
}

impl Lock {
    /// One grant and release: when the lock call returned, and the held interval (nanoseconds
    /// since `base` on the wall clock, from after the grant to before the release, so inside
    /// the true hold). `None` if not granted by `limit`.
    async fn cycle(&self, limit: Instant, base: i128) -> Res<Option<(Instant, [f64; 2])>> {
        match self {
            Lock::ZkLock(mutex) => {
                let Ok(guard) = timeout_at(limit, mutex.lock()).await else { return Ok(None) };
                let guard = guard.map_err(err("lock"))?;
                let granted = Instant::now();
                let held = [wall_since(base), wall_since(base)];
                guard.release().await.map_err(err("release"))?;
                Ok(Some((granted, held)))
            }
            Lock::ZkClient(zk, path) => {
                let Ok(lock) = timeout_at(limit, native::zkc_lock(zk, path)).await else { return Ok(None) };
                let lock = lock?;
                let granted = Instant::now();
                let held = [wall_since(base), wall_since(base)];
                native::zkc_release(lock).await?;
                Ok(Some((granted, held)))
            }
        }
    }
}

/// The next line of stdin, `None` at its end. Blocking reads on the blocking pool: tokio's own
/// stdin needs a feature the workspace does not enable.
async fn read_line() -> Res<Option<String>> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(line.trim_end().to_owned())),
            Err(e) => Err(format!("stdin: {e}")),
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

async fn work(kind: Native, connect: &str, path: &str) -> Res<()> {
    let lock = match kind {
        Native::ZkLock => {
            let client = native::connect_zk_lock(connect).await?;
            Lock::ZkLock(zk_lock::Mutex::with_client(&client, path))
        }
        Native::ZkClient => Lock::ZkClient(native::connect_zk_client(connect).await?, path.to_owned()),
    };
    // The first lock call on a path may create its parent (a failed create, then the parent's):
    // done here, before the counters, once per process.
    if lock.cycle(Instant::now() + Duration::from_secs(30), 0).await?.is_none() {
        return Err("the warm-up lock call timed out".to_owned());
    }
    println!("ready");
    let line = read_line().await?.ok_or("stdin closed before `go`")?;
    let numbers: Vec<i128> = line.strip_prefix("go ").unwrap_or("").split(' ').filter_map(|n| n.parse().ok()).collect();
    let [base, warm, measure] = numbers[..] else {
        return Err(format!("expected `go <base> <warm> <measure>`: {line}"));
    };
    // The window on this process's monotonic clock.
    let now = Instant::now();
    let start = now.checked_sub(Duration::from_nanos(wall_since(base).max(0.0) as u64)).unwrap_or(now);
    let from = start + Duration::from_nanos(warm as u64);
    let end = from + Duration::from_nanos(measure as u64);
    // Bounded: a contender still waiting long after the end gives up, as in-process.
    let limit = end + Duration::from_secs(5);
    let (mut waits, mut held, mut asked, mut total) = (Vec::new(), Vec::new(), Vec::new(), 0u64);
    // This process's CPU time over the loop (all its threads: the caller's, zk-lock's own, the
    // client library's), for the client CPU per grant.
    let cpu_before = Cpu::read(std::process::id())?;
    while Instant::now() < end {
        let t0 = Instant::now();
        let asked_at = wall_since(base);
        let Some((granted, interval)) = lock.cycle(limit, base).await? else { break };
        total += 1;
        held.extend(interval);
        asked.push(asked_at);
        if granted >= from && granted < end {
            waits.push(micros(granted - t0));
        }
    }
    let cpu_ns = Cpu::read(std::process::id())?.since(&cpu_before).as_nanos() as u64;
    println!(
        "result {}",
        json!({"grants_total": total, "wait_us": waits, "held_ns": held, "asked_ns": asked, "cpu_ns": cpu_ns})
    );
    // Keep the session until the parent has read the server's counters.
    while read_line().await.is_ok_and(|line| line.is_some()) {}
    drop(lock);
    Ok(())
}

// ---- parent --------------------------------------------------------------------------------

/// How to start one contender process.
pub struct Launch {
    program: PathBuf,
    args: Vec<OsString>,
    /// Where the processes' stderr goes (appended); inherited if `None`.
    stderr: Option<PathBuf>,
    /// How long all the processes may take to start, connect and warm up.
    pub ready_timeout: Duration,
}

impl Launch {
    /// `program args... --contender <connect> <path>`, the peers' contender mode.
    pub fn peer(program: PathBuf, mut args: Vec<OsString>, connect: &str, path: &str, stderr: PathBuf) -> Launch {
        args.extend([FLAG, connect, path].map(OsString::from));
        Launch { program, args, stderr: Some(stderr), ready_timeout: Duration::from_secs(300) }
    }

    /// This binary as a contender of a Rust client, on a `flavour` runtime.
    pub fn native(kind: Native, flavour: Flavour, connect: &str, path: &str) -> Res<Launch> {
        let program = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let args = [FLAG, name(kind), flavour.arg(), connect, path].map(OsString::from).to_vec();
        Ok(Launch { program, args, stderr: None, ready_timeout: Duration::from_secs(60) })
    }
}

/// A contender process, killed when dropped.
struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    fn spawn(launch: &Launch) -> Res<Worker> {
        let stderr = match &launch.stderr {
            Some(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map(Stdio::from)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?,
            None => Stdio::inherit(),
        };
        let mut child = Command::new(&launch.program)
            .args(&launch.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start a contender process: {e}"))?;
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        Ok(Worker { child, stdin, lines })
    }

    /// The rest of the next line starting with `prefix`; an `error` line is the error.
    async fn expect(&mut self, prefix: &str, deadline: Instant) -> Res<String> {
        loop {
            let line = match timeout_at(deadline, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => return Err("a contender process exited".to_owned()),
                Ok(Err(e)) => return Err(format!("cannot read a contender process: {e}")),
                Err(_) => return Err(format!("a contender process printed no `{prefix}` in time")),
            };
            if let Some(rest) = line.strip_prefix(prefix) {
                return Ok(rest.to_owned());
            }
            if let Some(message) = line.strip_prefix("error ") {
                return Err(format!("contender process: {message}"));
            }
        }
    }

    async fn send(&mut self, line: &str) -> Res<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        stdin.write_all(format!("{line}\n").as_bytes()).await.map_err(|e| format!("contender process: {e}"))?;
        stdin.flush().await.map_err(|e| format!("contender process: {e}"))
    }
}

/// Mutual exclusion across the processes: held intervals (from every process, on the wall
/// clock) that start before an earlier one ended, and the most that overlap.
fn overlaps(mut intervals: Vec<(f64, f64)>) -> (u64, usize) {
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut violations, mut max_holders) = (0, 0);
    let mut open: Vec<f64> = Vec::new();
    for (start, end) in intervals {
        open.retain(|&open_end| open_end > start);
        if !open.is_empty() {
            violations += 1;
        }
        open.push(end);
        max_holders = max_holders.max(open.len());
    }
    (violations, max_holders)
}

/// One grant as a contender process reports it, in wall-clock nanoseconds since the common
/// base: when its lock call started, after the grant, before the release (the delete is sent
/// right after).
#[derive(Debug, Clone, Copy)]
struct Hold {
    asked: f64,
    granted: f64,
    released: f64,
}

/// Hand-off latencies across processes, in microseconds: from the moment the holder began its
/// release (its delete is sent next) to the next holder's grant, for every grant inside
/// `window` (nanoseconds since the base) whose lock call had started before the hold *before*
/// that one ended. Such a holder sat in the queue for a whole grant, so it was waiting, its
/// watch set, when the release began: the gap is a hand-off. (Asking before the release itself
/// is not enough: with zero hold time a holder asks again at once, and is still creating its
/// node when the next release comes, a fresh acquire racing it.) Two contenders taking turns
/// have no hand-offs by this rule.
fn handoffs(mut holds: Vec<Hold>, window: (f64, f64)) -> Vec<f64> {
    holds.sort_by(|a, b| a.granted.total_cmp(&b.granted));
    holds
        .windows(3)
        .filter(|three| {
            let (before, previous, next) = (three[0], three[1], three[2]);
            next.granted >= window.0
                && next.granted < window.1
                && next.granted >= previous.released
                && next.asked < before.released
        })
        .map(|three| ((three[2].granted - three[1].released) / 100.0).round() / 10.0)
        .collect()
}

/// `sessions` contender processes, one session each, loop on one mutex for `warm + measure`.
/// The same result shape as the in-process `native::contended`.
pub async fn contended(
    launch: &Launch,
    server: Servers,
    sessions: usize,
    warm: Duration,
    measure: Duration,
) -> Res<Measured> {
    let mut workers = (0..sessions).map(|_| Worker::spawn(launch)).collect::<Res<Vec<_>>>()?;
    let deadline = Instant::now() + launch.ready_timeout;
    for worker in &mut workers {
        worker.expect("ready", deadline).await?;
    }
    tokio::time::sleep(SETTLE).await;
    let before = Counters::read_async(server).await?;
    // One absolute start for all; the warm-up absorbs the time the `go` lines take to arrive.
    let base = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| e.to_string())?.as_nanos();
    let go = format!("go {base} {} {}", warm.as_nanos(), measure.as_nanos());
    for worker in &mut workers {
        worker.send(&go).await?;
    }
    let deadline = Instant::now() + warm + measure + Duration::from_secs(30);
    let mut results = Vec::with_capacity(sessions);
    for worker in &mut workers {
        let line = worker.expect("result ", deadline).await?;
        let result: Value =
            serde_json::from_str(&line).map_err(|e| format!("bad result from a contender process: {e}"))?;
        results.push(result);
    }
    tokio::time::sleep(SETTLE).await;
    let after = Counters::read_async(server).await?;
    // Closing stdin lets each worker close its session and exit.
    for worker in &mut workers {
        worker.stdin = None;
    }
    for worker in &mut workers {
        if tokio::time::timeout(Duration::from_secs(10), worker.child.wait()).await.is_err() {
            let _ = worker.child.start_kill();
        }
    }
    tokio::time::sleep(SETTLE).await;
    let mut waits = Vec::new();
    let mut intervals = Vec::new();
    let mut holds = Vec::new();
    let mut total = 0.0;
    // Reported by the Rust contenders only.
    let mut cpu_ns = Some(0.0);
    for result in &results {
        waits.extend(samples(result, "wait_us"));
        total += result["grants_total"].as_f64().unwrap_or(0.0);
        cpu_ns = cpu_ns.zip(result["cpu_ns"].as_f64()).map(|(sum, ns)| sum + ns);
        let held = samples(result, "held_ns");
        let asked = samples(result, "asked_ns");
        if held.len() != 2 * asked.len() {
            return Err(format!(
                "a contender reported {} held intervals but {} lock calls",
                held.len() / 2,
                asked.len()
            ));
        }
        for (pair, asked) in held.chunks_exact(2).zip(asked) {
            intervals.push((pair[0], pair[1]));
            holds.push(Hold { asked, granted: pair[0], released: pair[1] });
        }
    }
    let window = (warm.as_nanos() as f64, (warm + measure).as_nanos() as f64);
    let handoff_us = handoffs(holds, window);
    let (violations, max_holders) = overlaps(intervals);
    let result = json!({
        "sessions": sessions,
        "measure_s": measure.as_secs_f64(),
        "grants_measured": waits.len(),
        "grants_total": total,
        "violations": violations,
        "max_holders": max_holders,
        "wait_us": waits,
        "handoff_us": handoff_us,
        "client_cpu_us": cpu_ns.map(|ns| ns / 1000.0),
    });
    Ok(Measured { result, requests: after.since(&before), queued: true })
}

#[cfg(test)]
mod tests {
    use super::{handoffs, overlaps, Hold};

    #[test]
    fn overlapping_intervals_are_violations() {
        assert_eq!(overlaps(vec![(0.0, 1.0), (1.0, 2.0), (3.0, 4.0)]), (0, 1));
        assert_eq!(overlaps(vec![(0.0, 5.0), (1.0, 2.0), (1.5, 3.0)]), (2, 3));
    }

    #[test]
    fn handoffs_count_only_waiting_successors_inside_the_window() {
        let hold = |asked, granted, released| Hold { asked, granted, released };
        let holds = vec![
            hold(0.0, 1_000.0, 2_000.0),
            // Asked before the release at 2,000, but no hold before that one: not counted.
            hold(500.0, 3_500.0, 4_000.0),
            // Queued since before the hold ending at 2,000 ended: a hand-off of 1 µs from 4,000.
            hold(1_500.0, 5_000.0, 5_500.0),
            // Asked before the release at 5,500 but after the one at 4,000: racing, not waiting.
            hold(4_100.0, 9_000.0, 9_500.0),
            // Queued long enough, but outside the window.
            hold(4_200.0, 20_000.0, 21_000.0),
        ];
        assert_eq!(handoffs(holds, (0.0, 10_000.0)), [1.0]);
    }
}
