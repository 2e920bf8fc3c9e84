//! The `partition` row: how soon after a network partition a lock holder is told that it lost
//! the lock, and how soon another session is granted it.
//!
//! One trial, for each client: a holder session connected through a [`Proxy`] takes the lock at
//! a fresh path; a second session, connected to the server directly, waits for the same lock
//! (the bench waits, watching the lock's children, until its node is queued); then the proxy
//! holds back every byte both ways, at t0. Measured in milliseconds after t0: when the holder is
//! *told* (the signal its library gives, [`signals`]), when the other session is *granted* the
//! lock, and the library's other signal if it has one. Every wait ends at t0 + [`DEADLINE`]:
//! what did not happen by then is `None`. zk-lock and zookeeper-client run in this process;
//! Curator and kazoo in their peers (the `partition` command), both sessions in the peer's
//! process. The proxy is healed once the trial is timed, so that the sessions close normally.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::{timeout, timeout_at, Instant};
use zk_lock::testing::{wait_for_children_within, Proxy};
use zookeeper_client::SessionState;

use crate::native::{err, zkc_lock, Native, Res};
use crate::peer::Peer;

/// The session timeout of both sessions of a trial, for every client. The server's tick is
/// 500 ms, so it accepts 1 to 10 s.
pub const SESSION: Duration = Duration::from_secs(4);
/// How long after the cut a trial waits for its signals: Curator declares LOST a session
/// timeout after SUSPENDED (itself up to 2/3 of one after the last answer), so 2.5 session
/// timeouts leave it time.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// How long connecting, the holder's acquire and the other session's queueing may take.
const SETUP: Duration = Duration::from_secs(30);

/// One trial, in milliseconds after the cut; `None`: not within the deadline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trial {
    pub told: Option<f64>,
    pub granted: Option<f64>,
    /// The library's other signal (see [`signals`]).
    pub other: Option<f64>,
}

/// What tells each client's holder it lost the lock, and its other signal (recorded too).
pub fn signals(client: &str) -> (&'static str, Option<&'static str>) {
    match client {
        "zk-lock" => ("guard lost()", None),
        // Its `LockClient` has no signal of its own: the session state is what an application
        // can watch. The first state after `SyncConnected` counts (`Disconnected`).
        "zookeeper-client" => ("state Disconnected", Some("Expired")),
        // ConnectionStateListener; kazoo's state listener. Both say SUSPENDED first.
        _ => ("LOST", Some("SUSPENDED")),
    }
}

/// A signal: resolves when it happened (or fails the trial).
type Signal = Pin<Box<dyn Future<Output = Res<Instant>> + Send>>;

/// One trial of an in-process client.
pub async fn native_trial(kind: Native, server: SocketAddr, observer: &zk_lock::Client, path: &str) -> Res<Trial> {
    let proxy = Proxy::start(server).map_err(|e| format!("start the proxy: {e}"))?;
    match kind {
        Native::ZkLock => zk_lock_trial(&proxy, server, observer, path).await,
        Native::ZkClient => zk_client_trial(&proxy, server, observer, path).await,
    }
}

async fn zk_lock_trial(proxy: &Proxy, server: SocketAddr, observer: &zk_lock::Client, path: &str) -> Res<Trial> {
    let connect = async |connect: String| {
        zk_lock::Client::builder(connect).session_timeout(SESSION).connect().await.map_err(err("connect"))
    };
    let holder = connect(proxy.connect_string()).await?;
    let guard = zk_lock::Mutex::with_client(&holder, path).lock_timeout(SETUP).await.map_err(err("holder lock"))?;
    let lost = guard.lost();
    let other_client = connect(server.to_string()).await?;
    let other = zk_lock::Mutex::with_client(&other_client, path);
    let contender = tokio::spawn(async move {
        let guard = other.lock_timeout(SETUP + DEADLINE).await.map_err(err("the other session's lock"))?;
        let granted = Instant::now();
        drop(guard);
        Ok(granted)
    });
    let stop_contender = contender.abort_handle();
    let told: Signal = Box::pin(async move {
        lost.await;
        Ok(Instant::now())
    });
    let granted: Signal = Box::pin(async move { contender.await.map_err(|e| e.to_string())? });
    let trial = cut_and_time(proxy, observer, path, told, granted, None).await;
    stop_contender.abort();
    trial
}

async fn zk_client_trial(proxy: &Proxy, server: SocketAddr, observer: &zk_lock::Client, path: &str) -> Res<Trial> {
    let connect = async |connect: String| {
        zookeeper_client::Client::connector()
            .with_session_timeout(SESSION)
            .connect(&connect)
            .await
            .map_err(|e| format!("connect: {e}"))
    };
    let holder = connect(proxy.connect_string()).await?;
    // Held until the trial ends.
    let _held = timeout(SETUP, zkc_lock(&holder, path)).await.map_err(|_| "holder lock timed out".to_owned())??;
    let other = connect(server.to_string()).await?;
    let other_path = path.to_owned();
    let contender = tokio::spawn(async move {
        let lock = zkc_lock(&other, &other_path).await?;
        let granted = Instant::now();
        drop(lock);
        Ok(granted)
    });
    let stop_contender = contender.abort_handle();
    let mut state = holder.state_watcher();
    let mut expiry = state.clone();
    let told: Signal = Box::pin(async move {
        while state.changed().await == SessionState::SyncConnected {}
        Ok(Instant::now())
    });
    let expired: Signal = Box::pin(async move {
        while expiry.changed().await != SessionState::Expired {}
        Ok(Instant::now())
    });
    let granted: Signal = Box::pin(async move { contender.await.map_err(|e| e.to_string())? });
    let trial = cut_and_time(proxy, observer, path, told, granted, Some(expired)).await;
    stop_contender.abort();
    trial
}

/// Waits until two nodes are queued at `path` (the holder's and the other session's).
async fn queued(observer: &zk_lock::Client, path: &str) -> Res<()> {
    wait_for_children_within(observer, path, SETUP, |children| children.len() >= 2)
        .await
        .map(drop)
        .map_err(|e| format!("the other session never queued: {e}"))
}

/// Once the other session is queued: cuts the proxy and times the signals, each until the
/// deadline; then heals the proxy.
async fn cut_and_time(
    proxy: &Proxy,
    observer: &zk_lock::Client,
    path: &str,
    told: Signal,
    granted: Signal,
    other: Option<Signal>,
) -> Res<Trial> {
    queued(observer, path).await?;
    let t0 = Instant::now();
    proxy.cut();
    let deadline = t0 + DEADLINE;
    let at = async |signal: Option<Signal>| -> Res<Option<f64>> {
        let Some(signal) = signal else { return Ok(None) };
        match timeout_at(deadline, signal).await {
            Ok(at) => Ok(Some(millis_between(t0, at?))),
            Err(_) => Ok(None),
        }
    };
    let (told, granted, other) = tokio::join!(at(Some(told)), at(Some(granted)), at(other));
    proxy.heal();
    Ok(Trial { told: told?, granted: granted?, other: other? })
}

/// Milliseconds from `t0` to `t`, negative if `t` came first.
fn millis_between(t0: Instant, t: Instant) -> f64 {
    match t.checked_duration_since(t0) {
        Some(after) => after.as_secs_f64() * 1000.0,
        None => -(t0 - t).as_secs_f64() * 1000.0,
    }
}

/// One trial on a peer: its `partition` command runs both sessions and reports, on the wall
/// clock, when each signal came.
pub async fn peer_trial(peer: &mut Peer, server: SocketAddr, observer: &zk_lock::Client, path: &str) -> Res<Trial> {
    let proxy = Proxy::start(server).map_err(|e| format!("start the proxy: {e}"))?;
    let command =
        format!("partition {path} {} {} {}", proxy.connect_string(), SESSION.as_millis(), DEADLINE.as_millis());
    peer.arm(&command, SETUP * 2).await?;
    // An armed peer waits for `go` whatever happens here, so it is sent either way.
    let queued = queued(observer, path).await;
    let t0 = wall_nanos();
    if queued.is_ok() {
        proxy.cut();
    }
    let line = peer.go(DEADLINE + SETUP).await;
    proxy.heal();
    let result = peer.finish(&line?).await?;
    queued?;
    let at = |key: &str| result[key].as_i64().map(|ns| (ns - t0) as f64 / 1e6);
    let (told, other) = (at("lost_ns"), at("suspended_ns"));
    Ok(Trial { told, granted: at("granted_ns"), other })
}

/// Unix-time nanoseconds, the clock the peers report on.
fn wall_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}
