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
use zookeeper_client::{Client as ZkClient, Error as ZkError, EventType, OneshotWatcher, Stat, WatchedEvent};

use super::held_nodes::HeldNodes;
use super::held_status::HeldStatus;
use crate::error::LostReason;
use crate::layout::REVOKE_MESSAGE;

/// What a node's follow-up waits for: the reply to the read that sets its watch (in flight only
/// at a tick, or after the node's data changed), then the watch's event (what a long hold keeps,
/// so it is kept small).
enum Step {
    Set(Arc<HeldStatus>, Result<(Vec<u8>, Stat, OneshotWatcher), ZkError>),
    Fired(Arc<HeldStatus>, WatchedEvent),
}

type Pending = Pin<Box<dyn Future<Output = Step> + Send>>;

/// The watches on one session's held nodes.
pub(super) struct Follower {
    zk: ZkClient,
    held: Arc<HeldNodes>,
    period: Duration,
    tick: Interval,
    pending: FuturesUnordered<Pending>,
}

impl Follower {
    pub(super) fn new(zk: ZkClient, held: Arc<HeldNodes>, period: Duration) -> Self {
        let mut tick = tokio::time::interval_at(Instant::now() + period, period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self { zk, held, period, tick, pending: FuturesUnordered::new() }
    }

    /// Sets the watches that are due and follows them; never returns. Runs on the runtime of
    /// the session's I/O, and goes with it: zookeeper-client panics in whoever awaits a watch
    /// of a session whose I/O task was dropped.
    pub(super) async fn run(mut self) {
        loop {
            tokio::select! {
                _ = self.tick.tick() => {
                    for status in self.held.due_for_a_watch(Instant::now() - self.period) {
                        self.set_watch(status);
                    }
                }
                Some(step) = self.pending.next() => self.step(step),
            }
        }
    }

    /// Reads the node and sets a watch on it (sent when `run` next polls what is pending).
    fn set_watch(&mut self, status: Arc<HeldStatus>) {
        let zk = self.zk.clone();
        self.pending.push(Box::pin(async move {
            let reply = zk.get_and_watch_data(status.node_path()).await;
            Step::Set(status, reply)
        }));
    }

    fn step(&mut self, step: Step) {
        match step {
            Step::Set(status, Ok((data, _, watcher))) => {
                if data == REVOKE_MESSAGE {
                    status.revoke();
                }
                self.pending.push(Box::pin(async move {
                    let event = watcher.changed().await;
                    Step::Fired(status, event)
                }));
            }
            // Answered on the session that created the node: it is gone for good.
            Step::Set(status, Err(ZkError::NoNode)) => status.lose(LostReason::NodeDeleted),
            // The connection broke: tried again a period later.
            Step::Set(status, Err(_)) => self.held.watch_again(status),
            Step::Fired(status, event) => match event.event_type {
                // Our own release deletes it too: a released node is not lost.
                EventType::NodeDeleted => status.lose(LostReason::NodeDeleted),
                EventType::NodeDataChanged if status.is_followed() => self.set_watch(status),
                // Released, or the session ended (its loss reaches every node).
                _ => {}
            },
        }
    }
}
