//! The Curator (Java) and kazoo (Python) peers: separate processes that measure their own
//! client and print raw samples as JSON, over the line protocol described in
//! `bench/java/CuratorBench.java`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout_at, Instant};

use zk_lock::testing::{compile_curator_program, python_with_kazoo, JavaProgram};

use crate::contender::Launch;
use crate::stats::{Counters, Requests, Servers};

const JAVA_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/java/CuratorBench.java");
const KAZOO_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/kazoo_bench.py");

/// A long-running server JVM: the default (tiered C2) compiler, a fixed heap limit, the serial
/// collector so that GC threads do not compete for the two cores, and small thread stacks for
/// the thousand threads of the drain row.
pub const JVM_FLAGS: &[&str] = &["-Xmx512m", "-Xss512k", "-XX:+UseSerialGC"];

/// One JVM per contender in the `contended-processes` row: a small heap, the rest as above.
pub const CONTENDER_JVM_FLAGS: &[&str] = &["-Xmx64m", "-Xss512k", "-XX:+UseSerialGC"];

/// How long a peer may take to start and connect (a JVM start on a loaded machine).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a peer may take to clean up after a command.
const CLEAN_TIMEOUT: Duration = Duration::from_secs(60);

/// A peer process, killed when dropped.
pub struct Peer {
    pub name: &'static str,
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: PathBuf,
    /// Set when the protocol broke: the peer cannot take more commands.
    broken: bool,
}

/// What to wait for between `armed` and `go`: the waiters of a drain must all be queued.
#[derive(Debug, Clone, Copy)]
pub struct Queued {
    /// Ephemeral nodes that must exist beyond those at the start (holders and waiters).
    pub ephemerals: u64,
    /// Watches that must exist beyond those at the start (one per waiter).
    pub watches: u64,
    pub timeout: Duration,
}

/// The result of one peer command.
pub struct Measured {
    /// An object of numbers and arrays of numbers, as the peers print it.
    pub result: Value,
    pub requests: Requests,
    /// Whether the waiters were all queued before `go` (drain only; `true` otherwise).
    pub queued: bool,
}

/// The numbers of a result that rounds of one measurement add up: counts, durations, CPU time.
const ADDED_UP: [&str; 9] = [
    "ops",
    "elapsed_s",
    "measure_s",
    "grants_measured",
    "grants_total",
    "violations",
    "client_cpu_us",
    "rounds_on_leader",
    "rounds_on_follower",
];

impl Measured {
    /// Adds another round of the same measurement: samples are appended, operation counts,
    /// durations, CPU time and requests added up, the most holders at once kept.
    pub fn merge(&mut self, more: Measured) {
        if let (Value::Object(into), Value::Object(from)) = (&mut self.result, more.result) {
            for (key, value) in from {
                match (into.get_mut(&key), value) {
                    (Some(Value::Array(a)), Value::Array(b)) => a.extend(b),
                    (Some(a), Value::Number(b)) if a.is_number() && ADDED_UP.contains(&key.as_str()) => {
                        *a = Value::from(a.as_f64().unwrap_or_default() + b.as_f64().unwrap_or_default());
                    }
                    (Some(a), Value::Number(b)) if a.is_number() && key == "max_holders" => {
                        *a = Value::from(a.as_f64().unwrap_or_default().max(b.as_f64().unwrap_or_default()));
                    }
                    (None, value) => {
                        into.insert(key, value);
                    }
                    _ => {}
                }
            }
        }
        self.requests += more.requests;
        self.queued &= more.queued;
    }
}

/// The numbers of the array `key` of a result (anything else in it is skipped).
pub fn samples(result: &Value, key: &str) -> Vec<f64> {
    result[key].as_array().map_or_else(Vec::new, |items| items.iter().filter_map(Value::as_f64).collect())
}

impl Peer {
    /// Compiles (once per source version) and starts the Curator peer.
    pub async fn curator(connect: &str, work: &Path) -> Result<Peer, String> {
        let peer = curator_peer(work).await?;
        let mut command = Command::new(&peer.java);
        command.args(JVM_FLAGS).arg("-cp").arg(&peer.classpath).arg(&peer.main_class).arg(connect);
        Peer::start("curator", command, work).await
    }

    /// Starts the kazoo peer with a python3 that can import kazoo.
    pub async fn kazoo(connect: &str, work: &Path) -> Result<Peer, String> {
        let python = tokio::task::spawn_blocking(python_with_kazoo)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let mut command = Command::new(python);
        command.arg(KAZOO_SCRIPT).arg(connect);
        Peer::start("kazoo", command, work).await
    }

    async fn start(name: &'static str, mut command: Command, work: &Path) -> Result<Peer, String> {
        let logs = work.join("logs");
        std::fs::create_dir_all(&logs).map_err(|e| format!("create {}: {e}", logs.display()))?;
        let stderr = logs.join(format!("{name}.stderr"));
        let file = std::fs::File::create(&stderr).map_err(|e| format!("create {}: {e}", stderr.display()))?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the {name} peer: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let mut peer = Peer { name, child, stdin, lines, stderr, broken: false };
        peer.expect("ready", Instant::now() + START_TIMEOUT).await?;
        Ok(peer)
    }

    /// Runs one command: send it, wait for `armed` (and for the queue, if asked), read the
    /// counters, `go`, read the result and the counters again, `done`, wait for `clean`.
    pub async fn measure(
        &mut self,
        command: &str,
        server: Servers,
        queued: Option<Queued>,
        run_timeout: Duration,
    ) -> Result<Measured, String> {
        let base = Counters::read_async(server).await?;
        self.arm(command, run_timeout).await?;
        let mut all_queued = true;
        if let Some(queued) = queued {
            all_queued = wait_queued(server, &base, queued).await?;
        }
        let before = Counters::read_async(server).await?;
        let line = self.go(run_timeout).await?;
        let after = Counters::read_async(server).await?;
        let result = self.finish(&line).await?;
        Ok(Measured { result, requests: after.since(&before), queued: all_queued })
    }

    /// Sends `command` and waits until the peer is `armed` (set up, waiting for `go`).
    pub async fn arm(&mut self, command: &str, timeout: Duration) -> Result<(), String> {
        if self.broken {
            return Err(format!("the {} peer stopped answering earlier", self.name));
        }
        self.send(command).await?;
        match self.expect("armed", Instant::now() + timeout).await {
            Ok(_) => Ok(()),
            Err(error) => Err(self.settle(error).await),
        }
    }

    /// Sends `go` to an armed peer and returns its `result` line.
    pub async fn go(&mut self, timeout: Duration) -> Result<String, String> {
        self.send("go").await?;
        match self.expect("result ", Instant::now() + timeout).await {
            Ok(line) => Ok(line),
            Err(error) => Err(self.settle(error).await),
        }
    }

    /// Sends `done` after a result, waits for `clean`, and parses the result `line`.
    pub async fn finish(&mut self, line: &str) -> Result<Value, String> {
        self.send("done").await?;
        self.expect("clean", Instant::now() + CLEAN_TIMEOUT).await?;
        serde_json::from_str(line).map_err(|e| format!("bad result from the {} peer: {e}", self.name))
    }

    /// After a failed command, reads on to the peer's `clean` so it can take the next one.
    async fn settle(&mut self, error: String) -> String {
        if !self.broken && self.expect("clean", Instant::now() + CLEAN_TIMEOUT).await.is_err() {
            self.broken = true;
        }
        error
    }

    async fn send(&mut self, line: &str) -> Result<(), String> {
        let written = async {
            self.stdin.write_all(format!("{line}\n").as_bytes()).await?;
            self.stdin.flush().await
        };
        written.await.map_err(|e| {
            self.broken = true;
            format!("the {} peer did not take `{line}`: {e}{}", self.name, self.stderr_tail())
        })
    }

    /// Reads lines until one starting with `prefix` and returns the rest of it. An `error` line
    /// is returned as the error.
    async fn expect(&mut self, prefix: &str, deadline: Instant) -> Result<String, String> {
        loop {
            let line = match timeout_at(deadline, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => {
                    self.broken = true;
                    return Err(format!("the {} peer exited{}", self.name, self.stderr_tail()));
                }
                Ok(Err(e)) => {
                    self.broken = true;
                    return Err(format!("cannot read the {} peer: {e}", self.name));
                }
                Err(_) => {
                    self.broken = true;
                    return Err(format!("the {} peer printed no `{prefix}` in time{}", self.name, self.stderr_tail()));
                }
            };
            if let Some(rest) = line.strip_prefix(prefix) {
                return Ok(rest.to_owned());
            }
            if let Some(message) = line.strip_prefix("error ") {
                return Err(format!("{} peer: {message}", self.name));
            }
        }
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ({}) ends with:\n{tail}", self.stderr.display())
        }
    }

    /// The peer's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Asks the peer to exit, and kills it if it does not within a few seconds.
    pub async fn quit(mut self) {
        if !self.broken {
            let _ = self.send("quit").await;
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
    }
}

/// How to start one Curator contender JVM of the `contended-processes` row (compiling the peer
/// once); their stderr goes to `<work>/logs/curator-contenders.stderr`.
pub async fn curator_contender(connect: &str, path: &str, work: &Path) -> Result<Launch, String> {
    let peer = curator_peer(work).await?;
    let mut args: Vec<OsString> = CONTENDER_JVM_FLAGS.iter().map(OsString::from).collect();
    args.extend(["-cp".into(), peer.classpath, peer.main_class.into()]);
    Ok(Launch::peer(peer.java, args, connect, path, contender_log(work, "curator")?))
}

/// How to start one kazoo contender interpreter of the `contended-processes` row; their stderr
/// goes to `<work>/logs/kazoo-contenders.stderr`.
pub async fn kazoo_contender(connect: &str, path: &str, work: &Path) -> Result<Launch, String> {
    let python =
        tokio::task::spawn_blocking(python_with_kazoo).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    let args = vec![OsString::from(KAZOO_SCRIPT)];
    Ok(Launch::peer(python.into(), args, connect, path, contender_log(work, "kazoo")?))
}

fn contender_log(work: &Path, name: &str) -> Result<PathBuf, String> {
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("create {}: {e}", logs.display()))?;
    Ok(logs.join(format!("{name}-contenders.stderr")))
}

/// Waits until the server shows `queued` more ephemeral nodes and watches than `base`. `false`
/// if it did not within the timeout (the measurement then goes on, flagged).
pub async fn wait_queued(server: impl Into<Servers>, base: &Counters, queued: Queued) -> Result<bool, String> {
    let server = server.into();
    let deadline = Instant::now() + queued.timeout;
    loop {
        let now = Counters::read_async(server).await?;
        if now.ephemerals >= base.ephemerals + queued.ephemerals && now.watches >= base.watches + queued.watches {
            // The last waiter's watch reply may still be on its way back to it.
            tokio::time::sleep(Duration::from_millis(100)).await;
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Curator peer, compiled into `<work>/java` (once per version of its source).
async fn curator_peer(work: &Path) -> Result<JavaProgram, String> {
    let out = work.join("java");
    let compile = move || compile_curator_program(Path::new(JAVA_SOURCE), &out).map_err(|e| e.to_string());
    tokio::task::spawn_blocking(compile).await.map_err(|e| e.to_string())?
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{samples, Measured};
    use crate::stats::Requests;

    #[test]
    fn rounds_merge() {
        let round = |result| Measured { result, requests: Requests::default(), queued: true };
        let mut total = round(json!({"ops": 2, "elapsed_s": 0.5, "cycle_us": [1.5, 2]}));
        total.merge(round(json!({"ops": 1, "elapsed_s": 0.25, "cycle_us": [3]})));
        assert_eq!(total.result["ops"].as_f64(), Some(3.0));
        assert_eq!(total.result["elapsed_s"].as_f64(), Some(0.75));
        assert_eq!(samples(&total.result, "cycle_us"), [1.5, 2.0, 3.0]);
    }

    #[test]
    fn contended_rounds_add_up_and_keep_the_most_holders() {
        let round = |result| Measured { result, requests: Requests::default(), queued: true };
        let first = json!({"sessions": 8, "measure_s": 2.5, "grants_measured": 100, "grants_total": 120,
            "violations": 0, "max_holders": 1, "client_cpu_us": 6000.0, "handoff_us": [900]});
        let second = json!({"sessions": 8, "measure_s": 2.5, "grants_measured": 50, "grants_total": 60,
            "violations": 1, "max_holders": 2, "client_cpu_us": 3000.0, "handoff_us": [800]});
        let mut total = round(first);
        total.merge(round(second));
        let number = |key: &str| total.result[key].as_f64();
        assert_eq!(number("sessions"), Some(8.0), "not a count: kept");
        assert_eq!(number("measure_s"), Some(5.0));
        assert_eq!(number("grants_measured"), Some(150.0));
        assert_eq!(number("grants_total"), Some(180.0));
        assert_eq!(number("violations"), Some(1.0));
        assert_eq!(number("max_holders"), Some(2.0));
        assert_eq!(number("client_cpu_us"), Some(9000.0));
        assert_eq!(samples(&total.result, "handoff_us"), [900.0, 800.0]);
    }
}
