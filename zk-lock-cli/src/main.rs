//! `zk-lock`: inspect, revoke and list ZooKeeper locks (zk-lock, Apache Curator and kazoo).
//!
//! Run `zk-lock --help` for commands, options and exit codes.

mod args;
mod connect;
mod error;
mod inspect;
mod output;
mod revoke;
mod tree;

use std::io::Write;
use std::process::ExitCode;

use args::{Args, Command, Invocation};
use error::CliError;
use output::Report;

fn main() -> ExitCode {
    let invocation = args::parse(std::env::args().skip(1), std::env::var(zk_lock::CONNECT_ENV).ok());
    let code = match invocation {
        Ok(Invocation::Help) => print(args::HELP),
        Ok(Invocation::Version) => print(&format!("zk-lock {}\n", env!("CARGO_PKG_VERSION"))),
        Ok(Invocation::Run(args)) => execute(&args),
        Err(error) => fail(&error, true),
    };
    ExitCode::from(code)
}

/// Runs one command and prints its result; returns the exit code.
fn execute(args: &Args) -> u8 {
    // One thread is plenty: the runtime crate does its ZooKeeper I/O on a thread of its own.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            return fail(&CliError { code: error::ZOOKEEPER, message: format!("cannot start tokio: {e}") }, false)
        }
    };
    match runtime.block_on(run(args)) {
        Ok(report) => {
            let stdout = if args.json { format!("{:#}\n", report.json) } else { report.text };
            let printed = print(&stdout);
            match report.not_found {
                Some(message) if printed == error::SUCCESS => {
                    eprintln!("zk-lock: {message}");
                    error::NOT_FOUND
                }
                _ => printed,
            }
        }
        Err(error) => fail(&error, false),
    }
}

async fn run(args: &Args) -> Result<Report, CliError> {
    let client = connect::connect(&args.connect, args.timeout).await?;
    let command = async {
        match args.command {
            Command::Inspect => inspect::run(&client, &args.path).await,
            Command::Revoke => revoke::run(&client, &args.path).await,
            Command::Tree => tree::run(&client, &args.path).await,
        }
    };
    connect::bounded(&client, args.timeout, command).await
}

/// Writes to stdout; a closed pipe (`zk-lock tree / | head`) is not worth a panic.
fn print(text: &str) -> u8 {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => error::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => error::SUCCESS,
        Err(e) => {
            eprintln!("zk-lock: cannot write the result: {e}");
            error::ZOOKEEPER
        }
    }
}

fn fail(error: &CliError, usage_hint: bool) -> u8 {
    eprintln!("zk-lock: {}", error.message);
    if usage_hint && error.code == error::USAGE {
        eprintln!(
            "usage: zk-lock [--connect <HOSTS>] [--timeout <DUR>] [--json] <inspect|revoke|tree> <PATH>; see --help"
        );
    }
    error.code
}
