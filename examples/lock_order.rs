//! Seed 000's demo across processes: 10 tasks in 2 OS processes contend for one lock and the
//! order in which they got it is printed, with each grant's fencing token.
//!
//! ```text
//! cargo run --example lock_order                      # a throwaway local ZooKeeper
//! ZK_LOCK_CONNECT=host:2181 cargo run --example lock_order -- --processes 3 --tasks 4
//! ```
//!
//! The parent process starts the workers (copies of this program) and reads what they print.
//! Each worker runs its tasks on one ZooKeeper session; every task takes the same
//! `#[zk_lock]`-style mutex, holds it for a moment of simulated work, and lets it go.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "common/embedded.rs"]
mod embedded;
#[path = "common/flags.rs"]
mod flags;
#[path = "common/shutdown.rs"]
mod shutdown;

const LOCK_PATH: &str = "/demo/lock-order";
const WORK: Duration = Duration::from_millis(50);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |flag: &str, default: usize| flags::positive(&args, flag, default);
    if let Some(i) = args.iter().position(|a| a == "--worker") {
        let process: usize = args.get(i + 1).and_then(|v| v.parse().ok()).ok_or("`--worker` needs its index")?;
        return worker(process, number("--tasks", 5)?);
    }
    parent(number("--processes", 2)?, number("--tasks", 5)?)
}

fn parent(processes: usize, tasks: usize) -> Result<(), Box<dyn std::error::Error>> {
    let zookeeper = embedded::ZooKeeper::configured_or_throwaway()?;
    let connect_string = &zookeeper.connect_string;
    println!(
        "{} tasks in {processes} processes contend for `{LOCK_PATH}` on ZooKeeper at {connect_string}\n",
        processes * tasks
    );

    let started = Instant::now();
    let (lines, received) = mpsc::channel();
    let mut workers = Vec::new();
    for process in 1..=processes {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--worker", &process.to_string(), "--tasks", &tasks.to_string()])
            .env(zk_lock::config::CONNECT_ENV, connect_string)
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("worker without stdout")?;
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        workers.push(child);
    }
    drop(lines);

    let mut grants = Vec::new();
    for line in received {
        let Some(grant) = Grant::parse(&line) else {
            println!("{line}");
            continue;
        };
        println!(
            "  [{:>6.3}s] process {} task {} got the lock (token {})",
            started.elapsed().as_secs_f64(),
            grant.process,
            grant.task,
            grant.token
        );
        grants.push(grant);
    }
    for mut worker in workers {
        let status = worker.wait()?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }

    // Fencing tokens grow with every grant, so they give the true order across processes.
    grants.sort_by_key(|g| g.token);
    println!("\nOrder of acquisition (by fencing token):");
    for (rank, grant) in grants.iter().enumerate() {
        println!("  {:>2}. process {} task {}   token {}", rank + 1, grant.process, grant.task, grant.token);
    }
    let expected = processes * tasks;
    if grants.len() != expected {
        return Err(format!("expected {expected} grants, saw {}", grants.len()).into());
    }
    println!("\nAll {expected} tasks held the lock one at a time, in {:.2?}.", started.elapsed());
    Ok(())
}

#[tokio::main]
async fn worker(process: usize, tasks: usize) -> Result<(), Box<dyn std::error::Error>> {
    shutdown::after(take_turns(process, tasks)).await
}

async fn take_turns(process: usize, tasks: usize) -> Result<(), Box<dyn std::error::Error>> {
    let connect_string = std::env::var(zk_lock::config::CONNECT_ENV)?;
    zk_lock::connect(&connect_string).await?;
    let mut handles = Vec::new();
    for task in 1..=tasks {
        handles.push(tokio::spawn(async move {
            let guard = zk_lock::Mutex::new(LOCK_PATH).lock().await?;
            println!("grant {process} {task} {}", guard.fencing_token());
            tokio::time::sleep(WORK).await;
            guard.release().await
        }));
    }
    for handle in handles {
        handle.await??;
    }
    Ok(())
}

struct Grant {
    process: usize,
    task: usize,
    token: i64,
}

impl Grant {
    fn parse(line: &str) -> Option<Self> {
        let mut words = line.strip_prefix("grant ")?.split(' ');
        Some(Self {
            process: words.next()?.parse().ok()?,
            task: words.next()?.parse().ok()?,
            token: words.next()?.parse().ok()?,
        })
    }
}
