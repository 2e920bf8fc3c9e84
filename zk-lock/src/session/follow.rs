//! Following held nodes with watches: a node held for one heartbeat period gets a watch on its
//! data, so a deletion by someone else (an operator, a partition's heal) or a `__REVOKE__`
//! written into it is told by the server as it happens, and an idle hold costs no request at
//! all. Holds shorter than a period (the contended case) never pay for a watch. zookeeper-client
//! sets the watches again after a reconnect, and the server then reports what changed meanwhile.
//!
//! The bound: a node granted at `g` is watched by `g + 2P` (`P`, the heartbeat period, `T/9`),
//! and that read finds a node already deleted (or asked to be given up); after it, the watch
//! tells at once. So a deletion is seen within `2P` and a round trip of happening.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use zookeeper_client::{Client as ZkClient, Error as ZkError, EventType, OneshotWatcher, Stat, WatchedEvent};

use super::held_status::HeldStatus;
use super::node_table::{self, NodeTable};
use crate::error::LostReason;
use crate::layout::REVOKE_MESSAGE;

/// The reply to the read that sets a node's watch (in flight only at a tick, or after the
/// node's data changed).
type Setting = Pin<Box<dyn Future<Output = (Arc<HeldStatus>, WatchReply)> + Send>>;
type WatchReply = Result<(Vec<u8>, Stat, OneshotWatcher), ZkError>;

/// The watches on one session's held nodes.
pub(super) struct Follower {
    zk: ZkClient,
    nodes: Arc<Mutex<NodeTable>>,
    period: Duration,
    tick: Interval,
    setting: FuturesUnordered<Setting>,
}

impl Follower {
    pub(super) fn new(zk: ZkClient, nodes: Arc<Mutex<NodeTable>>, period: Duration) -> Self {
        let mut tick = tokio::time::interval_at(Instant::now() + period, period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self { zk, nodes, period, tick, setting: FuturesUnordered::new() }
    }

    /// Sets the watches that are due and follows them; never returns. Runs on the runtime of
    /// the session's I/O, and goes with it: zookeeper-client panics in whoever awaits a watch
    /// of a session whose I/O task was dropped.
    pub(super) async fn run(mut self) {
        // What a long hold keeps while idle: its watch's future, stored in place (its type is
        // only known here), so that a watched hold costs one small allocation of ours.
        let mut watched = FuturesUnordered::new();
        loop {
            tokio::select! {
                _ = self.tick.tick() => {
                    let due = node_table::lock(&self.nodes).due_for_a_watch(Instant::now() - self.period);
                    for status in due {
                        self.set_watch(status);
                    }
                }
                Some((status, reply)) = self.setting.next() => {
                    if let Some(watcher) = self.watch_set(&status, reply) {
                        watched.push(watcher.changed().map(move |event| (status, event)));
                    }
                }
                Some((status, event)) = watched.next() => self.fired(status, event),
            }
        }
    }

    /// Reads the node and sets a watch on it (sent when `run` next polls what is pending).
    fn set_watch(&mut self, status: Arc<HeldStatus>) {
        let zk = self.zk.clone();
        self.setting.push(Box::pin(async move {
            let reply = zk.get_and_watch_data(status.node_path()).await;
            (status, reply)
        }));
    }

    /// The watch to follow, once the read that set it is answered.
    fn watch_set(&mut self, status: &Arc<HeldStatus>, reply: WatchReply) -> Option<OneshotWatcher> {
        match reply {
            Ok((data, _, watcher)) => {
                if data == REVOKE_MESSAGE {
                    status.revoke();
                }
                Some(watcher)
            }
            // Answered on the session that created the node: it is gone for good.
            Err(ZkError::NoNode) => {
                status.lose(LostReason::NodeDeleted);
                None
            }
            // The connection broke: tried again a period later.
            Err(_) => {
                node_table::lock(&self.nodes).watch_again(status.clone());
                None
            }
        }
    }

    fn fired(&mut self, status: Arc<HeldStatus>, event: WatchedEvent) {
        match event.event_type {
            // Our own release deletes it too: a released node is not lost.
            EventType::NodeDeleted => {
                status.lose(LostReason::NodeDeleted);
            }
            EventType::NodeDataChanged if status.is_followed() => self.set_watch(status),
            // Released, or the session ended (its loss reaches every node).
            _ => {}
        }
    }
}
