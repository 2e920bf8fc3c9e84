//! Seed 003's semaphore (Curator's `InterProcessSemaphoreV2`): 3 workers share a job guarded by
//! `#[zk_semaphore(permits = 2)]`, so at most 2 run it at once and the third waits for a permit.
//!
//! ```text
//! cargo run --example semaphore_workers                     # a throwaway local ZooKeeper
//! ZK_LOCK_CONNECT=host:2181 cargo run --example semaphore_workers -- --workers 4 --jobs 2 --work-ms 500
//! ```
//!
//! The workers are OS processes (copies of this program), each with its own ZooKeeper session:
//! that is what the semaphore is for, and no in-process shortcut could make the result look
//! right. They count who is running in a `SharedCount` (a ZooKeeper node changed by
//! compare-and-set): up by one after a job gets its permit, down by one before it gives it back,
//! so the count never exceeds the permits held. The parent starts the workers, lets them ask for
//! permits at the same moment, prints what they report, and exits non-zero if the count ever
//! went above 2 or a job did not run.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use zk_lock::{zk_semaphore, SharedCount};

#[path = "common/embedded.rs"]
mod embedded;
#[path = "common/flags.rs"]
mod flags;
#[path = "common/shutdown.rs"]
mod shutdown;

const SEMAPHORE_PATH: &str = "/demo/semaphore-workers";
const PERMITS: i32 = 2;
/// Outside the semaphore's path: Curator's semaphore owns the children of its path.
const RUNNING_PATH: &str = "/demo/semaphore-workers-running";

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |flag: &str, default: usize| flags::positive(&args, flag, default);
    let jobs = number("--jobs", 1)?;
    let work = Duration::from_millis(number("--work-ms", 1000)? as u64);
    if let Some(i) = args.iter().position(|a| a == "--worker") {
        let id: usize = args.get(i + 1).and_then(|v| v.parse().ok()).ok_or("`--worker` needs its number")?;
        return worker(id, jobs, work);
    }
    parent(number("--workers", 3)?, jobs, work)
}

#[tokio::main]
async fn parent(workers: usize, jobs: usize, work: Duration) -> Result<(), BoxError> {
    shutdown::after(lead_workers(workers, jobs, work)).await
}

async fn lead_workers(workers: usize, jobs: usize, work: Duration) -> Result<(), BoxError> {
    let zookeeper = embedded::ZooKeeper::configured_or_throwaway()?;
    let connect_string = &zookeeper.connect_string;
    println!(
        "{workers} workers, {jobs} job(s) each, share `{SEMAPHORE_PATH}` ({PERMITS} permits) on ZooKeeper at \
         {connect_string}\n"
    );
    zk_lock::connect(connect_string).await?;
    // A run that was killed mid-job may have left its count behind.
    let running = SharedCount::new(RUNNING_PATH, 0);
    running.set(0).await?;

    let started = Instant::now();
    let (lines, mut received) = tokio::sync::mpsc::unbounded_channel();
    let mut children = Vec::new();
    let mut go = Vec::new();
    for id in 1..=workers {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--worker", &id.to_string(), "--jobs", &jobs.to_string()])
            .args(["--work-ms", &work.as_millis().to_string()])
            .env(zk_lock::config::CONNECT_ENV, connect_string)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        go.push(child.stdin.take().ok_or("worker without stdin")?);
        let mut stdout = BufReader::new(child.stdout.take().ok_or("worker without stdout")?).lines();
        let lines = lines.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                let _ = lines.send(line);
            }
            let _ = lines.send("exited".to_owned());
        });
        children.push(child);
    }
    drop(lines);

    let stamp = |started: Instant| format!("[{:>6.3}s]", started.elapsed().as_secs_f64());
    let (mut ready, mut starts, mut finishes, mut most_running) = (0, 0, 0, 0);
    let mut longest_wait: Option<(usize, Duration)> = None;
    let mut asked: HashMap<(usize, usize), Instant> = HashMap::new();
    while let Some(line) = received.recv().await {
        match Event::parse(&line) {
            Some(Event::Ready) => {
                ready += 1;
                // Every worker is connected: let them all ask at once, so the third has to wait.
                if ready == workers {
                    for mut stdin in go.drain(..) {
                        stdin.write_all(b"go\n").await?;
                    }
                }
            }
            Some(Event::Asks { worker, job }) => {
                asked.insert((worker, job), Instant::now());
                println!("  {} worker {worker} asks for a permit for job {job}", stamp(started));
            }
            Some(Event::Starts { worker, job, running }) => {
                starts += 1;
                most_running = most_running.max(running);
                let waited = asked.get(&(worker, job)).map(Instant::elapsed).unwrap_or_default();
                if longest_wait.is_none_or(|(_, longest)| waited > longest) {
                    longest_wait = Some((worker, waited));
                }
                println!(
                    "  {} worker {worker} starts job {job} after waiting {:.2}s ({running} running)",
                    stamp(started),
                    waited.as_secs_f64()
                );
            }
            Some(Event::Finishes { worker, job, running }) => {
                finishes += 1;
                println!("  {} worker {worker} finishes job {job} ({running} still running)", stamp(started));
            }
            Some(Event::Exited) => {
                // A worker that failed before it was ready must not keep the others waiting:
                // closing their stdin lets them go.
                go.clear();
            }
            None => println!("{line}"),
        }
    }
    for mut child in children {
        let status = child.wait().await?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }

    let expected = workers * jobs;
    let left = running.read().await?.value;
    println!();
    if most_running > PERMITS {
        return Err(format!("{most_running} jobs ran at once with {PERMITS} permits").into());
    }
    if starts != expected || finishes != expected || left != 0 {
        return Err(
            format!("expected {expected} jobs, {starts} started, {finishes} finished, {left} still counted").into()
        );
    }
    println!("At most {most_running} jobs ran at once ({PERMITS} permits); all {expected} jobs ran.");
    if let Some((worker, waited)) = longest_wait {
        println!("The longest wait for a permit: worker {worker}, {:.2}s.", waited.as_secs_f64());
    }
    Ok(())
}

#[tokio::main]
async fn worker(id: usize, jobs: usize, work: Duration) -> Result<(), BoxError> {
    shutdown::after(run_jobs(id, jobs, work)).await
}

async fn run_jobs(id: usize, jobs: usize, work: Duration) -> Result<(), BoxError> {
    zk_lock::connect(&std::env::var(zk_lock::config::CONNECT_ENV)?).await?;
    let me = Worker { id, work, running: SharedCount::new(RUNNING_PATH, 0) };
    me.running.start().await?;
    println!("ready");
    // The parent's go-ahead: a line on stdin once every worker is ready (or the end of stdin).
    tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await??;
    for job in 1..=jobs {
        println!("asks {id} {job}");
        me.job(job).await?;
    }
    Ok(())
}

struct Worker {
    id: usize,
    work: Duration,
    /// How many jobs run now, across all workers.
    running: SharedCount,
}

impl Worker {
    /// The job: it runs only while this worker holds one of the semaphore's 2 permits.
    #[zk_semaphore(path = "/demo/semaphore-workers", permits = 2)]
    async fn job(&self, job: usize) -> Result<(), zk_lock::Error> {
        let running = add(&self.running, 1).await?;
        println!("starts {} {job} {running}", self.id);
        tokio::time::sleep(self.work).await; // the work
        let running = add(&self.running, -1).await?;
        println!("finishes {} {job} {running}", self.id);
        Ok(())
    }
}

/// Adds `delta` to the shared count by compare-and-set and returns the new count.
async fn add(count: &SharedCount, delta: i32) -> zk_lock::Result<i32> {
    loop {
        let seen = count.versioned();
        if count.try_set(seen.value + delta, seen.version).await? {
            return Ok(seen.value + delta);
        }
    }
}

/// What a worker reports on its stdout, one line each.
enum Event {
    Ready,
    /// Not printed by the worker: the parent's note that its output ended.
    Exited,
    Asks {
        worker: usize,
        job: usize,
    },
    Starts {
        worker: usize,
        job: usize,
        running: i32,
    },
    Finishes {
        worker: usize,
        job: usize,
        running: i32,
    },
}

impl Event {
    fn parse(line: &str) -> Option<Self> {
        let mut words = line.split(' ');
        let kind = words.next()?;
        match kind {
            "ready" => return Some(Self::Ready),
            "exited" => return Some(Self::Exited),
            _ => {}
        }
        let worker = words.next()?.parse().ok()?;
        let job = words.next()?.parse().ok()?;
        let mut running = || words.next()?.parse().ok();
        match kind {
            "asks" => Some(Self::Asks { worker, job }),
            "starts" => Some(Self::Starts { worker, job, running: running()? }),
            "finishes" => Some(Self::Finishes { worker, job, running: running()? }),
            _ => None,
        }
    }
}
