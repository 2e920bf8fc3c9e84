//! The loop every acquisition runs, written once for locks and leases: an attempt on the
//! client's session; when that session ends or is retired, another attempt on a new one, until
//! granted or out of patience.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::patience::{Deadline, Patience};
use crate::client::Client;
use crate::engine::{Attempt, NotGranted};
use crate::error::{Error, Result};
use crate::holds::scope;
use crate::lock_order;
use crate::session::Session;
use crate::zk::until_connected;

/// The longest pause between two attempts to open a session for a waiting acquisition.
const MAX_RENEWAL_PAUSE: Duration = Duration::from_secs(2);

/// Runs attempts made by `start` (given the session and whether it may wait) until one is
/// granted, for the lock or semaphore at `path`.
///
/// Cancel safe: dropping the future drops the running attempt, whose nodes are deleted in the
/// background.
pub(crate) async fn acquire<A: Attempt>(
    client: &Client,
    path: &str,
    patience: Patience,
    start: impl Fn(Arc<Session>, bool) -> A,
) -> Result<A::Grant> {
    let started = patience.since();
    let deadline = patience.deadline(client.default_timeout());
    let ends = Ends { client, path, started };
    let mut outage = Outage::default();
    loop {
        let session = match client.ready_session(path) {
            Some(ready) => ready?,
            // Boxed: rare, and inline it would swell every waiting acquisition.
            None => Box::pin(session_within(client, deadline, &ends, &mut outage)).await?,
        };
        // A period without a session ends here; the session's own state tells the rest.
        outage.up();
        let mut attempt = start(session.clone(), deadline.may_wait());
        // Boxed, and raced here rather than through wrappers: every wrapper around a future by
        // value holds it again, in every waiting acquisition.
        let mut run = Box::pin(attempt.run());
        let outcome = tokio::select! {
            biased;
            // The session must not be used any more (it ended, or its locks were declared lost
            // and it is being retired).
            () = session.terminated() => Some(Err(NotGranted::SessionGone)),
            outcome = &mut run => Some(outcome),
            () = deadline.passed() => None,
        };
        drop(run);
        let failed = match outcome {
            Some(Ok(())) if !client.is_closed() => return Ok(attempt.grant()),
            // Granted as the client was being closed: the lock would be lost at once.
            Some(Ok(())) => Some(NotGranted::SessionGone),
            Some(Err(failed)) => Some(failed),
            None => None,
        };
        if let Some(NotGranted::SessionGone) = failed {
            // The nodes go with the session (ended, or retired and closed by its retirement),
            // unless it is the user's own, which a close only declared lost.
            match session.nodes_go_with_it() {
                true => attempt.let_go(),
                false => Box::pin(attempt.remove()).await,
            }
            // Start again on a new session if we can open it.
            Box::pin(renewal(client, &session, path)).await?;
            continue;
        }
        // The deadline passed: why the wait ended is settled now, before the removal, which
        // waits for a reconnect.
        let timed_out = failed.is_none().then(|| ends.timed_out(&outage.on(&session)));
        Box::pin(session.unless_terminated(attempt.remove())).await;
        if let Some(error) = timed_out.or_else(|| give_up(failed, path)) {
            return Err(error);
        }
    }
}

/// The error an acquisition returns after an attempt that ended without the lock before its
/// deadline; `None` if it tries again. Its nodes are removed first either way, a vanished node
/// too: deleting it again costs nothing if it is gone, and leaves nothing behind if not.
fn give_up(failed: Option<NotGranted>, path: &str) -> Option<Error> {
    match failed? {
        NotGranted::Busy => Some(Error::Busy { path: path.to_owned() }),
        NotGranted::Error(error) => Some(error.at_path(path)),
        NotGranted::NodeVanished | NotGranted::SessionGone => None,
    }
}

/// What an acquisition that runs out of time says about it.
struct Ends<'a> {
    client: &'a Client,
    path: &'a str,
    started: Instant,
}

impl Ends<'_> {
    /// The error of a wait whose deadline passed now: [`Error::ConnectionDown`] if the connection
    /// is down, so that an outage does not read as a busy lock; else [`Error::Timeout`].
    fn timed_out(&self, outage: &Outage) -> Error {
        let (path, waited) = (self.path.to_owned(), self.started.elapsed());
        if let Some(down) = outage.down_now() {
            let connect_string = self.client.connect_string().to_owned();
            return Error::ConnectionDown { path, waited, down: down.min(waited), connect_string };
        }
        // Asked only now: the wait is over, and the answer only words the error.
        let held_by_this_task = lock_order::holds_outside(&path, scope::enclosing_orders);
        Error::Timeout { path, waited, held_by_this_task }
    }
}

/// How long the connection was down during one acquisition: while the client had no session
/// and was opening one, and the session's current disconnection (one that ended earlier in the
/// wait is not counted).
#[derive(Default)]
struct Outage {
    /// The downtime of the periods that ended.
    ended: Duration,
    /// When the current period began, if the connection is down now.
    since: Option<Instant>,
}

impl Outage {
    /// The connection is down from now on (unless it already was).
    fn down(&mut self) {
        self.since.get_or_insert_with(Instant::now);
    }

    /// The connection is up now.
    fn up(&mut self) {
        if let Some(since) = self.since.take() {
            self.ended += since.elapsed();
        }
    }

    /// The whole downtime so far, if the connection is down now.
    fn down_now(&self) -> Option<Duration> {
        self.since.map(|since| self.ended + since.elapsed())
    }

    /// The downtime so far with `session` as the connection: its current disconnection, as its
    /// monitor saw it (no acquisition follows the connection's state itself: a waiting
    /// acquisition keeps nothing more for it).
    fn on(&self, session: &Session) -> Self {
        Self { ended: self.ended, since: session.down_since() }
    }
}

/// After an attempt's session went: `Ok` if the client can open another one.
async fn renewal(client: &Client, old: &Session, path: &str) -> Result<()> {
    client.refuse_if_closed(path)?;
    if !client.is_renewable() {
        return Err(Error::from_zk(zookeeper_client::Error::SessionExpired));
    }
    if old.is_usable() {
        // An error said the session ended: let its state catch up, so the client renews it.
        let _ = until_connected(&old.zk).await;
    }
    Ok(())
}

/// The session of the next attempt when the client has none it may use: a new one. The servers
/// may be out of reach for a while (the partition that made us give the old session up), so
/// opening one is tried again for as long as the deadline allows; meanwhile the connection
/// counts as down in `outage`.
async fn session_within(
    client: &Client,
    deadline: Deadline,
    ends: &Ends<'_>,
    outage: &mut Outage,
) -> Result<Arc<Session>> {
    let mut pause = Duration::from_millis(50);
    loop {
        // No usable session: one is being opened (by this call or another).
        outage.down();
        let Some(opened) = deadline.limit(client.session(ends.path)).await else {
            return Err(ends.timed_out(outage));
        };
        match opened {
            Err(Error::Connect { .. }) if deadline.may_wait() => {
                let Some(retry_at) = deadline.retry_at(pause) else { return Err(ends.timed_out(outage)) };
                // A close ends the pause: the next turn refuses.
                tokio::select! {
                    () = tokio::time::sleep_until(retry_at) => {}
                    () = client.closed() => {}
                }
                pause = (pause * 2).min(MAX_RENEWAL_PAUSE);
            }
            opened => return opened,
        }
    }
}
