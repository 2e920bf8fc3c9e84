//! `max_hold`: a hold that reaches its limit is ended by the library, whatever its holder does.
//!
//! A timer on the library's own thread (`zk-lock-io`) marks the hold lost, which tells its
//! guards (an annotated function's body is dropped), then deletes the node through a session
//! whose I/O also runs on that thread. The holder's own session may run on the holder's runtime
//! (issue 22), which may be the very thing that is stuck: a body blocking its thread, a wedged
//! `current_thread` runtime. So the next waiter is granted within the limit and a round trip
//! (and, the first time, the opening of that session), and a holder that wakes up late holds a
//! fencing token older than the next holder's.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::background;
use crate::client::Client;
use crate::error::{Error, LostReason, Result};
use crate::holds::HeldNode;
use crate::zk::delete_with_retry;

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

/// A limit whose clock has not started: a member of a multi-lock waits for the whole grant.
pub(super) struct Deferred {
    client: Client,
    hold: Arc<HeldNode>,
    limit: Duration,
}

impl Deferred {
    /// Starts the limit's clock now.
    pub(super) fn start(self) {
        enforce(&self.client, &self.hold, self.limit);
    }
}

/// The limits deferred by [`deferring`].
pub(super) type DeferredLimits = Arc<std::sync::Mutex<Vec<Deferred>>>;

tokio::task_local! {
    /// Set while a multi-lock takes its members.
    static DEFERRED: DeferredLimits;
}

/// Runs `acquire` with the limits of the holds it makes put in `limits` instead of started.
pub(super) async fn deferring<F: std::future::Future>(limits: DeferredLimits, acquire: F) -> F::Output {
    DEFERRED.scope(limits, acquire).await
}

/// Ends `hold` when it has lasted `limit`, counted from now, or from when [`deferring`] says.
pub(super) fn enforce_or_defer(client: &Client, hold: &Arc<HeldNode>, limit: Duration) {
    let deferred = DEFERRED.try_with(|limits| {
        let mut limits = limits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        limits.push(Deferred { client: client.clone(), hold: hold.clone(), limit });
    });
    if deferred.is_err() {
        enforce(client, hold, limit);
    }
}

/// Ends `hold` when it has lasted `limit`, unless it is let go first.
fn enforce(client: &Client, hold: &Arc<HeldNode>, limit: Duration) {
    let deadline = Instant::now() + limit;
    let (client, status, node) = (client.clone(), hold.status().clone(), hold.node_path().clone());
    background::spawn(async move {
        tokio::select! {
            () = status.until_let_go() => return,
            () = tokio::time::sleep_until(deadline) => {}
        }
        // Told before the node goes: its holder learns it first, as of any loss. Released or
        // lost meanwhile, the node is not ours to delete.
        if !status.lose(LostReason::MaxHoldReached { limit }) {
            return;
        }
        // A session of this thread's runtime (opened the first time it is needed).
        let Ok(session) = client.session(&node).await else { return };
        // NoNode: the holder's release came first. Other errors: the session ended, and with
        // it the node, or the client was closed, which ends the holder's session too.
        let _ = delete_with_retry(&session.zk, node).await;
    });
}
