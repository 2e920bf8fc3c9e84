//! The worker processes as the test sees them: started, paused, stopped, and their reports
//! gathered: their grants and fenced writes into one `zk_lock::testing::History`, the rest as
//! [`Line`]s.

use std::collections::{HashMap, VecDeque};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::watch;

use zk_lock::testing::History;

use super::line::Line;
use super::worker::{Config, ENV};

/// The name of the test that runs a worker; see `fault_worker` in `tests/faults.rs`.
const WORKER_TEST: &str = "fault_worker";

/// Lines of a worker's stderr kept to explain a failure.
const STDERR_LINES: usize = 40;

/// What the workers reported so far.
#[derive(Debug, Default)]
pub struct Reports {
    pub history: History,
    /// `fail` lines: acquisitions that returned an error.
    pub failures: Vec<Line>,
    /// `event` lines, in arrival order.
    pub events: Vec<Line>,
    /// `idle` lines, with each worker's counters.
    pub idle: Vec<Line>,
    /// `audit` lines: what the orphan oracle found in each worker, per round.
    pub audits: Vec<Line>,
    /// Session id per worker.
    pub sessions: HashMap<String, i64>,
    /// Sessions reported by a worker that had reported another before: sessions replaced after
    /// they expired or were retired.
    pub replaced_sessions: usize,
    /// Workers that exited, with their status.
    pub exited: Vec<(String, ExitStatus)>,
    /// Reports that could not be read.
    pub broken: Vec<String>,
}

impl Reports {
    /// Records a line of a worker's stdout: a history record, one of our lines, or neither
    /// (libtest's chatter).
    fn read(&mut self, worker: &str, text: &str) -> Result<(), String> {
        if self.history.record_output_line(text).map_err(|e| e.to_string())? {
            return Ok(());
        }
        match Line::parse(text) {
            Some(line) => self.record(worker, line),
            None => Ok(()),
        }
    }

    fn record(&mut self, worker: &str, line: Line) -> Result<(), String> {
        match line.tag.as_str() {
            "fail" => self.failures.push(line),
            "event" => self.events.push(line),
            "idle" => self.idle.push(line),
            "audit" => self.audits.push(line),
            "session" => {
                let session = line.get("id").and_then(|id| id.parse().ok());
                let session = session.ok_or_else(|| format!("bad session line {line}"))?;
                if self.sessions.insert(worker.to_owned(), session).is_some() {
                    self.replaced_sessions += 1;
                }
            }
            _ => return Err(format!("unknown report {line}")),
        }
        Ok(())
    }

    pub fn grants(&self) -> usize {
        self.history.grant_count()
    }

    pub fn event(&self, proc: &str, name: &str) -> Option<&Line> {
        self.events.iter().find(|e| e.get("proc") == Some(proc) && e.get("name") == Some(name))
    }

    /// Sum of a counter over the workers' `idle` lines.
    pub fn idle_total(&self, key: &str) -> u64 {
        self.idle.iter().filter_map(|line| line.get(key)?.parse::<u64>().ok()).sum()
    }
}

struct Process {
    id: String,
    pid: u32,
    stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// The worker processes of one test.
pub struct Fleet {
    processes: Vec<Process>,
    reports: Arc<Mutex<Reports>>,
    /// Bumped on every report, so waiters re-check their condition.
    changed: watch::Sender<u64>,
    finishing: bool,
    /// Audits asked for so far.
    audit_rounds: u64,
}

impl Fleet {
    pub fn new() -> Self {
        Self {
            processes: Vec::new(),
            reports: Arc::default(),
            changed: watch::Sender::new(0),
            finishing: false,
            audit_rounds: 0,
        }
    }

    /// Starts a worker: this test binary again, running only [`WORKER_TEST`].
    pub fn spawn(&mut self, config: &Config) {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args(["--exact", WORKER_TEST, "--nocapture", "--include-ignored", "--test-threads", "1"])
            .env(ENV, config.encode())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start a worker process");
        let pid = child.id().expect("a running worker has a pid");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr_pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut tail = tail.lock().unwrap();
                if tail.len() == STDERR_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
        let (reports, changed, id) = (self.reports.clone(), self.changed.clone(), config.id.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(text)) = lines.next_line().await {
                let mut locked = reports.lock().unwrap();
                if let Err(e) = locked.read(&id, &text) {
                    locked.broken.push(format!("worker {id}: {e}"));
                }
                drop(locked);
                changed.send_modify(|n| *n += 1);
            }
            // Stdout closes when the worker exits (or dies).
            let status = child.wait().await.expect("wait for a worker");
            reports.lock().unwrap().exited.push((id, status));
            changed.send_modify(|n| *n += 1);
        });
        self.processes.push(Process { id: config.id.clone(), pid, stdin, stderr });
    }

    pub fn len(&self) -> usize {
        self.processes.len()
    }

    pub fn id(&self, worker: usize) -> &str {
        &self.processes[worker].id
    }

    /// Reads the reports.
    pub fn reports<T>(&self, read: impl FnOnce(&Reports) -> T) -> T {
        read(&self.reports.lock().unwrap())
    }

    /// Waits until `done` holds for the reports; panics with `what` after `timeout`, or at once
    /// if a worker exits before it was told to.
    pub async fn wait_for(&self, what: &str, timeout: Duration, done: impl FnMut(&Reports) -> bool) {
        if let Err(stalled) = self.try_wait_for(what, timeout, done).await {
            panic!("{stalled}");
        }
    }

    /// As [`wait_for`](Self::wait_for), but a timeout is returned as the message it would panic with.
    pub async fn try_wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&Reports) -> bool,
    ) -> Result<(), String> {
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            {
                let reports = self.reports.lock().unwrap();
                assert!(reports.broken.is_empty(), "unreadable reports: {:?}", reports.broken);
                if let Some((id, status)) = reports.exited.first().filter(|_| !self.finishing) {
                    let (id, status) = (id.clone(), *status);
                    drop(reports);
                    panic!("worker {id} exited ({status}) while waiting for {what}\n{}", self.stderr_tails());
                }
                if done(&reports) {
                    return Ok(());
                }
            }
            if tokio::time::timeout_at(deadline, changed.changed()).await.is_err() {
                let grants = self.reports(Reports::grants);
                let failures =
                    self.reports(|r| r.failures.iter().rev().take(5).map(ToString::to_string).collect::<Vec<_>>());
                return Err(format!(
                    "timed out after {timeout:?} waiting for {what} ({grants} grants so far; last failures {failures:#?})\n{}",
                    self.stderr_tails()
                ));
            }
        }
    }

    /// Waits until the workers have reported `grants` grants in all.
    pub async fn wait_for_grants(&self, grants: usize, timeout: Duration) -> Result<usize, String> {
        self.try_wait_for(&format!("{grants} grants"), timeout, |r| r.grants() >= grants).await?;
        Ok(self.reports(Reports::grants))
    }

    /// Waits for an `event` line of `proc` named `name`.
    pub async fn wait_for_event(&self, proc: &str, name: &str, timeout: Duration) -> Line {
        self.wait_for(&format!("event `{name}` of {proc}"), timeout, |r| r.event(proc, name).is_some()).await;
        self.reports(|r| r.event(proc, name).cloned()).expect("seen above")
    }

    /// Sends `SIGSTOP` to a worker, as a long GC pause or a frozen VM would stop it.
    pub fn pause(&self, worker: usize) {
        signal(self.processes[worker].pid, "STOP");
    }

    /// Sends `SIGCONT` to a paused worker.
    pub fn resume(&self, worker: usize) {
        signal(self.processes[worker].pid, "CONT");
    }

    /// Has every worker run the orphan oracle on its own client (see `worker::audit`) and
    /// returns their `audit` lines. No worker may be paused.
    pub async fn audit(&mut self, timeout: Duration) -> Vec<Line> {
        self.audit_rounds += 1;
        let round = self.audit_rounds.to_string();
        self.tell_all(&format!("audit {round}")).await;
        let n = self.processes.len();
        let this_round = |r: &Reports| -> Vec<Line> {
            r.audits.iter().filter(|a| a.get("round") == Some(round.as_str())).cloned().collect()
        };
        self.wait_for(&format!("audit round {round}"), timeout, |r| this_round(r).len() == n).await;
        self.reports(this_round)
    }

    /// Writes the line `order` to every worker's control channel.
    async fn tell_all(&mut self, order: &str) {
        for process in &mut self.processes {
            if let Some(stdin) = process.stdin.as_mut() {
                stdin.write_all(format!("{order}\n").as_bytes()).await.expect("write an order to a worker");
                stdin.flush().await.expect("write an order to a worker");
            }
        }
    }

    /// Tells every worker to stop and waits until all are idle: nothing held, nothing queued.
    pub async fn stop(&mut self, timeout: Duration) {
        self.tell_all("stop").await;
        let n = self.processes.len();
        self.wait_for("every worker to be idle", timeout, |r| r.idle.len() == n).await;
    }

    /// Lets every worker exit and checks that each succeeded; returns the reports.
    pub async fn finish(mut self, timeout: Duration) -> Reports {
        self.finishing = true;
        for process in &mut self.processes {
            process.stdin = None;
        }
        let n = self.processes.len();
        self.wait_for("every worker to exit", timeout, |r| r.exited.len() == n).await;
        let failed: Vec<String> = self.reports(|r| {
            r.exited
                .iter()
                .filter(|(_, status)| !status.success())
                .map(|(id, status)| format!("{id}: {status}"))
                .collect()
        });
        assert!(failed.is_empty(), "workers failed: {failed:?}\n{}", self.stderr_tails());
        // All exited and reaped: their pids are no longer ours to signal.
        self.processes.clear();
        std::mem::take(&mut *self.reports.lock().unwrap())
    }

    /// The last lines each worker wrote to stderr.
    pub fn stderr_tails(&self) -> String {
        let mut text = String::new();
        for process in &self.processes {
            let tail = process.stderr.lock().unwrap();
            text.push_str(&format!("--- stderr of worker {} (pid {}):\n", process.id, process.pid));
            for line in tail.iter() {
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // A paused worker would outlive the test otherwise: the kill on drop does not wake it,
        // and its stdin closing does not matter while it is stopped.
        let exited: Vec<String> = self.reports(|r| r.exited.iter().map(|(id, _)| id.clone()).collect());
        for process in self.processes.iter().filter(|p| !exited.contains(&p.id)) {
            signal(process.pid, "KILL");
        }
    }
}

/// Sends `signal` to `pid` with the shell's `kill`, which minimal images have even without procps.
pub fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("sh")
        .args(["-c", r#"kill -s "$1" "$2""#, "faults-kill", signal])
        .arg(pid.to_string())
        .status()
        .expect("run `kill`");
    assert!(status.success() || signal == "KILL", "kill -s {signal} {pid} failed: {status}");
}
