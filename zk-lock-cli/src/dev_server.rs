//! `zk-lock dev-server`: a local ZooKeeper for development, until Ctrl-C.
//!
//! The server is the testing kit's ([`TestingServer::builder`]): the same lookup of `java` and
//! the ZooKeeper jars, the same readiness probe, and the same watchdog, which kills the JVM when
//! this process goes away however it goes (even `kill -9`). Its shell and JVM are in a process
//! group of their own, so a Ctrl-C at the terminal reaches only this process, which stops the
//! server (`SIGTERM`, then `SIGKILL` after ten seconds) and deletes its temporary directory.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::signal::unix::{signal, Signal, SignalKind};
use zk_lock::testing::{TestingError, TestingServer};

use crate::args::Args;
use crate::error::CliError;
use crate::output::{escape, json_text, write_stdout};

/// How often the command checks that the server still runs.
const LIVENESS_INTERVAL: Duration = Duration::from_millis(250);

/// Lines of the server's log quoted when it exits on its own.
const LOG_LINES: usize = 40;

/// How to install what the server needs, for messages.
const INSTALL_HINT: &str =
    "on Debian, `apt-get install zookeeper default-jre-headless` (zk-lock's repository has `scripts/install-deps` for it)";

/// Runs `dev-server`: starts the server on `port` (0: any free one), with its data in `data_dir`
/// if given, else in a temporary directory; prints its connect string once it serves; stops it
/// on SIGINT, SIGTERM or SIGHUP.
///
/// # Errors
///
/// A usage error for `--connect` or `--auth-file`, which are for the other commands, and for a
/// `--data-dir` that cannot be used; any other error (exit code 4) when the server cannot start
/// or exits on its own.
pub async fn run(args: &Args, port: u16, data_dir: Option<&Path>) -> Result<(), CliError> {
    if let Some(option) = args.connection_option() {
        return Err(CliError::usage(format!(
            "{option} is for the commands that talk to a server; dev-server starts one on 127.0.0.1 \
             (choose its port with --port)"
        )));
    }
    let temporary = data_dir.is_none();
    // In place before the server starts, and kept: a signal is never missed between two waits.
    let mut signals = Signals::new()?;
    let mut builder = TestingServer::builder().port(port);
    if let Some(dir) = data_dir {
        builder = builder.data_dir(dir);
    }
    let mut starting = tokio::task::spawn_blocking(move || builder.start());
    let started = tokio::select! {
        started = &mut starting => started,
        () = signals.recv() => {
            // The start cannot be cancelled: the server is stopped once up.
            eprintln!("interrupted: stopping the server once it has started");
            return match starting.await {
                Ok(Ok(server)) => stop(server, temporary).await,
                _ => Ok(()),
            };
        }
    };
    let server = started
        .map_err(|e| CliError::other(format!("the server's start failed: {e}")))?
        .map_err(|e| start_error(&e, port, temporary))?;
    announce(&server, temporary, args.json);
    let mut liveness = tokio::time::interval(LIVENESS_INTERVAL);
    loop {
        tokio::select! {
            () = signals.recv() => return stop(server, temporary).await,
            _ = liveness.tick() => {
                if server.pid().is_none() {
                    return Err(exited(server, temporary));
                }
            }
        }
    }
}

/// SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed): the ways to stop the server.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    /// Handles them from now on.
    fn new() -> Result<Self, CliError> {
        let handle = |kind| signal(kind).map_err(|e| CliError::other(format!("cannot handle Ctrl-C: {e}")));
        Ok(Signals {
            interrupt: handle(SignalKind::interrupt())?,
            terminate: handle(SignalKind::terminate())?,
            hangup: handle(SignalKind::hangup())?,
        })
    }

    /// Waits for any of them.
    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
            _ = self.hangup.recv() => {}
        }
    }
}

/// Prints the connect string (or the JSON line) on stdout, then on stderr how to use it and
/// where the data and log are.
fn announce(server: &TestingServer, temporary: bool, json: bool) {
    let connect = server.connect_string();
    let version = server.four_letter("srvr").ok().and_then(|srvr| version(&srvr));
    let pid = server.pid();
    let line = match json {
        true => {
            let document = json!({
                "connect": connect,
                "port": server.port(),
                "pid": pid,
                "version": version,
                "data_dir": server.data_dir().to_string_lossy(),
                "log": server.log_file().to_string_lossy(),
                "temporary": temporary,
            });
            format!("{}\n", json_text(&document, false))
        }
        false => format!("{connect}\n"),
    };
    // A reader that is gone (`| head -1`) does not stop the server: Ctrl-C does.
    let _ = write_stdout(&line);
    let version = version.map_or_else(String::new, |version| format!(" {version}"));
    let pid = pid.map_or_else(String::new, |pid| format!(", pid {pid}"));
    let kept = match temporary {
        true => "temporary, deleted on exit",
        false => "kept on exit",
    };
    eprintln!(
        "ZooKeeper{version} serving on {connect} (standalone{pid}); Ctrl-C stops it.\n  \
         data: {data} ({kept})\n  log:  {log}\nIn other shells:\n  export {env}={connect}",
        data = escape(&server.data_dir().display().to_string()),
        log = escape(&server.log_file().display().to_string()),
        env = zk_lock::config::CONNECT_ENV,
    );
}

/// The version in the answer to `srvr`: `Zookeeper version: 3.8.0-<commit>, built on ...`.
fn version(srvr: &str) -> Option<String> {
    let line = srvr.lines().find_map(|line| line.strip_prefix("Zookeeper version:"))?;
    let version = line.trim().split([',', '-', ' ']).next()?;
    let plausible = !version.is_empty() && version.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    plausible.then(|| version.to_owned())
}

/// Stops the server and deletes its temporary directory, off the runtime's thread.
async fn stop(server: TestingServer, temporary: bool) -> Result<(), CliError> {
    let pid = server.pid().map_or_else(String::new, |pid| format!(" (pid {pid})"));
    eprintln!("stopping the server{pid}");
    let data_dir = server.data_dir().to_owned();
    // The temporary directory holds the data directory, the log and the configuration.
    let dir = data_dir.parent().unwrap_or(&data_dir).to_owned();
    let stopped = tokio::task::spawn_blocking(move || {
        let stopped = server.stop();
        // Dropping it deletes its temporary directory (never a --data-dir).
        drop(server);
        stopped
    })
    .await;
    match stopped {
        Ok(Ok(())) => {
            match temporary {
                true => eprintln!("stopped; deleted {}", escape(&dir.display().to_string())),
                false => eprintln!("stopped; its data stays in {}", escape(&data_dir.display().to_string())),
            }
            Ok(())
        }
        Ok(Err(e)) => Err(CliError::other(format!("cannot stop the server: {e}"))),
        Err(e) => Err(CliError::other(format!("cannot stop the server: {e}"))),
    }
}

/// The error for a server that exited on its own, after printing the end of its log, read
/// before the server's temporary directory (with the log, unless it is in --data-dir) is deleted.
fn exited(server: TestingServer, temporary: bool) -> CliError {
    let log = server.log_file().to_owned();
    print_log_tail(&log, &server.log_tail(LOG_LINES));
    drop(server);
    CliError::other(format!(
        "the zookeeper server exited on its own ({}; the end of its log is above)",
        log_fate(temporary)
    ))
}

/// Prints the end of the server's log on stderr, indented, each line escaped.
fn print_log_tail(log: &Path, tail: &str) {
    eprintln!("the end of the server's log, {}:", escape(&log.display().to_string()));
    for line in tail.lines() {
        // Java's stack traces are indented with tabs, which `escape` would spell `\t`.
        eprintln!("  {}", escape(&line.replace('\t', "    ")));
    }
}

/// What became of the log once the server is gone.
fn log_fate(temporary: bool) -> &'static str {
    match temporary {
        true => "its log went with its temporary directory",
        false => "its log stays",
    }
}

/// Explains why the server did not start, in the command's terms; prints the end of the server's
/// log first if it ran.
fn start_error(error: &TestingError, port: u16, temporary: bool) -> CliError {
    let failed = "cannot start a ZooKeeper server";
    match error {
        TestingError::PortInUse { .. } => CliError::other(format!(
            "port {port} on 127.0.0.1 is already in use (another ZooKeeper?); choose another with \
             --port N, or --port 0 for any free port"
        )),
        TestingError::DataDir { dir, reason } => {
            CliError::usage(format!("--data-dir {}: {reason}", escape(&dir.display().to_string())))
        }
        TestingError::JavaNotFound | TestingError::ZookeeperNotFound { .. } => CliError::other(format!(
            "{failed}: {error}; dev-server needs both Java and ZooKeeper's jars: {INSTALL_HINT}"
        )),
        TestingError::Exited { status, log, log_tail, .. } => {
            print_log_tail(log, log_tail);
            CliError::other(format!(
                "{failed}: it exited before serving ({status}; {}; the end of its log is above)",
                log_fate(temporary)
            ))
        }
        TestingError::NotServing { waited, detail, log, log_tail, .. } => {
            print_log_tail(log, log_tail);
            CliError::other(format!(
                "{failed}: it was not serving after {} ({}); the machine may be overloaded \
                 ({}; the end of its log is above)",
                humantime::format_duration(Duration::from_secs(waited.as_secs())),
                escape(detail),
                log_fate(temporary)
            ))
        }
        _ => CliError::other(format!("{failed}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_srvr() {
        let debian = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2023-01-01 00:00 UTC\nLatency min/avg/max: 0/0.0/0\nMode: standalone\n";
        assert_eq!(version(debian).as_deref(), Some("3.8.0"));
        let apache =
            "Zookeeper version: 3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c, built on 2024-02-12 22:16 UTC\n";
        assert_eq!(version(apache).as_deref(), Some("3.8.4"));
        assert_eq!(version("Mode: standalone\n"), None);
        assert_eq!(version("Zookeeper version: \x1b[2J\n"), None);
    }

    #[test]
    fn a_taken_port_names_it_and_suggests_port_0() {
        let error = start_error(&TestingError::PortInUse { port: 2181 }, 2181, true);
        assert_eq!(error.code, crate::error::ZOOKEEPER);
        assert!(error.message.starts_with("port 2181 on 127.0.0.1 is already in use"), "{}", error.message);
        assert!(error.message.contains("--port 0"), "{}", error.message);
        let java = start_error(&TestingError::JavaNotFound, 2181, true);
        assert!(java.message.contains("java") && java.message.contains("scripts/install-deps"), "{}", java.message);
        let dir = start_error(
            &TestingError::DataDir { dir: "f".into(), reason: "it exists and is not a directory".into() },
            0,
            false,
        );
        assert_eq!(
            (dir.code, dir.message.as_str()),
            (crate::error::USAGE, "--data-dir f: it exists and is not a directory")
        );
    }
}
