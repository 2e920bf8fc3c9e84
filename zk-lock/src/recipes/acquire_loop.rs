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
    let started = Instant::now();
    let deadline = patience.deadline(client.default_timeout());
    loop {
        let session = Box::pin(session_within(client, deadline, path, started)).await?;
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
        Box::pin(session.unless_terminated(attempt.remove())).await;
        if let Some(error) = give_up(failed, path, started) {
            return Err(error);
        }
    }
}

/// The error an acquisition returns after an attempt that ended without the lock (`None`: its
/// deadline passed); `None` if it tries again. Its nodes are removed first either way, a
/// vanished node too: deleting it again costs nothing if it is gone, and leaves nothing behind
/// if not.
fn give_up(failed: Option<NotGranted>, path: &str, started: Instant) -> Option<Error> {
    match failed {
        None => Some(Error::Timeout { path: path.to_owned(), waited: started.elapsed() }),
        Some(NotGranted::Busy) => Some(Error::Busy { path: path.to_owned() }),
        Some(NotGranted::Error(error)) => Some(error.at_path(path)),
        Some(NotGranted::NodeVanished | NotGranted::SessionGone) => None,
    }
}

/// After an attempt's session went: `Ok` if the client can open another one.
async fn renewal(client: &Client, old: &Session, path: &str) -> Result<()> {
    client.refuse_if_closed(path)?;
    if !client.is_renewable() {
        return Err(zookeeper_client::Error::SessionExpired.into());
    }
    if old.is_usable() {
        // An error said the session ended: let its state catch up, so the client renews it.
        let _ = until_connected(&old.zk).await;
    }
    Ok(())
}

/// The session of the next attempt: the client's, or a new one if it ended or was retired. The
/// servers may be out of reach for a while (the partition that made us give the old session
/// up), so opening one is tried again for as long as the deadline allows.
async fn session_within(client: &Client, deadline: Deadline, path: &str, started: Instant) -> Result<Arc<Session>> {
    let timeout = || Error::Timeout { path: path.to_owned(), waited: started.elapsed() };
    let mut pause = Duration::from_millis(50);
    loop {
        match deadline.limit(client.session(path)).await.ok_or_else(timeout)? {
            Err(Error::Connect { .. }) if deadline.may_wait() => {
                let retry_at = deadline.retry_at(pause).ok_or_else(timeout)?;
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
