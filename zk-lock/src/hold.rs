//! A granted lock node: watched for loss while held, deleted exactly once when let go.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::watch;
use zookeeper_client::{Client as ZkClient, Error as ZkError, EventType, OneshotWatcher, Stat};

use crate::background;
use crate::client::Client;
use crate::engine::{delete_with_retry, until_connected, Granted};
use crate::error::{Error, LostReason, Result};
use crate::session::Session;

/// One granted lock node, shared by the guards of re-entrant acquisitions: it is deleted when
/// the last of them is released or dropped.
pub(crate) struct Hold {
    client: Client,
    /// Key in the client's re-entrancy table.
    key: String,
    /// Who acquired it: re-entry by the same owner takes no new node.
    pub owner: Owner,
    pub path: String,
    pub node_path: String,
    pub token: i64,
    session: Arc<Session>,
    lost: watch::Receiver<Option<LostReason>>,
    /// Set before our own delete is sent, so the loss watch takes that delete for a release.
    released: Arc<AtomicBool>,
}

impl Hold {
    pub(crate) fn new(client: &Client, key: String, path: &str, granted: Granted) -> Arc<Self> {
        let (report, lost) = watch::channel(None);
        let first_watch = send_watch_now(granted.session.zk.clone(), granted.node_path.clone());
        let released = Arc::new(AtomicBool::new(false));
        background::spawn(watch_for_loss(
            granted.session.clone(),
            first_watch,
            granted.node_path.clone(),
            granted.losses_seen,
            released.clone(),
            report,
        ));
        let hold = Arc::new(Self {
            client: client.clone(),
            key,
            owner: Owner::current(),
            path: path.to_owned(),
            node_path: granted.node_path,
            token: granted.token,
            session: granted.session,
            lost,
            released,
        });
        client.holds().insert(hold.key.clone(), Arc::downgrade(&hold));
        hold
    }

    /// The hold this task already has at `key` on `client`, for re-entrant acquisition.
    pub(crate) fn held_by_current_task(client: &Client, key: &str) -> Option<Arc<Self>> {
        let hold = client.holds().get(key)?.upgrade()?;
        (hold.owner == Owner::current()).then_some(hold)
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        *self.lost.borrow()
    }

    pub(crate) fn is_held(&self) -> bool {
        !self.released.load(Ordering::Acquire) && self.lost_reason().is_none()
    }

    pub(crate) fn lost_error(&self, reason: LostReason) -> Error {
        Error::lost(&self.path, reason)
    }

    /// Resolves when the lock is lost; never, if it is released first.
    pub(crate) fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let mut lost = self.lost.clone();
        async move {
            let reason = lost.wait_for(Option::is_some).await.ok().and_then(|reason| *reason);
            match reason {
                Some(reason) => reason,
                None => std::future::pending().await,
            }
        }
    }

    /// Deletes the node now and reports whether the lock was still ours.
    pub(crate) async fn release(self) -> Result<()> {
        let delete = self.start_release();
        if let Some(reason) = self.lost_reason() {
            return Err(self.lost_error(reason));
        }
        match delete {
            Some(delete) => match delete.await {
                Ok(()) => Ok(()),
                Err(ZkError::NoNode) => Err(self.lost_error(LostReason::NodeDeleted)),
                Err(ZkError::SessionExpired) => Err(self.lost_error(LostReason::SessionExpired)),
                Err(ZkError::ClientClosed | ZkError::AuthFailed) => Err(self.lost_error(LostReason::SessionClosed)),
                Err(other) => Err(other.into()),
            },
            None => Ok(()),
        }
    }

    /// Marks the hold released and sends the delete; the returned future waits for its reply.
    /// `None` if it was released before.
    fn start_release(&self) -> Option<impl Future<Output = std::result::Result<(), ZkError>> + Send + 'static> {
        if self.released.swap(true, Ordering::AcqRel) {
            return None;
        }
        let mut holds = self.client.holds();
        if holds.get(&self.key).is_some_and(|entry| std::ptr::eq(entry.as_ptr(), self)) {
            holds.remove(&self.key);
        }
        drop(holds);
        Some(delete_with_retry(&self.session.zk, self.node_path.clone()))
    }
}

/// The holder a re-entrant acquisition is recognised by: the tokio task, or the thread for code
/// that runs outside any task (the body of `block_on` and `#[tokio::main]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Owner {
    pub(crate) fn current() -> Self {
        match tokio::task::try_id() {
            Some(task) => Self::Task(task),
            None => Self::Thread(std::thread::current().id()),
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        // The delete request is sent here, in order; its reply is awaited in the background.
        if let Some(delete) = self.start_release() {
            if self.lost_reason().is_none() {
                background::spawn(async move {
                    let _ = delete.await;
                });
            }
        }
    }
}

/// Reports the first loss: the session's, or the deletion of our node by someone else.
async fn watch_for_loss(
    session: Arc<Session>,
    first_watch: impl Future<Output = WatchReply> + Send,
    node_path: String,
    losses_seen: u64,
    released: Arc<AtomicBool>,
    report: watch::Sender<Option<LostReason>>,
) {
    let reason = tokio::select! {
        reason = session.lost_after(losses_seen) => reason,
        reason = node_deleted(&session.zk, &node_path, first_watch) => reason,
    };
    // The watch runs until our own delete fires it: ending it earlier would cost a request to
    // remove the watch from the server.
    if !released.load(Ordering::Acquire) {
        report.send_replace(Some(reason));
    }
}

type WatchReply = std::result::Result<(Vec<u8>, Stat, OneshotWatcher), ZkError>;

/// Sends the watch request on our own node now, in order with the caller's next requests, so
/// that setting it costs the caller no round trip and no scheduling delay; the reply is awaited
/// by whoever polls the returned future next.
fn send_watch_now(zk: ZkClient, node_path: String) -> impl Future<Output = WatchReply> + Send {
    let mut reply = Box::pin(async move { zk.get_and_watch_data(&node_path).await });
    // The request is sent during the first poll; nobody needs waking for this one.
    let early = match reply.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    };
    async move {
        match early {
            Some(result) => result,
            None => reply.await,
        }
    }
}

/// Resolves if our node is deleted. Session trouble is left to the session's own watch.
async fn node_deleted(zk: &ZkClient, node_path: &str, first_watch: impl Future<Output = WatchReply>) -> LostReason {
    let mut reply = first_watch.await;
    loop {
        match reply {
            Ok((_, _, watcher)) => {
                let event = watcher.changed().await;
                if event.event_type == EventType::NodeDeleted {
                    return LostReason::NodeDeleted;
                }
                if event.session_state.is_terminated() {
                    return std::future::pending().await;
                }
            }
            Err(ZkError::NoNode) => return LostReason::NodeDeleted,
            Err(ZkError::ConnectionLoss) => {
                if until_connected(zk).await.is_err() {
                    return std::future::pending().await;
                }
            }
            Err(_) => return std::future::pending().await,
        }
        reply = zk.get_and_watch_data(node_path).await;
    }
}
