//! Turning raw measurements into records, tables, target checks and the JSON report.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::partition::{signals, Trial};
use crate::peer::{samples, Measured};
use crate::stats::{Requests, Summary};

/// One measured cell of the report: a case of a section, for one client.
#[derive(Debug, Clone)]
pub struct Record {
    pub section: &'static str,
    pub case: String,
    pub client: &'static str,
    pub metrics: BTreeMap<String, f64>,
    /// Why the cell is empty, or a caveat.
    pub note: Option<String>,
    /// What the JSON report also keeps as it is, for reading (`--median` does not read it back):
    /// the partition row's times of each trial.
    pub raw: Option<(&'static str, Value)>,
}

impl Record {
    pub fn new(section: &'static str, case: impl Into<String>, client: &'static str) -> Record {
        Record { section, case: case.into(), client, metrics: BTreeMap::new(), note: None, raw: None }
    }

    pub fn failed(section: &'static str, case: impl Into<String>, client: &'static str, why: String) -> Record {
        Record { note: Some(why), ..Record::new(section, case, client) }
    }

    pub fn set(&mut self, key: impl Into<String>, value: f64) {
        self.metrics.insert(key.into(), value);
    }

    /// Adds `notes` to the record's note, after what it says already, `; ` between each.
    pub fn add_notes(&mut self, notes: impl IntoIterator<Item = String>) {
        let all: Vec<String> = self.note.take().into_iter().chain(notes).collect();
        self.note = (!all.is_empty()).then(|| all.join("; "));
    }

    /// Adds to the note why the lock paths of the record's case could not be deleted after it,
    /// if they could not.
    pub fn note_clean_up(&mut self, cleaned: Result<(), String>) {
        if let Err(e) = cleaned {
            self.add_notes([format!("clean-up: {e}")]);
        }
    }

    pub fn summary(&mut self, prefix: &str, summary: Summary) {
        self.set(format!("{prefix}_p50_us"), summary.p50);
        self.set(format!("{prefix}_p99_us"), summary.p99);
        self.set(format!("{prefix}_mean_us"), summary.mean);
        self.set(format!("{prefix}_max_us"), summary.max);
    }

    /// Requests per operation, all servers together; on an ensemble also those the leader
    /// handled per operation (its own clients' and what the followers forwarded) and the share
    /// of the clients' requests that went to the leader directly (sessions connected to it).
    pub fn requests(&mut self, requests: Requests, per: f64) {
        if per > 0.0 {
            self.set("requests_per_op", requests.packets as f64 / per);
            self.set("writes_per_op", requests.writes as f64 / per);
            self.set("reads_per_op", requests.reads as f64 / per);
            if let Some(at) = requests.at_leader {
                self.set("leader_requests_per_op", at.handled as f64 / per);
                if requests.packets > 0 {
                    self.set("on_leader_share", at.received as f64 / requests.packets as f64);
                }
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<f64> {
        self.metrics.get(key).copied()
    }

    pub fn to_json(&self) -> Value {
        let mut map: serde_json::Map<String, Value> =
            self.metrics.iter().map(|(k, v)| (k.clone(), Value::from(*v))).collect();
        map.insert("section".into(), self.section.into());
        map.insert("case".into(), self.case.clone().into());
        map.insert("client".into(), self.client.into());
        if let Some(note) = &self.note {
            map.insert("note".into(), note.clone().into());
        }
        if let Some((key, raw)) = &self.raw {
            map.insert((*key).into(), raw.clone());
        }
        Value::Object(map)
    }
}

pub fn floor(client: &'static str, m: &Measured) -> Record {
    let mut record = Record::new("floor", "raw ops", client);
    let create = samples(&m.result, "create_us");
    let delete = samples(&m.result, "delete_us");
    let both: Vec<f64> = create.iter().zip(&delete).map(|(c, d)| c + d).collect();
    let ops = m.result["ops"].as_f64().unwrap_or(0.0);
    record.set("n", ops);
    record.summary("create", Summary::of(&create));
    record.summary("delete", Summary::of(&delete));
    record.summary("create_delete", Summary::of(&both));
    record.summary("list", Summary::of(&samples(&m.result, "list_us")));
    let pipelined = samples(&m.result, "create_list_pipelined_us");
    let mut requests = m.requests;
    if !pipelined.is_empty() {
        record.summary("create_list_pipelined", Summary::of(&pipelined));
        record.summary("watch_delete_pipelined", Summary::of(&samples(&m.result, "watch_delete_pipelined_us")));
        // Take off the pipelined pair, the watch on its node and its delete (2 writes, 2 reads)
        // so that req/iter counts create + delete + list for every client.
        let extra = ops as u64;
        requests.writes = requests.writes.saturating_sub(2 * extra);
        requests.reads = requests.reads.saturating_sub(2 * extra);
        requests.packets = requests.packets.saturating_sub(4 * extra);
    }
    record.requests(requests, ops);
    record
}

/// An `uncontended` or `uncontended-ensemble` cell.
pub fn uncontended(section: &'static str, client: &'static str, case: &str, m: &Measured) -> Record {
    let mut record = Record::new(section, case, client);
    let ops = m.result["ops"].as_f64().unwrap_or(0.0);
    let elapsed = m.result["elapsed_s"].as_f64().unwrap_or(f64::NAN);
    record.set("n", ops);
    record.summary("acquire", Summary::of(&samples(&m.result, "acquire_us")));
    record.summary("cycle", Summary::of(&samples(&m.result, "cycle_us")));
    record.set("ops_per_s", ops / elapsed);
    record.requests(m.requests, ops);
    // On the ensemble: the rounds whose session was on the leader, and those on a follower.
    for place in ["leader", "follower"] {
        let cycles = samples(&m.result, &format!("cycle_on_{place}_us"));
        if !cycles.is_empty() {
            record.set(format!("rounds_on_{place}"), m.result[format!("rounds_on_{place}")].as_f64().unwrap_or(0.0));
            record.summary(&format!("cycle_on_{place}"), Summary::of(&cycles));
            record.summary(
                &format!("acquire_on_{place}"),
                Summary::of(&samples(&m.result, &format!("acquire_on_{place}_us"))),
            );
        }
    }
    record
}

/// A `contended`, `contended-tasks`, `contended-processes` or `contended-processes-mt` cell.
pub fn contended(section: &'static str, client: &'static str, sessions: usize, m: &Measured) -> Record {
    let mut record = Record::new(section, format!("W={sessions}"), client);
    let waits = samples(&m.result, "wait_us");
    let measured = m.result["grants_measured"].as_f64().unwrap_or(waits.len() as f64);
    let total = m.result["grants_total"].as_f64().unwrap_or(0.0);
    let seconds = m.result["measure_s"].as_f64().unwrap_or(f64::NAN);
    record.set("sessions", sessions as f64);
    record.set("locks_per_s", measured / seconds);
    record.set("grants", measured);
    record.set("grants_total", total);
    record.summary("wait", Summary::of(&waits));
    record.set("violations", m.result["violations"].as_f64().unwrap_or(f64::NAN));
    record.set("max_holders", m.result["max_holders"].as_f64().unwrap_or(f64::NAN));
    // Requests are counted over warm-up and measurement, so per grant of both.
    record.requests(m.requests, total);
    // Across processes, Rust contenders: each process's CPU time over its loop, per grant.
    if let Some(cpu) = m.result["client_cpu_us"].as_f64() {
        record.set("client_cpu_us_per_grant", cpu / total);
    }
    // Across processes only: from a holder's release to the next (waiting) holder's grant.
    if m.result.get("handoff_us").is_some() {
        let handoffs = samples(&m.result, "handoff_us");
        record.set("handoffs", handoffs.len() as f64);
        // None: no percentiles to show (a summary of nothing would read 0 µs).
        if !handoffs.is_empty() {
            record.summary("handoff", Summary::of(&handoffs));
        }
    }
    record
}

pub fn drain(client: &'static str, waiters: usize, m: &Measured) -> Record {
    let mut record = Record::new("drain", format!("N={waiters}"), client);
    let completed = m.result["completed"].as_f64().unwrap_or(0.0);
    let seconds = m.result["drain_s"].as_f64().unwrap_or(f64::NAN);
    record.set("waiters", waiters as f64);
    record.set("completed", completed);
    record.set("drain_ms", seconds * 1000.0);
    record.set("handoffs_per_s", completed / seconds);
    record.set("violations", m.result["violations"].as_f64().unwrap_or(f64::NAN));
    record.requests(m.requests, completed);
    let mut notes = Vec::new();
    if completed < waiters as f64 {
        notes.push(format!("only {completed} of {waiters} waiters got the lock in time"));
    }
    if !m.queued {
        notes.push("not every waiter was queued when the drain started".to_owned());
    }
    record.add_notes(notes);
    record
}

pub fn memory(client: &'static str, case: String, result: &Value) -> Record {
    let mut record = Record::new("memory", case, client);
    for key in ["count", "bytes_each", "setup_s"] {
        if let Some(value) = result[key].as_f64() {
            record.set(key, value);
        }
    }
    // 1 when every waiter was queued (or every guard taken) in time.
    record.set("complete", if result["complete"] == false { 0.0 } else { 1.0 });
    if result["complete"] == false {
        record.note = Some("setup incomplete in time: read anyway".to_owned());
    }
    record
}

/// An `idle` cell: the window's totals as rates, the take rate, memory per guard.
pub fn idle(client: &'static str, held: usize, result: &Value) -> Record {
    let mut record = Record::new("idle", format!("N={held}"), client);
    let number = |key: &str| result[key].as_f64();
    let seconds = number("window_s").unwrap_or(f64::NAN);
    let count = number("count").unwrap_or(0.0);
    record.set("held", count);
    record.set("window_s", seconds);
    if let Some(take) = number("take_s") {
        record.set("take_s", take);
        record.set("locks_per_s", count / take);
    }
    for (key, rate, scale) in [
        ("requests", "requests_per_s", 1.0),
        ("writes", "writes_per_s", 1.0),
        ("reads", "reads_per_s", 1.0),
        ("packets_sent", "packets_sent_per_s", 1.0),
        ("bytes_sent", "bytes_sent_per_s", 1.0),
        ("bytes_received", "bytes_received_per_s", 1.0),
        ("server_written", "server_written_per_s", 1.0),
        ("server_files_written", "server_files_written_per_s", 1.0),
        ("server_cpu_s", "server_cpu_ms_per_s", 1000.0),
        ("client_cpu_s", "client_cpu_ms_per_s", 1000.0),
    ] {
        if let Some(total) = number(key) {
            record.set(rate, total * scale / seconds);
        }
    }
    for key in ["bytes_per_guard", "settle_s", "server_connections", "znodes_changed", "watches_changed"] {
        if let Some(value) = number(key) {
            record.set(key, value);
        }
    }
    let mut notes = Vec::new();
    if count < held as f64 {
        notes.push(format!("only {count} of {held} locks taken"));
    }
    if result["memory"] == "jvm-heap" {
        notes.push(if number("bytes_per_guard").is_some() {
            "bytes/guard: JVM heap used, after a full GC".to_owned()
        } else {
            format!("no bytes/guard below {} locks (JVM heap noise)", crate::idle::HEAP_PER_GUARD_FROM)
        });
    }
    if result["settled"] == false {
        notes.push("the server's watch or ephemeral counts were still moving when the window began".to_owned());
    }
    if number("znodes_changed").is_some_and(|changed| changed != 0.0) {
        notes.push(format!(
            "the server's node count changed by {} in the window",
            number("znodes_changed").unwrap_or(0.0)
        ));
    }
    // A log line or two is nothing; more is the server's own work (a snapshot) in the window.
    if let Some(bytes) = number("server_files_written").filter(|b| *b > 64.0 * 1024.0) {
        notes.push(format!("the server wrote {:.0} KB to files in the window", bytes / 1024.0));
    }
    if number("server_cpu_s").is_none() {
        notes.push("no server pid: no server CPU".to_owned());
    }
    if let Some(why) = result["sockets_error"].as_str() {
        notes.push(format!("no bytes: {why}"));
    }
    record.add_notes(notes);
    record
}

/// The case name of an `idle-ensemble` cell.
pub fn idle_ensemble_case(sessions: usize, held: usize) -> String {
    format!("S={sessions}, H={held}")
}

/// An `idle-ensemble` cell: S sessions connected to a follower, each holding H locks, idle. The
/// leader's and the follower's requests and CPU over the window, the same over a window just
/// before it without those sessions (`base_`), and the difference per session.
pub fn idle_ensemble(client: &'static str, result: &Value) -> Record {
    let number = |value: &Value, key: &str| value[key].as_f64();
    let sessions = number(result, "sessions").unwrap_or(f64::NAN);
    let held = number(result, "held_per_session").unwrap_or(f64::NAN);
    let mut record = Record::new("idle-ensemble", idle_ensemble_case(sessions as usize, held as usize), client);
    let count = number(result, "count").unwrap_or(0.0);
    record.set("sessions", sessions);
    record.set("held_per_session", held);
    record.set("held", count);
    if let Some(take) = number(result, "take_s") {
        record.set("take_s", take);
        record.set("locks_per_s", count / take);
    }
    if let Some(settle) = number(result, "settle_s") {
        record.set("settle_s", settle);
    }
    let rates = [
        ("leader_requests", "leader_requests_per_s", 1.0),
        ("leader_received", "leader_received_per_s", 1.0),
        ("follower_requests", "follower_requests_per_s", 1.0),
        ("follower_writes", "follower_writes_per_s", 1.0),
        ("follower_reads", "follower_reads_per_s", 1.0),
        ("leader_cpu_s", "leader_cpu_ms_per_s", 1000.0),
        ("follower_cpu_s", "follower_cpu_ms_per_s", 1000.0),
    ];
    let windows = [(&result["window"], ""), (&result["base"], "base_before_"), (&result["base_after"], "base_after_")];
    for (window, prefix) in windows {
        let seconds = number(window, "window_s").unwrap_or(f64::NAN);
        if window.is_object() {
            record.set(format!("{prefix}window_s"), seconds);
        }
        for (key, rate, scale) in rates {
            if let Some(total) = number(window, key) {
                record.set(format!("{prefix}{rate}"), total * scale / seconds);
            }
        }
    }
    // Without the sessions: the mean of the windows before and after them (or the one there is).
    for (_, rate, _) in rates {
        let around: Vec<f64> =
            ["base_before_", "base_after_"].iter().filter_map(|p| record.get(&format!("{p}{rate}"))).collect();
        if !around.is_empty() {
            record.set(format!("base_{rate}"), around.iter().sum::<f64>() / around.len() as f64);
        }
    }
    // Per session: what the window had beyond the windows without the sessions.
    let net = |rate: &str| record.get(rate).zip(record.get(&format!("base_{rate}"))).map(|(with, base)| with - base);
    let per_session = [
        ("leader_requests_per_s", "leader_requests_per_session_s", 1.0),
        ("follower_requests_per_s", "follower_requests_per_session_s", 1.0),
        ("leader_cpu_ms_per_s", "leader_cpu_us_per_session_s", 1000.0),
        ("follower_cpu_ms_per_s", "follower_cpu_us_per_session_s", 1000.0),
    ];
    let mut derived = Vec::new();
    for (rate, key, scale) in per_session {
        if let Some(extra) = net(rate) {
            derived.push((key, extra * scale / sessions));
        }
    }
    // CPU per request, where the sessions sent any.
    for (who, requests) in [("leader", "leader_requests_per_s"), ("follower", "follower_requests_per_s")] {
        let cpu = net(&format!("{who}_cpu_ms_per_s"));
        if let (Some(cpu), Some(requests)) = (cpu, net(requests).filter(|r| *r >= 1.0)) {
            derived.push((
                if who == "leader" { "leader_cpu_us_per_request" } else { "follower_cpu_us_per_request" },
                cpu * 1000.0 / requests,
            ));
        }
    }
    for (key, value) in derived {
        record.set(key, value);
    }
    let mut notes = Vec::new();
    if count < sessions * held {
        notes.push(format!("only {count} of {} locks taken", sessions * held));
    }
    if result["settled"] == false {
        notes.push("the follower's watch or ephemeral counts were still moving when the window began".to_owned());
    }
    for (key, what) in [("window", "the window"), ("base", "the window before"), ("base_after", "the window after")] {
        if result[key]["quiet"] == false {
            notes.push(format!(
                "a member was still writing to files, or the leader handling requests, when {what} began"
            ));
        }
    }
    if number(&result["window"], "znodes_changed").is_some_and(|changed| changed != 0.0) {
        notes.push(format!(
            "the node count changed by {} in the window",
            number(&result["window"], "znodes_changed").unwrap_or(0.0)
        ));
    }
    if number(&result["window"], "leader_cpu_s").is_none() || number(&result["window"], "follower_cpu_s").is_none() {
        notes.push("no pid of a member: no CPU".to_owned());
    }
    if !result["base"].is_object() {
        notes.push("no window without the sessions: nothing per session".to_owned());
    }
    record.add_notes(notes);
    record
}

/// A `partition` cell: the trials' median and worst of each time, in ms after the cut. A signal that
/// did not come within the deadline counts as infinitely late, so a median or worst that is "never"
/// is left out of the metrics (the counts say how many trials saw it).
pub fn partition(client: &'static str, case: String, trials: &[Trial], deadline_ms: f64) -> Record {
    let mut record = Record::new("partition", case, client);
    let n = trials.len();
    record.set("trials", n as f64);
    record.set("deadline_ms", deadline_ms);
    let mut stats = |name: &str, values: Vec<f64>, worst_is_max: bool| {
        let mut sorted = values;
        sorted.sort_by(f64::total_cmp);
        record.set(format!("{name}_count"), sorted.iter().filter(|v| v.is_finite()).count() as f64);
        if sorted.is_empty() {
            return;
        }
        let worst = if worst_is_max { sorted[sorted.len() - 1] } else { sorted[0] };
        // The median proper (the mean of the middle two of an even count): of two trials, the
        // nearest-rank p50 would be one of them, the better or the worse.
        let (low, high) = (sorted[(sorted.len() - 1) / 2], sorted[sorted.len() / 2]);
        for (key, value) in [("median", (low + high) / 2.0), ("worst", worst)] {
            if value.is_finite() {
                record.set(format!("{name}_{key}_ms"), value);
            }
        }
    };
    let never = |t: Option<f64>| t.unwrap_or(f64::INFINITY);
    stats("told", trials.iter().map(|t| never(t.told)).collect(), true);
    stats("granted", trials.iter().map(|t| never(t.granted)).collect(), true);
    // The other signal is shown by its median only.
    stats("other_signal", trials.iter().map(|t| never(t.other)).collect(), true);
    // granted - told: positive when the holder was told first. Trials where neither came say
    // nothing.
    let margins: Vec<f64> = trials
        .iter()
        .filter(|t| t.told.is_some() || t.granted.is_some())
        .map(|t| never(t.granted) - never(t.told))
        .collect();
    stats("margin", margins, false);
    let granted_first = trials.iter().filter(|t| t.granted.is_some_and(|g| g < never(t.told))).count();
    record.set("granted_first", granted_first as f64);
    let each: Vec<Value> =
        trials.iter().map(|t| json!({"told": t.told, "granted": t.granted, "other_signal": t.other})).collect();
    record.raw = Some(("trials_ms", Value::from(each)));
    let (told_by, also) = signals(client);
    let seconds = deadline_ms / 1000.0;
    let mut notes = Vec::new();
    let missing = |count: usize| n - count;
    let told = trials.iter().filter(|t| t.told.is_some()).count();
    if told < n {
        notes.push(format!("{told_by} not seen within {seconds} s in {} of {n} trials", missing(told)));
    }
    let granted = trials.iter().filter(|t| t.granted.is_some()).count();
    if granted < n {
        notes.push(format!("not granted within {seconds} s in {} of {n} trials", missing(granted)));
    }
    let seen = trials.iter().filter(|t| t.other.is_some()).count();
    if let Some(also) = also.filter(|_| seen < n) {
        notes.push(format!("{also} not seen within {seconds} s in {} of {n} trials", missing(seen)));
    }
    record.add_notes(notes);
    record
}

// ---- tables ----------------------------------------------------------------------------------

pub fn fmt(value: Option<f64>, decimals: usize) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".to_owned(),
    }
}

/// The metrics `keys` of `record`, in whole numbers.
pub fn whole(record: &Record, keys: &[&str]) -> Vec<String> {
    keys.iter().map(|key| fmt(record.get(key), 0)).collect()
}

/// The leader's requests per operation and the share of requests sent to it directly.
fn leader_cells(record: &Record) -> [String; 2] {
    [
        fmt(record.get("leader_requests_per_op"), 2),
        record.get("on_leader_share").map_or_else(|| "-".to_owned(), |share| format!("{:.0}%", share * 100.0)),
    ]
}

/// `4.00 (2.00w + 2.00r)`.
pub fn fmt_requests(record: &Record) -> String {
    match (record.get("requests_per_op"), record.get("writes_per_op"), record.get("reads_per_op")) {
        (Some(all), Some(w), Some(r)) => format!("{all:.2} ({w:.2}w+{r:.2}r)"),
        _ => "-".to_owned(),
    }
}

pub fn print_table(title: &str, header: &[&str], rows: Vec<Vec<String>>) {
    if rows.is_empty() {
        return;
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    println!("\n{title}");
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| if i < 2 { format!("{c:<w$}", w = widths[i]) } else { format!("{c:>w$}", w = widths[i]) })
            .collect();
        println!("  {}", padded.join("  ").trim_end());
    };
    line(header.iter().map(|h| (*h).to_owned()).collect());
    line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in rows {
        line(row);
    }
}

/// A row of dashes with the reason in the last (note) column.
fn failed_row(record: &Record, columns: usize) -> Vec<String> {
    let mut row = vec![record.case.clone(), record.client.to_owned()];
    row.resize(columns - 1, "-".to_owned());
    let why = record.note.as_deref().unwrap_or("?").lines().next().unwrap_or("");
    let short: String = why.chars().take(100).collect();
    row.push(format!("failed: {short}"));
    row
}

/// The rows of one table: each record's case and client, its `cells`, its note; a failed record's
/// row says why instead.
pub fn table_rows<'a>(
    records: impl Iterator<Item = &'a Record>,
    header: &[&str],
    cells: impl Fn(&Record) -> Vec<String>,
) -> Vec<Vec<String>> {
    records
        .map(|r| {
            if r.metrics.is_empty() {
                return failed_row(r, header.len());
            }
            let mut row = vec![r.case.clone(), r.client.to_owned()];
            row.extend(cells(r));
            row.push(note(r));
            row
        })
        .collect()
}

fn note(record: &Record) -> String {
    record.note.clone().unwrap_or_default()
}

pub fn print_tables(records: &[Record]) {
    let section = |name: &'static str| records.iter().filter(move |r| r.section == name);

    let header = [
        "case",
        "client",
        "n",
        "create p50",
        "create p99",
        "delete p50",
        "create+delete p50",
        "list p50",
        "list p99",
        "create+list pipelined p50",
        "watch+delete pipelined p50",
        "req/iter",
        "note",
    ];
    let rows = table_rows(section("floor"), &header, |r| {
        let mut cells = whole(
            r,
            &[
                "n",
                "create_p50_us",
                "create_p99_us",
                "delete_p50_us",
                "create_delete_p50_us",
                "list_p50_us",
                "list_p99_us",
                "create_list_pipelined_p50_us",
                "watch_delete_pipelined_p50_us",
            ],
        );
        cells.push(fmt_requests(r));
        cells
    });
    print_table("floor: raw requests on one session (latency in µs; req/iter = create + delete + list)", &header, rows);

    let header = [
        "case",
        "client",
        "n",
        "acquire p50",
        "acquire p99",
        "cycle p50",
        "cycle p99",
        "cycles/s",
        "req/cycle",
        "note",
    ];
    let rows = table_rows(section("uncontended"), &header, |r| {
        let mut cells =
            whole(r, &["n", "acquire_p50_us", "acquire_p99_us", "cycle_p50_us", "cycle_p99_us", "ops_per_s"]);
        cells.push(fmt_requests(r));
        cells
    });
    print_table(
        "uncontended: acquire + release on one session, nobody else around (latency in µs; req = server packets)",
        &header,
        rows,
    );
    let header = [
        "case",
        "client",
        "n",
        "acquire p50",
        "cycle p50",
        "cycle p99",
        "cycle p50, session on a follower",
        "cycle p50, on the leader",
        "rounds on a follower / leader",
        "cycles/s",
        "req/cycle",
        "leader req/cycle",
        "on leader",
        "note",
    ];
    let rows = table_rows(section("uncontended-ensemble"), &header, |r| {
        let mut cells = whole(
            r,
            &[
                "n",
                "acquire_p50_us",
                "cycle_p50_us",
                "cycle_p99_us",
                "cycle_on_follower_p50_us",
                "cycle_on_leader_p50_us",
            ],
        );
        let rounds = |place: &str| fmt(r.get(&format!("rounds_on_{place}")).or(Some(0.0)), 0);
        cells.push(format!("{} / {}", rounds("follower"), rounds("leader")));
        cells.push(fmt(r.get("ops_per_s"), 0));
        cells.push(fmt_requests(r));
        cells.extend(leader_cells(r));
        cells
    });
    print_table(
        "uncontended on a three-server ensemble: as above, the client given all three members (req = packets at \
         all members; leader req = requests the leader handled, its own clients' and those forwarded to it; on \
         leader = share of the client's requests sent to the leader directly, i.e. its session was there; each \
         round is a new session on a member its library picks at random)",
        &header,
        rows,
    );

    let header =
        ["W", "client", "locks/s", "wait p50", "wait p99", "grants", "req/grant", "violations", "max holders", "note"];
    let contended_rows = |name| -> Vec<Vec<String>> {
        table_rows(section(name), &header, |r| {
            let mut cells = whole(r, &["locks_per_s", "wait_p50_us", "wait_p99_us", "grants"]);
            cells.push(fmt_requests(r));
            cells.extend(whole(r, &["violations", "max_holders"]));
            cells
        })
    };
    print_table(
        "contended mutex: W sessions loop on one path, zero hold time (wait in µs; req counted over warm-up too)",
        &header,
        contended_rows("contended"),
    );
    print_table(
        "contended mutex, W tasks sharing one session (one client per process): as above",
        &header,
        contended_rows("contended-tasks"),
    );
    // Across processes, the Rust contenders' CPU per grant too.
    let header = [
        "W",
        "client",
        "locks/s",
        "wait p50",
        "wait p99",
        "grants",
        "req/grant",
        "client CPU µs/grant",
        "violations",
        "max holders",
        "note",
    ];
    let processes_rows = |name| -> Vec<Vec<String>> {
        table_rows(section(name), &header, |r| {
            let mut cells = whole(r, &["locks_per_s", "wait_p50_us", "wait_p99_us", "grants"]);
            cells.push(fmt_requests(r));
            cells.extend(whole(r, &["client_cpu_us_per_grant", "violations", "max_holders"]));
            cells
        })
    };
    print_table(
        "contended mutex, one OS process per session: as above, no in-process hand-off (violations: held \
         intervals overlapping on the wall clock; client CPU: each Rust contender process's, all its threads, \
         summed, over their grants)",
        &header,
        processes_rows("contended-processes"),
    );
    let header = [
        "W",
        "client",
        "locks/s",
        "wait p50",
        "wait p99",
        "grants",
        "req/grant",
        "leader req/grant",
        "on leader",
        "client CPU µs/grant",
        "hand-off p50",
        "violations",
        "max holders",
        "note",
    ];
    let rows = table_rows(section("contended-processes-ensemble"), &header, |r| {
        let mut cells = whole(r, &["locks_per_s", "wait_p50_us", "wait_p99_us", "grants"]);
        cells.push(fmt_requests(r));
        cells.extend(leader_cells(r));
        cells.extend(whole(r, &["client_cpu_us_per_grant", "handoff_p50_us", "violations", "max_holders"]));
        cells
    });
    print_table(
        "contended mutex, one OS process per session, on a three-server ensemble: as above, each process given \
         all three members (req, leader req and on leader as in the uncontended ensemble table; hand-off as in \
         the hand-off table below, in µs)",
        &header,
        rows,
    );
    print_table(
        "contended mutex, one OS process per session, Rust contenders on tokio's multi-thread runtime (a worker \
         per core, as #[tokio::main] builds it): as above",
        &header,
        processes_rows("contended-processes-mt"),
    );
    let header = ["W", "client", "hand-offs", "hand-off p50", "hand-off p99", "note"];
    let rows = table_rows(section("contended-processes"), &header, |r| {
        whole(r, &["handoffs", "handoff_p50_us", "handoff_p99_us"])
    });
    print_table(
        "hand-off across processes (same runs): holder's release begun (delete sent next) to the next, already \
         waiting, holder's grant, in µs on the wall clock every process shares",
        &header,
        rows,
    );

    let header = ["N", "client", "completed", "drain ms", "hand-offs/s", "req/hand-off", "violations", "note"];
    let rows = table_rows(section("drain"), &header, |r| {
        vec![
            fmt(r.get("completed"), 0),
            fmt(r.get("drain_ms"), 1),
            fmt(r.get("handoffs_per_s"), 0),
            fmt_requests(r),
            fmt(r.get("violations"), 0),
        ]
    });
    print_table("queue drain: N waiters queued on one session, then released one after the other", &header, rows);

    let header = ["case", "client", "count", "bytes each", "setup s", "note"];
    let rows = table_rows(section("memory"), &header, |r| {
        vec![fmt(r.get("count"), 0), fmt(r.get("bytes_each"), 0), fmt(r.get("setup_s"), 1)]
    });
    print_table(
        "memory: bytes this process holds per waiting acquisition / per held guard (counting allocator)",
        &header,
        rows,
    );

    let header = [
        "case",
        "client",
        "trials",
        "told by",
        "told median",
        "told worst",
        "granted median",
        "granted worst",
        "margin median",
        "margin worst",
        "granted first",
        "other signal, median",
        "note",
    ];
    let rows = table_rows(section("partition"), &header, |r| {
        let (told_by, also) = signals(r.client);
        // A missing time with fewer trials seeing it than there were: it never came.
        let time = |name: &str, key: &str| match r.get(&format!("{name}_{key}_ms")) {
            Some(ms) => fmt(Some(ms), 0),
            None if r.get(&format!("{name}_count")) < r.get("trials") => "never".to_owned(),
            None => "-".to_owned(),
        };
        vec![
            fmt(r.get("trials"), 0),
            told_by.to_owned(),
            time("told", "median"),
            time("told", "worst"),
            time("granted", "median"),
            time("granted", "worst"),
            fmt(r.get("margin_median_ms"), 0),
            fmt(r.get("margin_worst_ms"), 0),
            format!("{} of {}", fmt(r.get("granted_first"), 0), fmt(r.get("trials"), 0)),
            also.map_or_else(|| "-".to_owned(), |also| format!("{also} {}", time("other_signal", "median"))),
        ]
    });
    print_table(
        "told after a partition: a holder's link to the server cut both ways at t0, another session waiting \
         (ms after t0; margin = granted - told, negative: granted before the holder was told; worst = latest \
         told or granted, smallest margin)",
        &header,
        rows,
    );

    let header = [
        "N",
        "client",
        "locks/s taken",
        "req/s",
        "bytes/s sent",
        "server CPU ms/s",
        "client CPU ms/s",
        "bytes/guard",
        "note",
    ];
    let rows = table_rows(section("idle"), &header, |r| {
        vec![
            fmt(r.get("locks_per_s"), 0),
            fmt(r.get("requests_per_s"), 2),
            fmt(r.get("bytes_sent_per_s"), 0),
            fmt(r.get("server_cpu_ms_per_s"), 1),
            fmt(r.get("client_cpu_ms_per_s"), 1),
            fmt(r.get("bytes_per_guard"), 0),
        ]
    });
    print_table(
        "idle: one session (timeout 10 s) takes N mutexes on N paths, 64 at a time (locks/s), then holds them, \
         idle; over the window: requests the server received (mntr), bytes it sent (tcp_info), server and client \
         CPU (/proc), and the client's bytes per guard",
        &header,
        rows,
    );

    let header = [
        "case",
        "client",
        "locks/s taken",
        "leader req/s per session",
        "leader CPU µs/s per session",
        "follower req/s per session",
        "follower CPU µs/s per session",
        "leader CPU ms/s",
        "follower CPU ms/s",
        "leader CPU µs/request",
        "note",
    ];
    let rows = table_rows(section("idle-ensemble"), &header, |r| {
        let before_after = |key: &str| format!("{} -> {}", fmt(r.get(&format!("base_{key}")), 1), fmt(r.get(key), 1));
        vec![
            fmt(r.get("locks_per_s"), 0),
            fmt(r.get("leader_requests_per_session_s"), 3),
            fmt(r.get("leader_cpu_us_per_session_s"), 1),
            fmt(r.get("follower_requests_per_session_s"), 3),
            fmt(r.get("follower_cpu_us_per_session_s"), 1),
            before_after("leader_cpu_ms_per_s"),
            before_after("follower_cpu_ms_per_s"),
            fmt(r.get("leader_cpu_us_per_request"), 0),
        ]
    });
    print_table(
        "idle on a three-server ensemble: S sessions (timeout 10 s), all connected to one follower, each holding H \
         locks, idle; per session = (the window - without them) / S, without them = the mean of a window just \
         before they connected and one after they closed; requests: at the leader those entering its request \
         pipeline (what the follower forwards), at the follower those its clients sent (mntr); CPU of each \
         member's JVM (/proc; without the sessions -> with them); windows of whole heartbeat periods (T/9)",
        &header,
        rows,
    );

    crate::many_paths::print_tables(records);
}

// ---- targets -----------------------------------------------------------------------------------

/// One goal of the issue, checked within this run.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub ours: Option<f64>,
    pub theirs: Option<f64>,
    /// `ours / theirs`, or the value itself for absolute goals.
    pub value: Option<f64>,
    pub goal: String,
    pub pass: Option<bool>,
    /// For a ratio goal: the limit, and whether it is an upper one.
    pub ratio_limit: Option<(f64, bool)>,
}

impl Target {
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "ours": self.ours,
            "theirs": self.theirs,
            "value": self.value,
            "goal": self.goal,
            "pass": self.pass,
        })
    }
}

fn find(records: &[Record], section: &str, case: &str, client: &str, key: &str) -> Option<f64> {
    records.iter().find(|r| r.section == section && r.case == case && r.client == client)?.get(key)
}

/// `ours / theirs` must be at most (`upper`) or at least (`!upper`) `limit`.
fn ratio(name: &str, ours: Option<f64>, theirs: Option<f64>, limit: f64, upper: bool) -> Target {
    let value = ours.zip(theirs).map(|(a, b)| a / b);
    Target {
        name: name.to_owned(),
        ours,
        theirs,
        value,
        goal: format!("{} {limit}x", if upper { "<=" } else { ">=" }),
        pass: value.map(|v| meets(v, limit, upper)),
        ratio_limit: Some((limit, upper)),
    }
}

fn meets(value: f64, limit: f64, upper: bool) -> bool {
    if upper {
        value <= limit
    } else {
        value >= limit
    }
}

/// Over several runs, a ratio goal is judged by the median of the runs' own ratios (each taken
/// within one run, on one server, as the goals are stated), not by the ratio of the medians.
/// `per_run` holds each run's values, in the order of `targets`.
pub fn judge_ratios_by_run(targets: &mut [Target], per_run: &[Vec<Option<f64>>]) {
    for (i, target) in targets.iter_mut().enumerate() {
        let values: Vec<f64> = per_run.iter().filter_map(|run| run.get(i).copied().flatten()).collect();
        if values.is_empty() {
            continue;
        }
        let value = median(&values);
        target.value = Some(value);
        if let Some((limit, upper)) = target.ratio_limit {
            target.pass = Some(meets(value, limit, upper));
        }
    }
}

/// `ours / theirs`, shown without a goal.
fn info(name: &str, ours: Option<f64>, theirs: Option<f64>) -> Target {
    Target {
        name: name.to_owned(),
        ours,
        theirs,
        value: ours.zip(theirs).map(|(a, b)| a / b),
        goal: "info".to_owned(),
        pass: None,
        ratio_limit: None,
    }
}

/// An absolute goal: `value` must satisfy `pass`.
fn absolute(name: &str, value: Option<f64>, goal: &str, pass: impl Fn(f64) -> bool) -> Target {
    Target {
        name: name.to_owned(),
        ours: value,
        theirs: None,
        value,
        goal: goal.to_owned(),
        pass: value.map(pass),
        ratio_limit: None,
    }
}

/// A value shown without a goal.
fn info_value(name: &str, value: Option<f64>) -> Target {
    Target {
        name: name.to_owned(),
        ours: value,
        theirs: None,
        value,
        goal: "info".to_owned(),
        pass: None,
        ratio_limit: None,
    }
}

/// Issue 14's targets first, in its order, then older goals and useful comparisons as info.
pub fn targets(records: &[Record]) -> Vec<Target> {
    let f = |section, case, client, key| find(records, section, case, client, key);
    let mut out = Vec::new();

    // One OS process per session: the deployment users run.
    for w in ["W=8", "W=32"] {
        let locks = |client| f("contended-processes", w, client, "locks_per_s");
        out.push(ratio(
            &format!("one process per session, {w}: locks/s vs zookeeper-client"),
            locks("zk-lock"),
            locks("zookeeper-client"),
            1.0,
            false,
        ));
        out.push(ratio(
            &format!("one process per session, {w}: locks/s vs Curator"),
            locks("zk-lock"),
            locks("curator"),
            1.6,
            false,
        ));
    }
    // The same on tokio's multi-thread runtime (issue 22): what `#[tokio::main]` services run.
    for w in ["W=8", "W=32"] {
        let locks = |client| f("contended-processes-mt", w, client, "locks_per_s");
        out.push(ratio(
            &format!("one process per session, multi-thread runtime, {w}: locks/s vs zookeeper-client"),
            locks("zk-lock"),
            locks("zookeeper-client"),
            1.0,
            false,
        ));
    }
    for w in ["W=8", "W=32"] {
        // Judged as printed, to two decimals: a stray ping in thousands of grants is not a request
        // of the recipe. (Each contender takes the lock once before the counters are read, so the
        // lock's parent is not created inside the count.)
        out.push(absolute(
            &format!("one process per session, {w}: requests per grant"),
            f("contended-processes", w, "zk-lock", "requests_per_op"),
            "<= 5",
            |r| (r * 100.0).round() <= 500.0,
        ));
    }

    // The annotated call, uncontended: apart (each call finds the previous call's delete done)
    // and back to back (each call's create waits on the server for the previous delete).
    let curator_cycle = f("uncontended", "mutex", "curator", "cycle_p50_us");
    let zkc_cycle = f("uncontended", "mutex", "zookeeper-client", "cycle_p50_us");
    for (how, case) in [("calls apart", "mutex fn, #[zk_lock], calls apart"), ("back to back", "mutex fn, #[zk_lock]")]
    {
        let call = f("uncontended", case, "zk-lock", "cycle_p50_us");
        out.push(ratio(
            &format!("#[zk_lock] call p50, {how}, vs Curator InterProcessMutex cycle"),
            call,
            curator_cycle,
            0.6,
            true,
        ));
        out.push(ratio(
            &format!("#[zk_lock] call p50, {how}, vs zookeeper-client Client::lock cycle"),
            call,
            zkc_cycle,
            0.8,
            true,
        ));
    }

    // Memory of zk-lock's own process.
    let memory: Vec<&Record> = records.iter().filter(|r| r.section == "memory" && r.client == "zk-lock").collect();
    out.push(absolute(
        "memory: bytes per held guard",
        memory.iter().find(|r| r.case.starts_with("held")).and_then(|r| r.get("bytes_each")),
        "<= 1024",
        |b| b <= 1024.0,
    ));
    let waiting: Vec<&&Record> = memory.iter().filter(|r| r.case.starts_with("waiting")).collect();
    for record in &waiting {
        out.push(absolute(
            &format!("memory: bytes per waiting acquisition, {}", record.case.trim_start_matches("waiting: ")),
            record.get("bytes_each"),
            "<= 4096",
            |b| b <= 4096.0,
        ));
    }
    if waiting.is_empty() {
        out.push(absolute("memory: bytes per waiting acquisition", None, "<= 4096", |b| b <= 4096.0));
    }
    // The largest waiting case; judged only when it is at least 10,000 (the full run's are).
    const MANY: f64 = 10_000.0;
    let largest = waiting.iter().max_by(|a, b| a.get("count").unwrap_or(0.0).total_cmp(&b.get("count").unwrap_or(0.0)));
    let count = largest.and_then(|r| r.get("count"));
    out.push(Target {
        name: "memory: 10,000 waiting acquisitions in one process, all queued".to_owned(),
        ours: count,
        theirs: None,
        value: count,
        goal: ">= 10000, queued".to_owned(),
        pass: largest.filter(|r| r.get("count").is_some_and(|n| n >= MANY)).map(|r| r.get("complete") == Some(1.0)),
        ratio_limit: None,
    });

    idle_targets(records, &mut out);
    idle_ensemble_targets(records, &mut out);

    // No regression.
    out.push(ratio(
        "no regression: contended W=8, sessions in one process: locks/s vs Curator",
        f("contended", "W=8", "zk-lock", "locks_per_s"),
        f("contended", "W=8", "curator", "locks_per_s"),
        1.4,
        false,
    ));
    out.push(absolute(
        "no regression: queue drain N=1000: requests per hand-off",
        f("drain", "N=1000", "zk-lock", "requests_per_op"),
        "<= 1",
        // N+1 deletes (the holder's too) for N hand-offs, and maybe a ping.
        |r| r <= 1.0 + 3.0 / 1000.0,
    ));

    // Information: earlier goals and what explains the numbers above.
    let apart = f("uncontended", "mutex fn, #[zk_lock], calls apart", "zk-lock", "cycle_p50_us");
    let back_to_back = f("uncontended", "mutex fn, #[zk_lock]", "zk-lock", "cycle_p50_us");
    let raw = |key| f("floor", "raw ops", "zk-lock", key);
    let ours_cycle = f("uncontended", "mutex", "zk-lock", "cycle_p50_us");
    let acquire = f("uncontended", "mutex", "zk-lock", "acquire_p50_us");
    out.push(info("(info) #[zk_lock] call p50, calls apart, vs one raw create", apart, raw("create_p50_us")));
    out.push(info(
        "(info) #[zk_lock] call p50, calls apart, vs raw create + list back to back",
        apart,
        raw("create_list_pipelined_p50_us"),
    ));
    out.push(info(
        "(info) #[zk_lock] call p50 vs the same function with a hand-written guard",
        back_to_back,
        f("uncontended", "mutex fn, hand-written guard", "zk-lock", "cycle_p50_us"),
    ));
    out.push(info(
        "(info) mutex cycle p50, release awaited, vs Curator InterProcessMutex cycle",
        ours_cycle,
        curator_cycle,
    ));
    out.push(info(
        "(info) mutex cycle p50, release awaited, vs raw create + delete",
        ours_cycle,
        raw("create_delete_p50_us"),
    ));
    out.push(info(
        "(info) uncontended mutex acquire p50 vs raw create + list back to back",
        acquire,
        raw("create_list_pipelined_p50_us"),
    ));
    out.push(info(
        "(info) uncontended mutex release (cycle - acquire p50) vs raw watch + delete back to back",
        ours_cycle.zip(acquire).map(|(cycle, acquire)| cycle - acquire),
        raw("watch_delete_pipelined_p50_us"),
    ));
    out.push(info_value(
        "(info) writes per uncontended mutex cycle (server counter)",
        f("uncontended", "mutex", "zk-lock", "writes_per_op"),
    ));
    out.push(info_value(
        "(info) reads per uncontended mutex cycle (server counter)",
        f("uncontended", "mutex", "zk-lock", "reads_per_op"),
    ));
    let contended = |section, client| f(section, "W=8", client, "locks_per_s");
    out.push(info(
        "(info) contended W=8, sessions in one process: locks/s vs zookeeper-client",
        contended("contended", "zk-lock"),
        contended("contended", "zookeeper-client"),
    ));
    out.push(info(
        "(info) contended W=8, tasks sharing one session: locks/s vs Curator",
        contended("contended-tasks", "zk-lock"),
        contended("contended-tasks", "curator"),
    ));
    out.push(info(
        "(info) contended W=8, tasks sharing one session: locks/s vs zookeeper-client",
        contended("contended-tasks", "zk-lock"),
        contended("contended-tasks", "zookeeper-client"),
    ));
    for (section, runtime) in [("contended-processes", "current-thread"), ("contended-processes-mt", "multi-thread")] {
        for w in ["W=8", "W=32"] {
            let cpu = |client| f(section, w, client, "client_cpu_us_per_grant");
            out.push(info(
                &format!(
                    "(info) one process per session, {runtime} runtime, {w}: client CPU per grant vs zookeeper-client"
                ),
                cpu("zk-lock"),
                cpu("zookeeper-client"),
            ));
        }
    }
    for (t, other) in
        [("T=64", "zookeeper-client"), ("T=64", "curator"), ("T=1024", "zookeeper-client"), ("T=1024", "curator")]
    {
        let locks = |client| f("many-paths", t, client, "locks_per_s");
        out.push(info(
            &format!("(info) many paths {t}, one session: locks/s vs {other}"),
            locks("zk-lock"),
            locks(other),
        ));
    }
    out.push(info_value(
        "(info) many paths T=1024, zk-lock: busiest thread of the process, % of one core",
        f("many-paths", "T=1024", "zk-lock", "busiest_thread_pct"),
    ));
    // Issue 33: the same clients on a three-server ensemble, sessions on a follower (where a
    // client given all three members lands two times in three).
    let ensemble_cycle = |client| f("uncontended-ensemble", "mutex", client, "cycle_on_follower_p50_us");
    out.push(info(
        "(info) ensemble, session on a follower: uncontended mutex cycle p50 vs Curator",
        ensemble_cycle("zk-lock"),
        ensemble_cycle("curator"),
    ));
    out.push(info(
        "(info) ensemble, session on a follower: uncontended mutex cycle p50 vs standalone",
        ensemble_cycle("zk-lock"),
        ours_cycle,
    ));
    for other in ["zookeeper-client", "curator"] {
        let locks = |client| f("contended-processes-ensemble", "W=8", client, "locks_per_s");
        out.push(info(
            &format!("(info) ensemble: one process per session, W=8: locks/s vs {other}"),
            locks("zk-lock"),
            locks(other),
        ));
    }
    out.push(info_value(
        "(info) ensemble: one process per session, W=8: requests per grant",
        f("contended-processes-ensemble", "W=8", "zk-lock", "requests_per_op"),
    ));
    out.push(info(
        "(info) queue drain N=1000: drain time vs Curator",
        f("drain", "N=1000", "zk-lock", "drain_ms"),
        f("drain", "N=1000", "curator", "drain_ms"),
    ));
    out
}

/// Issue 22's targets for zk-lock: what a session holding many locks costs while idle, against
/// holding one; its memory per guard and its take rate at 100,000 held.
fn idle_targets(records: &[Record], out: &mut Vec<Target>) {
    let f = |held: &str, key| find(records, "idle", &format!("N={held}"), "zk-lock", key);
    for (held, label) in [("10000", "10,000"), ("100000", "100,000")] {
        out.push(ratio(
            &format!("idle, {label} held: requests/s vs holding 1"),
            f(held, "requests_per_s"),
            f("1", "requests_per_s"),
            1.2,
            true,
        ));
        out.push(ratio(
            &format!("idle, {label} held: bytes/s the server sent vs holding 1"),
            f(held, "bytes_sent_per_s"),
            f("1", "bytes_sent_per_s"),
            1.2,
            true,
        ));
    }
    out.push(absolute("idle, 100,000 held: client bytes per guard", f("100000", "bytes_per_guard"), "<= 1024", |b| {
        b <= 1024.0
    }));
    out.push(ratio(
        "idle, 100,000 held: take rate (locks/s) vs taking 1,000",
        f("100000", "locks_per_s"),
        f("1000", "locks_per_s"),
        1.0,
        false,
    ));
}

/// Issue 33: on the ensemble, what zk-lock's idle sessions cost the leader must stay flat in the
/// locks they hold: the case with the most held per session against the one with 1.
fn idle_ensemble_targets(records: &[Record], out: &mut Vec<Target>) {
    let cells: Vec<&Record> = records
        .iter()
        .filter(|r| r.section == "idle-ensemble" && r.client == "zk-lock" && !r.metrics.is_empty())
        .collect();
    let one = cells.iter().find(|r| r.get("held_per_session") == Some(1.0));
    let most = cells
        .iter()
        .filter(|r| r.get("held_per_session").is_some_and(|h| h > 1.0))
        .max_by(|a, b| a.get("held_per_session").unwrap_or(0.0).total_cmp(&b.get("held_per_session").unwrap_or(0.0)));
    let get = |record: Option<&&Record>, key: &str| record.and_then(|r| r.get(key));
    for (what, key) in [
        ("leader requests/s per session", "leader_requests_per_session_s"),
        ("leader CPU per session", "leader_cpu_us_per_session_s"),
    ] {
        out.push(ratio(
            &format!("idle on an ensemble, sessions on a follower, most held per session: {what} vs holding 1"),
            get(most, key),
            get(one, key),
            1.2,
            true,
        ));
    }
    out.push(info_value(
        "(info) idle on an ensemble, 1 held: leader requests/s per zk-lock session",
        get(one, "leader_requests_per_session_s"),
    ));
    out.push(info_value(
        "(info) idle on an ensemble, 1 held: leader CPU µs/s per zk-lock session",
        get(one, "leader_cpu_us_per_session_s"),
    ));
    out.push(info_value(
        "(info) idle on an ensemble, 1 held: leader CPU µs per forwarded sync",
        get(one, "leader_cpu_us_per_request"),
    ));
}

/// Prints the targets; `per_run` (one list per target, same order) adds the value of each run.
pub fn print_targets(targets: &[Target], per_run: Option<&[Vec<Option<f64>>]>) {
    let rows = targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut row = vec![
                t.name.clone(),
                t.goal.clone(),
                fmt(t.ours, 2),
                fmt(t.theirs, 2),
                fmt(t.value, 2),
                match t.pass {
                    Some(true) => "met".to_owned(),
                    Some(false) => "MISSED".to_owned(),
                    None if t.goal == "info" => String::new(),
                    None => "not measured".to_owned(),
                },
            ];
            if let Some(per_run) = per_run {
                let values: Vec<String> = per_run.iter().map(|run| fmt(run.get(i).copied().flatten(), 2)).collect();
                row.push(values.join(" "));
            }
            row
        })
        .collect();
    let mut header = vec!["target", "goal", "zk-lock", "other", "value", "verdict"];
    let title = if per_run.is_some() {
        header.push("value in each run");
        "targets (medians of the runs; value = zk-lock / other, or the value itself; a ratio goal is judged by the median of the runs' own ratios)"
    } else {
        "targets (ratios within this run, same server; value = zk-lock / other, or the value itself)"
    };
    print_table(title, &header, rows);
}

// ---- the JSON file ---------------------------------------------------------------------------

/// The text of a JSON report: pretty-printed with sorted keys (serde_json's default map), whole
/// numbers as integers and the others to three decimals, plenty for timings and ratios.
pub fn pretty(mut report: Value) -> String {
    tidy_numbers(&mut report);
    format!("{report:#}\n")
}

fn tidy_numbers(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(tidy_numbers),
        Value::Object(map) => map.values_mut().for_each(tidy_numbers),
        Value::Number(n) if n.is_f64() => {
            let n = n.as_f64().unwrap_or_default();
            *value = if n == n.trunc() && n.abs() < 1e15 {
                Value::from(n as i64)
            } else {
                Value::from((n * 1000.0).round() / 1000.0)
            };
        }
        _ => {}
    }
}

// ---- medians of several runs ----------------------------------------------------------------

/// Reads the records of a JSON report written by this program.
pub fn records_of(report: &Value) -> Result<Vec<Record>, String> {
    let Some(items) = report["records"].as_array() else {
        return Err("no `records` array: not a report of this benchmark".to_owned());
    };
    let text = |item: &Value, key: &str| item[key].as_str().unwrap_or_default().to_owned();
    let mut records = Vec::new();
    for item in items {
        let section = match text(item, "section").as_str() {
            "floor" => "floor",
            "uncontended" => "uncontended",
            "contended" => "contended",
            "contended-tasks" => "contended-tasks",
            "contended-processes" => "contended-processes",
            "contended-processes-mt" => "contended-processes-mt",
            "drain" => "drain",
            "memory" => "memory",
            "partition" => "partition",
            "idle" => "idle",
            "many-paths" => "many-paths",
            "uncontended-ensemble" => "uncontended-ensemble",
            "contended-processes-ensemble" => "contended-processes-ensemble",
            "idle-ensemble" => "idle-ensemble",
            other => return Err(format!("unknown section `{other}`")),
        };
        let client = match text(item, "client").as_str() {
            "zk-lock" => "zk-lock",
            "zookeeper-client" => "zookeeper-client",
            "curator" => "curator",
            "kazoo" => "kazoo",
            other => return Err(format!("unknown client `{other}`")),
        };
        let mut record = Record::new(section, text(item, "case"), client);
        if let Some(map) = item.as_object() {
            for (key, value) in map {
                if let Some(n) = value.as_f64() {
                    record.set(key.clone(), n);
                }
            }
        }
        let note = text(item, "note");
        record.note = (!note.is_empty()).then_some(note);
        records.push(record);
    }
    Ok(records)
}

/// One record per cell of the runs: the median of each metric over the runs that measured it.
pub fn median_records(runs: &[Vec<Record>]) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::new();
    for record in runs.iter().flatten() {
        if out.iter().any(|r| r.section == record.section && r.case == record.case && r.client == record.client) {
            continue;
        }
        let same: Vec<&Record> = runs
            .iter()
            .flatten()
            .filter(|r| r.section == record.section && r.case == record.case && r.client == record.client)
            .collect();
        let mut merged = Record::new(record.section, record.case.clone(), record.client);
        let keys: std::collections::BTreeSet<&String> = same.iter().flat_map(|r| r.metrics.keys()).collect();
        for key in keys {
            let values: Vec<f64> = same.iter().filter_map(|r| r.get(key)).collect();
            merged.set(key.clone(), median(&values));
        }
        let mut notes: Vec<String> = same.iter().filter_map(|r| r.note.clone()).collect();
        notes.dedup();
        if !notes.is_empty() {
            let measured = same.iter().filter(|r| !r.metrics.is_empty()).count();
            merged.note = Some(format!("{} ({measured} of {} runs measured)", notes.join("; "), same.len()));
        }
        out.push(merged);
    }
    out
}

fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{partition, pretty, records_of, Record};
    use crate::partition::Trial;

    #[test]
    fn report_numbers_and_round_trip() {
        let numbers = json!({"b": [1.0, 2.5, 0.1234567, f64::NAN], "a": 3});
        assert_eq!(pretty(numbers), "{\n  \"a\": 3,\n  \"b\": [\n    1,\n    2.5,\n    0.123,\n    null\n  ]\n}\n");

        let mut record = Record::new("floor", "raw ops", "kazoo");
        record.set("n", 200.0);
        record.note = Some("a \"note\"".to_owned());
        let text = pretty(json!({"records": [record.to_json()]}));
        let back = records_of(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!((back[0].get("n"), back[0].note.as_deref()), (Some(200.0), Some("a \"note\"")));
    }

    #[test]
    fn partition_trials_never_told_count_as_infinitely_late() {
        let trial = |told, granted| Trial { told, granted, other: None };
        let told_first =
            partition("zk-lock", "c".into(), &[trial(Some(2.0), Some(4.0)), trial(Some(3.0), Some(6.0))], 10.0);
        let get = |r: &Record, key| r.get(key);
        assert_eq!(get(&told_first, "told_median_ms"), Some(2.5));
        assert_eq!(get(&told_first, "told_worst_ms"), Some(3.0));
        assert_eq!((get(&told_first, "margin_worst_ms"), get(&told_first, "granted_first")), (Some(2.0), Some(0.0)));
        assert_eq!(told_first.note, None);

        let never_told = partition("kazoo", "c".into(), &[trial(None, Some(4.0)), trial(Some(7.0), Some(4.5))], 10.0);
        // One of two never told: the median and the worst are "never", so not in the metrics.
        assert_eq!((get(&never_told, "told_median_ms"), get(&never_told, "told_worst_ms")), (None, None));
        assert_eq!(get(&never_told, "told_count"), Some(1.0));
        assert_eq!((get(&never_told, "margin_worst_ms"), get(&never_told, "granted_first")), (None, Some(2.0)));
        assert!(never_told.note.as_deref().is_some_and(|n| n.starts_with("LOST not seen within 0.01 s in 1 of 2")));
    }
}
