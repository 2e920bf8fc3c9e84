//! The settings of a [`TestingCluster`] before it starts: its size and the servers' timing.

use std::time::Duration;

use super::TestingCluster;
use crate::testing::config::DEFAULT_TICK_TIME;
use crate::testing::Result;

/// The default `syncLimit`, in ticks.
const DEFAULT_SYNC_LIMIT: u32 = 5;
/// `initLimit` is ten ticks, as ZooKeeper's sample configuration says, but never less than this:
/// a follower syncing with a new leader on a busy machine needs a few seconds.
const MIN_INIT_TIME: Duration = Duration::from_secs(5);

/// The servers' timing, as written in every member's `zoo.cfg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timing {
    pub(super) tick_time: Duration,
    pub(super) sync_limit: u32,
}

impl Timing {
    /// `initLimit`, in ticks.
    pub(super) fn init_limit(&self) -> u128 {
        10.max(MIN_INIT_TIME.as_millis().div_ceil(self.tick_time.as_millis()))
    }
}

/// Chooses the size and timing of a [`TestingCluster`], then [starts](Self::start) it; made by
/// [`TestingCluster::builder`].
///
/// ```no_run
/// use std::time::Duration;
///
/// use zk_lock::testing::TestingCluster;
///
/// # fn main() -> zk_lock::testing::Result<()> {
/// // A follower that hears nothing from its leader for 250 ms x 4 = 1 s gives it up.
/// let cluster = TestingCluster::builder().servers(3).tick_time(Duration::from_millis(250)).sync_limit(4).start()?;
/// assert_eq!(cluster.tick_time() * cluster.sync_limit(), Duration::from_secs(1));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct ClusterBuilder {
    servers: usize,
    timing: Timing,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder { servers: 3, timing: Timing { tick_time: DEFAULT_TICK_TIME, sync_limit: DEFAULT_SYNC_LIMIT } }
    }
}

impl ClusterBuilder {
    /// The number of servers; 3 unless set.
    ///
    /// # Panics
    ///
    /// Panics if `n` is zero.
    pub fn servers(mut self, n: usize) -> Self {
        assert!(n > 0, "a zookeeper cluster needs at least one server");
        self.servers = n;
        self
    }

    /// ZooKeeper's `tickTime`, its unit of time, in whole milliseconds (the rest is dropped);
    /// 500 ms unless set. Sessions may then last from two ticks (`minSessionTimeout`) to a
    /// minute or twenty ticks, whichever is longer (`maxSessionTimeout`), and `initLimit` is ten
    /// ticks but at least five seconds.
    ///
    /// # Panics
    ///
    /// Panics if `tick` is shorter than a millisecond or longer than ZooKeeper's `int` of
    /// milliseconds.
    pub fn tick_time(mut self, tick: Duration) -> Self {
        let millis = tick.as_millis();
        assert!(
            (1..=i32::MAX as u128 / 20).contains(&millis),
            "a zookeeper tick must be at least 1 ms and fit ZooKeeper's limits, not {tick:?}"
        );
        self.timing.tick_time = Duration::from_millis(millis as u64);
        self
    }

    /// ZooKeeper's `syncLimit`, in ticks; 5 unless set. A follower that hears nothing from its
    /// leader for `sync_limit` ticks gives it up and stops serving, and a leader gives up such a
    /// follower; a leader that keeps no quorum of followers for that long stops leading.
    ///
    /// # Panics
    ///
    /// Panics if `ticks` is zero.
    pub fn sync_limit(mut self, ticks: u32) -> Self {
        assert!(ticks > 0, "syncLimit must be at least one tick");
        self.timing.sync_limit = ticks;
        self
    }

    /// Starts the ensemble and waits until every server serves as leader or follower, with
    /// exactly one leader.
    ///
    /// # Errors
    ///
    /// As [`TestingCluster::start`].
    pub fn start(self) -> Result<TestingCluster> {
        TestingCluster::start_with(self.servers, self.timing)
    }
}
