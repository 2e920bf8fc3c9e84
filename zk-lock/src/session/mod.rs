//! One ZooKeeper session: when its locks are lost ([`liveness`]), every node the library is
//! responsible for on it, in one table that also knows which are held ([`node_table`]; each held
//! node's state in [`held_status`], followed by watches: [`follow`]), its retirement once a loss
//! has been declared ([`retire`]), and its end, asked for by `Client::close` and confirmed by the
//! server ([`end`]).
//!
//! The bottom layer above the foundations: it uses zookeeper-client, the background runtime and
//! `error`.

mod end;
mod follow;
mod held_status;
mod io_runtime;
mod liveness;
mod node_table;
mod renewal;
mod retire;

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::end::SessionEnd;
pub(crate) use self::held_status::{Change, End, HeldNodeEvents, HeldStatus};
use self::node_table::NodeTable;
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
    /// Since when its connection has been down (not fully connected: a read-only server takes
    /// no lock node), if it is down now: what a wait that times out says of an outage.
    pub down_since: Option<tokio::time::Instant>,
}

/// A session's connection as its client's [`ConnectionState`](crate::ConnectionState) follows
/// it: on a channel of its own, since a change of connection noted in the [`Health`] wakes
/// nobody (every waiting acquisition and release watches that one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Link {
    /// The connection is up (fully connected).
    pub up: bool,
    /// How many times the session's locks were lost.
    pub losses: u64,
    /// The session must not be used again.
    pub terminated: bool,
}

/// A live ZooKeeper session shared by the client and every guard acquired on it.
pub(crate) struct Session {
    pub zk: zookeeper_client::Client,
    health: watch::Receiver<Health>,
    link: watch::Receiver<Link>,
    /// Every node the library is responsible for on the session, held or not.
    nodes: Arc<Mutex<NodeTable>>,
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
        // Up from the start if it is: a follower that looks before the monitor does sees no flap.
        let up = zk.state() == zookeeper_client::SessionState::SyncConnected;
        let (link_sender, link) = watch::channel(Link { up, ..Link::default() });
        let nodes = Arc::new(Mutex::new(NodeTable::default()));
        let end = Arc::new(SessionEnd::new());
        // The monitor runs on zk-lock's own runtime: it declares a loss even when the runtime
        // of the session's I/O is stuck.
        let monitor = background::spawn(liveness::monitor(
            zk.clone(),
            requested,
            sender,
            link_sender,
            nodes.clone(),
            end.clone(),
            reopen.clone(),
        ));
        let period = liveness::heartbeat_period(zk.session_timeout());
        // With the session's I/O: see `follow`.
        let follower = background::spawn_here(follow::Follower::new(zk.clone(), nodes.clone(), period).run());
        Arc::new_cyclic(|session| {
            if let Some(reopen) = &reopen {
                let retirement = Retirement::of(&zk, reopen.clone(), nodes.clone(), end.clone());
                io_runtime::watch_for_shutdown(session.clone(), retirement);
            }
            Self { zk, health, link, nodes, end, reopen, monitor, follower }
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

    /// Its connection, as the client's connection state follows it.
    pub(crate) fn link(&self) -> watch::Receiver<Link> {
        self.link.clone()
    }

    /// Since when its connection has been down, if it is down now.
    pub(crate) fn down_since(&self) -> Option<tokio::time::Instant> {
        self.health.borrow().down_since
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

    /// Follows `node_path`, the node of the table's entry `entry` (`None`: a node without one,
    /// which gets its own), granted after `losses_seen` losses, until [`let_go`](Self::let_go):
    /// `events` hears of its loss or revocation. Returns its status and its entry's id.
    pub(crate) fn hold<E: HeldNodeEvents + 'static>(
        &self,
        entry: Option<u64>,
        node_path: Arc<str>,
        losses_seen: u64,
        events: E,
    ) -> (Arc<HeldStatus<E>>, u64) {
        let status = Arc::new(HeldStatus::new(node_path, losses_seen, events));
        let (entry, lost_since) = self.nodes().hold(entry, status.clone());
        // Told outside the table's lock: a loss's events run code of the hold's.
        if let Some(reason) = lost_since {
            status.lose(reason);
        }
        (status, entry)
    }

    /// Stops following the held node of the table's entry `entry`: it is released, or lost and
    /// let go.
    pub(crate) fn let_go(&self, entry: u64) {
        self.nodes().let_go(entry);
    }

    /// Every node the library is responsible for on this session.
    pub(crate) fn nodes(&self) -> std::sync::MutexGuard<'_, NodeTable> {
        node_table::lock(&self.nodes)
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("session_id", &self.zk.session_id())
            .field("health", &self.health())
            .field("nodes", &node_table::Summary(&self.nodes))
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
                Retirement::of(&self.zk, reopen, self.nodes.clone(), self.end.clone())
                    .start(tokio::time::Instant::now());
            }
        }
    }
}
