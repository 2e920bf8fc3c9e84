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

/// The server's counters that the benchmark reads with `mntr`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// `zk_packets_received`: every request, ping and four-letter word.
    pub packets: u64,
    /// `zk_cnt_updatelatency`: requests that went through the write path (creates, deletes,
    /// failed writes, session creation and closing).
    pub writes: u64,
    /// `zk_cnt_readlatency`: requests answered without a transaction (reads, multi-reads,
    /// watches, pings).
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
}

/// Requests between two counter readings.
#[derive(Debug, Clone, Copy, Default)]
pub struct Requests {
    pub packets: u64,
    pub writes: u64,
    pub reads: u64,
}

impl std::ops::AddAssign for Requests {
    fn add_assign(&mut self, other: Requests) {
        self.packets += other.packets;
        self.writes += other.writes;
        self.reads += other.reads;
    }
}

impl Counters {
    /// Reads the counters with `mntr` (blocking, a few milliseconds).
    pub fn read(addr: SocketAddr) -> Result<Counters, String> {
        let counters = zk_lock::testing::server_counters(addr).map_err(|e| format!("mntr: {e}"))?;
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
        })
    }

    /// Reads the counters without blocking the async runtime's worker.
    pub async fn read_async(addr: SocketAddr) -> Result<Counters, String> {
        tokio::task::spawn_blocking(move || Counters::read(addr)).await.map_err(|e| e.to_string())?
    }

    /// Requests sent since `earlier`. The `mntr` connection that read `self` counts itself as one
    /// received packet, which is taken off.
    pub fn since(&self, earlier: &Counters) -> Requests {
        Requests {
            packets: self.packets.saturating_sub(earlier.packets).saturating_sub(1),
            writes: self.writes.saturating_sub(earlier.writes),
            reads: self.reads.saturating_sub(earlier.reads),
        }
    }
}
