//! `max_hold`: a hold that reaches its limit is ended by the library, whatever its holder does.
//!
//! A timer on the library's own thread (`zk-lock-io`) marks the hold lost, which tells its
//! guards (an annotated function's body is dropped), then deletes the node through a session
//! whose I/O also runs on that thread. The holder's own session may run on the holder's runtime
//! (issue 22), which may be the very thing that is stuck: a body blocking its thread, a wedged
//! `current_thread` runtime. So the next waiter is granted within the limit and a round trip
//! (and, the first time, the opening of that session), and a holder that wakes up late holds a
//! fencing token older than the next holder's. Through an outage the delete is tried again
//! until the node is gone or the holder's session ends (which takes the node with it).
//!
//! A call nested in a holder of the same lock borrows the holder's node; its own limit ends
//! that node's hold, unless the call returns its loan first. A client made by
//! `Client::from_zookeeper` has no session of the library's own thread, so a limit on it is
//! refused.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use zookeeper_client::Error as ZkError;

use crate::background;
use crate::client::Client;
use crate::error::{Error, LostReason, Result};
use crate::holds::hold_limit::HoldLimit;
use crate::holds::HeldNode;
use crate::session::Session;
use crate::zk::{broke_connection, delete_with_retry};

/// The longest limit: what a hold keeps of it is a `u32` of milliseconds.
const LONGEST: Duration = Duration::from_millis(u32::MAX as u64);

/// Refuses a limit no hold could live with.
pub(super) fn check(path: &str, limit: Option<Duration>) -> Result<()> {
    match limit {
        Some(limit) if limit < Duration::from_millis(1) => Err(Error::invalid_argument(
            path,
            format!("max_hold is {limit:?}: every hold would end as it is granted; give it at least 1ms"),
        )),
        Some(limit) if limit > LONGEST => Err(Error::invalid_argument(
            path,
            format!("max_hold is {limit:?}, longer than the longest allowed, {LONGEST:?} (49 days)"),
        )),
        _ => Ok(()),
    }
}

/// Refuses a limit on a client that cannot keep it: one made by `Client::from_zookeeper` runs
/// its only session's I/O on the caller's runtime, which a stuck holder blocks, so neither the
/// holder nor the next waiter would be told at the limit.
pub(super) fn check_client(path: &str, limit: Option<Duration>, client: &Client) -> Result<()> {
    match limit {
        Some(limit) if !client.is_renewable() => Err(Error::invalid_argument(
            path,
            format!(
                "max_hold is {limit:?}, but this client was made by Client::from_zookeeper: the library \
                 cannot end a hold on a session whose I/O runs on your runtime, which a stuck holder \
                 blocks; connect with zk_lock::connect or Client::builder, or take the lock without max_hold"
            ),
        )),
        _ => Ok(()),
    }
}

/// Resolves when a limit no longer applies before its hold is let go: a nested call's, whose
/// loan of an enclosing holder's lock was returned.
pub(crate) type Returned = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A limit whose clock has not started: a member of a multi-lock waits for the whole grant.
pub(super) struct Deferred {
    client: Client,
    hold: Arc<HeldNode>,
    limit: Duration,
    returned: Option<Returned>,
}

impl Deferred {
    /// Starts the limit's clock now.
    pub(super) fn start(self) {
        enforce(&self.client, &self.hold, self.limit, self.returned);
    }
}

/// The limits deferred by [`deferring`].
pub(super) type DeferredLimits = Arc<std::sync::Mutex<Vec<Deferred>>>;

tokio::task_local! {
    /// Set while a multi-lock takes its members.
    static DEFERRED: DeferredLimits;
}

/// Runs `acquire` with the limits of the holds it makes put in `limits` instead of started.
pub(super) async fn deferring<F: Future>(limits: DeferredLimits, acquire: F) -> F::Output {
    DEFERRED.scope(limits, acquire).await
}

/// Ends `hold` when it has lasted `limit`, counted from now, or from when [`deferring`] says;
/// unless it is let go first, or `returned` resolves first (a nested call's limit).
pub(super) fn enforce_or_defer(client: &Client, hold: &Arc<HeldNode>, limit: Duration, returned: Option<Returned>) {
    let mut returned = Some(returned);
    let deferred = DEFERRED.try_with(|limits| {
        let mut limits = limits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let returned = returned.take().flatten();
        limits.push(Deferred { client: client.clone(), hold: hold.clone(), limit, returned });
    });
    if deferred.is_err() {
        enforce(client, hold, limit, returned.flatten());
    }
}

/// Ends `hold` when it has lasted `limit` (from now, or from its holder's last extension of it),
/// unless it is let go, or `returned` resolves, first.
fn enforce(client: &Client, hold: &Arc<HeldNode>, limit: Duration, returned: Option<Returned>) {
    let ends = Arc::new(HoldLimit::starting_now(limit));
    // A nested call's limit on a borrowed hold is not the one its guards extend.
    if returned.is_none() {
        hold.set_limit(ends.clone());
    }
    let (client, status, node) = (client.clone(), hold.status().clone(), hold.node_path().clone());
    // Weak: the timer must not keep the holder's session alive.
    let holder = Arc::downgrade(hold.session());
    background::spawn(async move {
        let returned = async move {
            match returned {
                Some(returned) => returned.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = status.until_let_go() => return,
            () = returned => return,
            () = ends.reached() => {}
        }
        // Told before the node goes: its holder learns it first, as of any loss. Released or
        // lost meanwhile (another limit on the same hold included), the node is not ours to
        // delete.
        if !status.lose(LostReason::MaxHoldReached { limit }) {
            return;
        }
        delete_until_gone(&client, &node, &holder).await;
    });
}

/// The first pause before trying again to delete a node whose holder was ended, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LONGEST_PAUSE: Duration = Duration::from_secs(2);

/// Deletes `node` through a session of this thread's runtime (opened the first time it is
/// needed), trying again through an outage until the node is gone, or the holder's session
/// can no longer be used (its end takes the node with it: it expired, or the library retires
/// it), or the client was closed (which closes that session too).
async fn delete_until_gone(client: &Client, node: &Arc<str>, holder: &Weak<Session>) {
    let mut pause = FIRST_PAUSE;
    loop {
        if let Ok(session) = client.session(node).await {
            match delete_with_retry(&session.zk, node.clone()).await {
                // NoNode: the holder's release, or the end of its session, came first.
                Ok(()) | Err(ZkError::NoNode) => return,
                // This thread's session ended meanwhile: another is opened.
                Err(ZkError::SessionExpired | ZkError::ClientClosed) => {}
                Err(error) if broke_connection(&error) => {}
                // Refused (an ACL, say): the holder's own release would be refused alike.
                Err(_) => return,
            }
        }
        let holder_usable = holder.upgrade().is_some_and(|session| session.is_usable());
        if client.is_closed() || !holder_usable {
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}
