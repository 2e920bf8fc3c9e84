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
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::{Instant, Interval, MissedTickBehavior};
use zookeeper_client::{Client as ZkClient, Error as ZkError, EventType};

use super::held_nodes::HeldNodes;
use super::held_status::HeldStatus;
use crate::error::LostReason;
use crate::layout::REVOKE_MESSAGE;

/// A node's watch, until it tells the node is gone; `Some` if it must be set again later.
type Watch = Pin<Box<dyn Future<Output = Option<Arc<HeldStatus>>> + Send>>;

/// The watches on one session's held nodes.
pub(super) struct Follower {
    zk: ZkClient,
    held: Arc<HeldNodes>,
    period: Duration,
    tick: Interval,
    watches: FuturesUnordered<Watch>,
}

impl Follower {
    pub(super) fn new(zk: ZkClient, held: Arc<HeldNodes>, period: Duration) -> Self {
        let mut tick = tokio::time::interval_at(Instant::now() + period, period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self { zk, held, period, tick, watches: FuturesUnordered::new() }
    }

    /// Sets the watches that are due and follows them; never returns. Cancel safe: the watches
    /// stay in `self`.
    pub(super) async fn run(&mut self) {
        loop {
            tokio::select! {
                _ = self.tick.tick() => {
                    for status in self.held.due_for_a_watch(Instant::now() - self.period) {
                        self.watches.push(Box::pin(watch(self.zk.clone(), status)));
                    }
                }
                Some(again) = self.watches.next() => {
                    if let Some(status) = again {
                        self.held.watch_again(status);
                    }
                }
            }
        }
    }
}

/// Follows one held node until it is deleted or no longer held; returns it if the watch could
/// not be set (a broken connection).
async fn watch(zk: ZkClient, status: Arc<HeldStatus>) -> Option<Arc<HeldStatus>> {
    while status.is_followed() {
        match zk.get_and_watch_data(status.node_path()).await {
            Ok((data, _, watcher)) => {
                if data == REVOKE_MESSAGE {
                    status.revoke();
                }
                match watcher.changed().await.event_type {
                    // Our own release deletes it too: a released node is not lost.
                    EventType::NodeDeleted => status.lose(LostReason::NodeDeleted),
                    EventType::NodeDataChanged => continue,
                    // The session ended: its loss reaches every node.
                    _ => return None,
                }
            }
            // Answered on the session that created the node: it is gone for good.
            Err(ZkError::NoNode) => status.lose(LostReason::NodeDeleted),
            Err(_) => return Some(status),
        }
    }
    None
}
