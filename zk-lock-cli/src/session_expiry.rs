//! How long the server keeps each session if it hears nothing more: the four-letter word `dump`.
//!
//! On a standalone server or an ensemble's leader, `dump` files every session under the time
//! the server will expire it (`Session Sets (..)`, then `1 expire at Tue Nov 24 20:05:24 UTC
//! 2026:` and a `0x..` session id a line). Each request or ping of a session files it again, under
//! `now + timeout` rounded up to a multiple of tickTime; dates are printed to the second, in the
//! server's time zone. A follower lists only timeouts; any server answers only if its
//! `4lw.commands.whitelist` names `dump` (the default names `srvr` alone). The AdminServer's
//! `/commands/dump` keys the same map by the server's monotonic clock, on a port of its own.
//!
//! The dates are read against this command's own session, renewed by the reads just made: its
//! date is `now + its timeout` by the server's clock, so neither the local clock nor the time zone
//! matters. The figure is a lower bound: the server keeps the session at least that long, and at
//! most 2s + tickTime longer (both dates are truncated to the second, ours is rounded up to a
//! tick). An ensemble's leader hears of sessions' activity from followers every half tick, which
//! can move the figure by as much.

use std::collections::HashMap;
use std::time::{Duration, Instant, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use zk_lock::Client;

use crate::connect::{self, Server};

/// What the server says of the sessions' expiry, as of its answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionExpiry {
    /// The server that answered, as `host:port`; `None` if none could.
    pub from: Option<String>,
    /// Why no server could tell, one reason per server; `None` if one could.
    pub unknown: Option<String>,
    /// The least time each listed session has left.
    left: HashMap<i64, Duration>,
}

impl SessionExpiry {
    /// Nothing known, for `reason`.
    fn unknown(reason: String) -> Self {
        Self { from: None, unknown: Some(reason), left: HashMap::new() }
    }

    /// The least time session `id` has left; `None` if it is unknown or not listed (it has just
    /// ended).
    pub fn left(&self, id: i64) -> Option<Duration> {
        self.left.get(&id).copied()
    }
}

/// After no server could tell, how long [`Dumps::read`] gives the same answer before asking
/// again: a server that does not answer costs `--timeout`, which `watch` should not pay each
/// refresh.
const ASK_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// Asks the servers of a client's connect string for `dump`, remembering the one that answered
/// (the leader, in an ensemble) to ask it alone next time.
pub struct Dumps {
    servers: Vec<Server>,
    answered: Option<usize>,
    /// When no server could tell, and what was said of it.
    failed: Option<(Instant, SessionExpiry)>,
    /// The bound on each server's answer: `--timeout`.
    timeout: Duration,
}

impl Dumps {
    /// For the servers `client` connects to.
    pub fn new(client: &Client, timeout: Duration) -> Self {
        // Validated before connecting; an empty list only says so below.
        let servers = connect::servers(client.connect_string()).unwrap_or_default();
        Self { servers, answered: None, failed: None, timeout }
    }

    /// What server `i` told: the time each session has `left`.
    fn told_by(&self, i: usize, left: HashMap<i64, Duration>) -> SessionExpiry {
        SessionExpiry { from: Some(self.servers[i].to_string()), unknown: None, left }
    }

    /// Asks for `dump`: the server that answered last, else every server at once, taking the
    /// first that lists session expiry. `renewed` is an instant before the latest request
    /// `client` sent (which renewed its session). Failures are reasons in the result; after one,
    /// the servers are asked again only [`ASK_AGAIN_AFTER`] later.
    pub async fn read(&mut self, client: &Client, renewed: Instant) -> SessionExpiry {
        if let Some((when, failure)) = &self.failed {
            if when.elapsed() < ASK_AGAIN_AFTER {
                return failure.clone();
            }
        }
        let zookeeper = client.zookeeper();
        let own = OwnSession { id: zookeeper.session_id().0, timeout: zookeeper.session_timeout(), renewed };
        if let Some(i) = self.answered {
            if let Ok(left) = own.measure_at(self.servers[i].clone(), self.timeout).await {
                return self.told_by(i, left);
            }
        }
        self.answered = None;
        let mut asks = JoinSet::new();
        for (i, server) in self.servers.iter().enumerate() {
            let (server, timeout, own) = (server.clone(), self.timeout, own.clone());
            asks.spawn(async move { (i, own.measure_at(server, timeout).await) });
        }
        let mut reasons = vec![String::new(); self.servers.len()];
        while let Some(Ok((i, measured))) = asks.join_next().await {
            match measured {
                Ok(left) => {
                    (self.answered, self.failed) = (Some(i), None);
                    return self.told_by(i, left);
                }
                Err(reason) => reasons[i] = format!("{}: {reason}", self.servers[i]),
            }
        }
        reasons.retain(|reason| !reason.is_empty());
        let failure =
            SessionExpiry::unknown(if reasons.is_empty() { "no server to ask".to_owned() } else { reasons.join("; ") });
        self.failed = Some((Instant::now(), failure.clone()));
        failure
    }
}

/// A server's answer to `dump` and when it arrived.
struct Answer {
    text: String,
    arrived: Instant,
}

/// Sends `dump` to `server` and reads its answer, within `timeout`.
async fn ask(server: Server, timeout: Duration) -> Result<Answer, String> {
    if server.tls {
        return Err("a TLS port; `dump` is asked on plain client ports only".to_owned());
    }
    let exchange = async {
        let mut stream = TcpStream::connect((server.host.as_str(), server.port)).await?;
        stream.write_all(b"dump").await?;
        // The server answers and closes; half-closing tells it no more is coming.
        stream.shutdown().await?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await?;
        Ok::<_, std::io::Error>(text)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(text)) => Ok(Answer { text, arrived: Instant::now() }),
        Ok(Err(e)) => Err(format!("cannot ask it for `dump`: {e}")),
        Err(_) => Err(format!("no answer to `dump` within {}", humantime::format_duration(timeout))),
    }
}

/// This command's own session: the yardstick for the others.
#[derive(Clone)]
struct OwnSession {
    id: i64,
    timeout: Duration,
    renewed: Instant,
}

/// How many times a server whose dump lacks our own session is asked again, and after how
/// long: a 3-server ensemble's leader was seen (once, in a full test run) to answer with a dump
/// that lacked this command's live, global session: it is asked again before giving up on it.
const OWN_SESSION_MISSING_RETRIES: usize = 2;
const OWN_SESSION_MISSING_PAUSE: Duration = Duration::from_millis(50);

/// Why a dump cannot be measured when it lacks our own session.
const OWN_SESSION_MISSING: &str =
    "its dump lacks this command's own session (a local session of another server?), the yardstick for the others";

impl OwnSession {
    /// Asks `server` for `dump` and measures it against our session, asking again a little
    /// later (a few times) if it lacks our session.
    async fn measure_at(&self, server: Server, timeout: Duration) -> Result<HashMap<i64, Duration>, String> {
        let mut retries = OWN_SESSION_MISSING_RETRIES;
        loop {
            let measured = ask(server.clone(), timeout).await.and_then(|answer| self.measure(&answer));
            match measured {
                Err(reason) if reason == OWN_SESSION_MISSING && retries > 0 => {
                    retries -= 1;
                    tokio::time::sleep(OWN_SESSION_MISSING_PAUSE).await;
                }
                measured => return measured,
            }
        }
    }

    /// The least time each session in `answer` has left when it arrived.
    ///
    /// The server renewed our session at some `t` after `renewed`, and filed it under a date
    /// after `t + timeout`, printed truncated to the second (`own`). The answer was written
    /// before it arrived, so then `now <= t + since_renewed < own + 1s - timeout +
    /// since_renewed`; a session filed under a date printed as `date` has more than `date - own
    /// + timeout - 1s - since_renewed` left.
    fn measure(&self, answer: &Answer) -> Result<HashMap<i64, Duration>, String> {
        let dates = parse_dump(&answer.text)?;
        let own = dates.get(&self.id).ok_or(OWN_SESSION_MISSING)?;
        let since_renewed = answer.arrived.saturating_duration_since(self.renewed);
        let slack_ms = self.timeout.as_millis() as i64 - 1000 - since_renewed.as_millis() as i64;
        Ok(dates
            .iter()
            // A session filed across a daylight saving change is not worth a time zone database.
            .filter(|(_, date)| date.zone == own.zone)
            .map(|(&id, date)| {
                let left_ms = (date.seconds - own.seconds) * 1000 + slack_ms;
                (id, Duration::from_millis(left_ms.max(0) as u64))
            })
            .collect())
    }
}

/// A date as `dump` prints it: seconds since 1970 on the server's wall clock read as UTC (good
/// for differences), and the name of its time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Date {
    seconds: i64,
    zone: String,
}

/// The expiry date of each session in a `dump` answer; why there is none otherwise.
fn parse_dump(text: &str) -> Result<HashMap<i64, Date>, String> {
    if text.contains("is not executed because it is not in the whitelist") {
        return Err("`dump` is not in its 4lw.commands.whitelist (the default allows `srvr` only)".to_owned());
    }
    if text.contains("not currently serving requests") {
        return Err("it is not serving requests".to_owned());
    }
    if text.contains("Global Sessions(") {
        return Err("a follower or observer, which knows only session timeouts; the leader knows expiry".to_owned());
    }
    if text.trim().is_empty() {
        return Err("it closed the connection without answering `dump`".to_owned());
    }
    let mut dates = HashMap::new();
    let mut listed = false;
    let mut date = None;
    for line in text.lines() {
        if line.starts_with("ephemeral nodes dump") {
            break; // Connections come next, in sets that also "expire at".
        }
        if line.contains("Session Sets (") {
            listed = true;
        } else if let Some((_, printed)) = line.split_once(" expire at ") {
            let printed = printed.trim_end_matches(':');
            date = Some(parse_date(printed).ok_or_else(|| format!("cannot read the date `{printed}` of its dump"))?);
        } else if let (Some(id), Some(date)) = (line.trim().strip_prefix("0x"), &date) {
            let id = u64::from_str_radix(id, 16).map_err(|_| format!("cannot read the session id `{line}`"))?;
            // Ids of servers 128 and up have the high bit set: i64 as ZooKeeper has them.
            dates.insert(id as i64, date.clone());
        }
    }
    if !listed {
        return Err("its dump lists no session expiry".to_owned());
    }
    Ok(dates)
}

/// Java's `Date.toString()`: `Tue Nov 24 20:05:24 UTC 2026`.
fn parse_date(printed: &str) -> Option<Date> {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let words: Vec<&str> = printed.split_whitespace().collect();
    let [_weekday, month, day, time, zone @ .., year] = words.as_slice() else { return None };
    let month = MONTHS.iter().position(|name| name == month)? as u32 + 1;
    let (year, day) = (year.parse::<u32>().ok()?, day.parse::<u32>().ok()?);
    // Read as if it were UTC: both dates compared are printed in the server's zone.
    let at = humantime::parse_rfc3339(&format!("{year:04}-{month:02}-{day:02}T{time}Z")).ok()?;
    let seconds = i64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_secs()).ok()?;
    Some(Date { seconds, zone: zone.join(" ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a ZooKeeper 3.8.0 standalone server answered, one session holding a node.
    const STANDALONE: &str = "SessionTracker dump:
Session Sets (2)/(2):
1 expire at Tue Nov 24 20:05:24 UTC 2026:
\t0x10001d9c20b0000
1 expire at Tue Nov 24 20:05:36 UTC 2026:
\t0x10001d9c20b0001
ephemeral nodes dump:
Sessions with Ephemerals (1):
0x10001d9c20b0000:
\t/x0000000000
Connections dump:
Connections Sets (2)/(3):
2 expire at Tue Nov 24 20:05:31 UTC 2026:
\tip: /127.0.0.1:35258 sessionId: 0x0
";

    /// The sessions of [`STANDALONE`]: one with an 8s timeout holding a node, one of 20s.
    const HOLDER: i64 = 0x0100_01d9_c20b_0000;
    const OURS: i64 = 0x0100_01d9_c20b_0001;

    fn answer(text: &str) -> Answer {
        Answer { text: text.to_owned(), arrived: Instant::now() }
    }

    #[test]
    fn reads_the_sessions_and_their_dates() {
        let dates = parse_dump(STANDALONE).unwrap();
        assert_eq!(dates.len(), 2, "connections are not sessions: {dates:?}");
        let first = &dates[&HOLDER];
        assert_eq!(dates[&OURS].seconds - first.seconds, 12);
        assert_eq!(first.zone, "UTC");
        assert_eq!(first.seconds % 86_400, 20 * 3600 + 5 * 60 + 24);
    }

    #[test]
    fn measures_against_our_own_session() {
        // Ours is the second, with a 20s timeout: the first has 12s less, minus a second for
        // the truncated dates and the time since our renewal.
        let renewed = Instant::now();
        let own = OwnSession { id: OURS, timeout: Duration::from_secs(20), renewed };
        let arrived = renewed + Duration::from_millis(30);
        let left = own.measure(&Answer { text: STANDALONE.to_owned(), arrived }).unwrap();
        assert_eq!(left[&HOLDER], Duration::from_millis(8000 - 1000 - 30));
        assert_eq!(left[&OURS], Duration::from_millis(20_000 - 1000 - 30));
        let stranger = OwnSession { id: 7, ..own };
        assert!(stranger.measure(&answer(STANDALONE)).unwrap_err().contains("own session"));
    }

    #[test]
    fn reads_a_leader_with_local_sessions_and_high_server_ids() {
        let leader = "SessionTracker dump:
Local Session Sets (1)/(1):
1 expire at Mon Mar 01 00:00:09 CET 2027:
\t0xff00000000000001
Global Session Sets (1)/(1):
1 expire at Sun Feb 28 23:59:59 CET 2027:
\t0x0100000000000002
ephemeral nodes dump:
";
        let dates = parse_dump(leader).unwrap();
        assert_eq!(dates[&(0xff00_0000_0000_0001_u64 as i64)].seconds - dates[&0x0100_0000_0000_0002].seconds, 10);
    }

    #[test]
    fn says_why_a_server_cannot_tell() {
        let cases = [
            ("dump is not executed because it is not in the whitelist.\n", "4lw.commands.whitelist"),
            ("This ZooKeeper instance is not currently serving requests\n", "not serving"),
            ("SessionTracker dump:\nGlobal Sessions(1):\n0x100000000000001\t10000ms\n", "follower"),
            ("", "without answering"),
            ("imok", "no session expiry"),
            ("Session Sets (1)/(1):\n1 expire at yesterday:\n", "cannot read the date `yesterday`"),
        ];
        for (text, reason) in cases {
            let error = parse_dump(text).unwrap_err();
            assert!(error.contains(reason), "{text:?}: {error}");
        }
    }
}
