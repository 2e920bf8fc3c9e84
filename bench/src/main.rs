//! Performance benchmark of zk-lock against zookeeper-client's `Client::lock`, Apache Curator
//! 5.4 and kazoo, on one ZooKeeper server, in one run, with the same parameters.
//!
//! ```text
//! scripts/bench                       # everything, ~6 minutes and the idle row; table on stdout,
//!                                     # JSON in target/bench/results.json
//! scripts/bench --quick               # a smoke run, ~2 minutes and ~2.5 for the idle row
//! scripts/bench --rows uncontended,drain --clients zk-lock,curator
//! cargo run --release -p zk-lock-bench -- --help
//! ```
//!
//! Rows: `floor` (raw create/delete/list), `uncontended` (acquire + release), `contended`
//! (W sessions on one mutex), `contended-tasks` (W tasks or threads sharing one session, as a
//! process with one client does), `contended-processes` (W sessions, one OS process each: this
//! binary re-run with the hidden `--contender` arguments, or one JVM / python interpreter per
//! session running the peer's `--contender` mode; `contended-processes-mt`: the Rust clients
//! only, on tokio's multi-thread runtime), `drain` (N queued waiters released in
//! turn), `memory` (bytes per waiting acquisition and per held guard in this process),
//! `partition` (a holder cut off from the server: when it is told, when another session is
//! granted the lock), `idle` (one session holding N locks on N paths, idle: what it costs the
//! server and the client, `idle.rs`), `many-paths` (T tasks of one session, each on a path of
//! its own: locks/s, and the CPU share of each thread, `many_paths.rs`); and on a three-server
//! ensemble (`ensemble.rs`), clients given all three members as users connect:
//! `uncontended-ensemble`, `contended-processes-ensemble`, and the idle row's ensemble cases
//! (what idle sessions connected to a follower cost the leader: their heartbeat is a `sync`,
//! which the follower forwards to it). Request counts come from the servers' own counters
//! (`mntr`), read around each client's measurement.
//! The Curator and kazoo peers (`bench/java/CuratorBench.java`, `bench/kazoo_bench.py`)
//! measure themselves and print raw samples; every statistic is computed here, with the same code.
//! See docs/benchmarks.md for the method and the numbers.

mod alloc;
mod contender;
mod ensemble;
mod idle;
mod many_paths;
mod native;
mod partition;
mod peer;
mod procstat;
mod report;
mod rounds;
mod stats;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::time::Instant;
use zk_lock::testing::TestingServer;

use native::{Native, Plan, Recipe};
use peer::{Measured, Peer, Queued};
use report::Record;
use rounds::{turn, Totals};
use stats::Servers;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

const USAGE: &str = "\
usage: bench [--quick] [--rows LIST] [--clients LIST] [--out PATH]
             [--cycles N] [--warmup N] [--measure-secs S] [--idle-held LIST] [--idle-secs S]
             [--many-paths LIST] [--idle-ensemble-sessions N] [--idle-ensemble-held LIST]
       bench --median [--out PATH] REPORT.json...

  --quick           a smoke run (~2 minutes, ~2.5 more for the idle row, ~4 for the
                    ensemble): fewer cycles, shorter windows, smaller queues, 2 partition
                    trials, idle up to 10,000
  --rows LIST       comma-separated: floor,uncontended,contended,contended-tasks,
                    contended-processes,contended-processes-mt,drain,memory,partition,
                    idle,many-paths,uncontended-ensemble,contended-processes-ensemble
                    (default: all; the -ensemble rows, and the idle row's ensemble cases, on
                    a three-server ensemble started for them)
  --clients LIST    comma-separated: zk-lock,zookeeper-client,curator,kazoo (default: all)
  --out PATH        where to write the JSON report (default: target/bench/results.json)
  --cycles N        measured operations per floor/uncontended case (default 1000, quick 200)
  --warmup N        warm-up operations before each of them, for every client (default 300, quick 50)
  --measure-secs S  measured window of each contended and many-paths case (default 2.5,
                    quick 0.5)
  --idle-held LIST  locks held by one session in the idle row, comma-separated
                    (default 1,1000,10000,100000, quick 1,1000,10000)
  --idle-secs S     idle window of each idle case (default 20, quick 5)
  --idle-ensemble-sessions N
                    sessions of each client (zk-lock, zookeeper-client) connected to a
                    follower of the ensemble in the idle row's ensemble cases (default 100,
                    quick 50; 0: no ensemble cases)
  --idle-ensemble-held LIST
                    locks each of those sessions holds, comma-separated (default 1,1000,
                    quick 1,100)
  --many-paths LIST tasks of one session in the many-paths row, each on its own path,
                    comma-separated (default 64,1024, quick 64,256)
  --median          instead of measuring, print (and with --out write) the medians of the
                    JSON reports of several runs

Environment: TMPDIR (server data; /dev/shm is used when TMPDIR is unset and the default
temporary directory is not tmpfs), CURATOR_CLASSPATH, KAZOO_PYTHON, JAVA_HOME.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    Floor,
    Uncontended,
    Contended,
    ContendedTasks,
    ContendedProcesses,
    ContendedProcessesMt,
    Drain,
    Memory,
    Partition,
    Idle,
    ManyPaths,
    UncontendedEnsemble,
    ContendedProcessesEnsemble,
}

impl Row {
    /// Whether the row runs on the ensemble (the idle row: its ensemble cases).
    fn on_ensemble(self, opts: &Opts) -> bool {
        match self {
            Row::UncontendedEnsemble | Row::ContendedProcessesEnsemble => true,
            Row::Idle => idle::ensemble_wanted(opts),
            _ => false,
        }
    }
}

const ROWS: [(&str, Row); 13] = [
    ("floor", Row::Floor),
    ("uncontended", Row::Uncontended),
    ("contended", Row::Contended),
    ("contended-tasks", Row::ContendedTasks),
    ("contended-processes", Row::ContendedProcesses),
    ("contended-processes-mt", Row::ContendedProcessesMt),
    ("drain", Row::Drain),
    ("memory", Row::Memory),
    ("partition", Row::Partition),
    ("idle", Row::Idle),
    ("many-paths", Row::ManyPaths),
    ("uncontended-ensemble", Row::UncontendedEnsemble),
    ("contended-processes-ensemble", Row::ContendedProcessesEnsemble),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientId {
    ZkLock,
    ZkClient,
    Curator,
    Kazoo,
}

const CLIENTS: [(&str, ClientId); 4] = [
    ("zk-lock", ClientId::ZkLock),
    ("zookeeper-client", ClientId::ZkClient),
    ("curator", ClientId::Curator),
    ("kazoo", ClientId::Kazoo),
];

impl ClientId {
    fn name(self) -> &'static str {
        CLIENTS.iter().find(|(_, c)| *c == self).map_or("?", |(name, _)| name)
    }

    fn native(self) -> Option<Native> {
        match self {
            ClientId::ZkLock => Some(Native::ZkLock),
            ClientId::ZkClient => Some(Native::ZkClient),
            ClientId::Curator | ClientId::Kazoo => None,
        }
    }
}

#[derive(Debug, Clone)]
struct Opts {
    quick: bool,
    rows: Vec<Row>,
    clients: Vec<ClientId>,
    out: PathBuf,
    plan: Plan,
    contended_warm: Duration,
    contended_measure: Duration,
    sessions: Vec<usize>,
    drains: Vec<usize>,
    drain_timeout: Duration,
    /// Waiting-task shapes of the memory row: (paths, waiters per path).
    waiting: Vec<(usize, usize)>,
    /// Guards held at once in the memory row.
    held: usize,
    memory_timeout: Duration,
    /// Trials of each client in the partition row.
    partition_trials: usize,
    /// Locks one session holds in each case of the idle row.
    idle_held: Vec<usize>,
    /// The idle row's window.
    idle_window: Duration,
    /// Sessions of each client in the idle row's ensemble cases (0: none).
    idle_ensemble_sessions: usize,
    /// Locks each of those sessions holds, one case each.
    idle_ensemble_held: Vec<usize>,
    /// Tasks of one session in each case of the many-paths row.
    many_paths: Vec<usize>,
    /// The floor and uncontended rows run in this many rounds, the clients taking turns, so
    /// that a burst of load on the machine does not land on one client only.
    rounds: usize,
    /// Mixed requests sent to the server before anything is measured.
    server_warmup: usize,
    args: Vec<String>,
}

impl Opts {
    fn parse(args: Vec<String>) -> Result<Option<Opts>, String> {
        if args.iter().any(|a| a == "-h" || a == "--help") {
            return Ok(None);
        }
        let quick = args.iter().any(|a| a == "--quick");
        let mut opts = Opts {
            quick,
            rows: ROWS.iter().map(|(_, r)| *r).collect(),
            clients: CLIENTS.iter().map(|(_, c)| *c).collect(),
            out: target_dir().join("bench").join("results.json"),
            plan: if quick {
                Plan { warm: 50, n: 200, budget: Duration::from_secs(10) }
            } else {
                Plan { warm: 300, n: 1000, budget: Duration::from_secs(30) }
            },
            contended_warm: Duration::from_millis(if quick { 200 } else { 500 }),
            contended_measure: Duration::from_millis(if quick { 500 } else { 2500 }),
            sessions: if quick { vec![2, 8] } else { vec![2, 8, 32] },
            drains: if quick { vec![100] } else { vec![100, 1000] },
            drain_timeout: Duration::from_secs(if quick { 30 } else { 60 }),
            waiting: if quick { vec![(10, 100)] } else { vec![(100, 100), (10, 1000)] },
            held: if quick { 200 } else { 2000 },
            memory_timeout: Duration::from_secs(if quick { 60 } else { 120 }),
            partition_trials: if quick { 2 } else { 5 },
            idle_held: if quick { vec![1, 1000, 10_000] } else { vec![1, 1000, 10_000, 100_000] },
            idle_window: Duration::from_secs(if quick { 5 } else { 20 }),
            idle_ensemble_sessions: if quick { 50 } else { 100 },
            idle_ensemble_held: if quick { vec![1, 100] } else { vec![1, 1000] },
            many_paths: if quick { vec![64, 256] } else { vec![64, 1024] },
            rounds: if quick { 1 } else { 3 },
            server_warmup: if quick { 2000 } else { 8000 },
            args: args.clone(),
        };
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| it.next().ok_or_else(|| format!("`{name}` needs a value"));
            match arg.as_str() {
                "--quick" => {}
                "--rows" => opts.rows = pick(&value("--rows")?, &ROWS, "row")?,
                "--clients" => opts.clients = pick(&value("--clients")?, &CLIENTS, "client")?,
                "--out" => opts.out = PathBuf::from(value("--out")?),
                "--cycles" => opts.plan.n = positive(&value("--cycles")?, "--cycles")?,
                "--warmup" => {
                    let text = value("--warmup")?;
                    opts.plan.warm = text.parse().map_err(|_| format!("`--warmup` needs a number, not `{text}`"))?;
                }
                "--measure-secs" => opts.contended_measure = seconds(&value("--measure-secs")?, "--measure-secs")?,
                "--idle-secs" => opts.idle_window = seconds(&value("--idle-secs")?, "--idle-secs")?,
                "--idle-held" => {
                    let list = value("--idle-held")?;
                    opts.idle_held = list.split(',').map(|n| positive(n, "--idle-held")).collect::<Result<_, _>>()?;
                }
                "--idle-ensemble-sessions" => {
                    let text = value("--idle-ensemble-sessions")?;
                    opts.idle_ensemble_sessions =
                        text.parse().map_err(|_| format!("`--idle-ensemble-sessions` needs a number, not `{text}`"))?;
                }
                "--idle-ensemble-held" => {
                    let list = value("--idle-ensemble-held")?;
                    opts.idle_ensemble_held =
                        list.split(',').map(|n| positive(n, "--idle-ensemble-held")).collect::<Result<_, _>>()?;
                }
                "--many-paths" => {
                    let list = value("--many-paths")?;
                    opts.many_paths = list.split(',').map(|n| positive(n, "--many-paths")).collect::<Result<_, _>>()?;
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        Ok(Some(opts))
    }
}

fn pick<T: Copy>(list: &str, known: &[(&str, T)], what: &str) -> Result<Vec<T>, String> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|name| {
            known.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).ok_or_else(|| {
                let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
                format!("unknown {what} `{name}`; choose from {}", names.join(", "))
            })
        })
        .collect()
}

fn seconds(text: &str, flag: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .ok()
        .filter(|s: &f64| *s > 0.0 && *s <= 600.0)
        .ok_or_else(|| format!("`{flag}` needs seconds in (0, 600], not `{text}`"))?;
    Ok(Duration::from_secs_f64(secs))
}

fn positive(text: &str, flag: &str) -> Result<usize, String> {
    text.parse().ok().filter(|n| *n > 0).ok_or_else(|| format!("`{flag}` needs a positive number, not `{text}`"))
}

/// `$CARGO_TARGET_DIR`, else the workspace's `target` (this crate is `bench/` in the workspace).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        manifest.parent().unwrap_or(manifest).join("target")
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--median") {
        return median_of_runs(&args[1..]);
    }
    if args.first().is_some_and(|a| a == contender::FLAG) {
        return contender::worker(&args[1..]);
    }
    let opts = match Opts::parse(args) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("bench: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Before any thread exists: the testing kit puts the server's data under TMPDIR.
    let data = choose_data_dir();
    eprintln!("bench: starting ZooKeeper (data under {}, tmpfs: {})", data.0.display(), data.1);
    let server = match TestingServer::start() {
        Ok(server) => server,
        Err(e) => {
            eprintln!("bench: cannot start ZooKeeper: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bench: cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(&opts, &server, data));
    runtime.shutdown_timeout(Duration::from_secs(5));
    code
}

/// `--median [--out PATH] FILE...`: the medians of several reports, as tables and as JSON.
fn median_of_runs(args: &[String]) -> ExitCode {
    let mut out = None;
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--out" {
            out = it.next().map(PathBuf::from);
        } else {
            files.push(PathBuf::from(arg));
        }
    }
    if files.is_empty() {
        eprintln!("bench: `--median` needs the JSON reports of one or more runs");
        return ExitCode::from(2);
    }
    let mut runs = Vec::new();
    let mut metas = Vec::new();
    for file in &files {
        let parsed = std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()))
            .and_then(|report| Ok((report::records_of(&report)?, report["meta"].clone())));
        match parsed {
            Ok((records, meta)) => {
                runs.push(records);
                metas.push(meta);
            }
            Err(e) => {
                eprintln!("bench: cannot read {}: {e}", file.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let records = report::median_records(&runs);
    println!(
        "medians of {} runs: {}",
        files.len(),
        files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    report::print_tables(&records);
    let mut targets = report::targets(&records);
    // Matched by name: a run may lack a case (and so a target) that another run has.
    let per_run: Vec<Vec<Option<f64>>> = runs
        .iter()
        .map(|run| {
            let mine = report::targets(run);
            targets.iter().map(|t| mine.iter().find(|m| m.name == t.name).and_then(|m| m.value)).collect()
        })
        .collect();
    report::judge_ratios_by_run(&mut targets, &per_run);
    report::print_targets(&targets, Some(&per_run));
    if let Some(out) = out {
        let report = json!({
            "runs": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "meta_of_runs": metas,
            "records": records.iter().map(Record::to_json).collect::<Vec<_>>(),
            "targets": targets.iter().map(report::Target::to_json).collect::<Vec<_>>(),
        });
        let written = out
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&out, report::pretty(report)));
        if let Err(e) = written {
            eprintln!("bench: cannot write {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
        println!("\nJSON medians: {}", out.display());
    }
    ExitCode::SUCCESS
}

/// Where the server's data goes: `$TMPDIR` if set, else the default temporary directory if it is
/// tmpfs, else `/dev/shm` (made the `TMPDIR` of this process) if that is a writable tmpfs.
fn choose_data_dir() -> (PathBuf, bool) {
    let default = std::env::temp_dir();
    if std::env::var_os("TMPDIR").is_some() || is_tmpfs(&default) {
        let tmpfs = is_tmpfs(&default);
        return (default, tmpfs);
    }
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir() && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly());
    if writable && is_tmpfs(shm) {
        // Single-threaded still: no other thread can read the environment meanwhile.
        std::env::set_var("TMPDIR", shm);
        return (shm.to_owned(), true);
    }
    (default, false)
}

/// Whether `path` is on a tmpfs, from the longest matching mount point in /proc/mounts.
fn is_tmpfs(path: &Path) -> bool {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_device, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            path.starts_with(point).then_some((point.len(), kind == "tmpfs" || kind == "ramfs"))
        })
        .max_by_key(|(len, _)| *len)
        .is_some_and(|(_, tmpfs)| tmpfs)
}

/// Everything a run needs.
struct Ctx<'a> {
    opts: &'a Opts,
    /// The connect string the rows' clients use: the standalone server's, or while an
    /// `-ensemble` row runs, the ensemble's (see [`ensemble::on_ensemble`]).
    connect: String,
    /// The standalone server.
    server: stats::Server,
    /// Where the rows that run on either count requests: the standalone server, or while an
    /// `-ensemble` row runs, every member of the ensemble.
    counted: Servers,
    curator: Result<Peer, String>,
    kazoo: Result<Peer, String>,
    /// The ensemble, once a row needed it (and until no next row does).
    ensemble: Option<Result<ensemble::Ensemble, String>>,
    records: Vec<Record>,
}

async fn run(opts: &Opts, server: &TestingServer, data: (PathBuf, bool)) -> ExitCode {
    let started = SystemTime::now();
    let clock = Instant::now();
    let load_start = read_first_line("/proc/loadavg");
    let work = target_dir().join("bench");
    let connect = server.connect_string();
    let wants = |c: ClientId| opts.clients.contains(&c);
    let not_selected = || Err("not selected".to_owned());
    let (curator, kazoo) = tokio::join!(
        async {
            if wants(ClientId::Curator) {
                eprintln!("bench: compiling and starting the Curator peer");
                Peer::curator(&connect, &work).await
            } else {
                not_selected()
            }
        },
        async {
            if wants(ClientId::Kazoo) {
                eprintln!("bench: starting the kazoo peer");
                Peer::kazoo(&connect, &work).await
            } else {
                not_selected()
            }
        }
    );
    for (name, peer) in [("curator", &curator), ("kazoo", &kazoo)] {
        if let Err(e) = peer {
            if e != "not selected" {
                eprintln!("bench: the {name} peer is unavailable, its cells stay empty: {e}");
            }
        }
    }
    eprintln!("bench: warming up the server ({} mixed requests)", opts.server_warmup * 5);
    if let Err(e) = native::warm_server(&connect, opts.server_warmup, Duration::from_secs(30)).await {
        eprintln!("bench: server warm-up failed: {e}");
    }
    let mut ctx = Ctx {
        opts,
        connect,
        server: stats::Server { addr: server.addr(), pid: server.pid() },
        counted: server.addr().into(),
        curator,
        kazoo,
        ensemble: None,
        records: Vec::new(),
    };
    for (i, row) in opts.rows.iter().enumerate() {
        match row {
            Row::Floor => floor_row(&mut ctx).await,
            Row::Uncontended => uncontended_row(&mut ctx, "uncontended").await,
            Row::Contended => contended_row(&mut ctx, "contended").await,
            Row::ContendedTasks => contended_row(&mut ctx, "contended-tasks").await,
            Row::ContendedProcesses => {
                contended_processes_row(&mut ctx, "contended-processes", contender::Flavour::CurrentThread).await
            }
            Row::ContendedProcessesMt => {
                contended_processes_row(&mut ctx, "contended-processes-mt", contender::Flavour::MultiThread).await
            }
            Row::Drain => drain_row(&mut ctx).await,
            Row::Memory => memory_row(&mut ctx).await,
            Row::Partition => partition_row(&mut ctx).await,
            Row::Idle => idle::row(&mut ctx).await,
            Row::ManyPaths => many_paths::row(&mut ctx).await,
            Row::UncontendedEnsemble => {
                ensemble::on_ensemble(&mut ctx, "uncontended-ensemble", async |ctx| {
                    uncontended_row(ctx, "uncontended-ensemble").await
                })
                .await
            }
            Row::ContendedProcessesEnsemble => {
                ensemble::on_ensemble(&mut ctx, "contended-processes-ensemble", async |ctx| {
                    let flavour = contender::Flavour::CurrentThread;
                    contended_processes_row(ctx, "contended-processes-ensemble", flavour).await
                })
                .await
            }
        }
        // The ensemble's servers stay up only while the next row needs them: the standalone
        // rows run without three more JVMs on the machine.
        let next = opts.rows.get(i + 1).copied();
        if next.is_none_or(|next| !next.on_ensemble(opts)) {
            if let Some(Ok(ensemble)) = ctx.ensemble.take() {
                ensemble.stop().await;
            }
        }
    }
    let Ctx { curator, kazoo, records, .. } = ctx;
    for peer in [curator, kazoo].into_iter().flatten() {
        peer.quit().await;
    }
    let elapsed = clock.elapsed();

    report::print_tables(&records);
    let targets = report::targets(&records);
    report::print_targets(&targets, None);

    let mut meta = machine(server, &data);
    meta["started_unix_s"] = json!(started.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()));
    meta["duration_s"] = json!(elapsed.as_secs_f64());
    meta["loadavg_start"] = json!(load_start);
    meta["loadavg_end"] = json!(read_first_line("/proc/loadavg"));
    meta["command"] = json!(format!("scripts/bench {}", opts.args.join(" ")).trim_end());
    meta["parameters"] = parameters(opts);
    let report = json!({
        "meta": meta,
        "records": records.iter().map(Record::to_json).collect::<Vec<_>>(),
        "targets": targets.iter().map(report::Target::to_json).collect::<Vec<_>>(),
    });
    let written = opts
        .out
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&opts.out, report::pretty(report)));
    match written {
        Ok(()) => println!("\nJSON report: {} ({:.0} s)", opts.out.display(), elapsed.as_secs_f64()),
        Err(e) => {
            eprintln!("bench: cannot write {}: {e}", opts.out.display());
            return ExitCode::FAILURE;
        }
    }
    let failures = records.iter().filter(|r| r.metrics.is_empty()).count();
    if failures > 0 {
        eprintln!("bench: {failures} measurement(s) failed; see the table");
    }
    ExitCode::SUCCESS
}

/// Runs `command` on a peer, or says why it cannot.
async fn on_peer(
    ctx: &mut Ctx<'_>,
    client: ClientId,
    command: String,
    queued: Option<Queued>,
    timeout: Duration,
) -> Result<Measured, String> {
    let counted = ctx.counted;
    peer_of(ctx, client)?.measure(&command, counted, queued, timeout).await
}

/// The peer of `client`, or why there is none.
fn peer_of<'c>(ctx: &'c mut Ctx<'_>, client: ClientId) -> Result<&'c mut Peer, String> {
    let peer = match client {
        ClientId::Curator => &mut ctx.curator,
        ClientId::Kazoo => &mut ctx.kazoo,
        _ => return Err("not a peer".to_owned()),
    };
    peer.as_mut().map_err(|e| format!("peer unavailable: {}", e.lines().next().unwrap_or("")))
}

fn path_of(client: ClientId, row: &str, case: &str) -> String {
    format!("/bench/{}/{row}/{case}", client.name())
}

/// Reports progress on stderr: the record's `metrics`, each a key, its decimals and its label
/// (`1234 locks/s, 0 violations`), or why the cell failed.
fn log(record: &Record, metrics: &[(&str, usize, &str)]) {
    let (section, case, client) = (&record.section, &record.case, &record.client);
    match &record.note {
        Some(note) if record.metrics.is_empty() => eprintln!("bench: {section} {case} {client}: failed: {note}"),
        _ => {
            let shown: Vec<String> = metrics
                .iter()
                .map(|(key, decimals, label)| format!("{:.*} {label}", decimals, record.get(key).unwrap_or(f64::NAN)))
                .collect();
            eprintln!("bench: {section} {case} {client}: {}", shown.join(", "));
        }
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// The plan of one round out of `rounds`: its share of the cycles and of the time budget, and
/// a full warm-up only in the first round (later rounds re-warm briefly: a new session).
fn round_plan(plan: Plan, rounds: usize, round: usize) -> Plan {
    /// Warm-up of rounds after the first.
    const REWARM: usize = 30;
    Plan {
        warm: if round == 0 { plan.warm } else { plan.warm.min(REWARM) },
        n: plan.n / rounds + usize::from(round < plan.n % rounds),
        budget: plan.budget / rounds as u32,
    }
}

async fn floor_once(ctx: &mut Ctx<'_>, client: ClientId, plan: Plan) -> Result<Measured, String> {
    let path = path_of(client, "floor", "raw");
    match client.native() {
        Some(kind) => native::floor(kind, &ctx.connect, ctx.server.addr, &path, plan).await,
        None => {
            let command = format!("floor {path} {} {} {}", plan.warm, plan.n, ms(plan.budget));
            on_peer(ctx, client, command, None, plan.budget + Duration::from_secs(60)).await
        }
    }
}

async fn floor_row(ctx: &mut Ctx<'_>) {
    let clients = ctx.opts.clients.clone();
    let rounds = ctx.opts.rounds;
    let mut totals = Totals::new(clients.iter().copied());
    for round in 0..rounds {
        let plan = round_plan(ctx.opts.plan, rounds, round);
        for client in turn(&clients, round) {
            if !totals.failed(client) {
                let measured = floor_once(ctx, client, plan).await;
                totals.add(client, measured);
            }
        }
    }
    for (client, total) in totals.measured() {
        let record = match total {
            Ok(m) => report::floor(client.name(), &m),
            Err(e) => Record::failed("floor", "raw ops", client.name(), e),
        };
        log(&record, &[("create_p50_us", 0, "µs create p50")]);
        ctx.records.push(record);
    }
}

/// The uncontended cases: label, path slug, the recipe of the native clients, the recipe word
/// of the peers.
const UNCONTENDED: [(&str, &str, Option<Recipe>, Option<&str>); 8] = [
    ("mutex", "mutex", Some(Recipe::Mutex), Some("mutex")),
    ("mutex, drop guard", "mutex-drop", Some(Recipe::MutexDrop), None),
    // These two are measured together, in turn (`native::annotated_and_by_hand`): keep them
    // next to each other, hand-written first.
    ("mutex fn, hand-written guard", "fn-by-hand", Some(Recipe::HandWritten), None),
    ("mutex fn, #[zk_lock]", "fn-annotated", Some(Recipe::Annotated), None),
    ("mutex fn, #[zk_lock], calls apart", "fn-apart", Some(Recipe::AnnotatedApart), None),
    ("rw write", "write", Some(Recipe::Write), Some("write")),
    ("rw read", "read", Some(Recipe::Read), Some("read")),
    ("semaphore (4 leases)", "semaphore", Some(Recipe::Semaphore), Some("semaphore")),
];

/// One round of one uncontended case for one client; `None` if the client has no such recipe.
async fn uncontended_once(
    ctx: &mut Ctx<'_>,
    section: &str,
    client: ClientId,
    case: usize,
    plan: Plan,
) -> Option<Result<Measured, String>> {
    let (_, slug, recipe, word) = UNCONTENDED[case];
    let path = path_of(client, section, slug);
    Some(match (client.native(), recipe, word) {
        (
            Some(Native::ZkClient),
            Some(
                Recipe::Write
                | Recipe::Read
                | Recipe::Semaphore
                | Recipe::Annotated
                | Recipe::AnnotatedApart
                | Recipe::HandWritten,
            )
            | None,
            _,
        ) => return None,
        (Some(Native::ZkLock), None, _) => return None,
        (Some(kind), Some(recipe), _) => {
            native::uncontended(kind, recipe, &ctx.connect, ctx.counted, &path, plan).await
        }
        (None, _, Some(word)) => {
            let command = format!("uncontended {word} {path} {} {} {}", plan.warm, plan.n, ms(plan.budget));
            on_peer(ctx, client, command, None, plan.budget + Duration::from_secs(60)).await
        }
        (None, _, None) => return None,
    })
}

/// The `uncontended` row, or (`section` `uncontended-ensemble`) the same on the ensemble.
async fn uncontended_row(ctx: &mut Ctx<'_>, section: &'static str) {
    let clients = ctx.opts.clients.clone();
    // On the ensemble each round's session lands on a member at random: at least three rounds,
    // so that a client's cell is unlikely to see one placement only.
    let on_ensemble = section == "uncontended-ensemble";
    let rounds = if on_ensemble { ctx.opts.rounds.max(ensemble::MIN_ROUNDS) } else { ctx.opts.rounds };
    let mut totals = Totals::new((0..UNCONTENDED.len()).flat_map(|case| clients.iter().map(move |c| (case, *c))));
    for round in 0..rounds {
        let plan = round_plan(ctx.opts.plan, rounds, round);
        for (case, &(_, _, recipe, _)) in UNCONTENDED.iter().enumerate() {
            for client in turn(&clients, round) {
                if totals.failed((case, client)) {
                    continue;
                }
                // The hand-written and annotated functions are measured together, in turn.
                if client.native() == Some(Native::ZkLock) && recipe == Some(Recipe::HandWritten) {
                    let path = path_of(client, section, "fn-pair");
                    match native::annotated_and_by_hand(&ctx.connect, ctx.counted, &path, plan).await {
                        Ok([mut by_hand, mut annotated]) => {
                            ensemble::tag_placement(&mut by_hand);
                            ensemble::tag_placement(&mut annotated);
                            totals.add((case, client), Ok(by_hand));
                            totals.add((case + 1, client), Ok(annotated));
                        }
                        Err(e) => {
                            totals.add((case, client), Err(e.clone()));
                            totals.add((case + 1, client), Err(e));
                        }
                    }
                    continue;
                }
                if client.native() == Some(Native::ZkLock) && recipe == Some(Recipe::Annotated) {
                    continue;
                }
                if let Some(mut measured) = uncontended_once(ctx, section, client, case, plan).await {
                    if let Ok(measured) = measured.as_mut() {
                        ensemble::tag_placement(measured);
                    }
                    totals.add((case, client), measured);
                }
            }
        }
    }
    for ((case, client), total) in totals.measured() {
        let label = UNCONTENDED[case].0;
        let record = match total {
            Ok(m) => report::uncontended(section, client.name(), label, &m),
            Err(e) => Record::failed(section, label, client.name(), e),
        };
        log(&record, &[("cycle_p50_us", 0, "µs cycle p50"), ("requests_per_op", 2, "requests/cycle")]);
        ctx.records.push(record);
    }
}

/// The `contended` row (W sessions, one per contender) or, as `contended-tasks`, W contenders
/// sharing one session.
async fn contended_row(ctx: &mut Ctx<'_>, section: &'static str) {
    let (warm, measure) = (ctx.opts.contended_warm, ctx.opts.contended_measure);
    let one_session = section == "contended-tasks";
    let clients = ctx.opts.clients.clone();
    for sessions in ctx.opts.sessions.clone() {
        contended_rounds(ctx, section, sessions, &clients, async |ctx, client, path| match client.native() {
            Some(kind) => {
                native::contended(kind, &ctx.connect, ctx.server.addr, &path, sessions, warm, measure, one_session)
                    .await
            }
            None => {
                let shared = if one_session { " one-session" } else { "" };
                let command = format!("contended {path} {sessions} {} {}{shared}", ms(warm), ms(measure));
                on_peer(ctx, client, command, None, warm + measure + Duration::from_secs(90)).await
            }
        })
        .await;
    }
}

/// The contended row with every contender in its own OS process and session: the Rust clients
/// re-run this binary (zk-lock's in-process hand-off shortcut does not apply there) on a
/// `flavour` runtime, Curator runs one small JVM per contender and kazoo one interpreter per
/// contender. On the multi-thread runtime (`contended-processes-mt`) the Rust clients only.
async fn contended_processes_row(ctx: &mut Ctx<'_>, section: &'static str, flavour: contender::Flavour) {
    let (warm, measure) = (ctx.opts.contended_warm, ctx.opts.contended_measure);
    let work = target_dir().join("bench");
    let clients: Vec<ClientId> = ctx
        .opts
        .clients
        .iter()
        .copied()
        .filter(|client| flavour == contender::Flavour::CurrentThread || client.native().is_some())
        .collect();
    for sessions in ctx.opts.sessions.clone() {
        contended_rounds(ctx, section, sessions, &clients, async |ctx, client, path| {
            let launch = match client.native() {
                Some(kind) => contender::Launch::native(kind, flavour, &ctx.connect, &path),
                None if client == ClientId::Curator => peer::curator_contender(&ctx.connect, &path, &work).await,
                None => peer::kazoo_contender(&ctx.connect, &path, &work).await,
            };
            contender::contended(&launch?, ctx.counted, sessions, warm, measure).await
        })
        .await;
    }
}

/// Rounds of each W of the contended rows (see [`contended_rounds`]).
const CONTENDED_ROUNDS: usize = 2;

/// One W of a contended row: [`CONTENDED_ROUNDS`] rounds, each starting with the next client,
/// each client's case measured by `case` on the client's path; a client's rounds add up, and
/// are recorded. In one fixed order the client measured first ran while the server's JIT was
/// still compiling for the pattern (`contended-processes`, W = 2, zk-lock first: 734 locks/s
/// against zookeeper-client's 947; zookeeper-client first: 996 against zk-lock's 1,162).
async fn contended_rounds<'a>(
    ctx: &mut Ctx<'a>,
    section: &'static str,
    sessions: usize,
    clients: &[ClientId],
    mut case: impl AsyncFnMut(&mut Ctx<'a>, ClientId, String) -> Result<Measured, String>,
) {
    let mut totals = Totals::new(clients.iter().copied());
    for round in 0..CONTENDED_ROUNDS {
        for client in turn(clients, round) {
            if !totals.failed(client) {
                let path = path_of(client, section, &format!("w{sessions}"));
                totals.add(client, case(ctx, client, path).await);
            }
        }
    }
    for (client, total) in totals.measured() {
        let record = match total {
            Ok(m) => report::contended(section, client.name(), sessions, &m),
            Err(e) => Record::failed(section, format!("W={sessions}"), client.name(), e),
        };
        log_contended(&record);
        ctx.records.push(record);
    }
}

fn log_contended(record: &Record) {
    let cpu = ("client_cpu_us_per_grant", 0, "µs client CPU/grant");
    match record.get(cpu.0) {
        Some(_) => log(record, &[("locks_per_s", 0, "locks/s"), ("violations", 0, "violations"), cpu]),
        None => log(record, &[("locks_per_s", 0, "locks/s"), ("violations", 0, "violations")]),
    }
}

async fn drain_row(ctx: &mut Ctx<'_>) {
    let timeout = ctx.opts.drain_timeout;
    for waiters in ctx.opts.drains.clone() {
        for client in ctx.opts.clients.clone() {
            let path = path_of(client, "drain", &format!("n{waiters}"));
            let measured = match client.native() {
                Some(kind) => native::drain(kind, &ctx.connect, ctx.server.addr, &path, waiters, timeout).await,
                None => {
                    let command = format!("drain {path} {waiters} {}", ms(timeout));
                    let queued = Queued {
                        ephemerals: waiters as u64 + 1,
                        watches: waiters as u64,
                        timeout: timeout + Duration::from_secs(60),
                    };
                    on_peer(ctx, client, command, Some(queued), timeout * 2 + Duration::from_secs(120)).await
                }
            };
            let record = match measured {
                Ok(m) => report::drain(client.name(), waiters, &m),
                Err(e) => Record::failed("drain", format!("N={waiters}"), client.name(), e),
            };
            log(&record, &[("drain_ms", 0, "ms"), ("requests_per_op", 2, "requests/hand-off")]);
            ctx.records.push(record);
        }
    }
}

async fn memory_row(ctx: &mut Ctx<'_>) {
    let timeout = ctx.opts.memory_timeout;
    for client in ctx.opts.clients.clone() {
        let Some(kind) = client.native() else { continue };
        let root = format!("/bench/{}/memory", client.name());
        for (paths, per_path) in ctx.opts.waiting.clone() {
            let case = format!("waiting: {paths} paths x {per_path}");
            let measured =
                native::memory_waiting(kind, &ctx.connect, ctx.server.addr, &root, (paths, per_path), timeout).await;
            memory_record(ctx, client, case, measured);
        }
        let case = "held guards, one path each".to_owned();
        let measured = native::memory_held(kind, &ctx.connect, ctx.server.addr, &root, ctx.opts.held, timeout).await;
        memory_record(ctx, client, case, measured);
    }
}

fn memory_record(ctx: &mut Ctx<'_>, client: ClientId, case: String, measured: Result<Value, String>) {
    let record = match measured {
        Ok(result) => report::memory(client.name(), case, &result),
        Err(e) => Record::failed("memory", case, client.name(), e),
    };
    log(&record, &[("bytes_each", 0, "bytes each")]);
    ctx.records.push(record);
}

/// Each client's holder cut off from the server in turn, `partition_trials` times; the other
/// session and an observer (which watches for it to queue) connect directly.
async fn partition_row(ctx: &mut Ctx<'_>) {
    let case = format!("session {} s", partition::SESSION.as_secs());
    let observer = native::connect_zk_lock(&ctx.connect).await;
    for client in ctx.opts.clients.clone() {
        let mut trials = Vec::new();
        let mut failure = None;
        for i in 0..ctx.opts.partition_trials {
            let path = path_of(client, "partition", &format!("t{i}"));
            let server = ctx.server.addr;
            let trial = match (&observer, client.native()) {
                (Err(e), _) => Err(format!("observer: {e}")),
                (Ok(observer), Some(kind)) => partition::native_trial(kind, server, observer, &path).await,
                (Ok(observer), None) => match peer_of(ctx, client) {
                    Ok(peer) => partition::peer_trial(peer, server, observer, &path).await,
                    Err(e) => Err(e),
                },
            };
            match trial {
                Ok(trial) => trials.push(trial),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let deadline_ms = partition::DEADLINE.as_secs_f64() * 1000.0;
        let record = match failure {
            None => report::partition(client.name(), case.clone(), &trials, deadline_ms),
            Some(e) => Record::failed("partition", case.clone(), client.name(), e),
        };
        log(&record, &[("told_median_ms", 0, "ms told (median)"), ("granted_median_ms", 0, "ms granted (median)")]);
        ctx.records.push(record);
    }
}

fn read_first_line(path: &str) -> String {
    std::fs::read_to_string(path).ok().and_then(|t| t.lines().next().map(str::to_owned)).unwrap_or_default()
}

/// The machine and software the numbers come from.
fn machine(server: &TestingServer, data: &(PathBuf, bool)) -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split(':').nth(1).map(|s| s.trim().to_owned()))
        .unwrap_or_else(|| "unknown".to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:")?.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN);
    let zk_version = server.counters().ok().and_then(|c| c.get("zk_version").map(str::to_owned)).unwrap_or_default();
    let java = std::process::Command::new("java")
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stderr).lines().next().map(str::to_owned))
        .unwrap_or_default();
    let package = |name: &str| {
        std::process::Command::new("dpkg-query")
            .args(["-W", "-f=${Version}", name])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|| "unknown".to_owned())
    };
    json!({
        "nproc": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "cpu": cpu,
        "memory_gib": (mem_kb / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        "kernel": read_first_line("/proc/sys/kernel/osrelease"),
        "zookeeper": zk_version,
        "java": java,
        "curator_package": package("libcurator-recipes-java"),
        "kazoo_package": package("python3-kazoo"),
        "zookeeper_client_crate": "0.11.2",
        "jvm_flags": peer::JVM_FLAGS.join(" "),
        "server_data_dir": data.0.display().to_string(),
        "server_data_on_tmpfs": data.1,
    })
}

fn parameters(opts: &Opts) -> Value {
    json!({
        "quick": opts.quick,
        "warmup": opts.plan.warm,
        "cycles": opts.plan.n,
        "loop_budget_s": opts.plan.budget.as_secs_f64(),
        "contended_warm_s": opts.contended_warm.as_secs_f64(),
        "contended_measure_s": opts.contended_measure.as_secs_f64(),
        "contended_sessions": opts.sessions,
        "drain_waiters": opts.drains,
        "drain_timeout_s": opts.drain_timeout.as_secs_f64(),
        "memory_waiting_shapes": opts.waiting,
        "memory_held": opts.held,
        "rounds": opts.rounds,
        "server_warmup_iterations": opts.server_warmup,
        "session_timeout_s": native::SESSION_TIMEOUT.as_secs_f64(),
        "partition_trials": opts.partition_trials,
        "partition_session_timeout_s": partition::SESSION.as_secs_f64(),
        "partition_deadline_s": partition::DEADLINE.as_secs_f64(),
        "idle_held": opts.idle_held,
        "idle_window_s": opts.idle_window.as_secs_f64(),
        "idle_session_timeout_s": idle::SESSION.as_secs_f64(),
        "idle_in_flight": idle::IN_FLIGHT,
        "idle_ensemble_sessions": opts.idle_ensemble_sessions,
        "idle_ensemble_held_per_session": opts.idle_ensemble_held,
        "ensemble_servers": ensemble::SIZE,
        "many_paths_tasks": opts.many_paths,
    })
}
