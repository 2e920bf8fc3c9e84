//! A JVM child process that cannot outlive the test process.
//!
//! Servers often live in a `static` whose `Drop` never runs, and a test process may die from a
//! signal or an abort. So the JVM is not our child: a small `sh` watchdog starts it and keeps a
//! pipe from us as its stdin. When our process goes away, however it goes, the kernel closes
//! that pipe; the watchdog's `read` returns, and it kills the JVM and deletes the server's
//! directory. `sh` and `kill` are used so that the kit needs no `libc` dependency. The shell
//! leads a process group of its own, so that signals meant for our process group (a terminal's
//! Ctrl-C) do not reach it.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{Result, TestingError};

/// `$1`: directory to delete if the test process goes away while Java runs; `$2`: its parent,
/// deleted too if it is then empty (`""` for none); the rest: the Java command line.
///
/// The shell prints Java's pid, then waits for Java and exits with its status, so our
/// `Child::try_wait` on the shell tells when Java has exited. The watchdog is a separate
/// subshell reading the pipe, so it works even while the main shell waits. It exits with 7 only
/// after it fired; otherwise the main shell stops it once Java exited on its own, so that a
/// stale pid is never signalled and a stopped server's directory survives for a restart.
const WATCHDOG: &str = r#"
dir=$1; parent=$2; shift 2
exec 3<&0 </dev/null
"$@" >&2 3<&- &
java=$!
echo "$java"
( read -r _ <&3; kill -9 "$java" 2>/dev/null; exit 7 ) >/dev/null 2>&1 &
watchdog=$!
exec 3<&-
wait "$java"
status=$?
kill "$watchdog" 2>/dev/null
wait "$watchdog"
if [ $? -eq 7 ]; then
  rm -rf "$dir"
  [ -z "$parent" ] || rmdir "$parent" 2>/dev/null
fi
exit "$status"
"#;

/// How often exit is polled while waiting with a deadline.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// The JVM flags of every server: small heaps for parallel tests, the cheapest collector for a
/// two-core CI runner, and no admin HTTP server (it would bind 8080 and collide across servers).
const JVM_FLAGS: &[&str] = &["-Xmx512m", "-XX:+UseSerialGC", "-Dzookeeper.admin.enableServer=false"];

/// How a [`JvmProcess`] is started.
#[derive(Debug)]
pub(crate) struct JvmCommand<'a> {
    /// The `java` executable.
    pub(crate) java: &'a Path,
    /// The classpath.
    pub(crate) classpath: &'a std::ffi::OsStr,
    /// The class to run.
    pub(crate) main_class: &'a str,
    /// Arguments of the main class.
    pub(crate) args: &'a [&'a std::ffi::OsStr],
    /// Working directory, deleted by the watchdog if the test process goes away.
    pub(crate) dir: &'a Path,
    /// Deleted by the watchdog after `dir` if then empty (a cluster's directory).
    pub(crate) parent_dir: Option<&'a Path>,
    /// Java's stdout and stderr are appended here.
    pub(crate) log: &'a Path,
}

/// A running (or exited) JVM, watched by its `sh` parent.
#[derive(Debug)]
pub(crate) struct JvmProcess {
    /// The watchdog shell, our child; it exits right after Java.
    shell: Child,
    /// Our end of the watchdog's pipe. Closed only after the shell exited: closing it while
    /// Java runs makes the watchdog delete the server directory.
    pipe: Option<ChildStdin>,
    java_pid: u32,
    log: PathBuf,
    /// Length of the log before this process started, so errors show only its own lines.
    log_start: u64,
    status: Option<ExitStatus>,
    /// Stopped by [`pause`](Self::pause) (`SIGSTOP`) and not resumed since.
    paused: bool,
}

impl JvmProcess {
    /// Starts the JVM and returns once its pid is known (not once it serves).
    pub(crate) fn spawn(command: &JvmCommand<'_>) -> Result<JvmProcess> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(command.log)
            .map_err(|err| TestingError::io(format!("open the server log {}", command.log.display()), err))?;
        let log_start = log.metadata().map_or(0, |meta| meta.len());
        let mut shell = Command::new("sh");
        shell
            .arg("-c")
            .arg(WATCHDOG)
            .arg("zk-lock-testing-watchdog")
            .arg(command.dir)
            .arg(command.parent_dir.unwrap_or(Path::new("")))
            .arg(command.java)
            .args(JVM_FLAGS)
            .arg("-cp")
            .arg(command.classpath)
            .arg(command.main_class)
            .args(command.args)
            .current_dir(command.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log);
        // A process group of its own: a terminal's Ctrl-C, SIGINT to the whole foreground group,
        // would kill this shell (Java, started in the background, ignores it), and we would take
        // the shell's exit for Java's while Java runs on. Only our process gets it now: it stops
        // the server as it chooses or, going away, through the pipe.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut shell, 0);
        let mut shell = shell.spawn().map_err(|err| TestingError::io("run `sh` to start the zookeeper JVM", err))?;
        let pipe = shell.stdin.take();
        let java_pid = match read_java_pid(&mut shell) {
            Ok(pid) => pid,
            Err(err) => {
                // Without a pid there is nothing safe to signal but the shell; if it started
                // Java anyway, closing the pipe makes its watchdog kill it.
                let _ = shell.kill();
                let _ = shell.wait();
                return Err(err);
            }
        };
        Ok(JvmProcess { shell, pipe, java_pid, log: command.log.to_owned(), log_start, status: None, paused: false })
    }

    /// Java's pid while it runs.
    pub(crate) fn pid(&mut self) -> Option<u32> {
        match self.try_wait() {
            Ok(None) => Some(self.java_pid),
            _ => None,
        }
    }

    /// Java's exit status once it has exited (the shell exits with it).
    pub(crate) fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.shell.try_wait().map_err(|err| TestingError::io("check whether the JVM exited", err))?;
            if self.status.is_some() {
                self.pipe = None;
            }
        }
        Ok(self.status)
    }

    /// Waits up to `timeout` for Java to exit; `None` if it still runs.
    pub(crate) fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(EXIT_POLL);
        }
    }

    /// Sends `SIGKILL` and waits until Java is gone, so its ports are free on return.
    pub(crate) fn kill(&mut self) -> Result<ExitStatus> {
        if let Some(status) = self.try_wait()? {
            return Ok(status);
        }
        self.signal("KILL")?;
        // A killed JVM goes within milliseconds; the bound only keeps a wedged system from
        // hanging the test forever.
        self.wait_timeout(Duration::from_secs(30))?.ok_or_else(|| {
            TestingError::io(
                format!("kill the JVM {}", self.java_pid),
                std::io::Error::new(std::io::ErrorKind::TimedOut, "still running 30s after SIGKILL"),
            )
        })
    }

    /// Sends `SIGTERM`, waits up to `grace` for a clean exit, then falls back to [`Self::kill`].
    pub(crate) fn terminate(&mut self, grace: Duration) -> Result<ExitStatus> {
        if let Some(status) = self.try_wait()? {
            return Ok(status);
        }
        self.request_stop()?;
        match self.wait_timeout(grace)? {
            Some(status) => Ok(status),
            None => self.kill(),
        }
    }

    /// Sends `SIGTERM` without waiting, to stop several servers in parallel; a paused JVM is
    /// resumed, or it would not act on it (`SIGKILL` needs no such help).
    pub(crate) fn request_stop(&mut self) -> Result<()> {
        self.signal("TERM")?;
        if self.paused {
            self.resume()?;
        }
        Ok(())
    }

    /// Freezes Java with `SIGSTOP`, as a long GC pause or a frozen VM would: its sockets stay
    /// open, and nothing answers on them until [`resume`](Self::resume).
    pub(crate) fn pause(&mut self) -> Result<()> {
        self.signal("STOP")?;
        self.paused = true;
        Ok(())
    }

    /// Lets a paused Java run again (`SIGCONT`).
    pub(crate) fn resume(&mut self) -> Result<()> {
        self.signal("CONT")?;
        self.paused = false;
        Ok(())
    }

    /// Whether Java is paused: it runs, but answers nothing.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused
    }

    /// Sends `SIGKILL` without waiting, to kill several servers in parallel.
    pub(crate) fn request_kill(&mut self) -> Result<()> {
        self.signal("KILL")
    }

    /// Signals Java, unless it already exited: the shell is reaped only after Java, so while it
    /// runs the pid cannot belong to anybody else.
    fn signal(&mut self, signal: &str) -> Result<()> {
        if self.try_wait()?.is_some() {
            return Ok(());
        }
        // The shell's builtin `kill`, as minimal images may lack procps' `kill`. It fails only if
        // Java died meanwhile, which is what we wanted anyway.
        Command::new("sh")
            .args(["-c", r#"kill -s "$1" "$2" 2>/dev/null"#, "zk-lock-testing-kill", signal])
            .arg(self.java_pid.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(drop)
            .map_err(|err| TestingError::io(format!("run `kill -{signal}` on the JVM {}", self.java_pid), err))
    }

    /// The last `lines` lines this process wrote to its log.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, self.log_start, lines)
    }

    /// The log file.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }
}

/// Reads the first line of the watchdog shell: Java's pid.
fn read_java_pid(shell: &mut Child) -> Result<u32> {
    let Some(stdout) = shell.stdout.take() else {
        return Err(TestingError::io("read the JVM pid", std::io::ErrorKind::BrokenPipe.into()));
    };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|err| TestingError::io("read the JVM pid from the watchdog shell", err))?;
    match line.trim().parse() {
        // Pid 0 would make `kill` signal our whole process group.
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(TestingError::io(
            format!("read the JVM pid from the watchdog shell (got {line:?})"),
            std::io::ErrorKind::InvalidData.into(),
        )),
    }
}

impl Drop for JvmProcess {
    fn drop(&mut self) {
        // Killed before the pipe closes, so the watchdog does not delete the directory of a
        // server that may be restarted; on any error the pipe closing still stops Java.
        let _ = self.kill();
    }
}

/// The last `lines` lines of `path` from byte `start` on; the log grows over restarts.
pub(crate) fn log_tail(path: &Path, start: u64, lines: usize) -> String {
    // Enough bytes for the lines of interest, without reading a long log whole.
    const MAX_BYTES: u64 = 64 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let from = start.max(len.saturating_sub(MAX_BYTES));
        file.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            let tail = &all[all.len().saturating_sub(lines)..];
            if tail.is_empty() {
                "(the log is empty)".to_owned()
            } else {
                tail.join("\n")
            }
        }
        Err(err) => format!("(cannot read the log: {err})"),
    }
}
