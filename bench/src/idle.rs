//! The `idle` row (issue 22): one session takes N mutexes on N paths, then holds them and does
//! nothing for a while. What that costs the server (requests, bytes sent, CPU) and the client's
//! process (CPU, memory per guard) while idle, and how fast the N were taken: zk-lock and
//! zookeeper-client in this process, Curator in its peer JVM (the peer's `idle` command).
//!
//! Each case, client after client: a fresh session (timeout [`SESSION`]) on a root of its own
//! (`/bench/<client>/idle/n<N>`); one lock taken and released on `<root>/warm` before anything is
//! counted; the N locks on `<root>/l<i>`, [`IN_FLIGHT`] acquisitions at a time; the server's
//! counters settle ([`settle`]); the idle window ([`window`]); then the session is closed, which
//! releases the N holds, and once the server shows its nodes and connection gone, the N lock
//! paths (containers left empty) are deleted, so that the server's container sweeper has nothing
//! to do during a later window.
//!
//! Then, on the three-server ensemble (issue 33; [`ensemble_cases`]): S sessions of one client,
//! each holding H locks, all connected to one follower, idle; what they cost the leader and the
//! follower (requests and CPU, per session per second) against a window just before with none of
//! them. zk-lock's heartbeat is a `sync`, which the follower forwards to the leader;
//! zookeeper-client's pings, the reference, the follower answers alone.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};
use zookeeper_client::OwnedLockClient;

use crate::alloc::live_bytes;
use crate::native::{self, err, Native, Res, SETTLE};
use crate::procstat::{written, Cpu, Sockets};
use crate::report::{self, Record};
use crate::stats::{Counters, Server};
use crate::{ClientId, Ctx};

/// Session timeout of every idle session, as in the issue.
pub const SESSION: Duration = Duration::from_secs(10);
/// Lock acquisitions in flight at once while taking the N, for every client.
pub const IN_FLIGHT: usize = 64;
/// The first wait after the last take: one ping period of a Java ZooKeeper client at
/// [`SESSION`] (a third of it), the longest heartbeat of the three clients (zk-lock's beats
/// every ninth of it), and a little more.
const SETTLE_FIRST: Duration = Duration::from_millis(3_500);
/// Then the server's watch and ephemeral counts must hold still this long.
const STILL: Duration = Duration::from_secs(1);
/// What the server may write to files (its log, a snapshot) in [`STILL`] and count as settled.
const QUIET_FILES: u64 = 16 * 1024;
/// At most this long settling: the window then starts anyway, flagged.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
/// How long the server may take to show a closed session's nodes gone, and the lock paths'
/// deletion.
const CLEAN_LIMIT: Duration = Duration::from_secs(180);
/// Curator's bytes per guard, from its JVM's heap, are reported from this many locks up.
pub const HEAP_PER_GUARD_FROM: usize = 10_000;
/// Deletes in flight at once while removing the lock paths.
const DELETES_IN_FLIGHT: usize = 256;

/// How long taking `n` locks may take: a minute, plus 5 ms a lock.
fn take_limit(n: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_millis(5 * n as u64)
}

/// Locks held in the unmeasured warm-up case of each client.
const WARM_HELD: usize = 1000;
/// The warm-up case's window.
const WARM_WINDOW: Duration = Duration::from_secs(2);

/// Whether the row has ensemble cases to run with these options.
pub fn ensemble_wanted(opts: &crate::Opts) -> bool {
    opts.idle_ensemble_sessions > 0
        && !opts.idle_ensemble_held.is_empty()
        && opts.clients.iter().any(|client| client.native().is_some())
}

pub async fn row(ctx: &mut Ctx<'_>) {
    // kazoo is not asked for (issue 22: zk-lock, zookeeper-client, Curator).
    let clients: Vec<ClientId> = ctx.opts.clients.iter().copied().filter(|c| *c != ClientId::Kazoo).collect();
    // Unmeasured first, each client holds WARM_HELD locks through a short case, so that the
    // server's JIT has compiled what idle sessions make it do before the first window counts its
    // CPU (without it, whichever client comes first pays for the compilation).
    for &client in &clients {
        if let Err(e) = case(ctx, client, WARM_HELD, "warm-up", WARM_WINDOW).await {
            eprintln!("bench: idle warm-up {}: {e}", client.name());
        }
    }
    let length = ctx.opts.idle_window;
    for held in ctx.opts.idle_held.clone() {
        for &client in &clients {
            let record = match case(ctx, client, held, &format!("n{held}"), length).await {
                Ok((result, cleaned)) => {
                    let mut record = report::idle(client.name(), held, &result);
                    record.note_clean_up(cleaned);
                    record
                }
                Err(e) => Record::failed("idle", format!("N={held}"), client.name(), e),
            };
            crate::log(
                &record,
                &[
                    ("locks_per_s", 0, "locks/s taken"),
                    ("requests_per_s", 2, "requests/s"),
                    ("bytes_sent_per_s", 0, "B/s sent"),
                    ("server_cpu_ms_per_s", 1, "ms/s server CPU"),
                    ("client_cpu_ms_per_s", 1, "ms/s client CPU"),
                    ("bytes_per_guard", 0, "B/guard"),
                ],
            );
            ctx.records.push(record);
        }
    }
    if ensemble_wanted(ctx.opts) {
        ensemble_cases(ctx).await;
    }
}

/// One case of one client, on `/bench/<client>/idle/<slug>`: the measured result, and whether
/// its lock paths were deleted after it.
async fn case(ctx: &mut Ctx<'_>, client: ClientId, held: usize, slug: &str, length: Duration) -> Res<(Value, Res<()>)> {
    let server = ctx.server;
    let root = crate::path_of(client, "idle", slug);
    let measured = match client.native() {
        Some(kind) => native_case(kind, &ctx.connect, server, &root, held, length).await,
        None => peer_case(ctx, client, server, &root, held, length).await,
    };
    let cleaned = delete_lock_paths(&ctx.connect, &root, held).await;
    Ok((measured?, cleaned))
}

// ---- the in-process clients ----------------------------------------------------------------

async fn native_case(
    kind: Native,
    connect: &str,
    server: Server,
    root: &str,
    n: usize,
    length: Duration,
) -> Res<Value> {
    let base = Counters::read_async(server.addr).await?;
    let mut holder = Holder::connect(kind, connect).await?;
    let outcome = hold(&mut holder, server, root, n, length, &base).await;
    holder.close().await;
    let closed = wait_closed(server.addr, &base).await;
    let result = outcome?;
    closed?;
    Ok(result)
}

/// Takes the `n` locks, waits for the server to settle, and measures the window.
async fn hold(
    holder: &mut Holder,
    server: Server,
    root: &str,
    n: usize,
    length: Duration,
    base: &Counters,
) -> Res<Value> {
    holder.warm(root).await?;
    holder.reserve(n);
    // Background work of the warm-up (a release's reply) done.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let live_before = live_bytes();
    let start = Instant::now();
    holder.take(root, n, start + take_limit(n)).await?;
    let take = start.elapsed();
    let (settling, settled) = settle(server, std::process::id(), base, n).await?;
    let live_after = live_bytes();
    let mut result = window(server, std::process::id(), length).await?;
    result["count"] = json!(n);
    result["take_s"] = json!(take.as_secs_f64());
    result["settle_s"] = json!(settling.as_secs_f64());
    result["settled"] = json!(settled);
    result["bytes_per_guard"] = json!((live_after - live_before) as f64 / n.max(1) as f64);
    result["memory"] = json!("allocator");
    Ok(result)
}

/// One in-process client's session and the guards it holds.
enum Holder {
    ZkLock { client: zk_lock::Client, guards: Vec<zk_lock::MutexGuard> },
    ZkClient { zk: zookeeper_client::Client, guards: Vec<OwnedLockClient> },
}

impl Holder {
    async fn connect(kind: Native, connect: &str) -> Res<Holder> {
        Ok(match kind {
            Native::ZkLock => Holder::ZkLock {
                client: zk_lock::Client::builder(connect)
                    .session_timeout(SESSION)
                    .connect()
                    .await
                    .map_err(err("connect"))?,
                guards: Vec::new(),
            },
            Native::ZkClient => Holder::ZkClient {
                zk: zookeeper_client::Client::connector()
                    .with_session_timeout(SESSION)
                    .connect(connect)
                    .await
                    .map_err(|e| format!("connect: {e}"))?,
                guards: Vec::new(),
            },
        })
    }

    /// One lock taken and released on `<root>/warm`: lazy state and the root made before the
    /// baseline.
    async fn warm(&self, root: &str) -> Res<()> {
        let path = format!("{root}/warm");
        match self {
            Holder::ZkLock { client, .. } => {
                let guard = zk_lock::Mutex::with_client(client, path).lock().await.map_err(err("lock"))?;
                guard.release().await.map_err(err("release"))
            }
            Holder::ZkClient { zk, .. } => native::zkc_release(native::zkc_lock(zk, &path).await?).await,
        }
    }

    /// Room for `n` guards, made before the baseline: the bytes counted are what each guard
    /// holds, not its slot in our vector.
    fn reserve(&mut self, n: usize) {
        match self {
            Holder::ZkLock { guards, .. } => guards.reserve_exact(n),
            Holder::ZkClient { guards, .. } => guards.reserve_exact(n),
        }
    }

    async fn take(&mut self, root: &str, n: usize, deadline: Instant) -> Res<()> {
        let root = root.to_owned();
        match self {
            Holder::ZkLock { client, guards } => {
                let client = client.clone();
                take_all(n, deadline, guards, move |i| {
                    let mutex = zk_lock::Mutex::with_client(&client, format!("{root}/l{i}"));
                    async move { mutex.lock().await.map_err(err("lock")) }
                })
                .await
            }
            Holder::ZkClient { zk, guards } => {
                let zk = zk.clone();
                take_all(n, deadline, guards, move |i| {
                    let (zk, path) = (zk.clone(), format!("{root}/l{i}"));
                    async move { Ok(native::zkc_lock(&zk, &path).await?.into_owned()) }
                })
                .await
            }
        }
    }

    /// Ends the session, which releases every hold.
    async fn close(self) {
        match self {
            Holder::ZkLock { client, guards } => {
                // The server deletes the session's nodes as it closes it; the guards then only
                // learn that they are lost.
                client.close().await;
                drop(guards);
            }
            Holder::ZkClient { zk, guards } => {
                // No close of its own: each lock deletes its node in the background when dropped,
                // and the session ends with the last clone of the client.
                drop(guards);
                drop(zk);
            }
        }
    }
}

/// Takes `n` locks, `start(i)` taking the `i`th, [`IN_FLIGHT`] at a time, into `into`.
async fn take_all<T, F>(n: usize, deadline: Instant, into: &mut Vec<T>, start: impl Fn(usize) -> F) -> Res<()>
where
    T: Send + 'static,
    F: Future<Output = Res<T>> + Send + 'static,
{
    let mut tasks = JoinSet::new();
    let mut next = 0;
    loop {
        while next < n && tasks.len() < IN_FLIGHT {
            tasks.spawn(start(next));
            next += 1;
        }
        // Returning drops `tasks`, which cancels the acquisitions still running.
        match timeout_at(deadline, tasks.join_next()).await {
            Ok(None) => return Ok(()),
            Ok(Some(Ok(Ok(held)))) => into.push(held),
            Ok(Some(Ok(Err(e)))) => return Err(e),
            Ok(Some(Err(e))) => return Err(format!("a lock task failed: {e}")),
            Err(_) => {
                return Err(format!("took only {} of {n} locks in {:.0} s", into.len(), take_limit(n).as_secs_f64()))
            }
        }
    }
}

// ---- Curator -------------------------------------------------------------------------------

/// The peer takes the locks on a session of its own and prints `armed`; the window runs while it
/// waits for `go`; after `done` it closes that session.
async fn peer_case(
    ctx: &mut Ctx<'_>,
    client: ClientId,
    server: Server,
    root: &str,
    n: usize,
    length: Duration,
) -> Res<Value> {
    let base = Counters::read_async(server.addr).await?;
    let limit = take_limit(n);
    let peer = crate::peer_of(ctx, client)?;
    let pid = peer.pid().ok_or_else(|| format!("the {} peer has exited", peer.name))?;
    let command = format!("idle {root} {n} {IN_FLIGHT} {} {}", SESSION.as_millis(), limit.as_millis());
    peer.arm(&command, limit + Duration::from_secs(60)).await?;
    let measured = async {
        let (settling, settled) = settle(server, pid, &base, n).await?;
        let mut result = window(server, pid, length).await?;
        result["settle_s"] = json!(settling.as_secs_f64());
        result["settled"] = json!(settled);
        Ok::<Value, String>(result)
    }
    .await;
    // `go` and `done` whatever happened: the peer then closes the session.
    let line = peer.go(Duration::from_secs(60)).await?;
    let taken = peer.finish(&line).await?;
    let closed = wait_closed(server.addr, &base).await;
    let mut result = measured?;
    closed?;
    let count = taken["count"].as_f64().unwrap_or(0.0);
    let heap = taken["heap_after"].as_f64().zip(taken["heap_before"].as_f64()).map(|(after, before)| after - before);
    result["count"] = json!(count);
    result["take_s"] = taken["take_s"].clone();
    // The heap in use after a full GC moves by up to a megabyte or so from one reading to the
    // next: divided by fewer locks, that is all a figure would show.
    if count >= HEAP_PER_GUARD_FROM as f64 {
        result["bytes_per_guard"] = json!(heap.map(|bytes| bytes / count));
    }
    result["memory"] = json!("jvm-heap");
    Ok(result)
}

// ---- settling, the window, cleaning up -----------------------------------------------------

/// Waits until the server has settled after the take: [`SETTLE_FIRST`], then until all `n`
/// nodes are there, the watch and ephemeral counts held still for [`STILL`] (a client that
/// watches what it holds once the hold is old enough has set its watches) and the server wrote
/// no more than [`QUIET_FILES`] to files meanwhile (a snapshot, which the take's transactions
/// may start, is done). `client`: the client's pid. Returns how long it took and whether it
/// settled before [`SETTLE_LIMIT`].
async fn settle(server: Server, client: u32, base: &Counters, n: usize) -> Res<(Duration, bool)> {
    let start = Instant::now();
    tokio::time::sleep(SETTLE_FIRST).await;
    let mut last = Counters::read_async(server.addr).await?;
    loop {
        // No four-letter word between these two readings: its answer is not a file write.
        let first = Reading::take_async(server, client, true).await?;
        tokio::time::sleep(STILL).await;
        let second = Reading::take_async(server, client, false).await?;
        let now = Counters::read_async(server.addr).await?;
        let all_held = now.ephemerals >= base.ephemerals + n as u64;
        let still = now.watches == last.watches && now.ephemerals == last.ephemerals;
        let quiet = files_written(&first, &second).is_none_or(|bytes| bytes <= QUIET_FILES);
        if all_held && still && quiet {
            return Ok((start.elapsed(), true));
        }
        if start.elapsed() >= SETTLE_LIMIT {
            return Ok((start.elapsed(), false));
        }
        last = now;
    }
}

/// One reading of the costs: the client's and the server's CPU, the server's socket traffic and
/// written bytes.
struct Reading {
    at: std::time::Instant,
    client_cpu: Cpu,
    server_cpu: Option<Cpu>,
    sockets: Result<Sockets, String>,
    written: Option<u64>,
}

impl Reading {
    /// Blocking (`ss` runs for a few ms). The client's CPU is read last at the start of the
    /// window and first at its end, so that reading the rest, in this process, falls outside it.
    fn take(server: Server, client: u32, client_last: bool) -> Res<Reading> {
        let own = || Cpu::read(client).map(|cpu| (std::time::Instant::now(), cpu));
        let first = if client_last { None } else { Some(own()?) };
        let server_cpu = server.pid.map(Cpu::read).transpose()?;
        let written = server.pid.and_then(written);
        let sockets = Sockets::read(server.addr.port());
        let (at, client_cpu) = match first {
            Some(first) => first,
            None => own()?,
        };
        Ok(Reading { at, client_cpu, server_cpu, sockets, written })
    }

    async fn take_async(server: Server, client: u32, client_last: bool) -> Res<Reading> {
        tokio::task::spawn_blocking(move || Reading::take(server, client, client_last))
            .await
            .map_err(|e| e.to_string())?
    }
}

/// What the server wrote between two readings other than what it sent its clients: the bytes of
/// its `write` calls less those sent on the connections open at both (its log, its transaction
/// log, a snapshot, and the answer to a four-letter word, if one came in between).
fn files_written(first: &Reading, last: &Reading) -> Option<u64> {
    let written = last.written?.saturating_sub(first.written?);
    let sent = last.sockets.as_ref().ok()?.since(first.sockets.as_ref().ok()?).sent;
    Some(written.saturating_sub(sent))
}

/// The idle window: the server's counters, then the costs, `length` of nothing, the costs and the
/// counters again. Raw totals over the window, which the report turns into rates.
async fn window(server: Server, client: u32, length: Duration) -> Res<Value> {
    let before = Counters::read_async(server.addr).await?;
    let first = Reading::take_async(server, client, true).await?;
    tokio::time::sleep(length).await;
    let last = Reading::take_async(server, client, false).await?;
    let after = Counters::read_async(server.addr).await?;
    let requests = after.since(&before);
    let mut result = json!({
        "window_s": (last.at - first.at).as_secs_f64(),
        "requests": requests.packets,
        "writes": requests.writes,
        "reads": requests.reads,
        "packets_sent": after.sent.saturating_sub(before.sent),
        "znodes_changed": after.znodes as f64 - before.znodes as f64,
        "watches_changed": after.watches as f64 - before.watches as f64,
        "client_cpu_s": last.client_cpu.since(&first.client_cpu).as_secs_f64(),
    });
    if let (Some(first), Some(last)) = (&first.server_cpu, &last.server_cpu) {
        result["server_cpu_s"] = json!(last.since(first).as_secs_f64());
    }
    if let (Some(first), Some(last)) = (first.written, last.written) {
        result["server_written"] = json!(last.saturating_sub(first));
    }
    if let Some(bytes) = files_written(&first, &last) {
        result["server_files_written"] = json!(bytes);
    }
    match (&first.sockets, &last.sockets) {
        (Ok(first), Ok(last)) => {
            let traffic = last.since(first);
            result["bytes_sent"] = json!(traffic.sent);
            result["bytes_received"] = json!(traffic.received);
            result["server_connections"] = json!(last.count());
        }
        (Err(e), _) | (_, Err(e)) => result["sockets_error"] = json!(e),
    }
    Ok(result)
}

/// Waits (bounded) until the server is back where it was at `base`: no more ephemeral nodes and
/// connections than then.
async fn wait_closed(server: SocketAddr, base: &Counters) -> Res<()> {
    let deadline = Instant::now() + CLEAN_LIMIT;
    loop {
        let now = Counters::read_async(server).await?;
        if now.ephemerals <= base.ephemerals && now.connections <= base.connections {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} ephemeral nodes and {} connections {} s after the session's close ({} and {} before it)",
                now.ephemerals,
                now.connections,
                CLEAN_LIMIT.as_secs(),
                base.ephemerals,
                base.connections
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes a case's lock paths (`<root>/l<i>`, `<root>/warm`), then `root`: containers, left
/// empty, that the server would otherwise sweep (at most 10,000 a minute by default) during the
/// windows that follow. A path already gone is fine.
pub async fn delete_lock_paths(connect: &str, root: &str, n: usize) -> Res<()> {
    let paths = (0..n).map(|i| format!("{root}/l{i}")).chain([format!("{root}/warm")]);
    delete_paths(connect, paths, &[root.to_owned()]).await
}

/// Deletes `paths`, [`DELETES_IN_FLIGHT`] at a time, then `parents`, in order. A path already
/// gone is fine.
async fn delete_paths(connect: &str, mut paths: impl Iterator<Item = String>, parents: &[String]) -> Res<()> {
    let zk = native::connect_zk_client(connect).await?;
    let deadline = Instant::now() + CLEAN_LIMIT;
    let mut tasks = JoinSet::new();
    loop {
        while tasks.len() < DELETES_IN_FLIGHT {
            let Some(path) = paths.next() else { break };
            let zk = zk.clone();
            tasks.spawn(async move { delete(&zk, &path).await });
        }
        match timeout_at(deadline, tasks.join_next()).await {
            Ok(None) => break,
            Ok(Some(Ok(Ok(())))) => {}
            Ok(Some(Ok(Err(e)))) => return Err(e),
            Ok(Some(Err(e))) => return Err(e.to_string()),
            Err(_) => return Err(format!("deleting the lock paths took over {} s", CLEAN_LIMIT.as_secs())),
        }
    }
    for parent in parents {
        delete(&zk, parent).await?;
    }
    drop(zk);
    tokio::time::sleep(SETTLE).await;
    Ok(())
}

async fn delete(zk: &zookeeper_client::Client, path: &str) -> Res<()> {
    match zk.delete(path, None).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
        Err(e) => Err(format!("delete {path}: {e}")),
    }
}

// ---- on the ensemble (issue 33) ------------------------------------------------------------

/// Syncs sent through the follower before the ensemble cases, so that the follower's and the
/// leader's JIT have compiled the `sync` path before a window counts their CPU.
const SYNC_WARM: usize = 20_000;
/// Syncs in flight at once during that warm-up.
const SYNC_IN_FLIGHT: usize = 64;

/// The ensemble cases: for each H of `--idle-ensemble-held`, for zk-lock and zookeeper-client,
/// `--idle-ensemble-sessions` sessions connected to a follower, each holding H locks, idle.
/// Before them, unmeasured: [`SYNC_WARM`] syncs through the follower, and one short case per
/// client (each session holding one lock), for the JIT of both servers.
async fn ensemble_cases(ctx: &mut Ctx<'_>) {
    let clients: Vec<ClientId> = ctx.opts.clients.iter().copied().filter(|c| c.native().is_some()).collect();
    let sessions = ctx.opts.idle_ensemble_sessions;
    let members = crate::ensemble::get(ctx)
        .await
        .map(|ensemble| (ensemble.member(ensemble.leader), ensemble.member(ensemble.follower())));
    let (leader, follower) = match members {
        Ok(members) => members,
        Err(e) => {
            for &client in &clients {
                let record = Record::failed("idle-ensemble", "-", client.name(), format!("ensemble: {e}"));
                crate::log(&record, &[]);
                ctx.records.push(record);
            }
            return;
        }
    };
    eprintln!("bench: idle on the ensemble: {sessions} sessions per case, connected to a follower ({})", follower.addr);
    if let Err(e) = warm_syncs(follower.addr, SYNC_WARM).await {
        eprintln!("bench: idle ensemble sync warm-up: {e}");
    }
    for &client in &clients {
        let Some(kind) = client.native() else { continue };
        let root = crate::path_of(client, "idle-ensemble", "warm-up");
        if let Err(e) = ensemble_case(kind, leader, follower, sessions, 1, &root, WARM_WINDOW, false).await {
            eprintln!("bench: idle ensemble warm-up {}: {e}", client.name());
        }
    }
    let length = whole_heartbeats(ctx.opts.idle_window);
    for held in ctx.opts.idle_ensemble_held.clone() {
        for &client in &clients {
            let Some(kind) = client.native() else { continue };
            let root = crate::path_of(client, "idle-ensemble", &format!("s{sessions}h{held}"));
            let record = match ensemble_case(kind, leader, follower, sessions, held, &root, length, true).await {
                Ok((result, cleaned)) => {
                    let mut record = report::idle_ensemble(client.name(), &result);
                    record.note_clean_up(cleaned);
                    record
                }
                Err(e) => Record::failed("idle-ensemble", report::idle_ensemble_case(sessions, held), client.name(), e),
            };
            crate::log(
                &record,
                &[
                    ("locks_per_s", 0, "locks/s taken"),
                    ("leader_requests_per_session_s", 3, "leader req/s per session"),
                    ("leader_cpu_us_per_session_s", 1, "leader CPU µs/s per session"),
                    ("follower_requests_per_session_s", 3, "follower req/s per session"),
                    ("follower_cpu_us_per_session_s", 1, "follower CPU µs/s per session"),
                ],
            );
            ctx.records.push(record);
        }
    }
}

/// `window` rounded up to a whole number of zk-lock heartbeat periods at [`SESSION`] (`T/9`).
/// The sessions of a case connect within a fraction of a period, so their heartbeats are nearly
/// in phase: a window of 4.5 periods counted 4 or 5 heartbeats from every session alike (0.8 or
/// 1.0 requests/s per session for 0.9), a whole number of periods counts the same number from
/// each whatever the phase.
fn whole_heartbeats(window: Duration) -> Duration {
    let period = SESSION / 9;
    // A period is a whole number of nanoseconds short of T/9: allow for that, so that a window
    // already a whole number of periods (20 s) is not rounded up one more.
    let periods = (window.as_secs_f64() / period.as_secs_f64() - 1e-6).ceil().max(1.0);
    period * periods as u32
}

/// `count` syncs of `/` on one session connected to `server`, [`SYNC_IN_FLIGHT`] at a time.
async fn warm_syncs(server: SocketAddr, count: usize) -> Res<()> {
    let zk = native::connect_zk_client(&server.to_string()).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut tasks = JoinSet::new();
    let mut sent = 0;
    loop {
        while sent < count && tasks.len() < SYNC_IN_FLIGHT {
            let zk = zk.clone();
            tasks.spawn(async move { zk.sync("/").await.map_err(|e| format!("sync: {e}")) });
            sent += 1;
        }
        match timeout_at(deadline, tasks.join_next()).await {
            Ok(None) => return Ok(()),
            Ok(Some(Ok(Ok(())))) => {}
            Ok(Some(Ok(Err(e)))) => return Err(e),
            Ok(Some(Err(e))) => return Err(e.to_string()),
            Err(_) => return Err(format!("{count} syncs took over 120 s")),
        }
    }
}

/// One ensemble case: `sessions` sessions of `kind` on the follower, each holding `held` locks
/// under `<root>/s<j>`; with `baseline`, also a window without them before they connect and
/// one after they closed. The measured result and whether the lock paths were deleted after it.
#[allow(clippy::too_many_arguments)]
async fn ensemble_case(
    kind: Native,
    leader: Server,
    follower: Server,
    sessions: usize,
    held: usize,
    root: &str,
    length: Duration,
    baseline: bool,
) -> Res<(Value, Res<()>)> {
    let connect = follower.addr.to_string();
    let base = Counters::read_async(follower.addr).await?;
    let before = if baseline { Some(quiet_window(leader, follower, length, true).await?) } else { None };
    let mut holders = Vec::with_capacity(sessions);
    let outcome =
        hold_many(&mut holders, kind, &connect, (leader, follower), sessions, held, root, length, &base).await;
    for holder in holders {
        holder.close().await;
    }
    let closed = wait_closed(follower.addr, &base).await;
    let paths = (0..sessions).flat_map(|j| {
        let session_root = format!("{root}/s{j}");
        (0..held).map(move |i| format!("{session_root}/l{i}")).chain([format!("{root}/s{j}/warm")])
    });
    let parents: Vec<String> = (0..sessions).map(|j| format!("{root}/s{j}")).chain([root.to_owned()]).collect();
    let cleaned = delete_paths(&connect, paths, &parents).await;
    let mut result = outcome?;
    closed?;
    if let Some(before) = before {
        result["base"] = before;
        // And once more after the sessions closed: the figures per session are taken against
        // the mean of the two, so that a drift of the members' own work does not land on them.
        result["base_after"] = quiet_window(leader, follower, length, true).await?;
    }
    Ok((result, cleaned))
}

/// Connects the `sessions` holders, takes `held` locks on each, waits for the servers to
/// settle, and measures the window.
#[allow(clippy::too_many_arguments)]
async fn hold_many(
    holders: &mut Vec<Holder>,
    kind: Native,
    connect: &str,
    (leader, follower): (Server, Server),
    sessions: usize,
    held: usize,
    root: &str,
    length: Duration,
    base: &Counters,
) -> Res<Value> {
    for _ in 0..sessions {
        holders.push(Holder::connect(kind, connect).await?);
    }
    for (j, holder) in holders.iter_mut().enumerate() {
        holder.warm(&format!("{root}/s{j}")).await?;
        holder.reserve(held);
    }
    // The warm-up locks' paths, left empty, would be swept by the leader's container manager
    // (a delete each, in its request pipeline) during the window: deleted now instead.
    tokio::time::sleep(Duration::from_millis(300)).await;
    delete_paths(connect, (0..sessions).map(|j| format!("{root}/s{j}/warm")), &[]).await?;
    let n = sessions * held;
    let start = Instant::now();
    let deadline = start + take_limit(n);
    for (j, holder) in holders.iter_mut().enumerate() {
        holder.take(&format!("{root}/s{j}"), held, deadline).await?;
    }
    let take = start.elapsed();
    let (settling, settled) = settle(follower, std::process::id(), base, n).await?;
    let window = quiet_window(leader, follower, length, false).await?;
    Ok(json!({
        "sessions": sessions,
        "held_per_session": held,
        "count": n,
        "take_s": take.as_secs_f64(),
        "settle_s": settling.as_secs_f64(),
        "settled": settled,
        "window": window,
    }))
}

/// The leader's and the follower's counters and CPU at one moment.
struct MembersReading {
    leader: Counters,
    follower: Counters,
    leader_cpu: Option<Cpu>,
    follower_cpu: Option<Cpu>,
    at: std::time::Instant,
}

impl MembersReading {
    /// Blocking. The counters are read before the CPU at the start of a window (`counters_first`)
    /// and after it at its end, so that the CPU interval lies inside the counted one.
    fn take(leader: Server, follower: Server, counters_first: bool) -> Res<MembersReading> {
        let counters = || Ok::<_, String>((Counters::read(leader.addr)?, Counters::read(follower.addr)?));
        let cpu = || {
            let leader_cpu = leader.pid.map(Cpu::read).transpose()?;
            let follower_cpu = follower.pid.map(Cpu::read).transpose()?;
            Ok::<_, String>((leader_cpu, follower_cpu, std::time::Instant::now()))
        };
        let ((leader, follower), (leader_cpu, follower_cpu, at)) = if counters_first {
            let counted = counters()?;
            (counted, cpu()?)
        } else {
            let cpus = cpu()?;
            (counters()?, cpus)
        };
        Ok(MembersReading { leader, follower, leader_cpu, follower_cpu, at })
    }

    async fn take_async(leader: Server, follower: Server, counters_first: bool) -> Res<MembersReading> {
        tokio::task::spawn_blocking(move || MembersReading::take(leader, follower, counters_first))
            .await
            .map_err(|e| e.to_string())?
    }
}

/// Waits (bounded by [`SETTLE_LIMIT`]) until neither the leader nor the follower wrote more than
/// [`QUIET_FILES`] in [`STILL`] (a snapshot, which the take's or the clean-up's transactions may
/// start, is done; their sockets' idle traffic is far less) and, for a window without the
/// sessions (`idle_leader`), the leader handled no request in it (a clean-up's or the container
/// manager's deletes are over), then measures a window. The window's `quiet` says whether they
/// were.
async fn quiet_window(leader: Server, follower: Server, length: Duration, idle_leader: bool) -> Res<Value> {
    let start = Instant::now();
    let written = move || [leader.pid.and_then(written), follower.pid.and_then(written)];
    let quiet = loop {
        // No four-letter word between the two readings of what they wrote: its answer (`mntr`'s
        // is over 16 KB) is not a file write.
        let queued = Counters::read_async(leader.addr).await?.queued;
        let first = written();
        tokio::time::sleep(STILL).await;
        let second = written();
        let still = !idle_leader || Counters::read_async(leader.addr).await?.queued == queued;
        let calm = first.iter().zip(&second).all(|(a, b)| match (a, b) {
            (Some(a), Some(b)) => b.saturating_sub(*a) <= QUIET_FILES,
            _ => true,
        });
        if calm && still {
            break true;
        }
        if start.elapsed() >= SETTLE_LIMIT {
            break false;
        }
    };
    let mut result = members_window(leader, follower, length).await?;
    result["quiet"] = json!(quiet);
    Ok(result)
}

/// A window of `length` on the ensemble: what the leader and the follower received and spent.
async fn members_window(leader: Server, follower: Server, length: Duration) -> Res<Value> {
    let first = MembersReading::take_async(leader, follower, true).await?;
    tokio::time::sleep(length).await;
    let last = MembersReading::take_async(leader, follower, false).await?;
    let at_follower = last.follower.since(&first.follower);
    let mut result = json!({
        "window_s": (last.at - first.at).as_secs_f64(),
        // What entered the leader's request pipeline: the syncs (and writes) its followers
        // forwarded, and its own clients' requests.
        "leader_requests": last.leader.queued.saturating_sub(first.leader.queued),
        // Requests from clients connected to the leader itself (none of ours are).
        "leader_received": last.leader.since(&first.leader).packets,
        "follower_requests": at_follower.packets,
        "follower_writes": at_follower.writes,
        "follower_reads": at_follower.reads,
        "znodes_changed": last.follower.znodes as f64 - first.follower.znodes as f64,
        "follower_watches_changed": last.follower.watches as f64 - first.follower.watches as f64,
    });
    for (key, first, last) in [
        ("leader_cpu_s", &first.leader_cpu, &last.leader_cpu),
        ("follower_cpu_s", &first.follower_cpu, &last.follower_cpu),
    ] {
        if let (Some(first), Some(last)) = (first, last) {
            result[key] = json!(last.since(first).as_secs_f64());
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::whole_heartbeats;

    #[test]
    fn windows_are_whole_heartbeat_periods() {
        let period = Duration::from_secs(10) / 9;
        assert_eq!(whole_heartbeats(Duration::from_secs(20)), period * 18);
        assert_eq!(whole_heartbeats(Duration::from_secs(5)), period * 5);
        assert_eq!(whole_heartbeats(Duration::from_millis(1)), period);
    }
}
