//! `Mutex` on a real three-server ensemble while its leader is killed, re-elected and restarted.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use zk_lock::testing::{wait_for_children, TestingCluster};
use zk_lock::{Client, Mutex};
use zookeeper_client::SessionState;

const SESSIONS: usize = 4;
const TASKS_PER_SESSION: usize = 4;
/// Long enough that the sessions outlive the election, and that no holder is told of a loss
/// (about 0.36 of it after the last answered heartbeat, 14 s, unless the reconnection comes
/// first): the connection is down meanwhile. An election took 5.5 s on this 2-core machine under
/// the load of three test runs at once, and 19 s with two ensembles and 20 partition trials
/// running beside it, which a 20 s timeout (a loss declared at 7 s) did not survive.
const SESSION_TIMEOUT: Duration = Duration::from_secs(40);
/// Per acquisition: generous, because an election stalls every acquisition for a while.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the test waits for the contenders to make a given amount of progress.
const PROGRESS_TIMEOUT: Duration = Duration::from_secs(90);
/// Grants before the leader is killed.
const GRANTS_BEFORE_KILL: u64 = 120;
/// Grants required after the re-election, and again after the killed member rejoined.
const GRANTS_PER_PHASE: u64 = 60;

/// What the contenders report to the test: grants so far, and the first failure.
#[derive(Default)]
struct Progress {
    grants: u64,
    failure: Option<String>,
}

/// Runs blocking cluster control off the runtime's worker threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("blocking cluster operation panicked")
}

/// Waits until the contenders have `target` grants in all; panics on a contender's failure or
/// after [`PROGRESS_TIMEOUT`]. Returns the grant count seen.
async fn wait_for_grants(progress: &watch::Sender<Progress>, target: u64, what: &str) -> u64 {
    let mut seen = progress.subscribe();
    let waited = tokio::time::timeout(PROGRESS_TIMEOUT, seen.wait_for(|p| p.grants >= target || p.failure.is_some()))
        .await
        .map(|reached| reached.map(|p| (p.grants, p.failure.clone())));
    match waited {
        Ok(Ok((grants, None))) => grants,
        Ok(Ok((_, Some(failure)))) => panic!("a contender failed while waiting for {what}: {failure}"),
        Ok(Err(_)) => unreachable!("the sender is borrowed"),
        Err(_) => panic!(
            "acquisitions stalled: {} grants, {target} expected {what}, within {PROGRESS_TIMEOUT:?}",
            progress.borrow().grants
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_keep_exclusion_and_progress_through_a_leader_failover() {
    let path = "/it-ensemble/failover";
    let started = Instant::now();
    let cluster = Arc::new(blocking(|| TestingCluster::start(3)).await.expect("start a three-server ensemble"));
    eprintln!("ensemble up after {:?}: {}", started.elapsed(), cluster.connect_string());

    let mut clients = Vec::new();
    for _ in 0..SESSIONS {
        let client = Client::builder(cluster.connect_string())
            .session_timeout(SESSION_TIMEOUT)
            .connect()
            .await
            .expect("connect to the ensemble");
        clients.push(client);
    }
    let session_ids: Vec<i64> = clients.iter().map(|c| c.zookeeper().session_id().0).collect();

    // Which sessions saw their connection drop: proves the kill really disturbed them.
    let disconnected = Arc::new(AtomicUsize::new(0));
    for client in &clients {
        let mut states = client.zookeeper().state_watcher();
        let disconnected = disconnected.clone();
        tokio::spawn(async move {
            loop {
                match states.changed().await {
                    SessionState::Disconnected => {
                        disconnected.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                    state if state.is_terminated() => return,
                    _ => {}
                }
            }
        });
    }

    let counter = Arc::new(AtomicU64::new(0));
    let holders = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(watch::Sender::new(Progress::default()));
    let mut tasks = Vec::new();
    for (session, client) in clients.iter().enumerate() {
        for task in 0..TASKS_PER_SESSION {
            let mutex = Mutex::with_client(client, path);
            let zk = client.zookeeper();
            let (counter, holders, stop, progress) = (counter.clone(), holders.clone(), stop.clone(), progress.clone());
            let name = format!("session {session} task {task}");
            tasks.push(tokio::spawn(async move {
                let fail = |failure: String| {
                    let failure = format!("{name}: {failure}");
                    progress.send_modify(|p| {
                        p.failure.get_or_insert(failure.clone());
                    });
                    failure
                };
                let mut increments = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let acquired = Instant::now();
                    let guard = match mutex.lock_timeout(ACQUIRE_TIMEOUT).await {
                        Ok(guard) => guard,
                        Err(e) => return Err(fail(format!("lock after {:?}: {e}", acquired.elapsed()))),
                    };
                    if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                        return Err(fail(format!("two holders at once ({})", guard.node_path())));
                    }
                    // Read, yield so any other holder could run, then write: a lost update
                    // would show in the final count.
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    increments += 1;
                    holders.fetch_sub(1, Ordering::SeqCst);
                    progress.send_modify(|p| p.grants += 1);
                    let node = guard.node_path().to_owned();
                    if let Err(e) = guard.release().await {
                        // A node left behind would block every other contender for good.
                        let left = tokio::time::timeout(Duration::from_secs(30), zk.check_stat(&node))
                            .await
                            .map(|stat| stat.map(|stat| stat.is_some()));
                        return Err(fail(format!("release of {node}: {e} (node still there afterwards: {left:?})")));
                    }
                }
                Ok(increments)
            }));
        }
    }

    let contending = Instant::now();
    wait_for_grants(&progress, GRANTS_BEFORE_KILL, "before the kill").await;
    let killing = Instant::now();
    let killed = {
        let cluster = cluster.clone();
        blocking(move || cluster.kill_leader()).await.expect("kill the leader")
    };
    // Every grant counted from here on happened after the leader's process was gone.
    let grants_at_kill = progress.borrow().grants;
    let new_leader = {
        let cluster = cluster.clone();
        blocking(move || cluster.wait_for_leader()).await.expect("a new leader is elected")
    };
    assert_ne!(new_leader, killed, "the killed server cannot lead");
    let grants_at_election = progress.borrow().grants;
    eprintln!(
        "killed leader {killed} at {grants_at_kill} grants; server {new_leader} leads after {:?} \
         ({grants_at_election} grants)",
        killing.elapsed()
    );

    let after_election =
        wait_for_grants(&progress, grants_at_election + GRANTS_PER_PHASE, "after the re-election").await;
    eprintln!("{after_election} grants {:?} after the kill", killing.elapsed());

    let restarting = Instant::now();
    {
        let cluster = cluster.clone();
        blocking(move || cluster.restart(killed)).await.expect("restart the killed server");
    }
    let grants_at_restart = progress.borrow().grants;
    eprintln!("server {killed} rejoined after {:?} ({grants_at_restart} grants)", restarting.elapsed());
    wait_for_grants(&progress, grants_at_restart + GRANTS_PER_PHASE, "after the restart").await;

    stop.store(true, Ordering::SeqCst);
    let mut increments = 0;
    for task in tasks {
        let finished = tokio::time::timeout(ACQUIRE_TIMEOUT + Duration::from_secs(10), task)
            .await
            .expect("a contender did not finish")
            .expect("a contender panicked");
        increments += finished.unwrap_or_else(|failure| panic!("{failure}"));
    }
    let grants = progress.borrow().grants;
    eprintln!(
        "{grants} grants in {:?}, {} after the kill; whole test {:?}",
        contending.elapsed(),
        grants - grants_at_kill,
        started.elapsed()
    );

    assert_eq!(counter.load(Ordering::SeqCst), increments, "lost updates: the lock let two holders overlap");
    assert_eq!(grants, increments);
    assert!(grants - grants_at_kill > 0, "no acquisition after the leader was killed");
    assert!(grants_at_restart > grants_at_election, "no acquisition between the re-election and the restart");
    assert!(
        disconnected.load(Ordering::SeqCst) > 0,
        "no session saw its connection drop: the kill did not disturb the clients"
    );
    let renewed: Vec<(i64, i64)> = clients
        .iter()
        .zip(&session_ids)
        .map(|(client, &before)| (before, client.zookeeper().session_id().0))
        .filter(|(before, after)| before != after)
        .collect();
    assert!(renewed.is_empty(), "sessions expired during the failover (old, new ids): {renewed:?}");
    wait_for_children(&clients[0], path, |children| children.is_empty()).await.unwrap();
}
