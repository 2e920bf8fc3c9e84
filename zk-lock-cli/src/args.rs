//! The command line, parsed by clap: the doc comments below are `zk-lock --help`.

use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Parser, Subcommand};

/// The end of `--help`: credentials and exit codes.
const AFTER_HELP: &str = "\
Credentials (for ACLs with digest entries, like creator_all): `user:password` from the file named
by --auth-file (one line; refused if other users may read or write it), else from $ZK_LOCK_DIGEST.
Never on the command line, which `ps` shows to every user; never printed.

Exit codes:
  0  success; `watch` and `dev-server` exit with 0 when stopped by Ctrl-C (SIGINT) or SIGTERM;
     `tree` also when it skipped nodes it may not read (it lists them, and says so on stderr)
  1  the path does not exist (inspect, tree), or there is no holder to revoke (revoke)
  2  usage error: unknown command or option, missing or invalid argument (path, connect string,
     duration, a --data-dir that is not a usable directory), unusable credentials (--auth-file,
     $ZK_LOCK_DIGEST)
  3  cannot connect: no ZooKeeper session within --timeout, or the connection was lost and stayed
     down for --timeout
  4  any other error: ZooKeeper refused a request (no permission, ...); dev-server could not start
     its server (Java or ZooKeeper missing, --port taken) or the server exited on its own

Errors are reported on stderr; stdout carries only the result (the JSON document with --json, also
for exit code 1).";

/// zk-lock: inspect, watch and revoke ZooKeeper locks (zk-lock, Apache Curator and kazoo layouts); run a ZooKeeper for development
#[derive(Debug, Parser)]
#[command(name = "zk-lock", version, propagate_version = true, after_help = AFTER_HELP)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
    /// ZooKeeper at host:port[,...][/chroot] [default: $ZK_LOCK_CONNECT, else 127.0.0.1:2181]
    #[arg(long, global = true, value_name = "HOSTS")]
    #[allow(rustdoc::broken_intra_doc_links)] // `[/chroot]` is help text, not a link
    connect: Option<String>,
    /// Bound on connecting, on a lost connection and on asking for `dump`, like 500ms, 1.5s or 1m 30s
    #[arg(long, global = true, value_name = "DUR", default_value = "5s", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Print one JSON document on stdout instead of tables (watch: one a line, per refresh)
    #[arg(long, global = true)]
    pub json: bool,
    /// Digest credentials from FILE: one line user:password, not readable by other users [default: $ZK_LOCK_DIGEST]
    #[arg(long, global = true, value_name = "FILE")]
    pub auth_file: Option<PathBuf>,
}

/// The commands. The first line of each doc comment is its line in `zk-lock --help`; the whole
/// comment, kept as written, heads `zk-lock <command> --help`. The display name makes
/// `zk-lock <command> --version` print `zk-lock <version>` like `zk-lock --version`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// The holders and waiters of a lock, in queue order
    ///
    /// For each: role, recipe, session, how long the server keeps the session if it hears
    /// nothing more from its client (EXPIRES-IN), fencing token, how long the node has existed
    /// (HELD/WAITING; a holder's includes its time in the queue), holder (host, pid, task).
    /// Works for mutexes, read/write locks and semaphores (PATH/locks, PATH/leases).
    ///
    /// HELD/WAITING compares the node's creation time, by the ZooKeeper leader's clock, with
    /// this machine's clock: a skew between the two clocks is part of it.
    ///
    /// EXPIRES-IN is read from the four-letter word `dump` of the leader (or standalone server)
    /// among --connect, which must allow it (4lw.commands.whitelist=srvr,dump). It is a lower
    /// bound: the server prints whole seconds and rounds expiry up to its tickTime, so the
    /// session may live up to 2s + tickTime longer. It is - when no server could tell; stderr
    /// says why, once.
    ///
    /// With --json, a node's data is "data_base64", its exact bytes in standard base64, and
    /// "data", the same as text if it is valid UTF-8, else null (watch and revoke alike).
    #[command(verbatim_doc_comment, display_name = "zk-lock")]
    Inspect {
        /// The lock, like /locks/orders
        path: String,
    },
    /// Shows `inspect` and keeps it current until interrupted (Ctrl-C: exit code 0)
    ///
    /// Refreshes at once when a node under PATH is created, deleted or written (a persistent
    /// recursive watch), and every --interval for the durations; each refresh reads the lock and
    /// asks for `dump`. PATH need not exist yet.
    ///
    /// On a terminal, redraws in place on the alternate screen, cutting lines at its edge and
    /// the table at its bottom; Ctrl-C (or SIGTERM) restores the screen. Otherwise (a pipe, a
    /// file) each refresh is printed as a block, blocks separated by a blank line; with --json,
    /// each refresh is one JSON document (inspect's, plus time_ms) on a line of its own.
    #[command(verbatim_doc_comment, display_name = "zk-lock")]
    Watch {
        /// The lock, like /locks/orders
        path: String,
        /// How often to refresh when nothing changes, like 500ms or 5s; at least 100ms
        #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_interval)]
        interval: Duration,
    },
    /// Asks every holder of a lock to let it go, and lists the nodes written to
    ///
    /// Curator's __REVOKE__ protocol: revocable holders are notified; the lock stays held until
    /// they release it. A holder is revocable when it listens for the request (a zk-lock
    /// guard's revoked() or is_revoked(), a Curator lock's makeRevocable): see docs/guide.md,
    /// "Revocation".
    ///
    /// With --force, releases a stuck lock instead: deletes its holder's node (or the node named
    /// by --node, for a lock with several holders), and says who held it and for how long. A
    /// zk-lock holder is told within its follow-up bound and its guard reports the loss; Curator
    /// and kazoo holders are not told: only fencing refuses what they write afterwards.
    #[command(verbatim_doc_comment, display_name = "zk-lock")]
    Revoke {
        /// The lock, like /locks/orders
        path: String,
        /// Delete the holder's node instead of asking
        #[arg(long)]
        force: bool,
        /// With --force: the node to delete, by name (from `inspect`) or path
        #[arg(long, value_name = "NAME", requires = "force")]
        node: Option<String>,
    },
    /// Every lock under PATH (or PATH itself) with its recipe and how many hold and wait
    ///
    /// Nodes it may not read (another application's, behind an ACL) are skipped and listed after
    /// the table; so are locks whose path is longer than a lock path may be (zk-lock cannot
    /// inspect them) and nodes whose path is that long already, below which it does not walk,
    /// each with the rule it breaks. Stderr says so once; the exit code stays 0.
    ///
    /// With --json: {"path", "exists", "locks": [{"path", "kind", "holders", "waiters",
    /// "unknown"}], "unreadable": [path...], "not_shown": [{"path", "path_length", "lock",
    /// "reason"}]}; a "path" of "not_shown" over 4096 characters is cut in the middle (...).
    #[command(verbatim_doc_comment, display_name = "zk-lock")]
    Tree {
        /// Where to start; may be /
        path: String,
    },
    /// Runs a local ZooKeeper server for development until interrupted (Ctrl-C: exit code 0)
    ///
    /// Starts one standalone ZooKeeper (3.8, Debian's `zookeeper` package run by `java`, as the
    /// testing kit zk_lock::testing does) on 127.0.0.1, and once it serves prints its connect
    /// string on stdout, like 127.0.0.1:2181, and on stderr the line to paste into other shells,
    /// `export ZK_LOCK_CONNECT=127.0.0.1:2181`, its pid, and where its data and log are.
    ///
    /// Without --data-dir, the data and the log are in a temporary directory deleted on exit.
    /// With it, they stay in DIR (created if missing; the log is DIR/zookeeper.log), and a later
    /// run on DIR serves the same nodes. One server at a time per directory.
    ///
    /// Ctrl-C (SIGINT), SIGTERM or SIGHUP (its terminal closed) stops the server and exits with
    /// 0; the JVM never outlives the command, even killed. If the server exits on its own, the
    /// command exits with 4 and prints the end of its log. Sessions may last 1s to 60s (tickTime 500ms); every
    /// four-letter word is allowed, so `inspect` shows EXPIRES-IN.
    ///
    /// It needs Java and ZooKeeper's jars: on Debian, `apt-get install zookeeper
    /// default-jre-headless` (zk-lock's scripts/install-deps), or JAVA_HOME and
    /// ZOOKEEPER_CLASSPATH.
    ///
    /// With --json, stdout is one line: {"connect", "port", "pid", "version", "data_dir", "log",
    /// "temporary"}.
    #[command(verbatim_doc_comment, display_name = "zk-lock")]
    DevServer {
        /// The client port on 127.0.0.1; 0 picks a free one
        #[arg(long, value_name = "N", default_value_t = crate::connect::DEFAULT_PORT)]
        port: u16,
        /// Keep the data and log in DIR, created if missing [default: a temporary directory, deleted on exit]
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
}

impl Args {
    /// Parses the process's arguments; prints help, the version or a usage error and exits (with
    /// 0, 0 and 2) if that is what they ask for.
    pub fn parse_or_exit() -> Self {
        Self::try_parse().unwrap_or_else(|error| explain(error).exit())
    }

    /// The ZooKeeper connect string: `--connect`, else `env_connect` (`$ZK_LOCK_CONNECT`) unless
    /// blank, else 127.0.0.1:2181.
    pub fn connect(&self, env_connect: Option<String>) -> String {
        self.connect
            .clone()
            .or(env_connect.filter(|hosts| !hosts.trim().is_empty()))
            .unwrap_or_else(|| zk_lock::config::DEFAULT_CONNECT_STRING.to_owned())
    }

    /// The option given that only commands which connect use (`--connect`, `--auth-file`), for
    /// `dev-server` to refuse.
    pub fn connection_option(&self) -> Option<&'static str> {
        match (&self.connect, &self.auth_file) {
            (Some(_), _) => Some("--connect"),
            (None, Some(_)) => Some("--auth-file"),
            (None, None) => None,
        }
    }
}

/// Lists what is allowed where clap's errors only show the usage line: after an unknown command,
/// and after an unknown option (in place of clap's tip to pass it as a value after `--`).
fn explain(mut error: clap::Error) -> clap::Error {
    let tip = match (error.kind(), error.get(ContextKind::InvalidArg)) {
        (ErrorKind::InvalidSubcommand, _) => "commands are inspect, watch, revoke, tree, dev-server and help",
        (ErrorKind::UnknownArgument, Some(ContextValue::String(arg))) if arg.starts_with('-') => {
            "options are --connect <HOSTS>, --timeout <DUR>, --json, --auth-file <FILE>, --interval <DUR> (watch), \
             --port <N> and --data-dir <DIR> (dev-server), -h/--help and -V/--version"
        }
        _ => return error,
    };
    error.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![tip.into()]));
    error
}

/// `--timeout`: a duration with units, like `500ms`, `5s`, `1.5s`, `1m30s`, `1m 30s` or `2h`,
/// more than zero. humantime's syntax, the one of the attributes' `timeout` and `max_hold`
/// (zk-lock-macros parses them with the same humantime, a workspace dependency).
fn parse_timeout(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(duration) if duration.is_zero() => Err("zero gives up at once; give it some time, like 5s".into()),
        Ok(duration) => Ok(duration),
        Err(e) => Err(format!("{e}; like 500ms, 5s or 1m30s")),
    }
}

/// The shortest `--interval`: each refresh reads the lock and asks the server for `dump`.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// `watch --interval`: a duration like `--timeout`'s, at least [`MIN_INTERVAL`].
fn parse_interval(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(interval) if interval < MIN_INTERVAL => Err(format!(
            "{} is too often: at least {}, since each refresh reads the lock and asks the server for `dump`",
            humantime::format_duration(interval),
            humantime::format_duration(MIN_INTERVAL)
        )),
        Ok(interval) => Ok(interval),
        Err(e) => Err(format!("{e}; like 500ms, 1s or 1m")),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("zk-lock").chain(args.iter().copied())).map_err(explain)
    }

    #[test]
    fn the_definition_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn options_anywhere_with_or_without_equals() {
        let parsed = parse(&["inspect", "--json", "/a", "--connect=h:1", "--timeout", "250ms"]).unwrap();
        assert_eq!(parsed.command, Command::Inspect { path: "/a".into() });
        assert_eq!(parsed.connect(None), "h:1");
        assert!(parsed.json);
        assert_eq!(parsed.timeout, Duration::from_millis(250));
        assert_eq!(parsed.auth_file, None);
        let parsed = parse(&["tree", "/", "--auth-file=/etc/zk-lock/ops"]).unwrap();
        assert_eq!(parsed.auth_file.as_deref(), Some(std::path::Path::new("/etc/zk-lock/ops")));
        let parsed = parse(&["--connect", "h:2", "tree", "--", "/"]).unwrap();
        assert_eq!((&parsed.command, parsed.json), (&Command::Tree { path: "/".into() }, false));
        assert_eq!(parsed.connect(None), "h:2");
        assert_eq!(parsed.timeout, Duration::from_secs(5));
    }

    #[test]
    fn connect_defaults_to_the_environment_then_localhost() {
        let parsed = parse(&["revoke", "/a"]).unwrap();
        assert_eq!(parsed.connect(Some("env:3".into())), "env:3");
        assert_eq!(parsed.connect(Some(" ".into())), "127.0.0.1:2181");
        assert_eq!(parsed.connect(None), "127.0.0.1:2181");
        let flag_wins = parse(&["revoke", "/a", "--connect", "f:4"]).unwrap();
        assert_eq!(flag_wins.connect(Some("env:3".into())), "f:4");
    }

    #[test]
    fn help_and_version_exit_0() {
        for (args, kind) in [
            (&["inspect", "--help"][..], ErrorKind::DisplayHelp),
            (&["help"], ErrorKind::DisplayHelp),
            (&["help", "tree"], ErrorKind::DisplayHelp),
            (&["-V"], ErrorKind::DisplayVersion),
            (&["tree", "--version"], ErrorKind::DisplayVersion),
        ] {
            let error = parse(args).unwrap_err();
            assert_eq!((error.kind(), error.exit_code()), (kind, 0), "{args:?}");
        }
        let version = parse(&["tree", "--version"]).unwrap_err().render().to_string();
        assert_eq!(version, format!("zk-lock {}\n", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn usage_errors_exit_2_and_say_what_is_allowed() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "Usage: zk-lock [OPTIONS] <COMMAND>\n\nCommands:\n  inspect "),
            (
                &["frobnicate", "/a"],
                "unrecognized subcommand 'frobnicate'\n\n  tip: commands are inspect, watch, revoke, tree",
            ),
            (&["inspect"], "the following required arguments were not provided:\n  <PATH>"),
            (&["inspect", "/a", "/b"], "unexpected argument '/b' found"),
            (&["inspect", "/a", "--bogus"], "unexpected argument '--bogus' found\n\n  tip: options are --connect"),
            (&["inspect", "/a", "--connect"], "a value is required for '--connect <HOSTS>' but none was supplied"),
            (&["inspect", "/a", "--timeout", "5"], "invalid value '5' for '--timeout <DUR>': time unit needed"),
            (&["inspect", "/a", "--timeout", "0s"], "invalid value '0s' for '--timeout <DUR>': zero gives up"),
            (&["inspect", "/a", "--json=yes"], "unexpected value 'yes' for '--json' found"),
            (&["watch", "/a", "--interval", "0s"], "invalid value '0s' for '--interval <DUR>': 0s is too often"),
        ];
        for (args, expected) in cases {
            let error = parse(args).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{args:?}");
            let message = error.render().to_string();
            assert!(message.contains(expected), "{args:?}: {message}");
        }
    }

    #[test]
    fn watch_takes_an_interval_of_at_least_100ms() {
        let parsed = parse(&["watch", "/a"]).unwrap();
        assert_eq!(parsed.command, Command::Watch { path: "/a".into(), interval: Duration::from_secs(1) });
        let parsed = parse(&["watch", "--interval=250ms", "/a", "--json"]).unwrap();
        assert_eq!(parsed.command, Command::Watch { path: "/a".into(), interval: Duration::from_millis(250) });
        assert_eq!(parse_interval("100ms"), Ok(MIN_INTERVAL));
        for (bad, reason) in [("0s", "too often"), ("99ms", "too often"), ("1", "time unit needed"), ("soon", "")] {
            let error = parse_interval(bad).unwrap_err();
            assert!(error.contains(reason), "{bad:?}: {error}");
        }
        let error = parse(&["inspect", "/a", "--interval", "1s"]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::UnknownArgument, "inspect has no --interval");
    }
    #[test]
    fn dev_server_defaults_to_port_2181_and_a_temporary_directory() {
        let parsed = parse(&["dev-server"]).unwrap();
        assert_eq!(parsed.command, Command::DevServer { port: 2181, data_dir: None });
        assert_eq!(parsed.connection_option(), None);
        let parsed = parse(&["dev-server", "--port", "0", "--data-dir=zk-data", "--json"]).unwrap();
        assert_eq!(parsed.command, Command::DevServer { port: 0, data_dir: Some(PathBuf::from("zk-data")) });
        assert!(parsed.json);
        assert_eq!(parse(&["dev-server", "--connect", "h:1"]).unwrap().connection_option(), Some("--connect"));
        assert_eq!(parse(&["--auth-file", "f", "dev-server"]).unwrap().connection_option(), Some("--auth-file"));
        for bad in ["65536", "-1", "http"] {
            let error = parse(&["dev-server", "--port", bad]).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{bad}");
        }
        let error = parse(&["inspect", "/a", "--port", "1"]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::UnknownArgument, "only dev-server has --port");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_timeout("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_timeout("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_timeout("1s500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_timeout("1.5s"), Ok(Duration::from_millis(1500)));
        for bad in ["", "5", "s", "5parsecs", "-1s", "0s", "0ms"] {
            assert!(parse_timeout(bad).is_err(), "{bad:?}");
        }
    }
}
