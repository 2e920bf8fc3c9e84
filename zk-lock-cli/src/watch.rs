//! `zk-lock watch <path>`: `inspect`'s report kept current until the process is interrupted.

use std::future::Future;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};
use zk_lock::Client;
use zookeeper_client::{AddWatchMode, EventType, PersistentWatcher, WatchedEvent};

use crate::error::CliError;
use crate::inspect::{self, Snapshot};
use crate::output::{escape, escape_lines, json_text, write_stderr, write_stdout, Report};
use crate::session_expiry::Dumps;
use crate::terminal::Screen;

/// Runs `command` until it ends or the process gets SIGINT (Ctrl-C) or SIGTERM, which end it
/// with `Ok(None)`: the way out of `watch`. The handlers are in place before `command` starts, so
/// an interrupt while connecting ends it the same way.
///
/// # Errors
///
/// Those of `command`, and a failure to register the handlers.
pub async fn until_interrupted<T>(
    command: impl Future<Output = Result<Option<T>, CliError>>,
) -> Result<Option<T>, CliError> {
    let handlers = signal(SignalKind::interrupt()).and_then(|int| Ok((int, signal(SignalKind::terminate())?)));
    let (mut interrupt, mut terminate) = handlers.map_err(|e| CliError::other(format!("cannot handle Ctrl-C: {e}")))?;
    tokio::select! {
        result = command => result,
        _ = interrupt.recv() => Ok(None),
        _ = terminate.recv() => Ok(None),
    }
}

/// Runs `watch`: shows the lock at `path` on every change under it and every `interval`, until
/// cancelled (see [`until_interrupted`]), stdout is closed, or reading fails. `timeout` bounds
/// each server's answer to `dump`.
///
/// # Errors
///
/// As `inspect`'s reads; the session ended; stdout cannot be written.
pub async fn run(
    client: &Client,
    path: &str,
    interval: Duration,
    timeout: Duration,
    json: bool,
) -> Result<(), CliError> {
    zk_lock::path::validate_lock_path(path).map_err(|e| CliError::from_lock(path, e))?;
    // One watch for the lock's whole subtree (a semaphore's `leases` and `locks` too, and data
    // such as `__REVOKE__`), set before the first read so that no change goes unseen.
    let mut changes = client
        .zookeeper()
        .watch(path, AddWatchMode::PersistentRecursive)
        .await
        .map_err(|e| CliError::zookeeper(path, &e))?;
    let mut dumps = Dumps::new(client, timeout);
    let mut display = Display::new(json).map_err(|e| cannot_write(&e))?;
    // The warning last said on stderr.
    let mut said = None;
    loop {
        let refreshed = tokio::time::Instant::now();
        let snapshot = inspect::snapshot(client, path, &mut dumps).await?;
        match display.show(path, &snapshot, interval, &mut said) {
            Ok(()) => {}
            // `zk-lock watch /x | head` is done reading.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(cannot_write(&e)),
        }
        let next = tokio::time::Instant::now() + interval;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next) => break,
                event = changes.changed() => {
                    ended(&event)?;
                    // A busy lock changes all the time: each refresh reads the queue and asks a
                    // server for `dump`, so changes refresh at most every `MIN_GAP`, once for
                    // all the changes meanwhile.
                    tokio::time::sleep_until(refreshed + MIN_GAP.min(interval)).await;
                    drain(&mut changes).await?;
                    break;
                }
                () = display.resized() => display.redraw().map_err(|e| cannot_write(&e))?,
            }
        }
    }
}

/// The shortest time between two refreshes made for changes.
const MIN_GAP: Duration = Duration::from_millis(250);

/// Fails if `event` says the session ended, after which the watcher must not be polled again.
fn ended(event: &WatchedEvent) -> Result<(), CliError> {
    if event.event_type == EventType::Session && event.session_state.is_terminated() {
        return Err(CliError::connect(format!(
            "the zookeeper session ended ({:?}); run `zk-lock watch` again",
            event.session_state
        )));
    }
    Ok(())
}

/// Takes every event already queued, as [`ended`] checks them.
async fn drain(changes: &mut PersistentWatcher) -> Result<(), CliError> {
    loop {
        tokio::select! {
            biased;
            event = changes.changed() => ended(&event)?,
            () = std::future::ready(()) => return Ok(()),
        }
    }
}

fn cannot_write(e: &io::Error) -> CliError {
    CliError::other(format!("cannot write to stdout: {e}"))
}

/// Where refreshes go: a terminal's screen, blocks of text, or lines of JSON.
enum Display {
    Screen(Screen),
    Blocks,
    Json,
}

impl Display {
    /// JSON lines with `json`; otherwise the screen if stdout is a terminal, else blocks.
    fn new(json: bool) -> io::Result<Self> {
        if json {
            return Ok(Self::Json);
        }
        Ok(Screen::enter()?.map_or(Self::Blocks, Self::Screen))
    }

    /// Shows one refresh. Its warning (why the sessions' expiry is unknown) is part of the
    /// screen, redrawn in place; blocks and JSON lines would repeat it on every refresh, so
    /// stderr says it instead, once, and again only if it changes (`said` is the last said).
    fn show(
        &mut self,
        path: &str,
        snapshot: &Snapshot,
        interval: Duration,
        said: &mut Option<String>,
    ) -> io::Result<()> {
        let now = SystemTime::now();
        let mut report = inspect::report(path, snapshot);
        if !matches!(self, Self::Screen(_)) {
            if let Some(warning) = report.warning.take().filter(|warning| said.as_ref() != Some(warning)) {
                write_stderr(&warning);
                *said = Some(warning);
            }
        }
        match self {
            Self::Json => {
                let mut document = report.json;
                document["time_ms"] = json!(now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64));
                write_stdout(&format!("{}\n", json_text(&document, false)))
            }
            Self::Blocks => write_stdout(&format!("{}\n", frame(path, &report, now, interval, ""))),
            Self::Screen(screen) => screen.draw(&frame(path, &report, now, interval, "; Ctrl-C quits")),
        }
    }

    /// Resolves when the screen needs drawing again; never for blocks and JSON.
    async fn resized(&mut self) {
        match self {
            Self::Screen(screen) => screen.resized().await,
            _ => std::future::pending().await,
        }
    }

    fn redraw(&self) -> io::Result<()> {
        match self {
            Self::Screen(screen) => screen.redraw(),
            _ => Ok(()),
        }
    }
}

/// One refresh as text: a heading, `inspect`'s report, and why anything is missing; every line
/// [`escape`]d (the report's were as it was made; checked again).
fn frame(path: &str, report: &Report, now: SystemTime, interval: Duration, hint: &str) -> String {
    let interval = humantime::format_duration(interval);
    let now = humantime::format_rfc3339_seconds(now);
    let mut text = format!("{now}: refreshed on changes and every {interval}{hint}\n");
    if report.not_found.is_some() {
        text.push_str(&format!("{}: does not exist (yet); shown when it does\n", escape(path)));
    }
    text.push_str(&escape_lines(&report.text));
    if let Some(warning) = &report.warning {
        text.push_str(&format!("{}\n", escape(warning)));
    }
    text
}
