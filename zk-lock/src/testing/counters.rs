//! The server's own counters: the answer to the `mntr` four-letter word, parsed.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;

use super::four_letter::four_letter_word;

/// What a ZooKeeper server counts about itself, read with `mntr`.
///
/// The fields are the counters every ZooKeeper since 3.4 reports; [`get`](Self::get) and
/// [`count`](Self::count) read any other line of the answer (ZooKeeper 3.6 and later report
/// many more, such as `zk_cnt_updatelatency`, the requests that went through the write path).
///
/// Every reading is itself one packet the server receives: to count the requests a piece of
/// code sends, read the counters before and after it (on a server no one else uses, with a
/// session timeout long enough to keep pings out) and take one off the difference of
/// [`packets_received`](Self::packets_received).
///
/// ```no_run
/// # fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use zk_lock::testing::TestingServer;
///
/// let server = TestingServer::start()?;
/// let before = server.counters()?;
/// // ... the code under test ...
/// let after = server.counters()?;
/// let sent = after.packets_received - before.packets_received - 1;
/// # let _ = sent; Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerCounters {
    /// `zk_server_state`: `standalone`, `leader`, `follower` or `observer`.
    pub server_state: String,
    /// `zk_packets_received`: every request, ping and four-letter word since the server started.
    pub packets_received: u64,
    /// `zk_packets_sent`: every answer and notification.
    pub packets_sent: u64,
    /// `zk_num_alive_connections`: client connections open now.
    pub alive_connections: u64,
    /// `zk_outstanding_requests`: requests received and not yet answered. Signed: ZooKeeper's
    /// own count races with its answers and reads `-1` now and then under load.
    pub outstanding_requests: i64,
    /// `zk_znode_count`: nodes in the tree, ZooKeeper's own included.
    pub znodes: u64,
    /// `zk_watch_count`: (connection, path) watch pairs.
    pub watches: u64,
    /// `zk_ephemerals_count`: ephemeral nodes.
    pub ephemerals: u64,
    /// Every `key value` line of the answer, by key (the fields above included).
    pub all: BTreeMap<String, String>,
}

impl ServerCounters {
    /// Parses the answer to `mntr`: one `key<TAB>value` a line.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidData`] when a counter of the fields is missing or not a number,
    /// naming it; an empty answer is a server that does not allow `mntr`
    /// (`4lw.commands.whitelist`; the kit's servers allow every word).
    pub fn parse(mntr: &str) -> io::Result<ServerCounters> {
        if mntr.trim().is_empty() {
            return Err(invalid(
                "the server gave no answer to `mntr`; allow it with `4lw.commands.whitelist=mntr`".to_owned(),
            ));
        }
        let all: BTreeMap<String, String> = mntr
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
            .collect();
        let count = |key: &str| field::<u64>(&all, mntr, key);
        Ok(ServerCounters {
            server_state: all
                .get("zk_server_state")
                .cloned()
                .ok_or_else(|| invalid(format!("no `zk_server_state` in the answer to `mntr`:\n{mntr}")))?,
            packets_received: count("zk_packets_received")?,
            packets_sent: count("zk_packets_sent")?,
            alive_connections: count("zk_num_alive_connections")?,
            outstanding_requests: field::<i64>(&all, mntr, "zk_outstanding_requests")?,
            znodes: count("zk_znode_count")?,
            watches: count("zk_watch_count")?,
            ephemerals: count("zk_ephemerals_count")?,
            all,
        })
    }

    /// The value of `key` (`zk_version`, `zk_avg_latency`, ...), as the server wrote it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.all.get(key).map(String::as_str)
    }

    /// The value of `key` as a whole number: `None` when the server did not report it or
    /// reported something else (a version, an average).
    pub fn count(&self, key: &str) -> Option<u64> {
        self.get(key)?.parse().ok()
    }
}

/// The value of `key` in the answer `mntr`, parsed.
fn field<T: std::str::FromStr>(all: &BTreeMap<String, String>, mntr: &str, key: &str) -> io::Result<T> {
    match all.get(key) {
        Some(value) => value.parse().map_err(|_| invalid(format!("`{key}` is not a number in `mntr`: {value:?}"))),
        None => Err(invalid(format!("no `{key}` in the answer to `mntr`:\n{mntr}"))),
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Reads the counters of the server at `addr` with `mntr`: a few milliseconds of blocking I/O
/// on the calling thread. [`TestingServer::counters`](super::TestingServer::counters) and
/// [`TestingCluster::counters`](super::TestingCluster::counters) read those of the kit's
/// servers.
///
/// # Errors
///
/// As [`four_letter_word`](super::four_letter_word) and [`ServerCounters::parse`].
pub fn server_counters(addr: SocketAddr) -> io::Result<ServerCounters> {
    ServerCounters::parse(&four_letter_word(addr, "mntr")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MNTR: &str = "zk_version\t3.8.4-1, built on 2024-01-01 00:00 UTC\n\
        zk_server_state\tstandalone\n\
        zk_avg_latency\t0.1234\n\
        zk_packets_received\t42\n\
        zk_packets_sent\t41\n\
        zk_num_alive_connections\t2\n\
        zk_outstanding_requests\t0\n\
        zk_znode_count\t7\n\
        zk_watch_count\t3\n\
        zk_ephemerals_count\t1\n\
        zk_cnt_updatelatency\t12\n";

    #[test]
    fn the_fields_and_every_other_line_are_read() {
        let counters = ServerCounters::parse(MNTR).unwrap();
        assert_eq!(counters.server_state, "standalone");
        assert_eq!((counters.packets_received, counters.packets_sent, counters.alive_connections), (42, 41, 2));
        assert_eq!(
            (counters.outstanding_requests, counters.znodes, counters.watches, counters.ephemerals),
            (0, 7, 3, 1)
        );
        assert_eq!(counters.count("zk_cnt_updatelatency"), Some(12));
        assert_eq!(counters.get("zk_avg_latency"), Some("0.1234"));
        assert_eq!(counters.count("zk_avg_latency"), None, "not a whole number");
        assert_eq!(counters.count("zk_no_such_counter"), None);
    }

    #[test]
    fn a_missing_counter_or_an_empty_answer_is_named() {
        let without = MNTR.replace("zk_watch_count\t3\n", "");
        let err = ServerCounters::parse(&without).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("zk_watch_count"), "{err}");
        let err = ServerCounters::parse("").unwrap_err();
        assert!(err.to_string().contains("4lw.commands.whitelist"), "{err}");
        let err = ServerCounters::parse(&MNTR.replace("\t42", "\tmany")).unwrap_err();
        assert!(err.to_string().contains("zk_packets_received"), "{err}");
    }

    #[test]
    fn outstanding_requests_may_read_minus_one() {
        // ZooKeeper 3.8 under load: its count of outstanding requests races with its answers.
        let racing = MNTR.replace("zk_outstanding_requests\t0", "zk_outstanding_requests\t-1");
        assert_eq!(ServerCounters::parse(&racing).unwrap().outstanding_requests, -1);
    }
}
