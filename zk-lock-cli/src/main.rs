//! `zk-lock`: inspect, watch, revoke and list ZooKeeper locks (zk-lock, Apache Curator and kazoo),
//! and run a local ZooKeeper for development.
//!
//! Run `zk-lock --help` for commands, options and exit codes.

mod args;
mod connect;
mod credentials;
mod dev_server;
mod error;
mod inspect;
mod output;
mod revoke;
mod session_expiry;
mod terminal;
mod tree;
mod watch;

use std::process::ExitCode;

use args::{Args, Command};
use error::CliError;
use output::Report;

fn main() -> ExitCode {
    let args = Args::parse_or_exit();
    ExitCode::from(execute(&args))
}

/// Runs one command and prints its result; returns the exit code.
fn execute(args: &Args) -> u8 {
    // One thread is plenty: the runtime crate does its ZooKeeper I/O on a thread of its own.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&CliError::other(format!("cannot start tokio: {e}"))),
    };
    if let Command::DevServer { port, data_dir } = &args.command {
        // It prints as it goes, and talks to no server but its own.
        return match runtime.block_on(dev_server::run(args, *port, data_dir.as_deref())) {
            Ok(()) => error::SUCCESS,
            Err(error) => fail(&error),
        };
    }
    let outcome = runtime.block_on(run(args));
    match outcome {
        // `watch` printed as it went.
        Ok(None) => error::SUCCESS,
        Ok(Some(report)) => {
            // What the server said is escaped where it enters the report; the whole is checked
            // again on the way out.
            let stdout = match args.json {
                true => format!("{}\n", output::json_text(&report.json, true)),
                false => output::escape_lines(&report.text).into_owned(),
            };
            let printed = print(&stdout);
            if let Some(warning) = &report.warning {
                output::write_stderr(warning);
            }
            match report.not_found {
                Some(message) if printed == error::SUCCESS => {
                    output::write_stderr(&message);
                    error::NOT_FOUND
                }
                _ => printed,
            }
        }
        Err(error) => fail(&error),
    }
}

/// Connects and runs the command: its report, or `None` for `watch`, which prints as it goes.
async fn run(args: &Args) -> Result<Option<Report>, CliError> {
    let connect_string = args.connect(std::env::var(zk_lock::config::CONNECT_ENV).ok());
    let credentials = credentials::load(args.auth_file.as_deref(), std::env::var_os(credentials::DIGEST_ENV))?;
    let outcome = run_with(args, &connect_string, credentials.as_ref()).await;
    outcome.map_err(|error| error.with_credentials(credentials.as_ref()))
}

/// [`run`] with the connect string and credentials found.
async fn run_with(
    args: &Args,
    connect_string: &str,
    credentials: Option<&credentials::Digest>,
) -> Result<Option<Report>, CliError> {
    // What needs no server is checked first: a bad path costs no connection attempt.
    check_path(&args.command)?;
    let watching = matches!(args.command, Command::Watch { .. });
    let connecting = connect::connect(connect_string, args.timeout, credentials);
    let client = match watching {
        // Ctrl-C is how `watch` ends, even while it is still connecting.
        true => match watch::until_interrupted(async { connecting.await.map(Some) }).await? {
            Some(client) => client,
            None => return Ok(None),
        },
        false => connecting.await?,
    };
    let command = async {
        match &args.command {
            Command::Inspect { path } => inspect::run(&client, path, args.timeout).await.map(Some),
            Command::Watch { path, interval } => {
                watch::run(&client, path, *interval, args.timeout, args.json).await.map(|()| None)
            }
            Command::Revoke { path, force: false, .. } => revoke::run(&client, path).await.map(Some),
            Command::Revoke { path, force: true, node } => {
                revoke::force(&client, path, node.as_deref()).await.map(Some)
            }
            Command::Tree { path } => tree::run(&client, path).await.map(Some),
            Command::DevServer { .. } => Ok(None),
        }
    };
    let bounded = connect::bounded(&client, args.timeout, command);
    // Interrupted, `watch` still gets to the close below: only the command is dropped.
    let outcome = if watching { watch::until_interrupted(bounded).await } else { bounded.await };
    // Ends the command's session on the server now rather than after its timeout: it does
    // not stay listed among the server's sessions. An unreachable server expires it anyway.
    let _ = tokio::time::timeout(CLOSE_PATIENCE, client.close()).await;
    outcome
}

/// Refuses a command's path that no lock can have (`tree /` lists from the root).
fn check_path(command: &Command) -> Result<(), CliError> {
    let path = match command {
        Command::Tree { path } if path == "/" => return Ok(()),
        Command::DevServer { .. } => return Ok(()),
        Command::Inspect { path }
        | Command::Watch { path, .. }
        | Command::Revoke { path, .. }
        | Command::Tree { path } => path,
    };
    zk_lock::path::validate_lock_path(path).map_err(|e| CliError::from_lock(path, e))
}

/// How long the command waits for the server to confirm that its session ended.
const CLOSE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// Writes to stdout; a closed pipe (`zk-lock tree / | head`) is not worth a panic.
fn print(text: &str) -> u8 {
    match output::write_stdout(text) {
        Ok(()) => error::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => error::SUCCESS,
        Err(e) => {
            output::write_stderr(&format!("cannot write the result: {e}"));
            error::ZOOKEEPER
        }
    }
}

fn fail(error: &CliError) -> u8 {
    output::write_stderr(&error.message);
    error.code
}
