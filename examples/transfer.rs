//! Seed 003's multi-lock (Curator's `InterProcessMultiLock`): money moves between accounts A, B
//! and C under `#[zk_multi_lock(paths = ["/demo/transfer/account_<from>", "/demo/transfer/account_<to>"])]`,
//! in every direction at once, from several processes. The total never changes and nothing
//! deadlocks, though A->B and B->A at the same moment deadlock with naive per-account locks
//! (shown first).
//!
//! ```text
//! cargo run --example transfer                        # a throwaway local ZooKeeper
//! ZK_LOCK_CONNECT=host:2181 cargo run --example transfer -- --processes 3 --tasks 4 --transfers 10
//! ```
//!
//! The balances are ZooKeeper data nodes (`/demo/transfer/balances/<account>`, decimal text), so
//! every process sees the same ones and `zkCli.sh get` shows them. A transfer reads both
//! balances, takes a moment (the slow back end in which unprotected updates get lost), and writes
//! both in one ZooKeeper multi, so a crash cannot leave half a transfer. Each write carries the
//! version it read: if anyone had written either account while we held its lock, the write would
//! fail and so would the program. The parent sets up the balances, starts the workers (copies of
//! this program), prints what they report, and exits non-zero unless every transfer finished and
//! the total is what it was.

use std::process::Stdio;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::Barrier;
use zk_lock::{zk_multi_lock, Error, Mutex};
use zookeeper_client::{Acls, CreateMode};

#[path = "common/embedded.rs"]
mod embedded;
#[path = "common/flags.rs"]
mod flags;
#[path = "common/shutdown.rs"]
mod shutdown;

const ACCOUNTS: [&str; 3] = ["A", "B", "C"];
const OPENING_BALANCE: u64 = 100;
const BALANCES: &str = "/demo/transfer/balances";
/// The pairs the transfers cycle through: every direction between every two accounts.
const PAIRS: [(&str, &str); 6] = [("A", "B"), ("B", "A"), ("B", "C"), ("C", "B"), ("C", "A"), ("A", "C")];
/// How long the naive transfers wait for their second lock before giving up.
const NAIVE_PATIENCE: Duration = Duration::from_millis(500);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

static STARTED: LazyLock<Instant> = LazyLock::new(Instant::now);

macro_rules! say {
    ($($arg:tt)*) => {
        println!("  [{:>6.3}s] {}", STARTED.elapsed().as_secs_f64(), format_args!($($arg)*))
    };
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |flag: &str, default: usize| flags::positive(&args, flag, default);
    let plan = Plan {
        processes: number("--processes", 2)?,
        tasks: number("--tasks", 3)?,
        transfers: number("--transfers", 4)?,
        work: Duration::from_millis(number("--work-ms", 20)? as u64),
    };
    if let Some(i) = args.iter().position(|a| a == "--worker") {
        let process: usize = args.get(i + 1).and_then(|v| v.parse().ok()).ok_or("`--worker` needs its number")?;
        return worker(process, plan);
    }
    let zookeeper = embedded::ZooKeeper::configured_or_throwaway().map_err(|e| e.to_string())?;
    parent(&zookeeper.connect_string, plan)
}

#[derive(Clone, Copy)]
struct Plan {
    processes: usize,
    tasks: usize,
    transfers: usize,
    /// How long a transfer takes between reading and writing the balances.
    work: Duration,
}

impl Plan {
    fn args(&self) -> Vec<String> {
        let (p, t, n, w) = (self.processes, self.tasks, self.transfers, self.work.as_millis());
        ["--processes", &p.to_string(), "--tasks", &t.to_string(), "--transfers", &n.to_string()]
            .into_iter()
            .map(str::to_owned)
            .chain(["--work-ms".to_owned(), w.to_string()])
            .collect()
    }
}

#[tokio::main]
async fn parent(connect_string: &str, plan: Plan) -> Result<(), BoxError> {
    shutdown::after(run_transfers(connect_string, plan)).await
}

async fn run_transfers(connect_string: &str, plan: Plan) -> Result<(), BoxError> {
    zk_lock::connect(connect_string).await?;
    let zk = zk_lock::default_client().await?.zookeeper();
    LazyLock::force(&STARTED);
    println!("Accounts {} on ZooKeeper at {connect_string}", ACCOUNTS.join(", "));
    open_accounts(&zk).await?;
    let opening = balances(&zk).await?;
    println!("Opening balances: {}\n", show(&opening));

    naive_transfers_deadlock().await?;

    let expected = plan.processes * plan.tasks * plan.transfers;
    println!(
        "\nNow with #[zk_multi_lock]: {} processes x {} tasks x {} transfers = {expected}, in every direction",
        plan.processes, plan.tasks, plan.transfers
    );
    let (lines, mut received) = tokio::sync::mpsc::unbounded_channel();
    let mut children = Vec::new();
    for process in 1..=plan.processes {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--worker", &process.to_string()])
            .args(plan.args())
            .env(zk_lock::config::CONNECT_ENV, connect_string)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("worker without stdout")?).lines();
        let lines = lines.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                let _ = lines.send(line);
            }
        });
        children.push(child);
    }
    drop(lines);

    let (mut moved, mut declined) = (0, 0);
    while let Some(line) = received.recv().await {
        match Report::parse(&line) {
            Some(Report::Moved { process, task, from, to, amount, from_after, to_after }) => {
                moved += 1;
                say!("process {process} task {task}: {from} -> {to} {amount:>2}   ({from} {from_after}, {to} {to_after})");
            }
            Some(Report::Declined { process, task, from, to, amount, from_balance }) => {
                declined += 1;
                say!("process {process} task {task}: {from} -> {to} {amount:>2}   declined, {from} has {from_balance}");
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

    let closing = balances(&zk).await?;
    let (total_before, total_after) = (total(&opening), total(&closing));
    println!("\nFinal balances: {} (total {total_after}; it was {total_before})", show(&closing));
    close_accounts(&zk).await;
    if moved + declined != expected {
        return Err(format!("{expected} transfers planned, {moved} moved money and {declined} were declined").into());
    }
    if total_after != total_before {
        return Err(format!("the total changed from {total_before} to {total_after}").into());
    }
    println!("All {expected} transfers done ({moved} moved money, {declined} declined), no deadlock, total conserved.");
    Ok(())
}

/// A->B and B->A at once, each locking its `from` account first: each holds what the other needs.
/// Both give up after NAIVE_PATIENCE instead of waiting forever.
async fn naive_transfers_deadlock() -> Result<(), BoxError> {
    println!("First the naive way: A -> B and B -> A at once, each locking its `from` account, then its `to` account");
    let holding = Arc::new(Barrier::new(2));
    let tried = Arc::new(Barrier::new(2));
    let naive = |from: &'static str, to: &'static str| {
        let (holding, tried) = (holding.clone(), tried.clone());
        tokio::spawn(async move {
            let first = Mutex::new(format!("/demo/transfer/account_{from}")).lock().await?;
            say!("{from} -> {to} holds account_{from} and asks for account_{to}");
            holding.wait().await;
            let second = Mutex::new(format!("/demo/transfer/account_{to}")).lock_timeout(NAIVE_PATIENCE).await;
            // Keep the first lock until both have tried, so neither can get through by luck.
            tried.wait().await;
            first.release().await?;
            match second {
                Err(Error::Timeout { waited, .. }) => {
                    say!("{from} -> {to} gave up after {:.2}s waiting for account_{to}", waited.as_secs_f64());
                    Ok(())
                }
                Ok(_) => Err(format!("{from} -> {to} got account_{to} while the other transfer held it").into()),
                Err(other) => Err(BoxError::from(other)),
            }
        })
    };
    let (a_to_b, b_to_a) = (naive("A", "B"), naive("B", "A"));
    a_to_b.await??;
    b_to_a.await??;
    println!("  Deadlock: each waited for the other and neither could move money.");
    Ok(())
}

#[tokio::main]
async fn worker(process: usize, plan: Plan) -> Result<(), BoxError> {
    shutdown::after(transfer_in_tasks(process, plan)).await
}

async fn transfer_in_tasks(process: usize, plan: Plan) -> Result<(), BoxError> {
    zk_lock::connect(&std::env::var(zk_lock::config::CONNECT_ENV)?).await?;
    let zk = zk_lock::default_client().await?.zookeeper();
    let mut tasks = Vec::new();
    for task in 1..=plan.tasks {
        let zk = zk.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..plan.transfers {
                // Each task walks through all six directions from its own starting point, so opposite
                // transfers (A -> B and B -> A) are under way at the same time.
                let (from, to) = PAIRS[(process + task + i) % PAIRS.len()];
                let amount = 1 + (process * 7 + task * 3 + i * 5) as u64 % 30;
                let report = match transfer(&zk, from, to, amount, plan.work).await? {
                    Ok((from_after, to_after)) => format!("moved {from_after} {to_after}"),
                    Err(from_balance) => format!("declined {from_balance}"),
                };
                println!("{process} {task} {from} {to} {amount} {report}");
            }
            Ok::<_, BoxError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// Moves `amount` from one account to another while holding both accounts' locks: the new
/// balances, or `Err(balance)` if `from` has less than `amount`.
#[zk_multi_lock(paths = ["/demo/transfer/account_<from>", "/demo/transfer/account_<to>"], timeout = "30s")]
async fn transfer(
    zk: &zookeeper_client::Client,
    from: &str,
    to: &str,
    amount: u64,
    work: Duration,
) -> Result<Result<(u64, u64), u64>, BoxError> {
    let (from_balance, from_version) = balance(zk, from).await?;
    let (to_balance, to_version) = balance(zk, to).await?;
    if from_balance < amount {
        return Ok(Err(from_balance));
    }
    tokio::time::sleep(work).await; // the slow back end
    let (from_after, to_after) = (from_balance - amount, to_balance + amount);
    let mut both = zk.new_multi_writer();
    both.add_set_data(&balance_path(from), from_after.to_string().as_bytes(), Some(from_version))?;
    both.add_set_data(&balance_path(to), to_after.to_string().as_bytes(), Some(to_version))?;
    both.commit().await.map_err(|e| format!("{from} -> {to}: an account changed while we held its lock: {e}"))?;
    Ok(Ok((from_after, to_after)))
}

fn balance_path(account: &str) -> String {
    format!("{BALANCES}/{account}")
}

/// An account's balance and the version of its node.
async fn balance(zk: &zookeeper_client::Client, account: &str) -> Result<(u64, i32), BoxError> {
    let (data, stat) = zk.get_data(&balance_path(account)).await?;
    let balance = std::str::from_utf8(&data)?.parse().map_err(|e| format!("balance of {account}: {e}"))?;
    Ok((balance, stat.version))
}

async fn balances(zk: &zookeeper_client::Client) -> Result<Vec<(&'static str, u64)>, BoxError> {
    let mut all = Vec::new();
    for account in ACCOUNTS {
        all.push((account, balance(zk, account).await?.0));
    }
    Ok(all)
}

fn total(balances: &[(&str, u64)]) -> u64 {
    balances.iter().map(|(_, balance)| balance).sum()
}

fn show(balances: &[(&str, u64)]) -> String {
    balances.iter().map(|(account, balance)| format!("{account} {balance}")).collect::<Vec<_>>().join(", ")
}

/// Creates the balance nodes, or resets them if a previous run left them.
async fn open_accounts(zk: &zookeeper_client::Client) -> Result<(), BoxError> {
    // A container parent: ZooKeeper removes it once the balances are gone.
    zk.mkdir(BALANCES, &CreateMode::Container.with_acls(Acls::anyone_all())).await?;
    let opening = OPENING_BALANCE.to_string();
    for account in ACCOUNTS {
        let path = balance_path(account);
        match zk.create(&path, opening.as_bytes(), &CreateMode::Persistent.with_acls(Acls::anyone_all())).await {
            Ok(_) => {}
            Err(zookeeper_client::Error::NodeExists) => drop(zk.set_data(&path, opening.as_bytes(), None).await?),
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

async fn close_accounts(zk: &zookeeper_client::Client) {
    for account in ACCOUNTS {
        let _ = zk.delete(&balance_path(account), None).await;
    }
}

/// What a worker reports for each transfer, one line each.
enum Report {
    Moved { process: usize, task: usize, from: String, to: String, amount: u64, from_after: u64, to_after: u64 },
    Declined { process: usize, task: usize, from: String, to: String, amount: u64, from_balance: u64 },
}

impl Report {
    fn parse(line: &str) -> Option<Self> {
        let words: Vec<&str> = line.split(' ').collect();
        let number = |i: usize| words.get(i)?.parse::<u64>().ok();
        let (process, task) = (number(0)? as usize, number(1)? as usize);
        let (from, to, amount) = (words.get(2)?.to_string(), words.get(3)?.to_string(), number(4)?);
        match *words.get(5)? {
            "moved" => {
                Some(Self::Moved { process, task, from, to, amount, from_after: number(6)?, to_after: number(7)? })
            }
            "declined" => Some(Self::Declined { process, task, from, to, amount, from_balance: number(6)? }),
            _ => None,
        }
    }
}
