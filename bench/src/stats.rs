//! Percentiles and the server's own request counters.

use std::net::SocketAddr;

/// Latency statistics of one sample set, in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub p50: f64,
    pub p99: f64,
    pub mean: f64,
    pub max: f64,
}

impl Summary {
    /// Nearest-rank percentiles, the same code for every client.
    pub fn of(samples: &[f64]) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        Summary {
            p50: percentile(&sorted, 50.0),
            p99: percentile(&sorted, 99.0),
            mean: sorted.iter().sum::<f64>() / n as f64,
            max: sorted[n - 1],
        }
    }
}

/// The nearest-rank `p`th percentile of ascending `sorted` (not empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One ZooKeeper server of the run, as a window reads it: the standalone server, or a member of
/// the ensemble.
#[derive(Debug, Clone, Copy)]
pub struct Server {
    /// Its client address, where its counters are read.
    pub addr: SocketAddr,
    /// Its JVM's pid; without it there is no CPU figure for it.
    pub pid: Option<u32>,
}

/// Most servers a measurement reads: an ensemble of up to five.
const MAX_SERVERS: usize = 5;

/// Where a measurement counts requests: the run's standalone server, or every member of an
/// ensemble, whose counters are added up (a client's requests arrive at whichever member its
/// session is connected to), with the member that leads (which also handles the requests the
/// followers forward to it: writes and `sync`s).
#[derive(Debug, Clone, Copy)]
pub struct Servers {
    addrs: [SocketAddr; MAX_SERVERS],
    len: usize,
    /// The leader's index in `addrs`, for an ensemble.
    leader: Option<usize>,
}

impl Servers {
    /// Every member of an ensemble, `leader` the index of the one that leads.
    pub fn ensemble(members: &[SocketAddr], leader: usize) -> Servers {
        assert!(!members.is_empty() && members.len() <= MAX_SERVERS && leader < members.len());
        let mut addrs = [members[0]; MAX_SERVERS];
        addrs[..members.len()].copy_from_slice(members);
        Servers { addrs, len: members.len(), leader: Some(leader) }
    }

    pub fn members(&self) -> &[SocketAddr] {
        &self.addrs[..self.len]
    }
}

impl From<SocketAddr> for Servers {
    fn from(addr: SocketAddr) -> Servers {
        Servers { addrs: [addr; MAX_SERVERS], len: 1, leader: None }
    }
}

/// The server's counters that the benchmark reads with `mntr` (for an ensemble, its members'
/// added up: see [`Counters::read`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// `zk_packets_received`: every request, ping and four-letter word from the server's own
    /// clients (not what followers forward to a leader).
    pub packets: u64,
    /// `zk_cnt_updatelatency`: requests that went through the write path (creates, deletes,
    /// failed writes, session creation and closing).
    pub writes: u64,
    /// `zk_cnt_readlatency`: requests answered without a transaction (reads, multi-reads,
    /// watches, pings, and on a follower the `sync`s it forwarded).
    pub reads: u64,
    /// `zk_watch_count`: (connection, path) watch pairs.
    pub watches: u64,
    /// `zk_ephemerals_count`.
    pub ephemerals: u64,
    /// `zk_packets_sent`: every answer and notification.
    pub sent: u64,
    /// `zk_num_alive_connections`: client connections, the `mntr` one included.
    pub connections: u64,
    /// `zk_znode_count`.
    pub znodes: u64,
    /// `zk_prep_processor_request_queued`: requests that entered the server's request pipeline.
    /// On a leader that is its own clients' requests and those its followers forward (writes,
    /// `sync`s); a follower's clients' reads and pings never reach it. 0 if the server does not
    /// say.
    pub queued: u64,
    /// Members read: each `mntr` connection counts itself as one received packet.
    pub members: u64,
    /// For an ensemble, the leader's own `packets` and `queued`.
    pub leader: Option<(u64, u64)>,
}

/// Requests between two counter readings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    pub packets: u64,
    pub writes: u64,
    pub reads: u64,
    /// For an ensemble: what the leader handled (its own clients' requests and those its
    /// followers forwarded: [`Counters::queued`]), and how many of `packets` its own clients
    /// sent it.
    pub at_leader: Option<AtLeader>,
}

/// The leader's share of the requests of a measurement on an ensemble.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtLeader {
    /// Requests that entered the leader's pipeline.
    pub handled: u64,
    /// Requests the leader received from clients connected to it.
    pub received: u64,
}

impl Requests {
    /// One `n`th of each count (a loop that measured `n` things alike).
    pub fn divided(self, n: u64) -> Requests {
        Requests {
            packets: self.packets / n,
            writes: self.writes / n,
            reads: self.reads / n,
            at_leader: self.at_leader.map(|at| AtLeader { handled: at.handled / n, received: at.received / n }),
        }
    }
}

impl std::ops::AddAssign for Requests {
    fn add_assign(&mut self, other: Requests) {
        self.packets += other.packets;
        self.writes += other.writes;
        self.reads += other.reads;
        self.at_leader = self
            .at_leader
            .zip(other.at_leader)
            .map(|(a, b)| AtLeader { handled: a.handled + b.handled, received: a.received + b.received });
    }
}

impl Counters {
    /// Reads the counters of one server with `mntr` (blocking, a few milliseconds).
    fn read_one(addr: SocketAddr) -> Result<Counters, String> {
        let counters = zk_lock::testing::server_counters(addr).map_err(|e| format!("mntr {addr}: {e}"))?;
        let value = |key: &str| counters.count(key).ok_or_else(|| format!("no `{key}` in the server's mntr output"));
        Ok(Counters {
            packets: value("zk_packets_received")?,
            writes: value("zk_cnt_updatelatency")?,
            reads: value("zk_cnt_readlatency")?,
            watches: value("zk_watch_count")?,
            ephemerals: value("zk_ephemerals_count")?,
            sent: counters.packets_sent,
            connections: counters.alive_connections,
            znodes: counters.znodes,
            queued: counters.count("zk_prep_processor_request_queued").unwrap_or(0),
            members: 1,
            leader: None,
        })
    }

    /// Reads the counters of `servers` (blocking, a few milliseconds a member). For an ensemble
    /// the members' counts of what their own clients do are added up (requests, watches,
    /// connections); the replicated ones (ephemeral nodes, nodes) are the largest any member
    /// shows, the member furthest ahead.
    pub fn read(servers: impl Into<Servers>) -> Result<Counters, String> {
        let servers = servers.into();
        let mut total = Counters::default();
        for (i, &addr) in servers.members().iter().enumerate() {
            let one = Counters::read_one(addr)?;
            total.packets += one.packets;
            total.writes += one.writes;
            total.reads += one.reads;
            total.watches += one.watches;
            total.sent += one.sent;
            total.connections += one.connections;
            total.queued += one.queued;
            total.members += 1;
            total.ephemerals = total.ephemerals.max(one.ephemerals);
            total.znodes = total.znodes.max(one.znodes);
            if servers.leader == Some(i) {
                total.leader = Some((one.packets, one.queued));
            }
        }
        Ok(total)
    }

    /// Reads the counters without blocking the async runtime's worker.
    pub async fn read_async(servers: impl Into<Servers>) -> Result<Counters, String> {
        let servers = servers.into();
        tokio::task::spawn_blocking(move || Counters::read(servers)).await.map_err(|e| e.to_string())?
    }

    /// Requests sent since `earlier`. The `mntr` connection that read `self` counts itself as one
    /// received packet on each member, which is taken off.
    pub fn since(&self, earlier: &Counters) -> Requests {
        Requests {
            packets: self.packets.saturating_sub(earlier.packets).saturating_sub(self.members.max(1)),
            writes: self.writes.saturating_sub(earlier.writes),
            reads: self.reads.saturating_sub(earlier.reads),
            at_leader: self.leader.zip(earlier.leader).map(|((packets, queued), (packets_then, queued_then))| {
                AtLeader {
                    handled: queued.saturating_sub(queued_then),
                    received: packets.saturating_sub(packets_then).saturating_sub(1),
                }
            }),
        }
    }
}
