//! The command line: `zk-lock [OPTIONS] <COMMAND> <PATH>`, parsed by hand (the grammar is tiny and
//! a parser crate would be most of the binary's build time).

use std::time::Duration;

use crate::error::CliError;

/// Connecting gives up after this long unless `--timeout` says otherwise: long enough for a
/// server across a WAN, short enough for a script to notice a dead one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The help text, printed by `-h`, `--help` and `zk-lock help`.
pub const HELP: &str = "\
zk-lock: inspect and revoke ZooKeeper locks (zk-lock, Apache Curator and kazoo layouts)

USAGE:
    zk-lock [OPTIONS] <COMMAND> <PATH>

COMMANDS:
    inspect <PATH>   the holders and waiters of the lock at PATH, in queue order: role, recipe,
                     holder (host, pid, task), session, fencing token, how long held or waited.
                     Works for mutexes, read/write locks and semaphores (PATH/locks, PATH/leases).
    revoke <PATH>    asks every holder of the lock at PATH to let it go (Curator's __REVOKE__
                     protocol: revocable holders are notified; the lock stays held until they
                     release it), and lists the nodes written to
    tree <PATH>      every lock under PATH (or PATH itself) with its recipe and how many hold and
                     wait; PATH may be /
    help             prints this help

OPTIONS:
    --connect <HOSTS>    ZooKeeper connect string, host:port[,host:port...][/chroot]
                         [default: $ZK_LOCK_CONNECT, else 127.0.0.1:2181]
    --timeout <DUR>      how long to wait for a session, and for a lost connection to come back,
                         like 500ms, 5s or 1m30s [default: 5s]
    --json               print one JSON document on stdout instead of tables
    -h, --help           prints this help
    -V, --version        prints the version

EXIT CODES:
    0    success
    1    the path does not exist (inspect, tree), or there is no holder to revoke (revoke)
    2    usage error: unknown command or option, missing or invalid argument (path, connect
         string, duration)
    3    cannot connect: no ZooKeeper session within --timeout, or the connection was lost
         and stayed down for --timeout
    4    any other error: ZooKeeper refused a request (no permission, ...)

Errors are reported on stderr; stdout carries only the result (the JSON document with --json,
also for exit code 1).
";

/// What to do, from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Run a command.
    Run(Args),
    /// Print [`HELP`].
    Help,
    /// Print the version.
    Version,
}

/// A command and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The command to run.
    pub command: Command,
    /// The lock path (or subtree root for `tree`), as given; checked by the command.
    pub path: String,
    /// The ZooKeeper connect string.
    pub connect: String,
    /// Print JSON instead of tables.
    pub json: bool,
    /// Bound on connecting and on waiting for a lost connection.
    pub timeout: Duration,
}

/// The commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `inspect <path>`.
    Inspect,
    /// `revoke <path>`.
    Revoke,
    /// `tree <path>`.
    Tree,
}

impl Command {
    fn parse(word: &str) -> Option<Self> {
        match word {
            "inspect" => Some(Self::Inspect),
            "revoke" => Some(Self::Revoke),
            "tree" => Some(Self::Tree),
            _ => None,
        }
    }
}

/// Parses the arguments after the program name. `env_connect` is `$ZK_LOCK_CONNECT`.
///
/// Options may come before or after the command; `--opt value` and `--opt=value` both work, and
/// `--` ends the options.
pub fn parse(args: impl IntoIterator<Item = String>, env_connect: Option<String>) -> Result<Invocation, CliError> {
    let mut args = args.into_iter();
    let mut connect = None;
    let mut timeout = None;
    let mut json = false;
    let mut positional = Vec::new();
    let mut options_ended = false;
    while let Some(arg) = args.next() {
        if options_ended || !arg.starts_with('-') || arg == "-" {
            positional.push(arg);
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| {
            inline.clone().or_else(|| args.next()).ok_or_else(|| CliError::usage(format!("`{name}` needs a value")))
        };
        match name {
            "--" => options_ended = true,
            "-h" | "--help" => return Ok(Invocation::Help),
            "-V" | "--version" => return Ok(Invocation::Version),
            "--json" if inline.is_none() => json = true,
            "--json" => return Err(CliError::usage("`--json` takes no value")),
            "--connect" => connect = Some(value(name)?),
            "--timeout" => timeout = Some(parse_duration(&value(name)?)?),
            _ => {
                return Err(CliError::usage(format!(
                    "unknown option `{name}`; options are --connect, --timeout, --json, --help, --version"
                )))
            }
        }
    }

    let mut positional = positional.into_iter();
    let Some(word) = positional.next() else {
        return Err(CliError::usage("no command given; expected one of: inspect, revoke, tree"));
    };
    if word == "help" {
        return Ok(Invocation::Help);
    }
    let command = Command::parse(&word).ok_or_else(|| {
        CliError::usage(format!("unknown command `{word}`; expected one of: inspect, revoke, tree, help"))
    })?;
    let path = positional
        .next()
        .ok_or_else(|| CliError::usage(format!("`{word}` needs a lock path, like `{word} /locks/orders`")))?;
    if let Some(extra) = positional.next() {
        return Err(CliError::usage(format!("unexpected argument `{extra}`; `{word}` takes one path")));
    }
    let connect = connect
        .or(env_connect.filter(|hosts| !hosts.trim().is_empty()))
        .unwrap_or_else(|| zk_lock::DEFAULT_CONNECT_STRING.to_owned());
    Ok(Invocation::Run(Args { command, path, connect, json, timeout: timeout.unwrap_or(DEFAULT_TIMEOUT) }))
}

/// Parses `250ms`, `5s`, `1m30s`, `2h`: one or more `<integer><unit>` parts, unit `ms`, `s`, `m`
/// or `h`. A bare number is refused: its unit would be a guess.
pub fn parse_duration(text: &str) -> Result<Duration, CliError> {
    let invalid = || {
        CliError::usage(format!(
            "invalid duration `{text}` for `--timeout`; use a number with a unit: 500ms, 5s, 2m, 1m30s"
        ))
    };
    let mut rest = text;
    let mut total = Duration::ZERO;
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let number: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_alphabetic()).len();
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.saturating_mul(60)),
            "h" => Duration::from_secs(number.saturating_mul(3600)),
            _ => return Err(invalid()),
        };
        total = total.saturating_add(part);
        rest = &rest[unit_len..];
    }
    if total.is_zero() {
        return Err(CliError::usage(format!("`--timeout {text}` is zero; give it some time, like 5s")));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Invocation, CliError> {
        parse(args.iter().map(|a| a.to_string()), None)
    }

    fn args(args: &[&str]) -> Args {
        match run(args) {
            Ok(Invocation::Run(args)) => args,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn options_anywhere_with_or_without_equals() {
        let parsed = args(&["inspect", "--json", "/a", "--connect=h:1", "--timeout", "250ms"]);
        assert_eq!(parsed.command, Command::Inspect);
        assert_eq!(parsed.path, "/a");
        assert_eq!(parsed.connect, "h:1");
        assert!(parsed.json);
        assert_eq!(parsed.timeout, Duration::from_millis(250));
        let parsed = args(&["--connect", "h:2", "tree", "--", "/"]);
        assert_eq!((parsed.command, parsed.path.as_str(), parsed.json), (Command::Tree, "/", false));
        assert_eq!(parsed.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn connect_defaults_to_the_environment_then_localhost() {
        let from_env = parse(["revoke".into(), "/a".into()], Some("env:3".into())).unwrap();
        assert!(matches!(from_env, Invocation::Run(Args { connect, .. }) if connect == "env:3"));
        let flag_wins = parse(["revoke", "/a", "--connect", "f:4"].map(String::from), Some("env:3".into())).unwrap();
        assert!(matches!(flag_wins, Invocation::Run(Args { connect, .. }) if connect == "f:4"));
        assert_eq!(args(&["revoke", "/a"]).connect, "127.0.0.1:2181");
    }

    #[test]
    fn help_and_version_win() {
        assert_eq!(run(&["inspect", "--help"]).unwrap(), Invocation::Help);
        assert_eq!(run(&["help"]).unwrap(), Invocation::Help);
        assert_eq!(run(&["-V"]).unwrap(), Invocation::Version);
    }

    #[test]
    fn usage_errors_say_what_is_allowed() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "no command"),
            (&["frobnicate", "/a"], "unknown command `frobnicate`"),
            (&["inspect"], "needs a lock path"),
            (&["inspect", "/a", "/b"], "unexpected argument `/b`"),
            (&["inspect", "/a", "--bogus"], "unknown option `--bogus`"),
            (&["inspect", "/a", "--connect"], "`--connect` needs a value"),
            (&["inspect", "/a", "--timeout", "5"], "invalid duration `5`"),
            (&["inspect", "/a", "--json=yes"], "takes no value"),
        ];
        for (args, expected) in cases {
            let error = run(args).unwrap_err();
            assert_eq!(error.code, crate::error::USAGE, "{args:?}");
            assert!(error.message.contains(expected), "{args:?}: {}", error.message);
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("1s500ms").unwrap(), Duration::from_millis(1500));
        for bad in ["", "5", "s", "5 s", "5parsecs", "-1s", "0s", "1.5s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
