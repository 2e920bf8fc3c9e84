//! examples/stock_http against the shared test server and a real SQLite file: two instances of
//! the HTTP service under `#[zk_lock]` sell exactly the stock, never more; without the lock the
//! same load oversells; Ctrl-C on an instance hands the lock it holds to another process at once.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::time::{timeout, Instant};

use zk_lock::testing::Proxy;

use crate::support::examples::{example_binary, number, run_example};
use crate::support::kazoo::{KazooLock, Recipe};
use crate::support::{new_client, queue_of, scratch_dir, server, PATIENCE};

/// Runs the example with a small load and its own database, and returns its JSON results.
fn run(name: &str, stock: i64, extra: &[&str]) -> (Value, String) {
    let dir = scratch_dir("stock_http", name);
    let json: PathBuf = dir.join("results.json");
    let database = format!("sqlite:{}", dir.join("stock.db").display());
    let stock = stock.to_string();
    let mut args = vec!["--clients", "8", "--requests", "3", "--stock", &stock, "--delay", "50ms"];
    args.extend(["--database", &database, "--json", json.to_str().expect("a UTF-8 temporary path")]);
    args.extend(extra);
    let output = run_example("stock_http", &args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let results = serde_json::from_str(&std::fs::read_to_string(&json).expect("the --json file")).expect("valid JSON");
    let _ = std::fs::remove_dir_all(dir);
    (results, stdout)
}

#[test]
fn two_instances_under_zk_lock_sell_exactly_the_stock() {
    const STOCK: i64 = 5;
    let (results, stdout) = run("stock-http-locked", STOCK, &["--product", "7101"]);
    assert_eq!(results["locked"], true, "{results}");
    assert_eq!(number(&results, "requests"), 24, "{results}");
    assert_eq!(number(&results, "errors"), 0, "{results}\n{stdout}");
    assert_eq!(number(&results, "fenced"), 0, "a healthy run fences nothing: {results}");
    assert_eq!(number(&results, "sold"), STOCK, "{results}\n{stdout}");
    assert_eq!(number(&results, "sold") + number(&results, "sold_out"), 24, "{results}");
    // Stock only ever goes down, one unit per sale: ending at exactly zero after exactly STOCK
    // sales means it never went below zero on the way.
    assert_eq!(number(&results, "final_stock"), 0, "{results}\n{stdout}");
    let spread: Vec<i64> =
        results["per_instance"].as_array().expect("per_instance").iter().filter_map(Value::as_i64).collect();
    assert_eq!(spread, [12, 12], "round-robin over both instances: {results}");
    assert!(stdout.contains("nothing oversold"), "{stdout}");
}

#[test]
fn the_same_load_without_the_lock_oversells() {
    // 8 clients start together and each instance's check-to-deduct takes 50 ms: far more buyers
    // see stock left than there are units.
    let (results, stdout) = run("stock-http-unlocked", 2, &["--product", "7102", "--no-lock"]);
    assert_eq!(results["locked"], false, "{results}");
    assert_eq!(number(&results, "errors"), 0, "{results}\n{stdout}");
    assert!(number(&results, "final_stock") < 0, "expected an oversell: {results}\n{stdout}");
    assert_eq!(number(&results, "final_stock"), 2 - number(&results, "sold"), "{results}");
}

/// Ctrl-C on an instance whose request holds a product's lock: the instance closes its
/// ZooKeeper session at once, so a waiter in another process (a kazoo script) is granted the
/// lock well within the session timeout, and the request cut short answers that the lock was
/// lost instead of selling.
#[tokio::test]
async fn ctrl_c_on_an_instance_hands_its_lock_on_at_once() {
    const PRODUCT: u32 = 7103;
    let lock_path = format!("/product_{PRODUCT}");
    let (mut instance, address, dir) = start_instance(PRODUCT, "60s").await;
    let database = dir.join("stock.db");
    let observer = new_client().await;
    let request = tokio::spawn(get(address, format!("/stock/reduce?id={PRODUCT}")));
    queue_of(&observer, &lock_path, 1).await;
    let mut kazoo = KazooLock::start(&server().connect_string(), &lock_path, Recipe::Lock, "kazoo-buyer");
    queue_of(&observer, &lock_path, 2).await;

    let interrupted = Instant::now();
    let pid = instance.id().expect("the instance runs").to_string();
    let status = std::process::Command::new("kill").args(["-INT", &pid]).status().expect("run kill");
    assert!(status.success());
    kazoo.locked().await;
    let granted_after = interrupted.elapsed();
    println!("the kazoo process was granted the lock {granted_after:?} after Ctrl-C on the instance holding it");
    assert!(
        granted_after < Duration::from_secs(1),
        "granted {granted_after:?} after Ctrl-C; the session timeout is 10 s"
    );

    let answer = timeout(PATIENCE, request).await.expect("the request is answered").unwrap();
    assert!(answer.starts_with("HTTP/1.1 500") && answer.contains("was lost"), "{answer}");
    // Closing its stdin (as `wait` does) is the parent's word to stop, which ends its last task.
    let exited = timeout(PATIENCE, instance.wait()).await.expect("the instance exits").unwrap();
    assert!(exited.success(), "{exited}");
    let stock: i64 = rusqlite::Connection::open(&database)
        .unwrap()
        .query_row("SELECT stock FROM product WHERE id = ?1", [PRODUCT], |row| row.get(0))
        .unwrap();
    assert_eq!(stock, 5, "the request cut short sold nothing");
    kazoo.release().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Starts one `stock_http --serve` instance selling `product` (5 units) from a database of its
/// own, each sale taking `delay`; returns it, its address and its directory.
async fn start_instance(product: u32, delay: &str) -> (tokio::process::Child, String, PathBuf) {
    start_instance_on(&server().connect_string(), product, delay).await
}

/// [`start_instance`] on the ZooKeeper at `connect_string`.
async fn start_instance_on(
    connect_string: &str,
    product: u32,
    delay: &str,
) -> (tokio::process::Child, String, PathBuf) {
    let dir = scratch_dir("stock_http", &format!("instance-{product}"));
    let database = dir.join("stock.db");
    let mut instance = tokio::process::Command::new(example_binary("stock_http"))
        .args(["--serve", "1", "--delay", delay, "--database"])
        .arg(format!("sqlite:{}", database.display()))
        .env(zk_lock::config::CONNECT_ENV, connect_string)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start a stock_http instance");
    let mut said = BufReader::new(instance.stdout.take().unwrap()).lines();
    let line = timeout(PATIENCE, said.next_line()).await.expect("the instance starts").unwrap().unwrap();
    let address = line.strip_prefix("listening ").unwrap_or_else(|| panic!("unexpected first line: {line}")).to_owned();
    // The instance made the table; one product with stock to sell.
    rusqlite::Connection::open(&database)
        .unwrap()
        .execute("INSERT INTO product (id, product_name, stock) VALUES (?1, 'test', 5)", [product])
        .unwrap();
    (instance, address, dir)
}

/// `GET path` over HTTP/1.1; the whole answer.
async fn get(address: String, path: String) -> String {
    let mut stream = tokio::net::TcpStream::connect(&address).await.expect("connect to the instance");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

/// An instance's `/metrics` page (Prometheus' text format) while requests wait for one
/// product's lock, and after: the waiting and held gauges show the queue, and the counts match
/// the requests made.
#[tokio::test]
async fn the_metrics_page_counts_the_requests_made() {
    const PRODUCT: u32 = 7104;
    const REQUESTS: usize = 4;
    let template = r#"recipe="mutex",template="/product_<id>""#;
    // Each sale holds the lock this long: the page is read while the first one still holds it.
    let (mut instance, address, dir) = start_instance(PRODUCT, "1500ms").await;
    let observer = new_client().await;
    let requests: Vec<_> =
        (0..REQUESTS).map(|_| tokio::spawn(get(address.clone(), format!("/stock/reduce?id={PRODUCT}")))).collect();
    queue_of(&observer, &format!("/product_{PRODUCT}"), REQUESTS).await;

    let under_load = get(address.clone(), "/metrics".to_owned()).await;
    println!("--- /metrics while {REQUESTS} requests wait for /product_{PRODUCT}\n{under_load}");
    assert_eq!(sample(&under_load, "zk_lock_locks_held", template), Some(1.0), "{under_load}");
    let waiting = sample(&under_load, "zk_lock_acquisitions_waiting", template).unwrap_or(0.0);
    assert_eq!(waiting, (REQUESTS - 1) as f64, "every request but the holder's waits: {under_load}");

    for request in requests {
        let answer = timeout(PATIENCE, request).await.expect("answered").unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // A guard's release is confirmed in the background, after the answer: wait for the last.
    let settled = |page: &str| sample(page, "zk_lock_locks_held", template) == Some(0.0);
    let after = timeout(PATIENCE, scrape_until(&address, settled)).await.expect("every lock is released");
    println!("--- /metrics after the requests\n{after}");
    let granted = format!(r#"{template},outcome="granted""#);
    assert_eq!(sample(&after, "zk_lock_acquisitions_total", &granted), Some(REQUESTS as f64), "{after}");
    assert_eq!(sample(&after, "zk_lock_wait_seconds_count", &granted), Some(REQUESTS as f64), "{after}");
    let released = format!(r#"{template},outcome="released""#);
    assert_eq!(sample(&after, "zk_lock_hold_seconds_count", &released), Some(REQUESTS as f64), "{after}");
    assert_eq!(sample(&after, "zk_lock_acquisitions_waiting", template), Some(0.0), "{after}");
    assert_eq!(sample(&after, "zk_lock_locks_lost_total", template), None, "nothing was lost: {after}");

    drop(instance.stdin.take());
    let exited = timeout(PATIENCE, instance.wait()).await.expect("the instance exits").unwrap();
    assert!(exited.success(), "{exited}");
    let _ = std::fs::remove_dir_all(dir);
}

/// An instance's readiness probe during an outage and after: 200 while connected; 503 naming the
/// suspended connection once the proxy between the instance and ZooKeeper is cut; 200 again once
/// it heals (the same session: the outage was shorter than the told-first bound).
#[tokio::test]
async fn the_readiness_probe_says_when_zookeeper_is_out_of_reach() {
    const PRODUCT: u32 = 7105;
    let proxy = Proxy::start(server().connect_string()).expect("start a proxy");
    let (mut instance, address, dir) = start_instance_on(&proxy.connect_string(), PRODUCT, "1ms").await;
    let healthy = get(address.clone(), "/ready".to_owned()).await;
    println!("--- /ready, connected\n{healthy}");
    assert!(healthy.starts_with("HTTP/1.1 200") && healthy.ends_with("ready"), "{healthy}");

    proxy.cut();
    let down = timeout(PATIENCE, probe_until(&address, "HTTP/1.1 503")).await.expect("503 during the outage");
    println!("--- /ready, ZooKeeper cut off\n{down}");
    assert!(down.ends_with("not ready: Suspended"), "{down}");

    proxy.heal();
    let back = timeout(PATIENCE, probe_until(&address, "HTTP/1.1 200")).await.expect("200 after the outage");
    println!("--- /ready, after the heal\n{back}");
    assert!(back.ends_with("ready"), "{back}");
    let sold = get(address.clone(), format!("/stock/reduce?id={PRODUCT}")).await;
    assert!(sold.starts_with("HTTP/1.1 200"), "the instance sells again: {sold}");

    drop(instance.stdin.take());
    let exited = timeout(PATIENCE, instance.wait()).await.expect("the instance exits").unwrap();
    assert!(exited.success(), "{exited}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The instance's `/ready` answer, once it starts with `status`.
async fn probe_until(address: &str, status: &str) -> String {
    loop {
        let answer = get(address.to_owned(), "/ready".to_owned()).await;
        if answer.starts_with(status) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The instance's `/metrics` page, once `settled` says so of it.
async fn scrape_until(address: &str, settled: impl Fn(&str) -> bool) -> String {
    loop {
        let page = get(address.to_owned(), "/metrics".to_owned()).await;
        if settled(&page) {
            return page;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The value of the sample `name{labels...}` on a Prometheus text page whose labels start with
/// `labels` (the page lists them in the order the metric was recorded with).
fn sample(page: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}");
    page.lines().find(|line| line.starts_with(&prefix)).and_then(|line| line.rsplit(' ').next()?.parse().ok())
}
