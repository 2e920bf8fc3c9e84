//! Runs real Apache Curator (Java) peers next to the Rust code under test.
//!
//! [`JavaPeer`] drives a program of `tests/java/` ([`Program`]) through lines on stdin/stdout.
//! `CuratorPeer.java`, the recipes' peer, prints `ready` once connected, waits for `go`, then runs
//! its command (see the Java source for the commands and what they print).
//! `tests/server_partitions.rs` includes this file by its path, for `CuratorHolderStates.java`.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{timeout, timeout_at, Instant};
use zk_lock::testing::{compile_curator_program, JavaProgram};

/// How long a peer may take to print an expected line or to exit. Generous because several
/// JVMs may start at once on a loaded CI machine.
const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// A Java program of `tests/java/`, run against Curator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `CuratorPeer.java`: the recipes' commands, after `ready` and `go` ([`JavaPeer::spawn`]).
    Peer,
    /// `CuratorHolderStates.java`: holds a mutex and prints its connection states
    /// (`tests/server_partitions/curator.rs`).
    #[allow(dead_code, reason = "run by tests/server_partitions.rs, not by this binary")]
    HolderStates,
}

impl Program {
    /// Its main class, the name of its source file.
    fn class(self) -> &'static str {
        match self {
            Self::Peer => "CuratorPeer",
            Self::HolderStates => "CuratorHolderStates",
        }
    }

    /// The program, compiled once per process (and once per version of its source).
    fn compiled(self) -> &'static JavaProgram {
        static COMPILED: [OnceLock<JavaProgram>; 2] = [OnceLock::new(), OnceLock::new()];
        COMPILED[self as usize].get_or_init(|| {
            let source =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java").join(format!("{}.java", self.class()));
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("java-peer");
            compile_curator_program(&source, &out).unwrap_or_else(|e| panic!("{e}"))
        })
    }
}

/// A running JVM of a [`Program`], killed when dropped.
pub struct JavaPeer {
    program: Program,
    /// Command line after the connect string, to tell peers apart in failure messages.
    label: String,
    child: Child,
    /// `None` once closed by [`JavaPeer::wait_success`].
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every stdout line read so far, for failure messages.
    seen: Vec<String>,
    /// stderr goes to a file rather than a pipe: the JVM can never block on it, and it can be
    /// read synchronously when a failure message is built.
    stderr_file: PathBuf,
}

impl JavaPeer {
    /// Starts `CuratorPeer <connect_string> <args...>`; must be called inside a Tokio runtime.
    ///
    /// The peer connects, prints `ready`, then waits for [`send`](Self::send)`("go")`.
    pub fn spawn(connect_string: &str, args: &[&str]) -> JavaPeer {
        Self::spawn_program(Program::Peer, connect_string, args)
    }

    /// Starts `<program> <connect_string> <args...>`; must be called inside a Tokio runtime.
    pub fn spawn_program(program: Program, connect_string: &str, args: &[&str]) -> JavaPeer {
        static SPAWNED: AtomicUsize = AtomicUsize::new(0);
        let peer = program.compiled();
        let logs = Path::new(env!("CARGO_TARGET_TMPDIR")).join("java-peer/logs");
        std::fs::create_dir_all(&logs).expect("create peer log directory");
        let stderr_file =
            logs.join(format!("{}-{}.stderr", std::process::id(), SPAWNED.fetch_add(1, Ordering::Relaxed)));
        let stderr = std::fs::File::create(&stderr_file).expect("create peer stderr file");

        let mut child = Command::new(&peer.java)
            // Short-lived JVMs: C1 only and the serial GC start faster and use less memory.
            .args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-cp"])
            .arg(&peer.classpath)
            .arg(&peer.main_class)
            .arg(connect_string)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run java (install a JRE or set JAVA_HOME, see scripts/install-deps): {e}")
            });
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        JavaPeer { program, label: args.join(" "), child, stdin, stdout, seen: Vec::new(), stderr_file }
    }

    /// Reads stdout until a line starting with `prefix` and returns that whole line.
    ///
    /// Lines before it are skipped (e.g. `grant <n>` while waiting for `done`). Panics with the
    /// peer's output if it exits first or prints no such line within [`PEER_TIMEOUT`].
    pub async fn expect_line(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + PEER_TIMEOUT;
        loop {
            let line = match timeout_at(deadline, self.stdout.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => {
                    let status = self.exit_status().await;
                    self.fail(&format!("exited ({status}) before printing `{prefix}…`"))
                }
                Ok(Err(e)) => self.fail(&format!("unreadable stdout: {e}")),
                Err(_) => self.fail(&format!("printed no `{prefix}…` within {PEER_TIMEOUT:?}")),
            };
            self.seen.push(line.clone());
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// Writes `line` and a newline to the peer's stdin.
    pub async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open until wait_success");
        let written = async {
            stdin.write_all(format!("{line}\n").as_bytes()).await?;
            stdin.flush().await
        };
        if let Err(e) = written.await {
            self.fail(&format!("did not take `{line}` on stdin: {e}"));
        }
    }

    /// Closes stdin, waits for the peer to exit and asserts that it exited with code 0.
    pub async fn wait_success(mut self) {
        // EOF on stdin makes a peer still waiting for input fail instead of hang.
        drop(self.stdin.take());
        // Drain stdout so the peer cannot block on a full pipe, and keep it for the message.
        let drained = timeout(PEER_TIMEOUT, async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                self.seen.push(line);
            }
        })
        .await;
        if drained.is_err() {
            self.fail(&format!("did not exit within {PEER_TIMEOUT:?}"));
        }
        let status = self.exit_status().await;
        if !status.success() {
            self.fail(&format!("exited with {status}"));
        }
    }

    /// Exit status of a peer whose stdout reached EOF, i.e. that is exiting or has exited.
    async fn exit_status(&mut self) -> ExitStatus {
        match timeout(PEER_TIMEOUT, self.child.wait()).await {
            Ok(status) => status.expect("wait for java"),
            Err(_) => self.fail(&format!("closed stdout but did not exit within {PEER_TIMEOUT:?}")),
        }
    }

    /// Kills the peer and panics with everything it printed.
    fn fail(&mut self, what: &str) -> ! {
        let _ = self.child.start_kill();
        let stderr = std::fs::read_to_string(&self.stderr_file).unwrap_or_default();
        panic!(
            "{} `{}` {what}\n--- stdout ---\n{}\n--- stderr ---\n{stderr}",
            self.program.class(),
            self.label,
            self.seen.join("\n"),
        );
    }
}

impl Drop for JavaPeer {
    fn drop(&mut self) {
        // `kill_on_drop` ends the JVM. Failure messages already quote its stderr, so the file
        // need not outlive the peer.
        let _ = std::fs::remove_file(&self.stderr_file);
    }
}

impl JavaPeer {
    /// A line the peer has already printed, without waiting for one: `None` when nothing is
    /// readable right now. Best effort (output still in flight is not seen): use it to check
    /// that a peer has *not* done something yet. Panics if the peer has exited.
    pub async fn line_already_printed(&mut self) -> Option<String> {
        // `timeout` polls the read once before looking at the (already elapsed) deadline.
        match timeout(Duration::ZERO, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Ok(Ok(None)) => {
                let status = self.exit_status().await;
                self.fail(&format!("exited ({status}) unexpectedly"))
            }
            Ok(Err(e)) => self.fail(&format!("unreadable stdout: {e}")),
            Err(_) => None,
        }
    }
}

/// The counter file a peer increments, as the Java peer reads it: missing or empty is 0.
pub fn read_counter(file: &Path) -> u64 {
    match std::fs::read_to_string(file) {
        Ok(text) if text.trim().is_empty() => 0,
        Ok(text) => text.trim().parse().unwrap_or_else(|e| panic!("counter file holds {text:?}: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => panic!("read {}: {e}", file.display()),
    }
}

/// The node named in a peer's `held <node-name>` line.
pub fn held_node(line: &str) -> String {
    line.strip_prefix("held ").unwrap_or_else(|| panic!("not a `held` line: {line:?}")).to_owned()
}

/// Checks Curator's protected lock node layout, `_c_<uuid>-<lock_name><10 digits>` (`lock-` for
/// `InterProcessMutex`, `__READ__` and `__WRIT__` for `InterProcessReadWriteLock`, `lease-` for
/// `InterProcessSemaphoreV2` leases), and returns the sequence number.
pub fn curator_sequence(name: &str, lock_name: &str) -> u64 {
    let fail = |why: &str| -> ! { panic!("{name:?} is not `_c_<uuid>-{lock_name}<10 digits>`: {why}") };
    let Some(rest) = name.strip_prefix("_c_") else { fail("no `_c_` prefix") };
    let Some((uuid, sequence)) = rest.split_once(&format!("-{lock_name}")) else { fail("no lock name") };
    let groups: Vec<&str> = uuid.split('-').collect();
    if groups.iter().map(|group| group.len()).collect::<Vec<_>>() != [8, 4, 4, 4, 12] {
        fail("the uuid is not 8-4-4-4-12");
    }
    if !groups.iter().all(|group| group.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())) {
        fail("the uuid is not lowercase hex");
    }
    if sequence.len() != 10 || !sequence.bytes().all(|b| b.is_ascii_digit()) {
        fail("the sequence is not 10 digits");
    }
    sequence.parse().expect("10 digits fit in u64")
}
