//! When a session's locks are lost, decided on the client's own clock, before the ensemble could
//! expire the session.
//!
//! The leader expires a session one session timeout `T` after it last renewed it, at the earliest
//! (it rounds expiry times up to its tick). `renewal` keeps the latest moment `p` after which the
//! leader provably renewed it, from a chain of answered `sync`s; the monitor keeps such proofs
//! coming with a heartbeat (a `sync` every `T/9`, which also stands in for zookeeper-client's own
//! ping) and declares the locks lost at `p + 4/5 T`: `T/5` before anyone else can be granted
//! them (docs/reliability.md derives the bound). A terminal state of the client (expired,
//! closed) loses them at once, and so does `Client::close`, which also ends the session on the
//! server.
//!
//! Only a server in touch with the leader answers a `sync`: a follower cut off from the leader
//! answers reads and pings from its own state until it notices, `syncLimit` ticks later, which can
//! be long after the leader expired the session. The heartbeat is one `sync` whatever the session
//! holds: a held lock costs nothing while idle. Held nodes are followed by watches instead
//! (`follow`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use zookeeper_client::{Client as ZkClient, SessionState};

use super::end::SessionEnd;
use super::node_table::{self, NodeTable};
use super::renewal::{ping_bound, Renewals};
use super::retire::{Reopen, Retirement};
use super::{Health, Link};
use crate::error::LostReason;

/// The locks are declared lost 4/5 of the session timeout after the moment the leader provably
/// renewed the session after.
fn loss_delay(timeout: Duration) -> Duration {
    timeout * 4 / 5
}

/// Heartbeats per session timeout: one every `T/9`, within zookeeper-client's ping interval
/// (3/8 of the connection timeout the client sets, `0.3 T`), so it never pings on its own.
const BEATS_PER_TIMEOUT: u32 = 9;

/// The heartbeat's period for a session timeout `timeout`: also how long a hold lasts before a
/// watch follows it (`follow`).
pub(super) fn heartbeat_period(timeout: Duration) -> Duration {
    timeout / BEATS_PER_TIMEOUT
}

/// Follows the session until it must not be used any more, reporting losses to `health`.
/// `proven`: a moment the leader renewed the session after (the send of its connect request).
pub(super) async fn monitor(
    zk: ZkClient,
    proven: Instant,
    health: watch::Sender<Health>,
    link: watch::Sender<Link>,
    nodes: Arc<Mutex<NodeTable>>,
    end: Arc<SessionEnd>,
    reopen: Option<Reopen>,
) {
    let timeout = zk.session_timeout();
    let lose_after = loss_delay(timeout);
    let mut states = zk.state_watcher();
    let mut state = states.state();
    note_connection(&health, &link, state);
    let mut heartbeat = Heartbeat::new(zk.clone(), heartbeat_period(timeout));
    // None after a loss until a whole chain of requests sent since proves a renewal again.
    let mut renewals = Renewals::new(ping_bound(timeout), Some(proven));
    // The latest moment the connection was seen up with no change of state unseen: a later
    // change to `SyncConnected` is a new connection, which the leader revalidated, after it.
    let mut seen_up_at = (state == SessionState::SyncConnected).then(Instant::now);
    loop {
        if let Some(reason) = terminal_reason(state) {
            // Not our own doing: a close or a retirement makes it give up and returns first.
            if state == SessionState::AuthFailed {
                crate::trace::authentication_refused(&zk.session_id());
            }
            lose(&health, &link, &nodes, reason, true);
            match reopen {
                // Closed by us (all handles dropped): the server ended it.
                _ if state == SessionState::Closed => end.confirm(&nodes),
                // Expired by the server, or given up by zookeeper-client after 1.4 T without a
                // connection, or its credentials refused on a reconnect: the server may still
                // hold it, so close it there (at once: it already is expired, or unreachable).
                Some(reopen) => end_on_server(&zk, &nodes, &end, reopen, Instant::now()),
                // A session we cannot reach again: take the client's word.
                None => end.confirm(&nodes),
            }
            return;
        }
        let deadline = renewals.proven().map(|proven| proven + lose_after);
        // Biased: a change of state sent before the select polls it wins over the other branches,
        // so when another branch wins, no change had been sent by `polled_at`.
        let polled_at = Instant::now();
        let mut state_changed = false;
        tokio::select! {
            biased;
            () = end.close_asked() => {
                // Told before the server deletes the nodes: the holders learn it first.
                lose(&health, &link, &nodes, LostReason::SessionClosed, true);
                if let Some(reopen) = reopen {
                    // With its runtime gone, nothing can be sent on the session any more.
                    if !end.is_io_gone() {
                        stop_reconnecting(&zk);
                        // Until the server refused the bogus credentials (one round trip when
                        // connected): a connection of ours it drops before that would reconnect
                        // and take the session back from the retirement's.
                        let refused = async { while !state.is_terminated() { state = states.changed().await } };
                        let _ = tokio::time::timeout(heartbeat_period(timeout), refused).await;
                    }
                    end_on_server(&zk, &nodes, &end, reopen, Instant::now());
                }
                // Else a session the user opened: it ends when the user drops it.
                return;
            }
            next = states.changed() => {
                state_changed = true;
                note_connection(&health, &link, next);
                if next == SessionState::SyncConnected {
                    if let Some(up_at) = seen_up_at {
                        renewals.reconnected(up_at);
                    }
                }
                state = next;
            }
            // One request at a time: each one is sent after the one before was answered.
            (sent, answered) = heartbeat.answered() => renewals.record(sent, answered),
            () = sleep_until(deadline) => {
                lose(&health, &link, &nodes, LostReason::ConnectionLost, reopen.is_some());
                if let Some(reopen) = reopen {
                    // Closed no earlier than the server could expire it: closing it sooner would
                    // hand its locks to the next holder sooner than a plain expiry would.
                    let earliest_expiry = renewals.proven().map_or_else(Instant::now, |proven| proven + timeout);
                    stop_reconnecting(&zk);
                    end_on_server(&zk, &nodes, &end, reopen, earliest_expiry);
                    return;
                }
                // Declared once per silence: a session we cannot retire is lost again only after
                // a renewal is proven by requests sent after this loss.
                renewals.forget(Instant::now());
                heartbeat.send_again();
            }
        }
        if !state_changed && state == SessionState::SyncConnected {
            seen_up_at = Some(polled_at);
        }
    }
}

/// Notes in `health` since when the connection has been down, if `state` is not connected.
/// Nobody waits for it (a wait that times out reads it), so nobody is woken: every waiting
/// acquisition and every release watch the health for a loss.
fn note_connection(health: &watch::Sender<Health>, link: &watch::Sender<Link>, state: SessionState) {
    let now = Instant::now();
    let up = state == SessionState::SyncConnected;
    health.send_if_modified(|health| {
        health.down_since = (!up).then(|| health.down_since.unwrap_or(now));
        false
    });
    link.send_if_modified(|link| std::mem::replace(&mut link.up, up) != up);
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A scheme no server knows: authenticating with it fails.
const NO_SUCH_SCHEME: &str = "zk-lock-retired";

/// Makes zookeeper-client give the session up for good: its next connection fails to
/// authenticate (the request is sent now, or first thing after it reconnects), and a client
/// whose authentication failed never connects again. Otherwise it would reconnect the session
/// as often as the retirement's own connection takes it over (the server drops the older
/// connection of a session), and neither would get to close it.
fn stop_reconnecting(zk: &ZkClient) {
    drop(zk.auth(NO_SUCH_SCHEME, b""));
}

/// Retires the session: closed on the server as soon as it is reachable, not before
/// `not_before` unless a close is asked for.
fn end_on_server(
    zk: &ZkClient,
    nodes: &Arc<Mutex<NodeTable>>,
    end: &Arc<SessionEnd>,
    reopen: Reopen,
    not_before: Instant,
) {
    Retirement::of(zk, reopen, nodes.clone(), end.clone()).start(not_before);
}

fn terminal_reason(state: SessionState) -> Option<LostReason> {
    match state {
        SessionState::Expired => Some(LostReason::SessionExpired),
        SessionState::Closed | SessionState::AuthFailed => Some(LostReason::SessionClosed),
        _ => None,
    }
}

/// Declares the session's locks lost: to its guards (`health`) and to every node held on it.
fn lose(
    health: &watch::Sender<Health>,
    link: &watch::Sender<Link>,
    nodes: &Mutex<NodeTable>,
    reason: LostReason,
    terminated: bool,
) {
    // A retired session has lost everything already; its end is no second loss.
    if health.borrow().terminated {
        return;
    }
    // The held nodes first: whoever wakes on the session's loss finds them lost.
    let (losses, held) = node_table::lock(nodes).lose_all(reason);
    // Told outside the table's lock: a loss's events run code of the hold's.
    for status in held {
        status.lose(reason);
    }
    health.send_modify(|health| {
        health.losses = losses;
        health.reason = Some(reason);
        health.terminated = terminated;
    });
    link.send_modify(|link| {
        link.losses = losses;
        link.terminated = terminated;
    });
}

type Reply = Pin<Box<dyn Future<Output = Result<(), zookeeper_client::Error>> + Send>>;

/// One `sync` at a time, every `period`, each remembered with the time it was sent.
struct Heartbeat {
    zk: ZkClient,
    period: Duration,
    next_send: Instant,
    in_flight: Option<(Instant, Reply)>,
}

impl Heartbeat {
    fn new(zk: ZkClient, period: Duration) -> Self {
        Self { zk, period, next_send: Instant::now() + period, in_flight: None }
    }

    /// Forgets the request in flight and sends a new one at once.
    fn send_again(&mut self) {
        self.in_flight = None;
        self.next_send = Instant::now();
    }

    /// Resolves with the send and answer times of the next request the server answers. Cancel
    /// safe: the request in flight stays in `self`.
    async fn answered(&mut self) -> (Instant, Instant) {
        loop {
            if self.in_flight.is_none() {
                tokio::time::sleep_until(self.next_send).await;
                // Sent while disconnected, zookeeper-client queues it until it reconnects: the
                // time taken here is then earlier than the real send, which is the safe side.
                let sent = Instant::now();
                let reply = beat(self.zk.clone());
                self.in_flight = Some((sent, reply));
                self.next_send = sent + self.period;
            }
            let Some((sent, reply)) = self.in_flight.as_mut() else { continue };
            let (sent, result) = (*sent, reply.await);
            self.in_flight = None;
            match result {
                Ok(()) => return (sent, Instant::now()),
                // Failed with its connection: ask again at once (it waits for the reconnect).
                Err(_) => self.next_send = Instant::now() + Duration::from_millis(10),
            }
        }
    }
}

/// One heartbeat: a `sync` of the root, which a follower cannot answer without the leader.
fn beat(zk: ZkClient) -> Reply {
    Box::pin(async move { zk.sync("/").await })
}
