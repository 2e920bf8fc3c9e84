//! The watch on our own waiting node, sent by a waiter behind a node of this process: a
//! hand-off from such a node skips listing the queue again, so without the watch nothing would
//! show that our node was deleted meanwhile, and a lock already lost would be granted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use zookeeper_client::{Client as ZkClient, Error as ZkError, EventType, OneshotWatcher, Stat, WatchedEvent};

use crate::background;
use crate::zk::Reconnects;

type WatchReply = std::result::Result<(Vec<u8>, Stat, OneshotWatcher), ZkError>;

type PendingWatch = Pin<Box<dyn Future<Output = WatchReply> + Send>>;

type PendingEvent = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// The watch on our own node, set again each time it fires until the node is deleted.
pub(super) struct OwnNodeWatch {
    node_path: Arc<str>,
    stage: Stage,
}

enum Stage {
    /// The watch request is sent; its reply has not been seen.
    Sent(PendingWatch),
    /// The watch is set on the server and has not fired.
    Set(PendingEvent),
    /// Not set: it fired, or its request failed. The next step sends it again.
    Unset,
}

/// What [`OwnNodeWatch::next`] saw.
enum WatchStep {
    /// The watch was set, or it fired for something else (data written, a reconnect).
    Again,
    Deleted,
    /// Our session ended: the session's own watch reports that.
    SessionEnded,
    Failed(ZkError),
}

impl OwnNodeWatch {
    /// Sends the watch request on `node_path` now, in order with the caller's later requests.
    pub(super) fn send(zk: &ZkClient, node_path: Arc<str>) -> Self {
        let stage = Stage::Sent(send_watch_now(zk.clone(), node_path.clone()));
        Self { node_path, stage }
    }

    /// Whether the watch is set on the server and has not been seen firing: only then does it
    /// stand for "our node is still there" up to the events already delivered on our session.
    pub(super) fn is_armed(&self) -> bool {
        matches!(self.stage, Stage::Set(_))
    }

    /// Follows the node until it is deleted. Never returns once the watch cannot go on (a dead
    /// session is for the session's watch to report). Cancel safe: the watch stays in `self`.
    pub(super) async fn until_deleted(&mut self, zk: &ZkClient) {
        let mut reconnects = Reconnects::new(zk);
        loop {
            match self.next(zk).await {
                WatchStep::Deleted => return,
                WatchStep::Again => {}
                WatchStep::SessionEnded => std::future::pending().await,
                WatchStep::Failed(error) => {
                    // Boxed: rare, and inline it would swell every waiter behind a node of ours.
                    if Box::pin(reconnects.wait(error)).await.is_err() {
                        std::future::pending().await
                    }
                }
            }
        }
    }

    /// The next step of the watch. Cancel safe: every future it waits on is kept in `stage`.
    async fn next(&mut self, zk: &ZkClient) -> WatchStep {
        match &mut self.stage {
            Stage::Sent(reply) => {
                let reply = reply.await;
                self.stage = Stage::Unset;
                match reply {
                    Ok((_, _, watcher)) => {
                        self.stage = Stage::Set(Box::pin(watcher.changed()));
                        WatchStep::Again
                    }
                    Err(ZkError::NoNode) => WatchStep::Deleted,
                    Err(error) => WatchStep::Failed(error),
                }
            }
            Stage::Set(event) => {
                let event = event.await;
                self.stage = Stage::Unset;
                if event.event_type == EventType::NodeDeleted {
                    WatchStep::Deleted
                } else if event.session_state.is_terminated() {
                    WatchStep::SessionEnded
                } else {
                    WatchStep::Again
                }
            }
            Stage::Unset => {
                self.stage = Stage::Sent(send_watch_now(zk.clone(), self.node_path.clone()));
                Box::pin(self.next(zk)).await
            }
        }
    }
}

impl Drop for OwnNodeWatch {
    /// Let the watch fire (on our own delete at the latest) rather than drop it, which would
    /// cost a request to remove it from the server.
    fn drop(&mut self) {
        match std::mem::replace(&mut self.stage, Stage::Unset) {
            Stage::Sent(reply) => {
                background::let_watch_fire(async move {
                    if let Ok((_, _, watcher)) = reply.await {
                        watcher.changed().await;
                    }
                });
            }
            Stage::Set(event) => {
                background::let_watch_fire(event);
            }
            Stage::Unset => {}
        }
    }
}

/// Sends a `getData` with a watch on our node now; the reply is awaited by whoever polls the
/// returned future next.
fn send_watch_now(zk: ZkClient, node_path: Arc<str>) -> PendingWatch {
    let mut reply = Box::pin(async move { zk.get_and_watch_data(&node_path).await });
    // The request is sent during the first poll; nobody needs waking for this one.
    let early = match reply.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    };
    Box::pin(async move {
        match early {
            Some(result) => result,
            None => reply.await,
        }
    })
}
