//! The stock oversell demo (seed 002's story): buyers in several OS processes deduct one
//! product's stock in a shared database, first with no lock, then with a process-local lock,
//! then with `#[zk_lock(path = "/product_<id>")]`, and a table shows what each sold.
//!
//! ```text
//! cargo run --example stock_oversell                  # a throwaway ZooKeeper and a temporary SQLite file
//! cargo run --example stock_oversell -- --processes 2 --buyers 20 --stock 10 --delay 50ms
//! ZK_LOCK_CONNECT=host:2181 cargo run --example stock_oversell -- --database sqlite:/tmp/stock.db
//! cargo run --example stock_oversell -- --help
//! ```
//!
//! Each purchase is the seed's service: read the stock, give up if none is left, spend a while
//! (`--delay`), then `stock = stock - 1`. Without a lock, buyers who read before another's update
//! sell the same unit again. A `tokio::sync::Mutex` fixes that inside one process but not across
//! processes (the seed's two nodes behind nginx). The ZooKeeper lock is shared by all processes,
//! and its fencing token goes with every write so the database can refuse a stale holder.
//!
//! The parent process starts the workers (copies of this program), starts their buyers together,
//! and reads one line per purchase from their stdout (the progress bar and the table).

#[path = "stock/cli.rs"]
mod cli;
#[path = "stock/db.rs"]
mod db;
#[path = "common/embedded.rs"]
mod embedded;
#[path = "stock/processes.rs"]
mod processes;
#[path = "stock/report.rs"]
mod report;
#[path = "common/shutdown.rs"]
mod shutdown;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use zk_lock::zk_lock;

use cli::Flags;
use db::{Database, Outcome, Store};
use processes::{Copies, Event};
use report::ModeResult;

const USAGE: &str = "\
usage: stock_oversell [--processes N] [--buyers N] [--stock N] [--delay D] [--product ID]
                      [--modes LIST] [--database URL] [--json FILE]

  --processes N   worker processes, as if behind a load balancer (default 4)
  --buyers N      concurrent buyers (tokio tasks) in each process, one purchase each (default 50)
  --stock N       the product's stock before each mode (default 100)
  --delay D       time between checking the stock and deducting it, e.g. 20ms, 1s (default 20ms)
  --product ID    the product's id, so its lock is /product_<ID> (default 1)
  --modes LIST    comma-separated, run in this order: no-lock,local,zk (default: all three)
  --database URL  sqlite:<file>; default $DATABASE_URL, else a temporary file
  --json FILE     also write the results as JSON

Environment: ZK_LOCK_CONNECT (default: a throwaway local ZooKeeper), DATABASE_URL.";

/// The ways the buyers can protect their check-then-deduct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    NoLock,
    Local,
    Zk,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::NoLock, Mode::Local, Mode::Zk];

    fn key(self) -> &'static str {
        match self {
            Mode::NoLock => "no-lock",
            Mode::Local => "local",
            Mode::Zk => "zk",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::NoLock => "no lock",
            Mode::Local => "process-local lock (tokio Mutex)",
            Mode::Zk => "#[zk_lock(path = \"/product_<id>\")]",
        }
    }

    fn parse(key: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.key() == key)
            .ok_or_else(|| format!("`--modes`: unknown mode `{key}`; allowed: no-lock, local, zk (comma-separated)"))
    }
}

/// The run's settings, the same in the parent and its workers.
struct Settings {
    processes: usize,
    buyers: usize,
    stock: i64,
    delay: Duration,
    product: u32,
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stock_oversell: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: impl Iterator<Item = String>) -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse(
        args,
        &[
            "--processes",
            "--buyers",
            "--stock",
            "--delay",
            "--product",
            "--modes",
            "--database",
            "--json",
            "--worker",
            "--mode",
        ],
        &["--help"],
    )?;
    if flags.has("--help") {
        println!("{USAGE}");
        return Ok(());
    }
    let settings = Settings {
        processes: flags.positive("--processes", 4)?,
        buyers: flags.positive("--buyers", 50)?,
        stock: flags.positive("--stock", 100)?,
        delay: flags.duration("--delay", Duration::from_millis(20))?,
        product: flags.positive("--product", 1)?,
    };
    if flags.get("--worker").is_some() {
        let mode = Mode::parse(flags.get("--mode").ok_or("a worker needs `--mode`")?)?;
        let database = db::sqlite_path("--database", flags.get("--database").ok_or("a worker needs `--database`")?)?;
        return worker(mode, &settings, &database);
    }
    let modes = match flags.get("--modes") {
        None => Mode::ALL.to_vec(),
        Some(list) => list.split(',').map(|key| Mode::parse(key.trim())).collect::<Result<Vec<_>, _>>()?,
    };
    parent(&settings, &modes, flags.get("--database"), flags.get("--json"))
}

fn parent(
    settings: &Settings,
    modes: &[Mode],
    database: Option<&str>,
    json_file: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let database = Database::configured_or_temporary(database)?;
    let store = Store::open(&database.path)?;
    // Only the zk mode needs ZooKeeper.
    let zookeeper = match modes.contains(&Mode::Zk) {
        true => Some(embedded::ZooKeeper::configured_or_throwaway()?),
        false => None,
    };
    let Settings { processes, buyers, stock, delay, product } = *settings;
    println!(
        "Product {product}: stock {stock}; {processes} processes x {buyers} buyers, {} between check and deduct",
        cli::millis(delay)
    );
    if let Some(zookeeper) = &zookeeper {
        println!("ZooKeeper: {}", zookeeper.connect_string);
    }
    println!("Database:  {}\n", database.describe());

    let mut results = Vec::new();
    for &mode in modes {
        let connect = zookeeper.as_ref().map(|zk| zk.connect_string.as_str());
        results.push(run_mode(mode, settings, &store, &database, connect)?);
    }
    // The last progress bar (stderr, drawn only on a terminal) leaves the cursor on its line.
    let gap = if std::io::stderr().is_terminal() { "\n\n" } else { "" };
    print!("{gap}{}", report::table(&results));

    if let Some(file) = json_file {
        let parameters = json!({
            "processes": processes,
            "buyers_per_process": buyers,
            "initial_stock": stock,
            "delay_ms": delay.as_secs_f64() * 1000.0,
            "product": product,
        });
        std::fs::write(file, serde_json::to_string_pretty(&report::json(parameters, &results))?)
            .map_err(|e| format!("`--json {file}`: {e}"))?;
    }
    Ok(())
}

/// Resets the stock, runs one mode's workers to the end and reads the final stock.
fn run_mode(
    mode: Mode,
    settings: &Settings,
    store: &Store,
    database: &Database,
    connect: Option<&str>,
) -> Result<ModeResult, Box<dyn std::error::Error>> {
    store.reset(settings.product, settings.stock)?;
    let args = |n: usize| {
        [
            ("--worker", n.to_string()),
            ("--mode", mode.key().to_owned()),
            ("--buyers", settings.buyers.to_string()),
            ("--delay", cli::millis(settings.delay)),
            ("--product", settings.product.to_string()),
            ("--database", database.url()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_owned(), value])
        .collect()
    };
    let mut workers = Copies::spawn(settings.processes, args, connect)?;
    // Every worker has its database (and session) open before any buyer starts, so that the
    // processes really overlap, as behind a load balancer.
    workers.wait_for_all("ready")?;
    let started = Instant::now();
    workers.tell_all("go")?;

    let requests = settings.processes * settings.buyers;
    let bar = ProgressBar::new(requests as u64).with_prefix(mode.label()).with_style(
        ProgressStyle::with_template("{prefix:<34} [{bar:30}] {pos}/{len} {msg}")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    let mut result = ModeResult {
        key: mode.key(),
        label: mode.label(),
        initial_stock: settings.stock,
        requests,
        sold: 0,
        sold_out: 0,
        fenced: (mode == Mode::Zk).then_some(0),
        errors: 0,
        final_stock: 0,
        wall: Duration::ZERO,
        waits: (mode != Mode::NoLock).then(Vec::new),
    };
    let mut answered = 0;
    while let Some(event) = workers.next() {
        let line = match event {
            Event::Line(_, line) => line,
            Event::Closed(_) => continue,
        };
        let Some((outcome, waited)) = parse_purchase(&line) else {
            bar.println(line);
            continue;
        };
        match outcome {
            Some(Outcome::Sold) => result.sold += 1,
            Some(Outcome::SoldOut) => result.sold_out += 1,
            Some(Outcome::Fenced) => *result.fenced.get_or_insert(0) += 1,
            None => result.errors += 1,
        }
        if let (Some(waits), Some(waited)) = (&mut result.waits, waited) {
            waits.push(waited);
        }
        answered += 1;
        result.wall = started.elapsed();
        bar.inc(1);
    }
    workers.wait()?;
    result.final_stock = store.stock(settings.product)?;
    bar.finish_with_message(format!("final stock {}", result.final_stock));
    if answered != requests {
        return Err(format!("{}: expected {requests} purchases, the workers reported {answered}", mode.key()).into());
    }
    Ok(result)
}

/// A worker's line `buy <outcome|error> <wait in µs|->`: the outcome (`None` for an error) and
/// the lock wait.
fn parse_purchase(line: &str) -> Option<(Option<Outcome>, Option<Duration>)> {
    let mut words = line.strip_prefix("buy ")?.split(' ');
    let outcome = match words.next()? {
        "error" => None,
        word => Some(Outcome::from_word(word)?),
    };
    let waited = match words.next()? {
        "-" => None,
        micros => Some(Duration::from_micros(micros.parse().ok()?)),
    };
    Some((outcome, waited))
}

/// The process-local lock: one per process, as `synchronized` or `ReentrantLock` in the seed.
static LOCAL_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The zk mode's purchase: `/product_<id>` is held in ZooKeeper around the whole
/// check-then-deduct, in every process, and the guard's fencing token goes with the write.
/// `called` is when the buyer asked, so the body knows how long it waited for the lock.
#[zk_lock(path = "/product_<id>", guard = lock)]
async fn reduce_stock(store: &Store, id: u32, delay: Duration, called: Instant) -> Result<Purchase, db::Error> {
    let waited = called.elapsed();
    let outcome = store.sell_one(id, delay, Some(lock.fencing_token())).await?;
    Ok(Purchase { outcome, waited: Some(waited) })
}

struct Purchase {
    outcome: Outcome,
    /// How long the buyer waited for its lock; `None` without a lock.
    waited: Option<Duration>,
}

async fn buy(mode: Mode, store: &Store, id: u32, delay: Duration) -> Result<Purchase, db::Error> {
    let called = Instant::now();
    match mode {
        Mode::NoLock => Ok(Purchase { outcome: store.sell_one(id, delay, None).await?, waited: None }),
        Mode::Local => {
            let _held = LOCAL_LOCK.lock().await;
            let waited = called.elapsed();
            Ok(Purchase { outcome: store.sell_one(id, delay, None).await?, waited: Some(waited) })
        }
        Mode::Zk => reduce_stock(store, id, delay, called).await,
    }
}

/// A worker process: opens the database (and a ZooKeeper session in the zk mode), says `ready`,
/// and on `go` runs its buyers at once, printing one `buy` line per purchase.
#[tokio::main]
async fn worker(mode: Mode, settings: &Settings, database: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    shutdown::after(run_buyers(mode, settings, database)).await
}

async fn run_buyers(
    mode: Mode,
    settings: &Settings,
    database: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let store = Store::open(database)?;
    if mode == Mode::Zk {
        let connect = std::env::var(zk_lock::config::CONNECT_ENV).map_err(|_| "a zk worker needs ZK_LOCK_CONNECT")?;
        zk_lock::connect(&connect).await?;
    }
    println!("ready");
    if processes::parent_says().await.as_deref() != Some("go") {
        return Ok(()); // The parent gave up.
    }
    let (id, delay) = (settings.product, settings.delay);
    let buyers: Vec<_> = (0..settings.buyers)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                match buy(mode, &store, id, delay).await {
                    Ok(Purchase { outcome, waited }) => {
                        let waited = waited.map_or("-".to_owned(), |w| w.as_micros().to_string());
                        println!("buy {} {waited}", outcome.word());
                    }
                    Err(e) => {
                        eprintln!("purchase failed: {e}");
                        println!("buy error -");
                    }
                }
            })
        })
        .collect();
    for buyer in buyers {
        buyer.await?;
    }
    Ok(())
}
