//! Tests of a `TestingCluster`'s faults between its servers (cuts, one-way cuts, delays, isolation)
//! and of its paused servers. They share one three-server ensemble of their own, with a short
//! `syncLimit`, and take turns on it: each starts from a whole, healed ensemble.

use std::collections::HashSet;
use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use tokio::time::Instant;
use zk_lock::testing::TestingCluster;
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, SessionState};

/// A tick and a `syncLimit` that make partitioned servers give up within 2 s.
const TICK: Duration = Duration::from_millis(250);
const SYNC_LIMIT: u32 = 8;
/// Longer than any scenario, so that the clients' sessions outlive them.
const SESSION: Duration = Duration::from_secs(40);
/// What an election and a resync may take on a loaded two-core machine, beyond the `syncLimit`
/// it starts after. Far below the minute a leader left in the election would cost.
const ELECTION: Duration = Duration::from_secs(8);
/// Bounds every other wait, so that a broken kit fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(30);

static ENSEMBLE: LazyLock<TestingCluster> = LazyLock::new(|| {
    TestingCluster::builder()
        .servers(3)
        .tick_time(TICK)
        .sync_limit(SYNC_LIMIT)
        .start()
        .unwrap_or_else(|err| panic!("start a three-server ensemble: {err}"))
});

/// One test at a time disturbs the ensemble.
static TURN: Mutex<()> = Mutex::const_new(());

/// The ensemble, whole: every server running, resumed, healed and serving with one leader. Hold
/// the guard for the whole test.
async fn ensemble() -> (MutexGuard<'static, ()>, &'static TestingCluster) {
    let turn = TURN.lock().await;
    let cluster = tokio::task::spawn_blocking(|| {
        let cluster = &*ENSEMBLE;
        // A test that failed half-way may have left faults behind.
        cluster.heal_all();
        for i in 0..cluster.len() {
            cluster.resume(i).unwrap();
            if cluster.pid(i).is_none() {
                cluster.restart(i).unwrap();
            }
        }
        cluster.wait_for_leader().unwrap();
        cluster
    })
    .await
    .unwrap();
    (turn, cluster)
}

/// The time after which a partitioned server gives up its leader or followers.
fn sync_timeout(cluster: &TestingCluster) -> Duration {
    cluster.tick_time() * cluster.sync_limit()
}

/// How server `i` serves now (`leader`, `follower`), asked with `srvr`; `None` when it does not
/// serve (during an election, without a quorum) or does not answer.
fn mode(cluster: &TestingCluster, i: usize) -> Option<String> {
    let srvr = cluster.four_letter(i, "srvr").ok()?;
    srvr.lines().find_map(|line| line.strip_prefix("Mode:")).map(|mode| mode.trim().to_owned())
}

/// Whether server `i` answers, and says it does not serve: it is looking for a leader.
fn answers_not_serving(cluster: &TestingCluster, i: usize) -> bool {
    cluster.four_letter(i, "srvr").is_ok_and(|srvr| srvr.contains("not currently serving requests"))
}

/// Polls `condition` every 20 ms until it holds and returns how long that took; panics after
/// `within`. Nothing in ZooKeeper tells when a server's role changes, so it is polled.
async fn within(what: &str, within: Duration, mut condition: impl AsyncFnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !condition().await {
        assert!(started.elapsed() < within, "{what}: still not the case after {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

async fn connect(connect_string: &str) -> Client {
    let connecting = Client::connector().with_session_timeout(SESSION).connect(connect_string);
    match tokio::time::timeout(DEADLINE, connecting).await {
        Ok(Ok(client)) => client,
        Ok(Err(err)) => panic!("cannot connect to {connect_string}: {err}"),
        Err(_) => panic!("connecting to {connect_string} took longer than {DEADLINE:?}"),
    }
}

/// A client of servers `members` only.
async fn client_of(cluster: &TestingCluster, members: &[usize]) -> Client {
    let servers: Vec<String> = members.iter().map(|&i| cluster.server_connect_string(i)).collect();
    connect(&servers.join(",")).await
}

/// Waits, within `within`, for the next state `client` reports after those already seen.
async fn next_state(state: &mut zookeeper_client::StateWatcher, within: Duration) -> SessionState {
    match tokio::time::timeout(within, state.changed()).await {
        Ok(state) => state,
        Err(_) => panic!("the session state did not change within {within:?}"),
    }
}

fn unique_path(name: &str) -> String {
    crate::unique_path("cluster", name)
}

async fn create(client: &Client, path: &str) {
    client.create(path, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
}

/// The servers other than `i`.
fn others(cluster: &TestingCluster, i: usize) -> Vec<usize> {
    (0..cluster.len()).filter(|&other| other != i).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_sets_the_servers_timing() {
    let (_turn, cluster) = ensemble().await;
    assert_eq!((cluster.tick_time(), cluster.sync_limit()), (TICK, SYNC_LIMIT));
    let conf = cluster.four_letter(0, "conf").unwrap();
    for line in ["tickTime=250", "syncLimit=8", "minSessionTimeout=500"] {
        assert!(conf.lines().any(|conf_line| conf_line == line), "no `{line}` in:\n{conf}");
    }
}

/// Every byte between two servers crosses a proxy of the kit: in particular the election
/// connections, which a server with a higher id would otherwise dial back to the real address
/// the other one advertised (3.8's `QuorumCnxManager.handleConnection`). It does so when it has
/// no election connection to that server yet: after that server restarts, for instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_reaches_another_around_the_proxies() {
    let (_turn, cluster) = ensemble().await;
    // Server 0 has the lowest id: the others dial it back, through their proxies.
    tokio::task::spawn_blocking(|| ENSEMBLE.restart(0)).await.unwrap().unwrap();
    let mut real_ports = HashSet::new();
    for i in 0..cluster.len() {
        let conf = cluster.four_letter(i, "conf").unwrap();
        let port = |key: &str| -> u16 {
            let value = conf.lines().find_map(|line| line.strip_prefix(key)).unwrap_or_else(|| panic!("{key}: {conf}"));
            value.trim().parse().unwrap()
        };
        let (quorum, election) = (port("quorumPort="), port("electionPort="));
        // The server's own entry has its real ports, the others' are proxies.
        let membership: Vec<&str> = conf.lines().filter(|line| line.starts_with("server.")).collect();
        assert_eq!(membership.len(), cluster.len(), "{conf}");
        for (j, entry) in membership.iter().enumerate() {
            let own = entry.contains(&format!(":{quorum}:{election}:"));
            assert_eq!(own, i == j, "server {i} names server {j} as {entry}");
        }
        real_ports.extend([quorum, election]);
    }

    // Every connection to a real quorum or election port comes from this process: a proxy.
    let ours = own_socket_inodes();
    let to_real_ports: Vec<Socket> =
        established_sockets().into_iter().filter(|socket| real_ports.contains(&socket.remote_port)).collect();
    let around: Vec<&Socket> = to_real_ports.iter().filter(|socket| !ours.contains(&socket.inode)).collect();
    eprintln!("{} connections between servers, {} of them around the proxies", to_real_ports.len(), around.len());
    // At least one election connection per pair of servers, and followers' links to their leader.
    assert!(to_real_ports.len() >= 3, "too few connections between servers: {to_real_ports:?}");
    assert!(around.is_empty(), "servers connected to each other without a proxy: {around:?}");
}

/// A TCP connection of this machine, as `/proc/net/tcp` lists it.
#[derive(Debug)]
struct Socket {
    remote_port: u16,
    inode: u64,
}

/// The established TCP connections of the machine (IPv4 and IPv6 tables: the JVM uses the
/// latter for IPv4 too).
fn established_sockets() -> Vec<Socket> {
    let mut sockets = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // `sl local remote st ... inode`; `01` is ESTABLISHED.
            if fields.len() < 10 || fields[3] != "01" {
                continue;
            }
            let port = |address: &str| u16::from_str_radix(address.rsplit(':').next().unwrap(), 16).unwrap();
            sockets.push(Socket { remote_port: port(fields[2]), inode: fields[9].parse().unwrap() });
        }
    }
    sockets
}

/// The inodes of this process's sockets.
fn own_socket_inodes() -> HashSet<u64> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            target.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_is_replaced_and_rejoins_as_a_follower_once_healed() {
    let (_turn, cluster) = ensemble().await;
    let old = cluster.leader().expect("a leader");
    let others = others(cluster, old);
    // Restarted, each follower dials the leader's election port again, and a leader with a
    // higher id dials it back: to the address the follower advertised, were it not for the
    // kit's election proxies, and the isolated leader would then keep voting in the others'
    // election (without them, no leader was elected within the bound, in 2 runs of 2).
    for &i in &others {
        tokio::task::spawn_blocking(move || ENSEMBLE.restart(i)).await.unwrap().unwrap();
    }
    assert_eq!(cluster.leader(), Some(old), "the restarts moved the leadership");
    let of_old = client_of(cluster, &[old]).await;
    let mut old_state = of_old.state_watcher();
    let observer = client_of(cluster, &others).await;
    let limit = sync_timeout(cluster);

    cluster.isolate(old);
    let isolated = Instant::now();
    let elected = within("one of the others leads", limit + ELECTION, async || {
        others.iter().any(|&i| mode(cluster, i).as_deref() == Some("leader"))
    })
    .await;
    within("the isolated leader stops serving", limit + ELECTION, async || answers_not_serving(cluster, old)).await;
    let stepped_down = isolated.elapsed();
    assert!(stepped_down < limit + ELECTION, "the isolated leader served {stepped_down:?}");
    assert_eq!(next_state(&mut old_state, DEADLINE).await, SessionState::Disconnected);
    let during = unique_path("written-during-the-isolation");
    create(&observer, &during).await;
    let new = cluster.leader().expect("a leader");
    assert!(others.contains(&new), "server {new} leads");
    assert!(answers_not_serving(cluster, old), "the isolated server serves again");
    eprintln!(
        "isolated leader {old} (syncLimit x tickTime = {limit:?}): server {new} led after {elected:?}, \
         {old} stopped serving {stepped_down:?} after the isolation"
    );

    cluster.heal_all();
    let rejoined =
        within("the old leader follows", DEADLINE, async || mode(cluster, old).as_deref() == Some("follower")).await;
    assert_eq!(next_state(&mut old_state, DEADLINE).await, SessionState::SyncConnected);
    of_old.sync(&during).await.unwrap();
    assert!(of_old.check_stat(&during).await.unwrap().is_some(), "the old leader missed a write");
    eprintln!("healed: {old} followed {rejoined:?} after the heal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_follower_stops_serving_after_the_sync_limit_and_serves_again_once_healed() {
    let (_turn, cluster) = ensemble().await;
    let leader = cluster.leader().expect("a leader");
    let follower = others(cluster, leader)[0];
    let of_follower = client_of(cluster, &[follower]).await;
    let mut state = of_follower.state_watcher();
    let observer = client_of(cluster, &others(cluster, follower)).await;
    let before = unique_path("before-the-isolation");
    create(&observer, &before).await;
    of_follower.sync(&before).await.unwrap();
    let limit = sync_timeout(cluster);

    cluster.isolate(follower);
    let isolated = Instant::now();
    // It serves what it has until it gives its leader up.
    assert!(of_follower.check_stat(&before).await.unwrap().is_some());
    assert_eq!(next_state(&mut state, limit + ELECTION).await, SessionState::Disconnected);
    let disconnected = isolated.elapsed();
    assert!(answers_not_serving(cluster, follower));
    let during = unique_path("written-during-the-isolation");
    let written = Instant::now();
    create(&observer, &during).await;
    let write_took = written.elapsed();
    assert_eq!(mode(cluster, leader).as_deref(), Some("leader"), "the others keep their quorum");
    eprintln!(
        "isolated follower {follower}: its clients disconnected {disconnected:?} after the isolation \
         (syncLimit x tickTime = {limit:?}); a write through the others took {write_took:?}"
    );
    // Its last read from the leader was at most half a tick before the isolation.
    assert!(disconnected + TICK >= limit, "disconnected after {disconnected:?}, before the sync limit");

    cluster.heal_all();
    let healed = Instant::now();
    assert_eq!(next_state(&mut state, DEADLINE).await, SessionState::SyncConnected);
    let reconnected = healed.elapsed();
    of_follower.sync(&during).await.unwrap();
    assert!(of_follower.check_stat(&during).await.unwrap().is_some(), "the follower missed a write");
    assert_eq!(mode(cluster, follower).as_deref(), Some("follower"));
    eprintln!("healed: its client reconnected {reconnected:?} after the heal");
}

/// Bytes from the leader to a follower are held, those from the follower to the leader flow: a
/// write sent through the follower reaches the leader and is applied by the ensemble, but the
/// follower never hears of it, and gives its silent leader up after the sync limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_way_cut_holds_only_its_direction() {
    let (_turn, cluster) = ensemble().await;
    let leader = cluster.leader().expect("a leader");
    let follower = others(cluster, leader)[0];
    let of_follower = client_of(cluster, &[follower]).await;
    let observer = client_of(cluster, &others(cluster, follower)).await;
    let path = unique_path("sent-through-the-deaf-follower");
    let limit = sync_timeout(cluster);

    cluster.cut_one_way(leader, follower);
    let cut = Instant::now();
    let sent = tokio::spawn({
        let (client, path) = (of_follower.clone(), path.clone());
        async move { client.create(&path, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.map(drop) }
    });
    let applied = within("the write through the follower is applied", limit, async || {
        observer.check_stat(&path).await.is_ok_and(|stat| stat.is_some())
    })
    .await;
    assert!(!sent.is_finished(), "the follower answered while its leader's bytes were held");
    within("the follower stops serving", limit + ELECTION, async || answers_not_serving(cluster, follower)).await;
    let stopped = cut.elapsed();
    let outcome = tokio::time::timeout(DEADLINE, sent).await.expect("the request ends").unwrap();
    assert!(matches!(outcome, Err(ZkError::ConnectionLoss)), "{outcome:?}");
    assert_eq!(mode(cluster, leader).as_deref(), Some("leader"));
    eprintln!(
        "one-way cut from leader {leader} to follower {follower}: its write was applied {applied:?} after the cut, \
         unanswered; it stopped serving {stopped:?} after the cut"
    );

    cluster.heal(leader, follower);
    within("the follower follows again", DEADLINE, async || mode(cluster, follower).as_deref() == Some("follower"))
        .await;
    of_follower.sync(&path).await.unwrap();
    assert!(of_follower.check_stat(&path).await.unwrap().is_some());
}

/// A write through a follower waits for the leader twice (the request, then the commit), so a
/// delay between them adds two delays; a write through the other follower adds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_between_a_follower_and_its_leader_slows_its_writes() {
    let delay = Duration::from_millis(500);
    let (_turn, cluster) = ensemble().await;
    let leader = cluster.leader().expect("a leader");
    let (slow, fast) = match others(cluster, leader)[..] {
        [slow, fast] => (slow, fast),
        _ => unreachable!("three servers"),
    };
    let through_slow = client_of(cluster, &[slow]).await;
    let through_fast = client_of(cluster, &[fast]).await;
    let write = async |client: &Client, name: &str| {
        let started = Instant::now();
        create(client, &unique_path(name)).await;
        started.elapsed()
    };

    cluster.delay(slow, leader, delay);
    let slow_write = write(&through_slow, "through-the-delayed-follower").await;
    let fast_write = write(&through_fast, "through-the-other-follower").await;
    cluster.delay(slow, leader, Duration::ZERO);
    // Its commit comes behind the bytes delayed before the removal, in order.
    let first_write = write(&through_slow, "just-after-the-removal").await;
    let healed_write = write(&through_slow, "through-the-healed-follower").await;
    eprintln!(
        "delay {delay:?} between follower {slow} and leader {leader}: a write through it took {slow_write:?}, \
         through the other follower {fast_write:?}; without the delay {first_write:?}, then {healed_write:?}"
    );
    assert!(slow_write >= 2 * delay, "the write through the delayed follower took {slow_write:?}");
    assert!(fast_write < delay, "the write through the other follower took {fast_write:?}");
    assert!(healed_write < delay, "the delay outlived its removal: {healed_write:?}");
    assert_eq!(mode(cluster, slow).as_deref(), Some("follower"), "a delay below the sync limit is no partition");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_is_replaced_and_rejoins_as_a_follower_once_resumed() {
    let (_turn, cluster) = ensemble().await;
    let old = cluster.leader().expect("a leader");
    let others = others(cluster, old);
    let limit = sync_timeout(cluster);

    cluster.pause(old).unwrap();
    let paused = Instant::now();
    assert!(cluster.pid(old).is_some(), "a paused server still runs");
    let elected = within("one of the others leads", limit + ELECTION, async || {
        others.iter().any(|&i| mode(cluster, i).as_deref() == Some("leader"))
    })
    .await;
    // The paused server is left out: it is not waited for.
    let new = tokio::task::spawn_blocking(|| ENSEMBLE.wait_for_leader()).await.unwrap().unwrap();
    assert!(others.contains(&new), "server {new} leads");
    let waited = paused.elapsed();

    cluster.resume(old).unwrap();
    let rejoined =
        within("the old leader follows", DEADLINE, async || mode(cluster, old).as_deref() == Some("follower")).await;
    eprintln!(
        "paused leader {old} (syncLimit x tickTime = {limit:?}): server {new} led after {elected:?} \
         (wait_for_leader returned {waited:?} after the pause); {old} followed {rejoined:?} after its resume"
    );
}

/// Faults add up: an isolated follower that is also paused serves again only once both are
/// undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_and_paused_follower_serves_again_once_resumed_and_healed() {
    let (_turn, cluster) = ensemble().await;
    let leader = cluster.leader().expect("a leader");
    let follower = others(cluster, leader)[0];
    let observer = client_of(cluster, &others(cluster, follower)).await;
    let limit = sync_timeout(cluster);

    cluster.isolate(follower);
    cluster.pause(follower).unwrap();
    create(&observer, &unique_path("written-while-one-is-out")).await;
    cluster.resume(follower).unwrap();
    // Resumed but still isolated: it finds its leader silent, and stays out.
    within("the resumed, isolated follower stops serving", limit + ELECTION, async || {
        answers_not_serving(cluster, follower)
    })
    .await;
    let out_since = Instant::now();
    within("the isolated follower stays out", 2 * limit, async || {
        assert!(answers_not_serving(cluster, follower), "it serves while isolated");
        out_since.elapsed() >= limit
    })
    .await;
    cluster.heal_all();
    let rejoined =
        within("the follower follows again", DEADLINE, async || mode(cluster, follower).as_deref() == Some("follower"))
            .await;
    eprintln!("isolated and paused follower {follower}: followed {rejoined:?} after resume and heal");
}

/// A paused server's JVM does not keep dropping the cluster waiting. (And `start` keeps
/// ZooKeeper's usual timing.)
#[test]
fn dropping_a_cluster_kills_its_paused_servers() {
    let cluster = TestingCluster::start(1).unwrap();
    assert_eq!((cluster.tick_time(), cluster.sync_limit()), (Duration::from_millis(500), 5));
    assert!(cluster.four_letter(0, "conf").unwrap().contains("minSessionTimeout=1000"));
    let pid = cluster.pid(0).expect("running");
    cluster.pause(0).unwrap();

    let dropped = Instant::now();
    drop(cluster);
    let took = dropped.elapsed();

    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the paused JVM {pid} survived");
    assert!(took < Duration::from_secs(10), "dropping took {took:?}");
}
