//! Retirement: a session whose locks were declared lost may still live on the server (a
//! partition shorter than its timeout, a new leader that gave every session a fresh timeout),
//! with nodes in queues that nobody will ever delete. It is closed through a connection of its
//! own once the server could have expired it anyway and is reachable, which deletes all its
//! ephemeral nodes at once, as Curator does when it injects an expiry. Its node table is emptied
//! only once the server confirmed that the session ended.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{Client as ZkClient, Error as ZkError, SessionInfo, SessionState};

use super::end::SessionEnd;
use super::node_table::NodeTable;
use crate::background;

/// Connects again to an existing session (same connect string, credentials and TLS as the
/// client that opened it). Resolves with `SessionExpired` if the server says it ended.
pub(crate) type Reopen = Arc<dyn Fn(SessionInfo) -> ReopenFuture + Send + Sync>;

/// What a [`Reopen`] returns.
pub(crate) type ReopenFuture = Pin<Box<dyn Future<Output = Result<ZkClient, ZkError>> + Send>>;

/// What closing a session on the server needs, for whichever of its paths gets there first.
pub(super) struct Retirement {
    session: SessionInfo,
    timeout: Duration,
    reopen: Reopen,
    nodes: Arc<Mutex<NodeTable>>,
    end: Arc<SessionEnd>,
}

impl Retirement {
    /// The retirement of `zk`'s session.
    pub(super) fn of(zk: &ZkClient, reopen: Reopen, nodes: Arc<Mutex<NodeTable>>, end: Arc<SessionEnd>) -> Self {
        Self { session: zk.session().clone(), timeout: zk.session_timeout(), reopen, nodes, end }
    }

    /// The session's end, which the retirement confirms.
    pub(super) fn end(&self) -> &Arc<SessionEnd> {
        &self.end
    }

    /// Starts the retirement on zk-lock's own runtime, unless one was started before.
    pub(super) fn start(self, not_before: Instant) {
        if self.end.take_retirement() {
            let Self { session, timeout, reopen, nodes, end } = self;
            background::spawn(retire(session, timeout, reopen, nodes, end, not_before));
        }
    }
}

/// The first pause between attempts to reach an unreachable server.
const FIRST_PAUSE: Duration = Duration::from_millis(50);

/// Closes `session` on the server, not before `not_before` (the earliest moment the server could
/// expire it) unless `Client::close` asks for it sooner, trying until the server confirms it
/// ended.
async fn retire(
    session: SessionInfo,
    timeout: Duration,
    reopen: Reopen,
    nodes: Arc<Mutex<NodeTable>>,
    end: Arc<SessionEnd>,
    not_before: Instant,
) {
    // Every holder on it was told of the loss already: the wait only keeps the locks from passing
    // on sooner than an expiry would, which a close asks for.
    tokio::select! {
        () = tokio::time::sleep_until(not_before) => {}
        () = end.close_asked() => {}
    }
    let mut pause = FIRST_PAUSE;
    loop {
        // Bounded too: a connection that takes longer is tried again after the pause.
        let reopened = tokio::time::timeout(timeout, reopen(session.clone())).await;
        match reopened.unwrap_or(Err(ZkError::Timeout)) {
            Ok(zk) => {
                let mut states = zk.state_watcher();
                // The last handle: zookeeper-client sends `closeSession` and reports `Closed`
                // once the server answered it, connecting again first if it has to.
                drop(zk);
                // Bounded: a close that no server answers within a session timeout is asked
                // again on a new connection, which finds the session expired by then if no
                // server had it.
                let ended = tokio::time::timeout(timeout, async {
                    let mut state = states.state();
                    while !state.is_terminated() {
                        state = states.changed().await;
                    }
                    state
                });
                if ended.await == Ok(SessionState::Closed) {
                    break;
                }
                // Given up without an answer: find out on the next connection.
            }
            Err(ZkError::SessionExpired) => break,
            // Our credentials are refused: we can never reach it again, and nobody keeps it
            // alive, so the server expires it within a session timeout.
            Err(ZkError::AuthFailed) => break,
            Err(_) => {}
        }
        let pause_over = tokio::time::sleep(pause);
        if end.is_close_asked() {
            pause_over.await;
        } else {
            tokio::select! {
                () = pause_over => {}
                // A close asked for meanwhile cuts the pause short, once: its caller waits.
                () = end.close_asked() => {
                    pause = FIRST_PAUSE;
                    continue;
                }
            }
        }
        // Short enough that a healed partition frees the locks within about half a timeout.
        pause = (pause * 2).min(timeout / 4);
    }
    end.confirm(&nodes);
}
