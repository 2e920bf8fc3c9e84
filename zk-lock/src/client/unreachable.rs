//! Why no server gave a session: each address of the connect string is resolved and dialled
//! once more, so the error can say "connection refused at 127.0.0.1:2181" or "`zk1` did not
//! resolve" rather than only that nothing answered.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::config::connect_hosts;

/// How long a probe waits for a TCP handshake.
const DIAL_TIMEOUT: Duration = Duration::from_millis(500);

/// What dialling the addresses of a connect string found.
pub(super) struct Finding {
    /// What each address does when dialled, as one sentence.
    pub(super) said: String,
    /// No host name of the connect string resolved: the names, or DNS, are at fault, not the
    /// servers.
    pub(super) none_resolved: bool,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.said)
    }
}

/// What each address of `connect_string` (`host:port[,host:port...][/chroot]`) does when dialled.
/// Blocking: DNS and TCP.
pub(super) fn diagnose(connect_string: &str) -> Finding {
    let probed: Vec<(String, bool)> = connect_hosts(connect_string).map(probe).collect();
    let none_resolved = !probed.is_empty() && probed.iter().all(|(_, resolved)| !resolved);
    let said = probed.into_iter().map(|(said, _)| said).collect::<Vec<_>>().join("; ");
    Finding { said, none_resolved }
}

/// ZooKeeper's port when a connect string gives none, as zookeeper-client assumes.
const DEFAULT_PORT: u16 = 2181;

/// `host` as zookeeper-client dials it: without its `tcp://`/`tcps://` scheme, with the default
/// port when it names none (`localhost`, `[::1]`).
fn dialled(host: &str) -> String {
    let bare = host.strip_prefix("tcp://").or_else(|| host.strip_prefix("tcps://")).unwrap_or(host);
    let has_port = match bare.strip_prefix('[') {
        Some(bracketed) => bracketed.contains("]:"),
        None => bare.contains(':'),
    };
    match has_port {
        true => bare.to_owned(),
        false => format!("{bare}:{DEFAULT_PORT}"),
    }
}

/// The host name of `host:port` (`[v6]:port`): what DNS is asked about.
fn host_name(dialled: &str) -> &str {
    let name = dialled.rsplit_once(':').map_or(dialled, |(name, _)| name);
    name.trim_start_matches('[').trim_end_matches(']')
}

/// What `host` does when dialled, and whether its name resolved.
fn probe(host: &str) -> (String, bool) {
    let host = &dialled(host);
    let addresses = match host.to_socket_addrs() {
        Ok(addresses) => addresses.collect::<Vec<_>>(),
        Err(error) => {
            let name = host_name(host);
            return (
                format!("`{host}` did not resolve: the host name `{name}` could not be resolved ({error})"),
                false,
            );
        }
    };
    let Some(address) = addresses.first() else {
        return (format!("`{host}` resolved to no address: the host name `{}` has none", host_name(host)), false);
    };
    let said = match TcpStream::connect_timeout(address, DIAL_TIMEOUT) {
        Ok(_) => format!("{address} accepts connections but gave no session"),
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("connection refused at {address}")
        }
        Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
            format!("no answer from {address} within {DIAL_TIMEOUT:?}")
        }
        Err(error) => format!("{address}: {error}"),
    };
    (said, true)
}

#[cfg(test)]
mod tests {
    use super::diagnose;

    #[test]
    fn names_the_refused_address_and_the_name_that_did_not_resolve() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let found = diagnose(&format!("{free},no-such-host.invalid:2181/chroot"));
        assert!(!found.none_resolved, "one resolved");
        let found = found.said;
        assert!(found.contains(&format!("connection refused at {free}")), "{found}");
        assert!(
            found.contains("`no-such-host.invalid:2181` did not resolve: the host name `no-such-host.invalid` could not be resolved"),
            "{found}"
        );
        let unresolved = diagnose("no-such-host.invalid:2181,other.invalid");
        assert!(unresolved.none_resolved, "{}", unresolved.said);
        assert!(unresolved.said.contains("`other.invalid`"), "{}", unresolved.said);
        assert_eq!(super::host_name("[::1]:2181"), "::1");
        assert_eq!(super::host_name("zk1:2181"), "zk1");
        assert_eq!(super::dialled("localhost"), "localhost:2181");
        assert_eq!(super::dialled("tcp://zk1"), "zk1:2181");
        assert_eq!(super::dialled("[::1]"), "[::1]:2181");
        assert_eq!(super::dialled("[::1]:2182"), "[::1]:2182");
        let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let found = diagnose(&listening.local_addr().unwrap().to_string()).said;
        assert!(found.ends_with("accepts connections but gave no session"), "{found}");
    }
}
