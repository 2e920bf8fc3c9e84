//! Seed 002's stock service over HTTP: `GET /stock/reduce?id=<id>` (axum) deducts one unit under
//! `#[zk_lock(path = "/product_<id>")]`, two instances run as separate OS processes on loopback
//! ports, and a built-in load generator (50 clients x 10 requests, as the seed's JMeter run)
//! spreads its requests over them round-robin, as the seed's nginx does.
//!
//! ```text
//! cargo run --example stock_http                      # a throwaway ZooKeeper and a temporary SQLite file
//! cargo run --example stock_http -- --no-lock         # the same service without the lock: oversold
//! ZK_LOCK_CONNECT=host:2181 cargo run --example stock_http -- --database sqlite:/tmp/stock.db --stock 1
//! cargo run --example stock_http -- --help
//! ```
//!
//! The instances share the SQLite store of examples/stock/db.rs (the same check, delay and
//! fenced `stock = stock - 1` as examples/stock_oversell.rs). The client is a few lines of
//! HTTP/1.1 over `tokio::net::TcpStream`, one connection per request.
//!
//! Each instance serves zk-lock's metrics (feature `metrics`) at `GET /metrics` in Prometheus'
//! text format and a readiness probe at `GET /ready` (200 while its ZooKeeper client can take
//! locks, 503 with the connection's state otherwise), logs each change of that state, and closes
//! its ZooKeeper session on Ctrl-C (`zk_lock::shutdown`).

#[path = "stock/cli.rs"]
mod cli;
#[path = "stock/db.rs"]
mod db;
#[path = "common/embedded.rs"]
mod embedded;
#[path = "stock/processes.rs"]
mod processes;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zk_lock::zk_lock;

use cli::Flags;
use db::{Database, Outcome, Store};
use processes::Copies;

const USAGE: &str = "\
usage: stock_http [--instances N] [--clients N] [--requests N] [--stock N] [--delay D]
                  [--product ID] [--no-lock] [--database URL] [--json FILE]

  --instances N   service instances (OS processes) behind the round-robin (default 2)
  --clients N     concurrent clients of the load generator (default 50)
  --requests N    requests each client sends, one after another (default 10)
  --stock N       the product's stock before the run (default 100)
  --delay D       time between checking the stock and deducting it, e.g. 20ms, 1s (default 20ms)
  --product ID    the product's id, so its lock is /product_<ID> (default 1)
  --no-lock       serve without the lock, to see the oversell
  --database URL  sqlite:<file>; default $DATABASE_URL, else a temporary file
  --json FILE     also write the results as JSON

Environment: ZK_LOCK_CONNECT (default: a throwaway local ZooKeeper), DATABASE_URL.";

/// How long the load generator waits for one answer before counting an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    match run(std::env::args().skip(1)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stock_http: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: impl Iterator<Item = String>) -> Result<(), Box<dyn std::error::Error>> {
    let valued = [
        "--instances",
        "--clients",
        "--requests",
        "--stock",
        "--delay",
        "--product",
        "--database",
        "--json",
        "--serve",
    ];
    let flags = Flags::parse(args, &valued, &["--no-lock", "--help"])?;
    if flags.has("--help") {
        println!("{USAGE}");
        return Ok(());
    }
    let delay = flags.duration("--delay", Duration::from_millis(20))?;
    let locked = !flags.has("--no-lock");
    if flags.get("--serve").is_some() {
        let database = db::sqlite_path("--database", flags.get("--database").ok_or("`--serve` needs `--database`")?)?;
        return serve(Service { store: Store::open(&database)?, delay, locked, zookeeper: None });
    }
    let load = Load {
        instances: flags.positive("--instances", 2)?,
        clients: flags.positive("--clients", 50)?,
        requests: flags.positive("--requests", 10)?,
        product: flags.positive("--product", 1)?,
    };
    parent(&load, flags.positive("--stock", 100)?, delay, locked, flags.get("--database"), flags.get("--json"))
}

// --- the service -------------------------------------------------------------------------------

#[derive(Clone)]
struct Service {
    store: Store,
    delay: Duration,
    locked: bool,
    /// The ZooKeeper client, once connected (not with `--no-lock`).
    zookeeper: Option<zk_lock::Client>,
}

/// One instance: listens on a free loopback port, says where, serves until the parent says stop
/// or Ctrl-C.
#[tokio::main]
async fn serve(mut service: Service) -> Result<(), Box<dyn std::error::Error>> {
    if service.locked {
        let connect = std::env::var(zk_lock::config::CONNECT_ENV).map_err(|_| "an instance needs ZK_LOCK_CONNECT")?;
        let client = zk_lock::connect(&connect).await?;
        // Each change of the connection, as an operator reads it in the instance's log.
        let mut states = client.connection_states();
        tokio::spawn(async move {
            while let Some(state) = states.next().await {
                eprintln!("zookeeper connection: {state:?}");
            }
        });
        service.zookeeper = Some(client);
    }
    let metrics = prometheus()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("listening {}", listener.local_addr()?);
    let reduce = if service.locked { get(reduce_locked) } else { get(reduce_unlocked) };
    let app = Router::new()
        .route("/stock/reduce", reduce)
        .route("/metrics", get(move || std::future::ready(metrics.render())))
        .route("/ready", get(ready))
        .with_state(service);
    let stop = async {
        tokio::select! {
            _ = processes::parent_says() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        // The ZooKeeper session ends first: a request holding a lock is aborted (its
        // `#[zk_lock]` returns `Error::Lost`) and the lock passes to the other instances at once,
        // instead of after the request or the session timeout.
        zk_lock::shutdown().await;
    };
    axum::serve(listener, app).with_graceful_shutdown(stop).await?;
    Ok(())
}

/// The process's metrics recorder, which `/metrics` renders: zk-lock's wait and hold times as
/// histograms with buckets from a millisecond to ten seconds.
fn prometheus() -> Result<metrics_exporter_prometheus::PrometheusHandle, Box<dyn std::error::Error>> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    const SECONDS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 10.0];
    let builder = PrometheusBuilder::new().set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS)?;
    Ok(builder.install_recorder()?)
}

/// `GET /ready`, a readiness probe: 200 once the ZooKeeper client can take locks (a client whose
/// session was lost opens a new one here), 503 with the connection's state if it cannot within a
/// second.
async fn ready(State(service): State<Service>) -> (StatusCode, String) {
    let Some(client) = service.zookeeper else { return (StatusCode::OK, "ready (no lock)".to_owned()) };
    match tokio::time::timeout(Duration::from_secs(1), client.ready()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready".to_owned()),
        Ok(Err(error)) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {error}")),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {:?}", client.connection_state())),
    }
}

/// The query of `/stock/reduce?id=<id>`; axum answers 400 to a request without a numeric `id`.
#[derive(serde::Deserialize)]
struct Product {
    id: u32,
}

/// `GET /stock/reduce?id=<id>`, the seed's controller, under the product's lock in every
/// instance: the `<id>` of the path is bound by the `Query` pattern. The fencing token goes with
/// the write, so the database refuses a holder that lost the lock without noticing.
#[zk_lock(path = "/product_<id>", guard = lock)]
async fn reduce_locked(
    State(service): State<Service>,
    Query(Product { id }): Query<Product>,
) -> Result<Answer, Answer> {
    Ok(service.store.sell_one(id, service.delay, Some(lock.fencing_token())).await.into())
}

/// The same controller without the lock (`--no-lock`).
async fn reduce_unlocked(State(service): State<Service>, Query(Product { id }): Query<Product>) -> Answer {
    service.store.sell_one(id, service.delay, None).await.into()
}

/// What the service answers: `sold`, `sold-out`, `fenced` (409), or the error (500).
struct Answer(StatusCode, String);

impl From<Result<Outcome, db::Error>> for Answer {
    fn from(sold: Result<Outcome, db::Error>) -> Self {
        match sold {
            Ok(Outcome::Fenced) => Answer(StatusCode::CONFLICT, Outcome::Fenced.word().to_owned()),
            Ok(outcome) => Answer(StatusCode::OK, outcome.word().to_owned()),
            Err(e) => Answer(StatusCode::INTERNAL_SERVER_ERROR, format!("error: {e}")),
        }
    }
}

/// The lock could not be taken or was lost: the purchase did not happen.
impl From<zk_lock::Error> for Answer {
    fn from(e: zk_lock::Error) -> Self {
        Answer(StatusCode::INTERNAL_SERVER_ERROR, format!("error: {e}"))
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

// --- the load generator ------------------------------------------------------------------------

struct Load {
    instances: usize,
    clients: usize,
    requests: usize,
    product: u32,
}

#[derive(Default)]
struct Tally {
    sold: usize,
    sold_out: usize,
    fenced: usize,
    errors: usize,
    per_instance: Vec<usize>,
}

fn parent(
    load: &Load,
    stock: i64,
    delay: Duration,
    locked: bool,
    database: Option<&str>,
    json_file: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let database = Database::configured_or_temporary(database)?;
    let store = Store::open(&database.path)?;
    store.reset(load.product, stock)?;
    let zookeeper = match locked {
        true => Some(embedded::ZooKeeper::configured_or_throwaway()?),
        false => None,
    };

    let args = |n: usize| {
        let mut args = vec!["--serve".to_owned(), n.to_string(), "--database".to_owned(), database.url()];
        args.extend(["--delay".to_owned(), cli::millis(delay)]);
        if !locked {
            args.push("--no-lock".to_owned());
        }
        args
    };
    let mut instances = Copies::spawn(load.instances, args, zookeeper.as_ref().map(|zk| zk.connect_string.as_str()))?;
    let addrs: Vec<SocketAddr> =
        instances.wait_for_all("listening")?.iter().map(|addr| addr.parse()).collect::<Result<_, _>>()?;

    let guard = match locked {
        true => "#[zk_lock(path = \"/product_<id>\")]",
        false => "no lock (--no-lock)",
    };
    println!("{} stock services reduce product {} (stock {stock}) under {guard}:", addrs.len(), load.product);
    for (n, addr) in addrs.iter().enumerate() {
        println!("  instance {}  http://{addr}/stock/reduce?id={}", n + 1, load.product);
    }
    if let Some(zookeeper) = &zookeeper {
        println!("ZooKeeper: {}", zookeeper.connect_string);
    }
    println!("Database:  {}", database.describe());
    println!(
        "Load: {} clients x {} requests, round-robin over the instances; {} between check and deduct\n",
        load.clients,
        load.requests,
        cli::millis(delay)
    );

    let started = Instant::now();
    let tally = tokio::runtime::Runtime::new()?.block_on(generate(load, &addrs));
    let wall = started.elapsed();
    // An instance that already died cannot read this; `wait` reports how it ended.
    let _ = instances.tell_all("quit");
    instances.wait()?;
    let final_stock = store.stock(load.product)?;

    let requests = load.clients * load.requests;
    let spread: Vec<String> =
        tally.per_instance.iter().enumerate().map(|(n, count)| format!("instance {}: {count}", n + 1)).collect();
    let oversold = (tally.sold as i64 - stock).max(0);
    println!("requests     {requests:>5}  ({}) in {wall:.2?}", spread.join(", "));
    println!("sold         {:>5}", tally.sold);
    println!("sold out     {:>5}", tally.sold_out);
    println!("fenced       {:>5}", tally.fenced);
    println!("errors       {:>5}", tally.errors);
    match oversold {
        0 => println!("final stock  {final_stock:>5}  (initial {stock}: nothing oversold)"),
        n => println!("final stock  {final_stock:>5}  (initial {stock}: {n} units sold that did not exist)"),
    }

    if let Some(file) = json_file {
        let results = json!({
            "locked": locked,
            "instances": load.instances,
            "clients": load.clients,
            "requests_per_client": load.requests,
            "requests": requests,
            "initial_stock": stock,
            "delay_ms": delay.as_secs_f64() * 1000.0,
            "sold": tally.sold,
            "sold_out": tally.sold_out,
            "fenced": tally.fenced,
            "errors": tally.errors,
            "per_instance": tally.per_instance,
            "final_stock": final_stock,
            "oversold": oversold,
            "wall_ms": wall.as_secs_f64() * 1000.0,
        });
        std::fs::write(file, serde_json::to_string_pretty(&results)?).map_err(|e| format!("`--json {file}`: {e}"))?;
    }
    Ok(())
}

/// Runs the clients: each sends its requests one after another, and every request goes to the
/// next instance in turn, whichever client sends it.
async fn generate(load: &Load, addrs: &[SocketAddr]) -> Tally {
    let total = (load.clients * load.requests) as u64;
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("requests [{bar:30}] {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let path = format!("/stock/reduce?id={}", load.product);
    let clients: Vec<_> = (0..load.clients)
        .map(|_| {
            let (next, addrs, path, bar, requests) =
                (next.clone(), addrs.to_vec(), path.clone(), bar.clone(), load.requests);
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..requests {
                    let instance = next.fetch_add(1, Ordering::Relaxed) % addrs.len();
                    let answer = tokio::time::timeout(REQUEST_TIMEOUT, http_get(addrs[instance], &path)).await;
                    answers
                        .push((instance, answer.unwrap_or_else(|_| Err(format!("no answer in {REQUEST_TIMEOUT:?}")))));
                    bar.inc(1);
                }
                answers
            })
        })
        .collect();

    let mut tally = Tally { per_instance: vec![0; addrs.len()], ..Tally::default() };
    for client in clients {
        let answers = match client.await {
            Ok(answers) => answers,
            Err(e) => {
                eprintln!("a client of the load generator failed: {e}");
                tally.errors += load.requests;
                continue;
            }
        };
        for (instance, answer) in answers {
            tally.per_instance[instance] += 1;
            match answer.as_ref().map(|(_, body)| Outcome::from_word(body)) {
                Ok(Some(Outcome::Sold)) => tally.sold += 1,
                Ok(Some(Outcome::SoldOut)) => tally.sold_out += 1,
                Ok(Some(Outcome::Fenced)) => tally.fenced += 1,
                Ok(None) | Err(_) => {
                    if tally.errors == 0 {
                        eprintln!("first failed request (instance {}): {answer:?}", instance + 1);
                    }
                    tally.errors += 1;
                }
            }
        }
    }
    bar.finish_and_clear();
    tally
}

/// `GET path` over a new HTTP/1.1 connection: the status code and the body.
async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = exchange.await.map_err(|e| format!("GET http://{addr}{path}: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("not an HTTP response: {text:?}"))?;
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok());
    status.map(|code| (code, body.to_owned())).ok_or_else(|| format!("no status in {head:?}"))
}
