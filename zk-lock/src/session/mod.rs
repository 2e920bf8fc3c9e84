//! One ZooKeeper session: when its locks are lost ([`liveness`]), the nodes held on it
//! ([`held_nodes`], each one's state in [`held_status`], followed by watches: [`follow`]), the
//! nodes the library must still see deleted on it
//! ([`ledger`]), its retirement once a loss has been declared ([`retire`]), and its end, asked
//! for by `Client::close` and confirmed by the server ([`end`]).
//!
//! The bottom layer above the foundations: it uses zookeeper-client, the background runtime and
//! `error`.

mod end;
mod follow;
mod held_nodes;
mod held_status;
mod io_runtime;
mod ledger;
mod liveness;
mod renewal;
mod retire;

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::end::SessionEnd;
use self::held_nodes::HeldNodes;
pub(crate) use self::held_status::{HeldNodeEvents, HeldStatus};
use self::ledger::Ledger;
use self::retire::Retirement;
pub(crate) use self::retire::{Reopen, ReopenFuture};
use crate::background;
use crate::error::LostReason;

/// What guards need to know about their session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Health {
    /// How many times locks of this session were lost; a guard compares it with the value it
    /// saw when its lock was granted, so a loss followed by a reconnect is still seen.
    pub losses: u64,
    /// Why the last loss happened.
    pub reason: Option<LostReason>,
    /// The session must not be used again: it ended, or it is retired (closed as soon as the
    /// server is reachable). New acquisitions need a new session; waiters on it queue again.
    pub terminated: bool,
}

/// A live ZooKeeper session shared by the client and every guard acquired on it.
pub(crate) struct Session {
    pub zk: zookeeper_client::Client,
    health: watch::Receiver<Health>,
    ledger: Arc<Mutex<Ledger>>,
    held: Arc<HeldNodes>,
    end: Arc<SessionEnd>,
    /// How the library reaches it again to end it on the server; `None` for a session the user
    /// opened.
    reopen: Option<Reopen>,
    monitor: JoinHandle<()>,
    follower: JoinHandle<()>,
}

impl Session {
    /// Follows `zk`'s health from now on. With `reopen`, a session whose loss is declared while
    /// it may still live on the server is closed through a new connection to it; without (a
    /// session opened by the user), it is only reported lost.
    /// A session the library opened (with `reopen`) is closed when the runtime that opened it
    /// shuts down, which its I/O runs on (`io_runtime`). `requested`: when its connect request was
    /// about to be sent (the server cannot have created it before), or when it was handed over
    /// for a session the user opened.
    pub(crate) fn new(
        zk: zookeeper_client::Client,
        reopen: Option<Reopen>,
        requested: tokio::time::Instant,
    ) -> Arc<Self> {
        let (sender, health) = watch::channel(Health::default());
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let held = Arc::new(HeldNodes::default());
        let end = Arc::new(SessionEnd::new());
        // The monitor runs on zk-lock's own runtime: it declares a loss even when the runtime
        // of the session's I/O is stuck.
        let monitor = background::spawn(liveness::monitor(
            zk.clone(),
            requested,
            sender,
            ledger.clone(),
            held.clone(),
            end.clone(),
            reopen.clone(),
        ));
        let period = liveness::heartbeat_period(zk.session_timeout());
        // With the session's I/O: see `follow`.
        let follower = background::spawn_here(follow::Follower::new(zk.clone(), held.clone(), period).run());
        Arc::new_cyclic(|session| {
            if let Some(reopen) = &reopen {
                let retirement = Retirement::of(&zk, reopen.clone(), ledger.clone(), end.clone());
                io_runtime::watch_for_shutdown(session.clone(), retirement);
            }
            Self { zk, health, ledger, held, end, reopen, monitor, follower }
        })
    }

    /// Ends the session: its locks are reported lost (`SessionClosed`) first, then it is closed
    /// on the server, which deletes its nodes. Resolves once the server confirmed it, or after
    /// the session timeout (by then an unreachable server has expired it anyway). A session
    /// opened by the user is only reported lost: it ends when the user drops it.
    pub(crate) async fn close(&self) {
        self.end.ask_close();
        // The monitor declares the loss at once (or did, before a retirement).
        self.terminated().await;
        if self.reopen.is_some() {
            let _ = tokio::time::timeout(self.zk.session_timeout(), self.end.confirmed()).await;
        }
    }

    pub(crate) fn health(&self) -> Health {
        *self.health.borrow()
    }

    /// Neither ended, nor retired, nor left without the runtime its I/O ran on.
    pub(crate) fn is_usable(&self) -> bool {
        !self.health().terminated && !self.end.is_close_asked() && !self.zk.state().is_terminated()
    }

    /// Resolves with the reason once the session loses its locks after `losses_seen` losses.
    pub(crate) async fn lost_after(&self, losses_seen: u64) -> LostReason {
        let mut health = self.health.clone();
        // The monitor only stops after a terminal state, which it reports first.
        let reason = health.wait_for(|h| h.losses > losses_seen).await.ok().and_then(|h| h.reason);
        reason.unwrap_or(LostReason::SessionClosed)
    }

    /// Whether the nodes made on this session are deleted with it once it must not be used any
    /// more: it ended, or the library ends it on the server. Not for a session the user opened
    /// and a [`close`](Self::close) only declared lost: it lives on until the user drops it.
    pub(crate) fn nodes_go_with_it(&self) -> bool {
        self.reopen.is_some() || self.zk.state().is_terminated()
    }

    /// Resolves once the session must not be used any more (it ended, or it is being retired).
    pub(crate) async fn terminated(&self) {
        let mut health = self.health.clone();
        if health.wait_for(|h| h.terminated).await.is_err() {
            // The monitor is gone only with the session itself.
            std::future::pending::<()>().await;
        }
    }

    /// `work`'s output, or `None` once the session must not be used any more (it ended, or it
    /// is being retired): waiters on it queue again, and removals waiting for a reconnect leave
    /// the nodes to their claims and the retirement instead of holding the caller up.
    pub(crate) async fn unless_terminated<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            () = self.terminated() => None,
            output = work => Some(output),
        }
    }

    /// Follows `node_path`, granted after `losses_seen` losses, until [`let_go`](Self::let_go):
    /// `events` hears of its loss or revocation.
    pub(crate) fn hold<E: HeldNodeEvents + 'static>(
        &self,
        node_path: Arc<str>,
        losses_seen: u64,
        events: E,
    ) -> Arc<HeldStatus<E>> {
        let status = Arc::new(HeldStatus::new(node_path, losses_seen, events));
        self.held.insert(status.clone());
        status
    }

    /// Stops following a held node: it is released.
    pub(crate) fn let_go(&self, status: &HeldStatus) {
        self.held.remove(status);
    }

    /// The nodes the library is responsible for on this session.
    pub(crate) fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        ledger::lock(&self.ledger)
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("session_id", &self.zk.session_id())
            .field("health", &self.health())
            .field("held", &self.held)
            .field("closable", &self.reopen.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The monitor would otherwise keep the session open (it holds a handle for its
        // heartbeat) and wait forever on a session that no one uses.
        self.monitor.abort();
        self.follower.abort();
        // Otherwise the last handle's drop ends it (zookeeper-client sends `closeSession`),
        // unless its runtime is gone, or going: then the close asked for is ours to finish.
        if let Some(reopen) = self.reopen.clone() {
            if self.end.is_close_asked() && !self.end.is_confirmed() {
                Retirement::of(&self.zk, reopen, self.ledger.clone(), self.end.clone())
                    .start(tokio::time::Instant::now());
            }
        }
    }
}
