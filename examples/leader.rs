//! Leader election across processes: `--workers N` copies of this program (default 2) each run
//! a nightly report under `#[zk_leader(path = "/examples/leader/<election>")]`. Only the leader
//! runs it; when its report is done it gives the leadership up and joins the line again, so the
//! workers take turns. After `--rounds R` reports (default 4) the parent stops them and prints
//! who led, in order, with each leadership's fencing token, which grows with each leader.
//!
//! ```text
//! cargo run --example leader                        # a throwaway ZooKeeper
//! ZK_LOCK_CONNECT=host:2181 cargo run --example leader -- --workers 3 --rounds 6 --work 200ms
//! ```
//!
//! A Java process running Curator's `LeaderSelector` on the same path takes its turn among them
//! (tests/recipes/curator_leader.rs).

#[path = "stock/cli.rs"]
mod cli;
#[path = "common/embedded.rs"]
mod embedded;
#[path = "stock/processes.rs"]
mod processes;

use std::process::ExitCode;
use std::time::Duration;

use cli::Flags;
use processes::{Copies, Event};
use zk_lock::zk_leader;

const USAGE: &str = "\
usage: leader [--workers N] [--rounds N] [--work D]

  --workers N   worker processes in the election (default 2)
  --rounds N    reports to run before stopping (default 4)
  --work D      how long one report takes, e.g. 50ms, 1s (default 100ms)

Environment: ZK_LOCK_CONNECT (default: a throwaway local ZooKeeper).";

fn main() -> ExitCode {
    match run(std::env::args().skip(1)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leader: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: impl Iterator<Item = String>) -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse(args, &["--workers", "--rounds", "--work", "--worker", "--election"], &["--help"])?;
    if flags.has("--help") {
        println!("{USAGE}");
        return Ok(());
    }
    let work = flags.duration("--work", Duration::from_millis(100))?;
    if let Some(worker) = flags.get("--worker") {
        let election = flags.get("--election").ok_or("`--worker` needs `--election`")?.to_owned();
        return worker_process(worker.parse()?, election, work);
    }
    parent(flags.positive("--workers", 2)?, flags.positive("--rounds", 4)?, work)
}

// --- a worker ----------------------------------------------------------------------------------

/// The report: runs only while this process leads the election; says when it starts and ends,
/// with its leadership's fencing token.
#[zk_leader(path = "/examples/leader/<election>", guard = leading)]
async fn nightly_report(election: &str, worker: usize, work: Duration) -> Result<(), zk_lock::Error> {
    let token = leading.fencing_token();
    println!("leading {worker} {token}");
    tokio::time::sleep(work).await;
    println!("done {worker} {token}");
    Ok(())
}

/// One worker: runs the report each time it leads, until the parent says stop (or goes away).
#[tokio::main]
async fn worker_process(worker: usize, election: String, work: Duration) -> Result<(), Box<dyn std::error::Error>> {
    zk_lock::default_client().await?;
    println!("ready");
    let stop = processes::parent_says();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            outcome = nightly_report(&election, worker, work) => match outcome {
                Ok(()) => {}
                // Led, and lost the leadership mid-report: the report stopped; lead again.
                Err(zk_lock::Error::Lost { reason, .. }) => println!("lost {worker} {reason}"),
                Err(error) => return Err(error.into()),
            },
        }
    }
    zk_lock::shutdown().await;
    Ok(())
}

// --- the parent --------------------------------------------------------------------------------

/// One report as a worker told it.
struct Report {
    worker: usize,
    token: i64,
}

fn parent(workers: usize, rounds: usize, work: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let zookeeper = embedded::ZooKeeper::configured_or_throwaway()?;
    let election = format!("nightly-{}", std::process::id());
    let args = |n: usize| {
        let mut args = vec!["--worker".to_owned(), n.to_string(), "--election".to_owned(), election.clone()];
        args.extend(["--work".to_owned(), cli::millis(work)]);
        args
    };
    let mut copies = Copies::spawn(workers, args, Some(&zookeeper.connect_string))?;
    copies.wait_for_all("ready")?;
    println!("{workers} worker processes in the election /examples/leader/{election}; each report takes {work:?}:");

    let mut reports: Vec<Report> = Vec::new();
    while reports.len() < rounds {
        match copies.next() {
            Some(Event::Line(_, line)) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                if let ["done", worker, token] = words[..] {
                    reports.push(Report { worker: worker.parse()?, token: token.parse()? });
                } else if !line.starts_with("leading") {
                    println!("  {line}");
                }
            }
            Some(Event::Closed(n)) => return Err(format!("worker {n} exited during the run").into()),
            None => return Err("every worker exited during the run".into()),
        }
    }
    copies.tell_all("stop")?;
    copies.wait()?;

    println!("  report  worker  fencing token");
    for (n, report) in reports.iter().enumerate() {
        println!("  {:>6}  {:>6}  {:>13}", n + 1, report.worker, report.token);
    }
    let growing = reports.windows(2).all(|pair| pair[0].token < pair[1].token);
    let mut led: Vec<usize> = reports.iter().map(|report| report.worker).collect();
    led.sort_unstable();
    led.dedup();
    println!(
        "{} reports by {} of {workers} workers, one leader at a time; fencing tokens {}",
        reports.len(),
        led.len(),
        if growing { "grow with each leader" } else { "DID NOT GROW" }
    );
    if !growing {
        return Err("a leader's fencing token was not larger than the one before".into());
    }
    Ok(())
}
