//! examples/stock_http against the shared test server and a real SQLite file: two instances of
//! the HTTP service under `#[zk_lock]` sell exactly the stock, never more; without the lock the
//! same load oversells.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::examples::{number, run_example};
use crate::support::scratch_dir;

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
