//! Fault injection: several worker processes contend on the same locks of a real three-server
//! ensemble while servers are killed, the ensemble is restarted, connections drop mid-`create`,
//! workers are frozen past their session timeout, and acquisitions are cancelled or panic; the
//! soak adds partitions of workers and faults between the servers (a follower or the leader cut
//! off from the others, the leader frozen, a slow link to the leader).
//! Every grant and fenced write goes into a `zk_lock::testing::History`, whose checker judges
//! it; afterwards no lock node may be left behind.
//!
//! The workers are this binary run again with only [`fault_worker`] selected (see
//! `faults::fleet`). The soak mode runs by hand:
//!
//! ```text
//! ZK_LOCK_SOAK_ACQUISITIONS=10000 cargo test --release --test faults soak -- --ignored --nocapture
//! ```
//!
//! Tests that kill servers take the one ensemble of this binary for themselves and leave it
//! whole again; the others share it.
//!
//! A binary of its own: it runs itself again as the worker processes, and kills, freezes and
//! restarts the servers of its ensemble, which would disturb any other test sharing them.

mod faults {
    pub mod fleet;
    pub mod line;
    pub mod store;
    pub mod worker;
}

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use faults::fleet::{Fleet, Reports};
use faults::store::Store;
use faults::worker::{base_path, Config, Role, SEMAPHORE_LEASES};
use tokio::sync::RwLock;
use tokio::time::Instant;
use zk_lock::testing::{wait_for_children_within, FencedWrite, History, Proxy, TestingCluster, Violation};
use zookeeper_client::{Client as ZkClient, Error as ZkError};

/// Session timeout of the contending workers: long enough that sessions outlive an election.
const SESSION: Duration = Duration::from_secs(10);
/// Short, so that a frozen worker loses its lock quickly.
const SHORT_SESSION: Duration = Duration::from_secs(3);
/// How long the workers may take to make the progress a test waits for; generous, for a loaded
/// two-core machine in the middle of an election.
const PROGRESS: Duration = Duration::from_secs(120);
/// How long nodes of finished acquisitions may take to go (background deletes).
const CLEANUP: Duration = Duration::from_secs(30);
const ALL_OPS: &[&str] = &["mutex", "read", "write", "sem"];

/// The worker processes' entry point; an ordinary run of the suite passes straight through.
#[test]
fn fault_worker() {
    faults::worker::run_if_worker();
}

/// A random generator for random delays and fault points, with its seed printed, so a failing
/// run can be replayed (`fastrand::Rng::with_seed`).
pub fn rng() -> fastrand::Rng {
    let seed = fastrand::u64(..);
    eprintln!("rng seed {seed}");
    fastrand::Rng::with_seed(seed)
}

// --- the ensemble ----------------------------------------------------------------------------

/// The servers' tick, the kit's default.
const TICK: Duration = Duration::from_millis(500);
/// ZooKeeper's `syncLimit`, in ticks: a follower that hears nothing from its leader for
/// `syncLimit x tickTime` (6 s) gives it up and drops its clients, and a leader that keeps no
/// quorum for that long stops leading. Between the soak's two session timeouts
/// ([`SOAK_SESSIONS`]), so that a server cut off from the others keeps answering some clients
/// after the leader could expire their sessions, and gives others up before it could.
const SYNC_LIMIT: u32 = 12;

static CLUSTER: LazyLock<TestingCluster> = LazyLock::new(|| {
    TestingCluster::builder()
        .servers(3)
        .tick_time(TICK)
        .sync_limit(SYNC_LIMIT)
        .start()
        .unwrap_or_else(|e| panic!("start a three-server ensemble: {e}"))
});

/// `syncLimit x tickTime`: how long a server cut off from the others goes on as it was.
fn sync_time() -> Duration {
    TICK * SYNC_LIMIT
}

/// Tests that stop servers hold it for writing, the others for reading.
static CLUSTER_USE: RwLock<()> = RwLock::const_new(());

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking cluster operation panicked")
}

/// The ensemble with all three servers serving, started on first use.
async fn cluster() -> &'static TestingCluster {
    blocking(|| {
        let cluster = &*CLUSTER;
        // A test that failed half-way may have left a server down, paused or cut off.
        cluster.heal_all();
        for i in 0..cluster.len() {
            if cluster.pid(i).is_none() {
                cluster.restart(i).unwrap_or_else(|e| panic!("restart server {i}: {e}"));
            } else {
                cluster.resume(i).unwrap_or_else(|e| panic!("resume server {i}: {e}"));
            }
        }
        cluster.wait_for_leader().expect("a leader");
        cluster
    })
    .await
}

/// A running server that is not the leader.
async fn a_follower(cluster: &'static TestingCluster) -> usize {
    blocking(move || {
        let leader = cluster.wait_for_leader().expect("a leader");
        (0..cluster.len()).find(|&i| i != leader && cluster.pid(i).is_some()).expect("a running follower")
    })
    .await
}

/// Whether server `i` answers `srvr` as the leader (a server cut off from the others may still
/// believe it leads).
fn leads(cluster: &TestingCluster, i: usize) -> bool {
    cluster.four_letter(i, "srvr").is_ok_and(|srvr| srvr.lines().any(|line| line.trim() == "Mode: leader"))
}

/// Waits until a server other than `old` leads, and returns it.
async fn another_leader(cluster: &'static TestingCluster, old: usize) -> usize {
    blocking(move || {
        let deadline = std::time::Instant::now() + PROGRESS;
        loop {
            if let Some(leader) = (0..cluster.len()).find(|&i| i != old && leads(cluster, i)) {
                return leader;
            }
            assert!(std::time::Instant::now() < deadline, "no server but {old} leads after {PROGRESS:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
}

/// Undoes every fault of the servers' links and waits until every server serves again, with one
/// leader, which it returns. A server cut off for long may take a while to find the others again
/// (its election backs off): it is given three of the kit's waits.
async fn settle(cluster: &'static TestingCluster) -> usize {
    blocking(move || {
        cluster.heal_all();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match cluster.wait_for_leader() {
                Ok(leader) => return leader,
                Err(e) if attempt < 3 => eprintln!("[settle] no leader yet (attempt {attempt}): {e}"),
                Err(e) => panic!("the ensemble did not settle after the fault: {e}"),
            }
        }
    })
    .await
}

/// The server each worker's current session is on; `None` for a worker between connections.
async fn placement(run: &Run, cluster: &'static TestingCluster) -> Vec<Option<usize>> {
    let sessions: Vec<Option<i64>> =
        (0..run.fleet.len()).map(|i| run.fleet.reports(|r| r.sessions.get(run.fleet.id(i)).copied())).collect();
    blocking(move || sessions.into_iter().map(|session| cluster.server_of_session(session?)).collect()).await
}

/// The workers on `server`, as `w0 (4s)` (id and session timeout).
fn workers_on(run: &Run, placement: &[Option<usize>], server: usize) -> Vec<String> {
    (0..run.fleet.len())
        .filter(|&i| placement[i] == Some(server))
        .map(|i| format!("{} ({:?})", run.fleet.id(i), run.timeouts[i]))
        .collect()
}

/// Rounds of [`crowded_follower`]'s steering, each resetting one worker's connection.
const STEERING_ROUNDS: usize = 8;

/// The leader, and a follower serving a worker of each of the soak's session timeouts, with the
/// workers on it and the number of connections reset to get them there. The follower serving the
/// most workers is taken; for each timeout it lacks, a worker of that timeout has its connection
/// reset (at its proxy to its server) and reconnects to a server of its list at random, up to
/// [`STEERING_ROUNDS`] times in all.
async fn crowded_follower(
    run: &Run,
    cluster: &'static TestingCluster,
    rng: &mut fastrand::Rng,
) -> (usize, usize, Vec<String>, usize) {
    let leader = settle(cluster).await;
    let mut placed = placement(run, cluster).await;
    let mut followers: Vec<usize> = (0..cluster.len()).filter(|&i| i != leader).collect();
    rng.shuffle(&mut followers);
    let on = |placed: &[Option<usize>], server: usize| placed.iter().filter(|&&at| at == Some(server)).count();
    let follower = followers.into_iter().max_by_key(|&i| on(&placed, i)).expect("a follower");
    let (mut rounds, mut resets) = (0, 0);
    while rounds < STEERING_ROUNDS {
        rounds += 1;
        let lacking = |timeout: Duration| {
            !(0..run.fleet.len()).any(|w| run.timeouts[w] == timeout && placed[w] == Some(follower))
        };
        let Some(&timeout) = SOAK_SESSIONS.iter().find(|&&timeout| lacking(timeout)) else { break };
        let movable: Vec<usize> = (0..run.fleet.len())
            .filter(|&w| run.timeouts[w] == timeout && placed[w].is_some_and(|at| at != follower))
            .collect();
        if movable.is_empty() {
            // Its workers are between connections: look again in a moment.
            tokio::time::sleep(Duration::from_millis(500)).await;
            placed = placement(run, cluster).await;
            continue;
        }
        let worker = movable[rng.usize(..movable.len())];
        let server = placed[worker].expect("placed");
        run.proxies[worker][server].reset();
        resets += 1;
        // Until it is connected again, wherever.
        let deadline = Instant::now() + Duration::from_secs(10);
        tokio::time::sleep(Duration::from_millis(200)).await;
        loop {
            placed = placement(run, cluster).await;
            if placed[worker].is_some() || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    (leader, follower, workers_on(run, &placed, follower), resets)
}

// --- a run: workers, the fenced store, the final checks -----------------------------------------

struct Run {
    name: String,
    connect: String,
    store: Store,
    fleet: Fleet,
    started: Instant,
    /// Orphan oracle rounds run, each finding nothing.
    audited: usize,
    /// The proxies of each worker started by [`spawn_behind_proxies`](Self::spawn_behind_proxies).
    proxies: Vec<Vec<Proxy>>,
    /// The session timeout of each worker, in the order started.
    timeouts: Vec<Duration>,
}

impl Run {
    async fn new(name: &str) -> Run {
        let cluster = cluster().await;
        // Unique per process, so a rerun against a kept ensemble would not see old nodes.
        let name = format!("{name}-{}", std::process::id());
        Run {
            name,
            connect: cluster.connect_string(),
            store: Store::start().await,
            fleet: Fleet::new(),
            started: Instant::now(),
            audited: 0,
            proxies: Vec::new(),
            timeouts: Vec::new(),
        }
    }

    fn config(&self, id: &str, role: Role, tasks: usize, ops: &[&str], session: Duration) -> Config {
        Config {
            id: id.to_owned(),
            role,
            connect: self.connect.clone(),
            store: self.store.addr,
            run: self.name.clone(),
            session,
            tasks,
            ops: ops.iter().map(|op| (*op).to_owned()).collect(),
            hold: Duration::from_millis(2),
        }
    }

    /// Starts `n` workers `w0..` with the same settings.
    fn spawn(&mut self, n: usize, role: Role, tasks: usize, ops: &[&str], session: Duration) {
        for i in 0..n {
            let config = self.config(&format!("w{i}"), role, tasks, ops, session);
            self.fleet.spawn(&config);
            self.timeouts.push(session);
        }
    }

    /// As [`spawn`](Self::spawn), each worker reaching every server through a proxy of its own,
    /// so that [`partition`](Self::partition) can cut it off. The workers take their session
    /// timeouts from `sessions` in turn.
    fn spawn_behind_proxies(&mut self, n: usize, role: Role, tasks: usize, ops: &[&str], sessions: &[Duration]) {
        let cluster = &*CLUSTER;
        for i in 0..n {
            let proxies: Vec<Proxy> = (0..cluster.len())
                .map(|server| Proxy::start(cluster.server_connect_string(server)).expect("start a proxy"))
                .collect();
            let session = sessions[i % sessions.len()];
            let mut config = self.config(&format!("w{i}"), role, tasks, ops, session);
            config.connect = proxies.iter().map(Proxy::connect_string).collect::<Vec<_>>().join(",");
            self.fleet.spawn(&config);
            self.proxies.push(proxies);
            self.timeouts.push(session);
        }
    }

    /// Cuts worker `worker` off from every server for `how_long`, then heals.
    async fn partition(&self, worker: usize, how_long: Duration) {
        self.proxies[worker].iter().for_each(Proxy::cut);
        tokio::time::sleep(how_long).await;
        self.proxies[worker].iter().for_each(Proxy::heal);
    }

    fn grants(&self) -> usize {
        self.fleet.reports(Reports::grants)
    }

    /// Waits for `more` grants beyond those so far.
    async fn progress(&self, more: usize, what: &str) -> usize {
        self.reach(self.grants() + more, what).await
    }

    /// Waits until `target` grants were made since the start. A stall dumps, before it fails,
    /// every queue of the run as each server sees it, with the owner of each node.
    async fn reach(&self, target: usize, what: &str) -> usize {
        match self.fleet.wait_for_grants(target, PROGRESS).await {
            Ok(reached) => {
                eprintln!("[{}] {reached} grants at {:?}: {what}", self.name, self.started.elapsed());
                reached
            }
            Err(stalled) => {
                eprintln!("[{}] STALLED: {what}\n{}", self.name, dump_queues(&base_path(&self.name)).await);
                panic!("{stalled}");
            }
        }
    }

    /// Has every worker run the orphan oracle (`zk_lock::testing::audit`) on its own sessions;
    /// fails on any node the library does not account for, or a retired session never closed.
    async fn audit(&mut self, when: &str) {
        let lines = self.fleet.audit(PROGRESS).await;
        let bad: Vec<String> = lines
            .iter()
            .filter(|line| line.get("orphans") != Some("0") || line.get("retiring") != Some("0"))
            .map(ToString::to_string)
            .collect();
        let ephemerals: u64 = lines.iter().filter_map(|line| line.get("ephemerals")?.parse::<u64>().ok()).sum();
        assert!(bad.is_empty(), "orphan oracle {when}: {bad:#?}");
        self.audited += 1;
        eprintln!("[{}] orphan oracle {when}: 0 orphans among {ephemerals} ephemeral nodes", self.name);
    }

    /// Stops the workers and checks: nothing left under the run's root while their sessions
    /// still live (a node left then is a leak, not a session's leftover), a sound history, and
    /// still nothing once every worker exited.
    async fn finish(mut self) -> Reports {
        self.audit("at the end, while contending").await;
        self.fleet.stop(PROGRESS).await;
        self.audit("with the workers idle").await;
        let zk = ZkClient::connect(&self.connect).await.expect("connect to check for leaks");
        let root = base_path(&self.name);
        let leaked_idle = wait_for_no_lock_nodes(&zk, &root, CLEANUP).await;
        let reports = self.fleet.finish(CLEANUP).await;
        let report = reports.history.check();
        // With nothing left while the sessions lived, this is immediate; it would otherwise wait
        // for the sessions to expire.
        let leaked_after_exit = wait_for_no_lock_nodes(&zk, &root, SESSION + CLEANUP).await;
        let (accepted, rejected) = self.store.counts();
        eprintln!(
            "[{}] {} grants ({} lost), {} failed acquisitions, {accepted} fenced writes accepted, \
             {rejected} rejected, {} violations, {} orphan audits with 0 orphans, {} nodes leaked by idle workers, \
             {} after they exited, in {:?}",
            self.name,
            reports.grants(),
            reports.history.grants().iter().filter(|g| g.outcome.is_lost()).count(),
            reports.failures.len(),
            report.violations().len(),
            self.audited,
            leaked_idle.len(),
            leaked_after_exit.len(),
            self.started.elapsed()
        );
        for failure in reports.failures.iter().take(10) {
            eprintln!("  {failure}");
        }
        report.assert_clean();
        assert!(leaked_idle.is_empty(), "lock nodes left behind by idle workers: {leaked_idle:#?}");
        assert!(leaked_after_exit.is_empty(), "lock nodes left after the workers exited: {leaked_after_exit:#?}");
        reports
    }
}

/// The fenced writes of `writer`, in the order they were recorded.
fn writes_of(history: &History, writer: &str) -> Vec<FencedWrite> {
    history.fenced_writes().into_iter().filter(|w| w.writer == writer).collect()
}

/// Without faults that outlast the acquire timeout, every acquisition must succeed: an error
/// here is a recipe giving up on something it should ride out.
fn assert_no_failures(reports: &Reports) {
    let failures: Vec<String> = reports.failures.iter().map(ToString::to_string).collect();
    assert!(failures.is_empty(), "{} acquisitions failed: {failures:#?}", failures.len());
}

/// Ephemeral nodes (lock, lease and queue nodes) anywhere under `root`, as `path data owner
/// <session> czxid <zxid>`, sorted.
async fn lock_nodes(zk: &ZkClient, root: &str) -> Result<Vec<String>, ZkError> {
    let mut found = Vec::new();
    let mut parents = vec![root.to_owned()];
    while let Some(parent) = parents.pop() {
        let children = match zk.list_children(&parent).await {
            Ok(children) => children,
            Err(ZkError::NoNode) => continue,
            Err(e) => return Err(e),
        };
        for child in children {
            let path = format!("{parent}/{child}");
            match zk.get_data(&path).await {
                Ok((data, stat)) if stat.ephemeral_owner != 0 => found.push(format!(
                    "{path} {} owner {:#x} czxid {:#x}",
                    String::from_utf8_lossy(&data),
                    stat.ephemeral_owner,
                    stat.czxid
                )),
                Ok(_) => parents.push(path),
                Err(ZkError::NoNode) => {}
                Err(e) => return Err(e),
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Every lock node under `root` as each server of the ensemble sees it (they may disagree), with
/// its owner: `server i: <path> <data> owner <session> czxid <zxid>`, in queue order.
async fn dump_queues(root: &str) -> String {
    let cluster = &*CLUSTER;
    let mut dump = String::new();
    for i in 0..cluster.len() {
        let connect = cluster.server_connect_string(i);
        let listing = match tokio::time::timeout(Duration::from_secs(10), ZkClient::connect(&connect)).await {
            Ok(Ok(zk)) => lock_nodes(&zk, root).await.map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no session within 10 s".to_owned()),
        };
        match listing {
            Ok(nodes) if nodes.is_empty() => dump.push_str(&format!("server {i}: no lock node\n")),
            Ok(nodes) => nodes.iter().for_each(|node| dump.push_str(&format!("server {i}: {node}\n"))),
            Err(e) => dump.push_str(&format!("server {i}: cannot list ({e})\n")),
        }
    }
    dump
}

/// Polls the server until no lock node is left under `root`; returns those left at the deadline.
async fn wait_for_no_lock_nodes(zk: &ZkClient, root: &str, timeout: Duration) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = match lock_nodes(zk, root).await {
            Ok(left) if left.is_empty() => return left,
            Ok(left) => left,
            // The connection may still be settling after a fault.
            Err(e) => vec![format!("(cannot list: {e})")],
        };
        if Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// --- the faults ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_and_then_a_follower_are_killed_during_contention() {
    let _exclusive = CLUSTER_USE.write().await;
    let cluster = cluster().await;
    let mut run = Run::new("leader").await;
    run.spawn(4, Role::Contend, 3, ALL_OPS, SESSION);
    run.progress(60, "contending").await;

    let killed = blocking(|| cluster.kill_leader()).await.expect("kill the leader");
    let leader = blocking(|| cluster.wait_for_leader()).await.expect("a new leader");
    assert_ne!(leader, killed);
    run.progress(40, &format!("leader {killed} killed, {leader} elected")).await;
    run.audit("after the leader kill").await;
    blocking(move || cluster.restart(killed)).await.expect("restart the old leader");
    run.progress(20, "old leader back").await;

    let follower = a_follower(cluster).await;
    blocking(move || cluster.kill(follower)).await.expect("kill a follower");
    run.progress(40, &format!("follower {follower} killed")).await;
    run.audit("after the follower kill").await;
    blocking(move || cluster.restart(follower)).await.expect("restart the follower");
    run.progress(20, "follower back").await;

    let reports = run.finish().await;
    assert_no_failures(&reports);
    assert!(reports.idle_total("disconnects") > 0, "no worker saw its connection drop: the kills missed them");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_ensemble_stops_and_restarts_during_contention() {
    let _exclusive = CLUSTER_USE.write().await;
    let cluster = cluster().await;
    let mut run = Run::new("restart").await;
    run.spawn(4, Role::Contend, 3, ALL_OPS, SESSION);
    run.progress(60, "contending").await;

    blocking(|| cluster.stop_all()).await.expect("stop the ensemble");
    let stopped_at = run.grants();
    // The ensemble stays down a moment, with acquisitions under way.
    tokio::time::sleep(Duration::from_millis(500)).await;
    blocking(|| cluster.restart_all()).await.expect("restart the ensemble");
    run.progress(60, "ensemble restarted").await;
    run.audit("after the restart").await;

    let reports = run.finish().await;
    assert_no_failures(&reports);
    assert!(reports.grants() > stopped_at + 60);
    assert!(reports.idle_total("disconnects") >= 4, "every worker lost its connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_past_its_session_timeout_loses_the_lock_and_its_late_write_is_rejected() {
    let _shared = CLUSTER_USE.read().await;
    let mut run = Run::new("gc").await;
    let holder = run.config("holder", Role::GcHolder, 1, &["mutex"], SHORT_SESSION);
    run.fleet.spawn(&holder);
    let holding = run.fleet.wait_for_event("holder", "holding", PROGRESS).await;
    let old_token: i64 = holding.get("token").unwrap().parse().unwrap();

    // The contender queues behind the holder before the pause.
    let contender = run.config("contender", Role::Once, 1, &["mutex"], SESSION);
    run.fleet.spawn(&contender);
    let observer = zk_lock::Client::builder(&run.connect).connect().await.unwrap();
    let gc_path = format!("{}/gc", base_path(&run.name));
    wait_for_children_within(&observer, &gc_path, PROGRESS, |queue| queue.len() >= 2)
        .await
        .expect("the contender queues");

    run.fleet.pause(0);
    let paused = Instant::now();
    run.fleet.wait_for("the contender's grant", PROGRESS, |r| r.grants() == 1).await;
    let waited = paused.elapsed();
    let granted = run.fleet.reports(|r| r.history.grants()[0].clone());
    assert_eq!(granted.holder, "contender/once");
    assert!(granted.token > old_token, "the new holder's token {} follows {old_token}", granted.token);
    let written = run.fleet.reports(|r| writes_of(&r.history, "contender/once"));
    assert!(matches!(written[..], [FencedWrite { accepted: true, .. }]), "the new holder's write: {written:?}");
    assert!(waited >= SHORT_SESSION / 2, "granted {waited:?} after the pause, before the session could expire");
    run.fleet.resume(0);

    run.fleet.wait_for_event("holder", "manual-released", PROGRESS).await;
    let reports = run.finish().await;
    assert_no_failures(&reports);
    let event = |name: &str| reports.event("holder", name).map(|e| e.to_string());
    let returned = event("returned").expect("the annotated call returned");
    assert!(returned.contains("Err(Lost"), "the annotated call must fail with Lost: {returned}");
    assert!(event("body-finished").is_none(), "the body ran to its end: on_lost = \"abort\" did not cancel it");
    assert!(event("body-lost").is_some(), "guard.lost() inside the body never resolved");
    assert!(event("manual-lost").is_some(), "a plain guard's lost() never resolved");
    assert!(event("manual-held").unwrap().contains("held=false"), "is_held() after the loss");
    let manual_release = event("manual-released").unwrap();
    assert!(manual_release.contains("Err(Lost"), "release after the loss reports it: {manual_release}");
    let grants = reports.history.grants();
    let holder_grant = grants.iter().find(|g| g.holder == "holder").expect("the holder's grant");
    assert!(holder_grant.outcome.is_lost(), "the frozen holder's grant ended {:?}", holder_grant.outcome);
    let [before, late] = &writes_of(&reports.history, "holder")[..] else { panic!("the holder writes twice") };
    assert!(before.accepted && before.answered <= holder_grant.end, "its write before the pause: {before:?}");
    assert!(!late.accepted && late.sent >= holder_grant.end, "the frozen holder's late write went through: {late:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_dropped_during_create_neither_duplicate_nor_leak_nodes() {
    let _exclusive = CLUSTER_USE.write().await;
    let cluster = cluster().await;

    // The kit finds the server a session talks to.
    let pinned = ZkClient::connect(&cluster.server_connect_string(1)).await.unwrap();
    let id = pinned.session_id().0;
    assert_eq!(blocking(move || cluster.server_of_session(id)).await, Some(1));
    drop(pinned);

    let mut run = Run::new("create").await;
    // Many tasks with no hold time: at any moment creates are in flight.
    run.spawn(3, Role::Contend, 6, &["mutex", "sem"], SESSION);
    run.fleet.wait_for("every session", PROGRESS, |r| r.sessions.len() == 3).await;
    run.progress(40, "contending").await;
    for round in 0..4 {
        // The server most workers' current sessions are on. A session declared lost while its
        // server was down is replaced, and its worker reports the new one with its next grants.
        let mut victim = None;
        for _ in 0..5 {
            let sessions: Vec<i64> = run.fleet.reports(|r| r.sessions.values().copied().collect());
            victim = blocking(move || {
                let mut on = BTreeMap::<usize, usize>::new();
                for session in sessions {
                    if let Some(server) = cluster.server_of_session(session) {
                        *on.entry(server).or_default() += 1;
                    }
                }
                on.into_iter().max_by_key(|&(_, n)| n).map(|(server, _)| server)
            })
            .await;
            if victim.is_some() {
                break;
            }
            run.progress(5, "looking for the workers' current sessions").await;
        }
        let victim = victim.expect("the workers are connected somewhere");
        blocking(move || cluster.kill(victim)).await.expect("kill the clients' server");
        run.progress(20, &format!("round {round}: killed server {victim}")).await;
        run.audit(&format!("after kill {round}")).await;
        blocking(move || cluster.restart(victim)).await.expect("restart it");
        run.progress(10, "it is back").await;
    }
    let reports = run.finish().await;
    assert_no_failures(&reports);
    let spanned = reports.idle_total("spanned");
    eprintln!("{spanned} grants rode out a dropped connection");
    assert!(spanned > 0, "no acquisition was under way when a connection dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquisitions_and_panicking_holders_leave_no_node_behind() {
    let _shared = CLUSTER_USE.read().await;
    let mut run = Run::new("chaos").await;
    run.spawn(3, Role::Chaos, 3, ALL_OPS, SESSION);
    run.fleet.wait_for("400 grants among the cancellations and panics", PROGRESS, |r| r.grants() >= 400).await;
    let connect = run.connect.clone();
    let name = run.name.clone();
    let reports = run.finish().await;
    assert_no_failures(&reports);
    let (cancels, panics) = (reports.idle_total("cancels"), reports.idle_total("panics"));
    eprintln!("{cancels} cancelled acquisitions, {panics} panics while holding");
    assert!(cancels >= 100, "too few cancellations to mean anything: {cancels}");
    assert!(panics >= 20, "too few panics to mean anything: {panics}");

    // Every lock still works, at once.
    let client = zk_lock::Client::builder(connect).connect().await.unwrap();
    let base = base_path(&name);
    let quick = Duration::from_secs(10);
    for n in 0..2 {
        let mutex = zk_lock::Mutex::with_client(&client, format!("{base}/m{n}"));
        mutex.lock_timeout(quick).await.expect("lock a mutex after the chaos").release().await.unwrap();
    }
    let rw = zk_lock::RwLock::with_client(&client, format!("{base}/rw"));
    rw.write_timeout(quick).await.expect("write-lock after the chaos").release().await.unwrap();
    let semaphore = zk_lock::Semaphore::with_client(&client, format!("{base}/sem"), SEMAPHORE_LEASES);
    let permits = semaphore.acquire_many_timeout(SEMAPHORE_LEASES, quick).await.expect("every permit after the chaos");
    for permit in permits {
        permit.release().await.unwrap();
    }
}

/// The suite can fail: a worker that reports grants without taking the lock is caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_skips_the_lock_is_caught() {
    let _shared = CLUSTER_USE.read().await;
    let mut run = Run::new("cheat").await;
    run.spawn(2, Role::Contend, 2, &["mutex"], SESSION);
    let cheat = run.config("cheat", Role::Cheat, 1, &["mutex"], SESSION);
    run.fleet.spawn(&cheat);
    run.progress(200, "contending next to a cheat").await;
    run.fleet.stop(PROGRESS).await;
    let reports = run.fleet.finish(CLEANUP).await;
    let report = reports.history.check();
    let cheat = |holder: &str| holder.starts_with("cheat/");
    assert!(
        report.violations().iter().any(
            |v| matches!(v, Violation::Overlap { earlier, later, .. } if cheat(&earlier.holder) || cheat(&later.holder))
        ),
        "the cheat's grants overlap real ones, yet the checker found {report}"
    );
}

// --- soak ------------------------------------------------------------------------------------

/// The soak workers' session timeouts, in turn. The first is below `syncLimit x tickTime`
/// ([`sync_time`]): a follower cut off from the leader goes on answering such a client (reads and
/// pings, never a `sync`) after the leader could expire its session. The second is above it: the
/// follower gives such a client up, and the client moves to another server, before the leader
/// could expire its session.
const SOAK_SESSIONS: [Duration; 2] = [Duration::from_secs(4), Duration::from_secs(8)];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    LeaderKill,
    FollowerKill,
    WholeRestart,
    ShortPause,
    LongPause,
    /// A worker cut off from every server, for less than its session timeout.
    ShortPartition,
    /// A worker cut off from every server for longer than its session timeout.
    LongPartition,
    /// The follower serving the most workers cut off from the other two servers, its clients
    /// still reaching it, for longer than every session timeout ([`isolation`]), then healed: the
    /// leader expires the sessions with the short timeout, which stay on the follower until it
    /// gives its leader up; those with the long one move first and live on.
    IsolatedFollower,
    /// The leader cut off from both followers, its clients still reaching it, until the followers
    /// elected another and it granted a few locks, then healed.
    IsolatedLeader,
    /// The leader frozen (`SIGSTOP`) past the short session timeout, short of `syncLimit x
    /// tickTime` ([`leader_pause`]), then resumed: the followers wait for it, and it expires the
    /// sessions nobody could renew meanwhile as soon as it runs again.
    PausedLeader,
    /// The leader frozen past `syncLimit x tickTime` and every session timeout
    /// ([`long_leader_pause`]), then resumed: the followers elect another leader meanwhile, and
    /// the old one finds out when it runs again.
    LongPausedLeader,
    /// The link between the follower serving the most workers and the leader slowed by a quarter
    /// of the short session timeout each way ([`SLOW_LINK`]), for a few seconds, then made fast.
    SlowLink,
}

const FAULTS: [Fault; 12] = [
    Fault::LeaderKill,
    Fault::FollowerKill,
    Fault::WholeRestart,
    Fault::ShortPause,
    Fault::LongPause,
    Fault::ShortPartition,
    Fault::LongPartition,
    Fault::IsolatedFollower,
    Fault::IsolatedLeader,
    Fault::PausedLeader,
    Fault::LongPausedLeader,
    Fault::SlowLink,
];

/// How long [`Fault::IsolatedFollower`] cuts its follower off: past every session timeout.
fn isolation() -> Duration {
    SOAK_SESSIONS[1] + Duration::from_secs(2)
}

/// How long [`Fault::PausedLeader`] freezes the leader: halfway between the moment it may expire a
/// session of the short timeout last renewed as the pause began (its tick rounds expiry times up)
/// and the moment the followers give it up.
fn leader_pause() -> Duration {
    (SOAK_SESSIONS[0] + TICK + sync_time()) / 2
}

/// How long [`Fault::LongPausedLeader`] freezes the leader.
fn long_leader_pause() -> Duration {
    sync_time().max(SOAK_SESSIONS[1]) + Duration::from_secs(1)
}

/// The delay each way of [`Fault::SlowLink`], and how long it lasts.
const SLOW_LINK: Duration = Duration::from_secs(1);
const SLOW_LINK_FOR: Duration = Duration::from_secs(6);

/// Contention with every fault in turn; `acquisitions` grants across at least four processes.
async fn soak(acquisitions: usize, processes: usize, faults: usize) {
    let _exclusive = CLUSTER_USE.write().await;
    let cluster = cluster().await;
    assert!(
        SOAK_SESSIONS[0] + TICK < leader_pause() && leader_pause() < sync_time() && sync_time() < SOAK_SESSIONS[1],
        "the soak's session timeouts {SOAK_SESSIONS:?} must lie on either side of syncLimit x tickTime {:?}",
        sync_time()
    );
    let mut run = Run::new("soak").await;
    run.spawn_behind_proxies(processes, Role::Contend, 2, ALL_OPS, &SOAK_SESSIONS);
    let mut rng = rng();
    let step = acquisitions / (faults + 1);
    let mut injected = BTreeMap::<Fault, usize>::new();
    for i in 0..faults {
        run.reach((i + 1) * step, "contending").await;
        let fault = FAULTS[i % FAULTS.len()];
        *injected.entry(fault).or_default() += 1;
        let replaced_before = run.fleet.reports(|r| r.replaced_sessions);
        match fault {
            Fault::LeaderKill => {
                let killed = blocking(|| cluster.kill_leader()).await.expect("kill the leader");
                blocking(|| cluster.wait_for_leader()).await.expect("a new leader");
                run.progress(step / 4, &format!("leader {killed} killed")).await;
                blocking(move || cluster.restart(killed)).await.expect("restart the old leader");
            }
            Fault::FollowerKill => {
                let follower = a_follower(cluster).await;
                blocking(move || cluster.kill(follower)).await.expect("kill a follower");
                run.progress(step / 4, &format!("follower {follower} killed")).await;
                blocking(move || cluster.restart(follower)).await.expect("restart the follower");
            }
            Fault::WholeRestart => {
                blocking(|| cluster.stop_all()).await.expect("stop the ensemble");
                tokio::time::sleep(Duration::from_millis(500)).await;
                blocking(|| cluster.restart_all()).await.expect("restart the ensemble");
            }
            Fault::ShortPause | Fault::LongPause => {
                let worker = rng.u64(..run.fleet.len() as u64) as usize;
                let session = run.timeouts[worker];
                let pause = if fault == Fault::ShortPause { session / 4 } else { session + Duration::from_secs(2) };
                run.fleet.pause(worker);
                tokio::time::sleep(pause).await;
                run.fleet.resume(worker);
                eprintln!("[soak] paused {} (session timeout {session:?}) for {pause:?}", run.fleet.id(worker));
            }
            Fault::ShortPartition | Fault::LongPartition => {
                let worker = rng.u64(..run.fleet.len() as u64) as usize;
                let session = run.timeouts[worker];
                // About when its locks are declared lost (4/5 of the timeout after the last renewal
                // proven before the cut), or past the timeout itself.
                let cut = if fault == Fault::ShortPartition { session * 4 / 5 } else { session * 3 / 2 };
                run.partition(worker, cut).await;
                eprintln!("[soak] cut {} (session timeout {session:?}) off for {cut:?}", run.fleet.id(worker));
            }
            Fault::IsolatedFollower => {
                let (leader, follower, on, resets) = crowded_follower(&run, cluster, &mut rng).await;
                cluster.isolate(follower);
                tokio::time::sleep(isolation()).await;
                cluster.heal_all();
                eprintln!(
                    "[soak] isolated follower {follower} (leader {leader}, workers on it: {on:?} after {resets} \
                     resets) for {:?}",
                    isolation()
                );
            }
            Fault::IsolatedLeader => {
                let leader = settle(cluster).await;
                let on = workers_on(&run, &placement(&run, cluster).await, leader);
                let isolated = Instant::now();
                cluster.isolate(leader);
                let elected = another_leader(cluster, leader).await;
                let after = isolated.elapsed();
                run.progress(step / 4, &format!("leader {leader} isolated, {elected} elected after {after:?}")).await;
                cluster.heal_all();
                eprintln!(
                    "[soak] isolated leader {leader} (workers on it: {on:?}) for {:?}; {elected} elected \
                     after {after:?}",
                    isolated.elapsed()
                );
            }
            Fault::PausedLeader | Fault::LongPausedLeader => {
                let leader = settle(cluster).await;
                let on = workers_on(&run, &placement(&run, cluster).await, leader);
                let pause = if fault == Fault::PausedLeader { leader_pause() } else { long_leader_pause() };
                blocking(move || cluster.pause(leader)).await.expect("pause the leader");
                tokio::time::sleep(pause).await;
                let during = blocking(move || cluster.leader()).await;
                blocking(move || cluster.resume(leader)).await.expect("resume the leader");
                eprintln!(
                    "[soak] paused leader {leader} (workers on it: {on:?}) for {pause:?}; leader while \
                     paused: {during:?}"
                );
            }
            Fault::SlowLink => {
                let (leader, follower, on, resets) = crowded_follower(&run, cluster, &mut rng).await;
                cluster.delay(follower, leader, SLOW_LINK);
                tokio::time::sleep(SLOW_LINK_FOR).await;
                cluster.delay(follower, leader, Duration::ZERO);
                eprintln!(
                    "[soak] slowed the link of follower {follower} (workers on it: {on:?} after {resets} resets) to \
                     leader {leader} by {SLOW_LINK:?} each way for {SLOW_LINK_FOR:?}"
                );
            }
        }
        // Whole again, with a leader, before anything else happens.
        let leader = settle(cluster).await;
        run.audit(&format!("after fault {i} ({fault:?})")).await;
        let replaced = run.fleet.reports(|r| r.replaced_sessions) - replaced_before;
        eprintln!("[soak] fault {i} ({fault:?}) over; leader {leader}; {replaced} sessions replaced since it began");
    }
    run.reach(acquisitions, "the last acquisitions").await;
    let reports = run.finish().await;
    let grants = reports.history.grants();
    let lost: Vec<_> = grants.iter().filter(|g| g.outcome.is_lost()).collect();
    // The writes a holder made with its token after it saw the lock lost.
    let late: Vec<FencedWrite> = reports
        .history
        .fenced_writes()
        .into_iter()
        .filter(|w| lost.iter().any(|g| g.path == w.path && g.token == w.token && w.sent >= g.end))
        .collect();
    let (lost, late_rejected) = (lost.len(), late.iter().filter(|w| !w.accepted).count());
    let injected: Vec<String> = injected.iter().map(|(fault, n)| format!("{fault:?} {n}")).collect();
    eprintln!(
        "soak: {} grants across {processes} processes ({lost} lost; {} late writes by them, {late_rejected} \
         rejected), {} sessions replaced, {faults} faults injected ({}), no violation, no leaked node, {} failed \
         acquisitions",
        reports.grants(),
        late.len(),
        reports.replaced_sessions,
        injected.join(", "),
        reports.failures.len()
    );
    assert!(reports.grants() >= acquisitions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_soak_with_every_fault() {
    soak(300, 4, FAULTS.len()).await;
}

/// `ZK_LOCK_SOAK_ACQUISITIONS` (default 10,000) acquisitions, `ZK_LOCK_SOAK_PROCESSES` (default 4)
/// processes, a fault every 500 grants or so: as many of each kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak: minutes long; run by hand"]
async fn soak_with_faults() {
    let number = |name: &str, default: usize| {
        std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
    };
    let acquisitions = number("ZK_LOCK_SOAK_ACQUISITIONS", 10_000);
    let processes = number("ZK_LOCK_SOAK_PROCESSES", 4).max(4);
    soak(acquisitions, processes, (acquisitions / 500).max(FAULTS.len()).next_multiple_of(FAULTS.len())).await;
}
