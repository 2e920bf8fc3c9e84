//! Connecting, with every wait bounded by `--timeout`: a dead server must not hang a script.

use std::future::Future;
use std::time::Duration;

use zk_lock::Client;
use zookeeper_client::SessionState;

use crate::credentials::Digest;
use crate::error::CliError;

/// The port ZooKeeper clients use when the connect string names none, and `dev-server`'s.
pub const DEFAULT_PORT: u16 = 2181;

/// One server of a connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// A host name or an IP address (IPv6 without brackets).
    pub host: String,
    /// The client port.
    pub port: u16,
    /// Whether it is a TLS port (`tcp+tls://`).
    pub tls: bool,
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "[{}]:{}", self.host, self.port),
            false => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// Checks `connect` against the grammar zookeeper-client accepts,
/// `[tcp://|tcp+tls://]host[:port][,...][/chroot]`, so a typo is a usage error naming the bad
/// part rather than a connection failure.
pub fn validate_connect_string(connect: &str) -> Result<(), CliError> {
    servers(connect).map(drop)
}

/// The servers of `connect`, in its order; a usage error naming the bad part if it does not
/// follow the grammar of [`validate_connect_string`].
pub fn servers(connect: &str) -> Result<Vec<Server>, CliError> {
    let invalid = |what: String| {
        CliError::usage(format!(
            "invalid `--connect {connect}`: {what}; expected host:port[,host:port...][/chroot], like 127.0.0.1:2181"
        ))
    };
    let (hosts, chroot) = split_chroot(connect);
    if hosts.trim().is_empty() {
        return Err(invalid("no host given".into()));
    }
    let mut servers = Vec::new();
    for entry in hosts.split(',') {
        let tls = entry.starts_with("tcp+tls://");
        let address = entry.strip_prefix("tcp://").or_else(|| entry.strip_prefix("tcp+tls://")).unwrap_or(entry);
        let (host, port) = if let Some(bracketed) = address.strip_prefix('[') {
            let Some((host, rest)) = bracketed.split_once(']') else {
                return Err(invalid(format!("`{entry}` opens `[` without closing it")));
            };
            match rest {
                "" => (host, None),
                _ => match rest.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(invalid(format!("`{entry}` has `{rest}` after the address"))),
                },
            }
        } else {
            match address.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (address, None),
            }
        };
        if host.is_empty() {
            return Err(invalid(format!("`{entry}` has no host")));
        }
        if host.chars().any(|c| c.is_whitespace() || c.is_control() || c == '/') {
            return Err(invalid(format!("host `{host}` contains whitespace or `/`")));
        }
        let port = match port {
            None => DEFAULT_PORT,
            Some(port) => match port.parse::<u16>() {
                Ok(port @ 1..) => port,
                _ => return Err(invalid(format!("port `{port}` of `{entry}` is not a number from 1 to 65535"))),
            },
        };
        servers.push(Server { host: host.to_owned(), port, tls });
    }
    if let Some(chroot) = chroot.filter(|&chroot| chroot != "/") {
        zk_lock::path::validate_lock_path(chroot).map_err(|e| invalid(format!("bad chroot: {e}")))?;
    }
    Ok(servers)
}

/// Splits off the chroot, which follows the last host (zookeeper-client's rule).
fn split_chroot(connect: &str) -> (&str, Option<&str>) {
    let last_start = connect.rfind(',').map_or(0, |i| i + 1);
    let last = &connect[last_start..];
    let scheme = ["tcp://", "tcp+tls://"].into_iter().find(|scheme| last.starts_with(scheme)).map_or(0, str::len);
    match last[scheme..].find('/') {
        Some(i) => {
            let (hosts, chroot) = connect.split_at(last_start + scheme + i);
            (hosts, Some(chroot))
        }
        None => (connect, None),
    }
}

/// Opens a session, authenticated with `credentials` if any, giving up after `timeout`.
pub async fn connect(connect: &str, timeout: Duration, credentials: Option<&Digest>) -> Result<Client, CliError> {
    validate_connect_string(connect)?;
    let mut builder = Client::builder(connect).connect_timeout(timeout);
    if let Some(digest) = credentials {
        // zookeeper-client's `with_auth`, sent again on every reconnection.
        builder = builder.auth("digest", digest.as_bytes());
    }
    builder.connect().await.map_err(|e| CliError::from_lock("", e))
}

/// Runs `operation`, failing with exit code 3 if the connection is lost and stays down for
/// `timeout`: the runtime crate waits for a reconnection as long as it takes, a CLI must not.
pub async fn bounded<T>(
    client: &Client,
    timeout: Duration,
    operation: impl Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    tokio::select! {
        result = operation => result,
        state = disconnected_for(client, timeout) => Err(CliError::connect(format!(
            "lost the connection to zookeeper at `{}` ({state:?}) and it did not come back within {timeout:?}",
            client.connect_string()
        ))),
    }
}

/// Resolves once the session has been disconnected for `timeout` without a break, or has ended.
async fn disconnected_for(client: &Client, timeout: Duration) -> SessionState {
    let mut states = client.zookeeper().state_watcher();
    let mut state = states.state();
    loop {
        match state {
            SessionState::Expired | SessionState::Closed | SessionState::AuthFailed => return state,
            SessionState::Disconnected => match tokio::time::timeout(timeout, states.changed()).await {
                Ok(next) => state = next,
                Err(_) => return state,
            },
            _ => state = states.changed().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{servers, validate_connect_string, Server};

    #[test]
    fn accepts_what_zookeeper_accepts() {
        for good in [
            "127.0.0.1:2181",
            "zk1:2181,zk2:2182,zk3",
            "zk1:2181,zk2:2181/app",
            "[::1]:2181",
            "[::1]",
            "tcp://zk1:2181,tcp+tls://zk2:2281/chroot",
            "localhost/",
        ] {
            validate_connect_string(good).unwrap_or_else(|e| panic!("{good}: {}", e.message));
        }
    }

    #[test]
    fn rejects_with_the_bad_part_named() {
        for (bad, named) in [
            ("", "no host"),
            ("127.0.0.1:notaport", "port `notaport`"),
            ("zk1:0", "port `0`"),
            ("zk1:70000", "port `70000`"),
            ("zk1:2181,,zk2", "`` has no host"),
            (":2181", "has no host"),
            ("[::1", "without closing"),
            ("zk 1:2181", "whitespace"),
            ("zk1:2181/a//b", "bad chroot"),
            ("zk1/app,zk2", "`zk1/app`"),
        ] {
            let error = validate_connect_string(bad).unwrap_err();
            assert_eq!(error.code, crate::error::USAGE);
            assert!(error.message.contains(named), "{bad:?}: {}", error.message);
        }
    }

    #[test]
    fn lists_the_servers_with_default_ports() {
        let server = |host: &str, port, tls| Server { host: host.into(), port, tls };
        let found = servers("zk1:2182,[::1],tcp+tls://zk3:2281/app").unwrap();
        assert_eq!(found, [server("zk1", 2182, false), server("::1", 2181, false), server("zk3", 2281, true)]);
        assert_eq!(found[1].to_string(), "[::1]:2181");
        assert_eq!(found[0].to_string(), "zk1:2182");
    }
}
