//! examples/stock_oversell against the shared test server and a real SQLite file: without a lock
//! the stock goes below zero, with `#[zk_lock]` it ends at exactly zero; and the store's fencing
//! refuses a write with an older token.

#[allow(dead_code)] // The example's store; this test uses only part of it.
#[path = "../../examples/stock/db.rs"]
mod db;

use std::time::Duration;

use serde_json::Value;

use crate::support::examples::{example_binary, number, run_example};
use crate::support::scratch_dir;

#[test]
fn without_a_lock_stock_is_oversold_and_with_zk_lock_it_ends_at_exactly_zero() {
    const STOCK: i64 = 4;
    let dir = scratch_dir("stock_demo", "oversell");
    let json = dir.join("results.json");
    let database = format!("sqlite:{}", dir.join("stock.db").display());
    // Stock 4 for 2 processes x 6 buyers: more buyers in each process than there is stock, and a
    // delay between check and deduct far longer than the buyers take to start.
    let output = run_example(
        "stock_oversell",
        &[
            "--processes",
            "2",
            "--buyers",
            "6",
            "--stock",
            &STOCK.to_string(),
            "--delay",
            "50ms",
            "--product",
            "7001",
            "--database",
            &database,
            "--json",
            json.to_str().expect("a UTF-8 temporary path"),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the --json file")).expect("valid JSON");
    let modes = results["modes"].as_array().expect("a `modes` array");
    let mode = |key: &str| {
        modes.iter().find(|m| m["mode"] == key).unwrap_or_else(|| panic!("no `{key}` mode in {results}\n{stdout}"))
    };

    for m in modes {
        assert_eq!(number(m, "requests"), 12, "{m}");
        assert_eq!(number(m, "errors"), 0, "{m}\n{stdout}");
        let answered = number(m, "sold") + number(m, "sold_out") + m["fenced"].as_i64().unwrap_or(0);
        assert_eq!(answered, 12, "every purchase answered once: {m}");
        // The database agrees with the sales the buyers were told about.
        assert_eq!(number(m, "final_stock"), STOCK - number(m, "sold"), "{m}");
    }

    let no_lock = mode("no-lock");
    assert!(number(no_lock, "final_stock") < 0, "no lock should oversell: {no_lock}\n{stdout}");
    assert!(number(no_lock, "oversold") > 0, "{no_lock}");
    assert!(no_lock["wait_p50_ms"].is_null(), "no lock, no lock wait: {no_lock}");

    let zk = mode("zk");
    assert_eq!(number(zk, "final_stock"), 0, "{zk}\n{stdout}");
    assert_eq!(number(zk, "sold"), STOCK, "{zk}");
    assert_eq!(number(zk, "oversold"), 0, "{zk}");
    assert_eq!(number(zk, "fenced"), 0, "a healthy run fences nothing: {zk}");
    assert!(zk["wait_p99_ms"].as_f64().is_some(), "{zk}");

    // The table the user sees has the three rows and the fencing note.
    for row in ["no lock", "process-local lock", "#[zk_lock(path = \"/product_<id>\")]", "fenced: "] {
        assert!(stdout.lines().any(|line| line.starts_with(row)), "no `{row}` line in:\n{stdout}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_store_refuses_a_write_with_an_older_fencing_token() {
    let dir = scratch_dir("stock_demo", "fencing");
    let store = db::Store::open(&dir.join("stock.db")).expect("open the store");
    store.reset(1, 10).expect("reset");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
    let sell = |token| runtime.block_on(store.sell_one(1, Duration::ZERO, Some(token))).expect("sell");

    assert_eq!(sell(100), db::Outcome::Sold);
    assert_eq!(sell(100), db::Outcome::Sold, "the same holder may write again");
    assert_eq!(sell(99), db::Outcome::Fenced, "an older holder is refused");
    assert_eq!(store.stock(1).expect("stock"), 8, "the refused write changed nothing");
    assert_eq!(sell(101), db::Outcome::Sold);
    assert_eq!(store.stock(1).expect("stock"), 7);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_database_other_than_sqlite_is_refused_with_the_allowed_schemes() {
    let output = std::process::Command::new(example_binary("stock_oversell"))
        .args(["--database", "postgres://user:secret@db.example/shop"])
        .output()
        .expect("run stock_oversell");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "should fail:\n{stderr}");
    assert!(stderr.contains("`postgres://…` is not supported") && stderr.contains("`sqlite:<file>`"), "{stderr}");
    assert!(!stderr.contains("secret"), "the URL's password is not echoed: {stderr}");
}
