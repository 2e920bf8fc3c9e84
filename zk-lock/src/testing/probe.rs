//! Readiness probes and the start-up wait shared by servers and clusters.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use super::four_letter::four_letter_word_within;
use super::process::JvmProcess;
use super::TestingError;

/// How often a starting server is probed: a JVM takes about a second, so finer is wasted.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(50);

/// How long a server may take to serve. Generous: JVMs start slowly on busy CI machines.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `stop` waits for a clean exit after `SIGTERM` before it kills.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);

/// Launches of a server whose port is still taken when it restarts. A listening socket is free
/// once its process is gone, so a retry only covers a slow release; a port that another
/// process took stays taken.
pub(crate) const REBIND_ATTEMPTS: usize = 3;

/// Pause before launching again after a port conflict.
pub(crate) const REBIND_PAUSE: Duration = Duration::from_millis(250);

/// Read timeout of a readiness probe; a serving server answers within milliseconds.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Lines of server log quoted in errors.
pub(crate) const LOG_LINES: usize = 40;

/// Asks the server at `addr` whether it serves, and in which mode.
///
/// Returns the `Mode:` of `srvr` (`standalone`, `leader`, `follower`, ...) once the server is
/// `imok` and the answer to `conf` names `data_dir`. The last check matters: when another
/// server took our port, it answers in our server's place until ours fails to bind.
pub(crate) fn serving_mode(addr: SocketAddr, data_dir: &Path) -> Result<String, String> {
    let ask =
        |cmd: &str| four_letter_word_within(addr, cmd, PROBE_TIMEOUT).map_err(|err| format!("`{cmd}` failed: {err}"));
    let ruok = ask("ruok")?;
    if ruok != "imok" {
        return Err(format!("`ruok` answered {ruok:?}"));
    }
    let srvr = ask("srvr")?;
    let Some(mode) = srvr_mode(&srvr) else {
        return Err(format!("`srvr` answered {:?}", srvr.trim()));
    };
    let conf = ask("conf")?;
    if !conf.contains(&*data_dir.to_string_lossy()) {
        return Err(format!("another server answers on {addr}"));
    }
    Ok(mode.to_owned())
}

/// The `Mode:` line of a `srvr` answer; absent while the server does not serve requests.
pub(crate) fn srvr_mode(srvr: &str) -> Option<&str> {
    srvr.lines().find_map(|line| line.strip_prefix("Mode:")).map(str::trim)
}

/// Why a server did not come up.
#[derive(Debug)]
pub(crate) struct StartFailure {
    pub(crate) error: TestingError,
    /// The server could not bind a port: retry, with other ports or once it is released.
    pub(crate) port_taken: bool,
}

impl From<TestingError> for StartFailure {
    fn from(error: TestingError) -> Self {
        StartFailure { error, port_taken: false }
    }
}

/// Waits until the server of `process` at `addr` serves in a mode accepted by `ready`.
pub(crate) fn wait_serving(
    name: &str,
    process: &mut JvmProcess,
    addr: SocketAddr,
    data_dir: &Path,
    ready: impl Fn(&str) -> bool,
) -> Result<(), StartFailure> {
    let started = Instant::now();
    loop {
        if let Some(status) = process.try_wait()? {
            let log_tail = process.log_tail(LOG_LINES);
            return Err(StartFailure {
                port_taken: is_bind_failure(&log_tail),
                error: TestingError::Exited {
                    name: name.to_owned(),
                    status: status.to_string(),
                    log: process.log().to_owned(),
                    log_tail,
                },
            });
        }
        let detail = match serving_mode(addr, data_dir) {
            Ok(mode) if ready(&mode) => return Ok(()),
            Ok(mode) => format!("serving as {mode}"),
            Err(probe) => probe,
        };
        if started.elapsed() >= START_TIMEOUT {
            return Err(StartFailure::from(TestingError::NotServing {
                name: name.to_owned(),
                waited: started.elapsed(),
                detail,
                log: process.log().to_owned(),
                log_tail: process.log_tail(LOG_LINES),
            }));
        }
        std::thread::sleep(PROBE_INTERVAL);
    }
}

/// Whether a server's log says it could not bind one of its ports. The election listener gives
/// up with its own message (and exit code 14), which the probes' own lines may have pushed the
/// `BindException` out of the log's tail.
pub(crate) fn is_bind_failure(log: &str) -> bool {
    log.contains("Address already in use") || log.contains("BindException") || log.contains("electionPortBindRetry")
}
