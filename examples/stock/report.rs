//! The stock demo's results: one row per mode, the side-by-side table, and the JSON file.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{json, Value};

/// What one mode of the demo did.
pub struct ModeResult {
    /// The mode's key in the JSON file (`no-lock`, `local`, `zk`).
    pub key: &'static str,
    /// The mode's name in the table.
    pub label: &'static str,
    pub initial_stock: i64,
    pub requests: usize,
    pub sold: usize,
    pub sold_out: usize,
    /// Writes the database refused for carrying an old fencing token; `None` without tokens.
    pub fenced: Option<usize>,
    pub errors: usize,
    pub final_stock: i64,
    /// From the start signal to the last answer.
    pub wall: Duration,
    /// How long each purchase waited for its lock; `None` without a lock.
    pub waits: Option<Vec<Duration>>,
}

impl ModeResult {
    /// Units sold that did not exist.
    pub fn oversold(&self) -> i64 {
        (self.sold as i64 - self.initial_stock).max(0)
    }

    /// The `p`-th percentile (0 < p <= 100, nearest rank) of the lock waits.
    pub fn wait_percentile(&self, p: f64) -> Option<Duration> {
        let mut waits = self.waits.clone()?;
        if waits.is_empty() {
            return None;
        }
        waits.sort_unstable();
        let rank = ((p / 100.0) * waits.len() as f64).ceil() as usize;
        Some(waits[rank.clamp(1, waits.len()) - 1])
    }
}

const HEADER: [&str; 10] =
    ["mode", "initial", "requests", "sold", "final stock", "oversold", "fenced", "wall", "wait p50", "wait p99"];

/// The side-by-side table, with the line that explains fencing.
pub fn table(results: &[ModeResult]) -> String {
    let rows: Vec<[String; 10]> = results
        .iter()
        .map(|r| {
            let or_na = |value: Option<String>| value.unwrap_or_else(|| "n/a".to_owned());
            [
                r.label.to_owned(),
                r.initial_stock.to_string(),
                r.requests.to_string(),
                r.sold.to_string(),
                r.final_stock.to_string(),
                r.oversold().to_string(),
                or_na(r.fenced.map(|n| n.to_string())),
                short(r.wall),
                or_na(r.wait_percentile(50.0).map(short)),
                or_na(r.wait_percentile(99.0).map(short)),
            ]
        })
        .collect();
    let width = |column: usize| rows.iter().map(|row| row[column].len()).chain([HEADER[column].len()]).max();
    let widths: Vec<usize> = (0..HEADER.len()).map(|c| width(c).unwrap_or(0)).collect();
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = format!("{:<w$}", cells[0], w = widths[0]);
        for (cell, w) in cells.iter().zip(&widths).skip(1) {
            let _ = write!(text, "  {cell:>w$}");
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&HEADER);
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    line(&rule.iter().map(String::as_str).collect::<Vec<_>>());
    for row in &rows {
        line(&row.iter().map(String::as_str).collect::<Vec<_>>());
    }
    let errors: usize = results.iter().map(|r| r.errors).sum();
    if errors > 0 {
        let _ = writeln!(out, "\n{errors} purchases failed (their errors are above); they are not counted as sales.");
    }
    // Fencing in one line; the why is in examples/stock/db.rs.
    out.push_str("\nfenced: writes the database refused for a fencing token older than the last it stored (a holder that lost its lock)\n");
    out
}

/// A duration as `850µs`, `12.3ms`, `240ms` or `1.42s`.
fn short(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{}µs", duration.as_micros())
    } else if ms < 10.0 {
        format!("{ms:.1}ms")
    } else if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}

/// The results as JSON, with the run's parameters.
pub fn json(parameters: Value, results: &[ModeResult]) -> Value {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let modes: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "mode": r.key,
                "label": r.label,
                "initial_stock": r.initial_stock,
                "requests": r.requests,
                "sold": r.sold,
                "sold_out": r.sold_out,
                "fenced": r.fenced,
                "errors": r.errors,
                "final_stock": r.final_stock,
                "oversold": r.oversold(),
                "wall_ms": ms(r.wall),
                "wait_p50_ms": r.wait_percentile(50.0).map(ms),
                "wait_p99_ms": r.wait_percentile(99.0).map(ms),
            })
        })
        .collect();
    json!({ "parameters": parameters, "modes": modes })
}
