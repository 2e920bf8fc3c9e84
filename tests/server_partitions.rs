//! Faults between the servers of a real three-server ensemble (`TestingCluster`'s links): a
//! holder is told of its loss before anyone else is granted the lock, whatever the fault.
//!
//! - the holder's server, a follower, cut from the leader, with the session timeout below and
//!   above `syncLimit x tickTime` (the follower answers reads and pings until it notices);
//! - the holder on the leader, the leader cut from both followers;
//! - the leader paused past the session timeout;
//! - the holder's follower on a slow link to the leader;
//! - a leader election's leader on a follower cut from the ensemble's leader.
//!
//! In every one: `lost()` resolves strictly before the other client is granted (the margin is
//! printed), the old holder's late fenced write is refused, no node of the holder is left once
//! the links heal, and the lock can be taken again at once.
//!
//! `curator` measures what Apache Curator 5.4 tells its holder in the isolated-follower case.
//!
//! A binary of its own: each test runs its own ensemble and faults it, and they run one at a time
//! (three JVMs each on a 2-core machine; the margins are timings).

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;
use zk_lock::testing::{audit, wait_for_children, TestingCluster};
use zk_lock::{Client, ConnectionState, LostReason};
use zookeeper_client::{Acls, CreateMode};

#[path = "server_partitions/curator.rs"]
mod curator;
#[allow(dead_code, reason = "the rest of it is for tests/recipes, which runs CuratorPeer.java")]
#[path = "recipes/support/java_peer.rs"]
mod java_peer;
#[path = "recipes/support/one_lock.rs"]
mod one_lock;

use one_lock::{Recipe, RECIPES};

/// The servers' tick: 500 ms, ZooKeeper's sample `syncLimit` of 5 ticks made 8 so that the gap
/// between a session timeout below it and one above it is wide.
const TICK: Duration = Duration::from_millis(500);
const SYNC_LIMIT: u32 = 8;
/// Below `syncLimit x tickTime` (4 s): the leader expires the session while the cut-off
/// follower still answers its client.
const SHORT_SESSION: Duration = Duration::from_secs(2);
/// Above it: the follower gives its clients up before the leader could expire the session.
const LONG_SESSION: Duration = Duration::from_secs(6);
/// Bounds every wait for something that must happen.
const PATIENCE: Duration = Duration::from_secs(60);

/// One ensemble at a time (a test that panics releases it too).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn ensemble() -> TestingCluster {
    TestingCluster::builder().servers(3).tick_time(TICK).sync_limit(SYNC_LIMIT).start().expect("start the ensemble")
}

/// A fault between the servers, applied once the holder holds and the other client waits.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The holder's follower cut from the leader (both ways; bytes held, sockets open).
    FollowerCutFromLeader,
    /// The leader, which the holder is connected to, cut from both followers.
    LeaderIsolated,
    /// The leader paused (`SIGSTOP`) for this long, then resumed.
    LeaderPaused(Duration),
    /// The holder's follower's link to the leader delayed this long each way.
    SlowLink(Duration),
}

impl Fault {
    /// Whether the holder's client connects to the leader (else to a follower).
    fn holder_on_leader(self) -> bool {
        matches!(self, Self::LeaderIsolated)
    }
}

/// What one run measured.
struct Outcome {
    /// `lost()`, from the fault.
    lost_after: Option<Duration>,
    /// The other client's grant, from the fault.
    granted_after: Option<Duration>,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = |d: Option<Duration>| d.map_or_else(|| "never".to_owned(), |d| format!("{:.3} s", d.as_secs_f64()));
        write!(f, "lost() at {}, the other client granted at {}", secs(self.lost_after), secs(self.granted_after))?;
        if let (Some(lost), Some(granted)) = (self.lost_after, self.granted_after) {
            let margin = granted.as_secs_f64() - lost.as_secs_f64();
            write!(f, ": margin {margin:.3} s")?;
        }
        Ok(())
    }
}

/// Runs `fault` against a holder of `recipe` with session timeout `session`, checks that the
/// holder is told first and that everything is clean after the heal, and returns what it saw.
async fn told_first(recipe: Recipe, fault: Fault, session: Duration) -> Outcome {
    let cluster = ensemble();
    let leader = cluster.leader().expect("a leader");
    let followers: Vec<usize> = (0..cluster.len()).filter(|&i| i != leader).collect();
    let holder_server = if fault.holder_on_leader() { leader } else { followers[0] };
    let others: Vec<String> =
        (0..cluster.len()).filter(|&i| i != holder_server).map(|i| cluster.server_connect_string(i)).collect();

    let holder = Client::builder(cluster.server_connect_string(holder_server))
        .session_timeout(session)
        .connect()
        .await
        .expect("the holder connects");
    let other = Client::builder(others.join(",")).session_timeout(session).connect().await.expect("the other connects");
    let path = format!("/server-partitions-{}", fastrand::u64(..));
    // Top-level, beside the lock: a persistent node that fenced writes go to.
    let store = format!("{path}-store");
    other.zookeeper().create(&store, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();

    let held = recipe.take(&holder, &path, PATIENCE).await.expect("the holder takes the lock");
    // What a health check of the holder's service sees: Lost, when it comes.
    let mut states = holder.connection_states();
    let state_lost_at = tokio::spawn(async move {
        while let Some(state) = states.next().await {
            if state == ConnectionState::Lost {
                return Some(Instant::now());
            }
        }
        None
    });
    held.fenced_write(&store, b"holder").await.expect("the holder writes while it holds");
    let lost = held.lost();
    let lost_at = tokio::spawn(async move { (lost.await, Instant::now()) });
    let waiter = other.clone();
    let waiter_path = path.clone();
    let granted = tokio::spawn(async move {
        let guard = recipe.take(&waiter, &waiter_path, PATIENCE).await.expect("the other client is granted");
        (Instant::now(), guard)
    });
    recipe.until_someone_waits(&other, &path).await;
    // The holder has held for a whole session timeout when the fault comes, as a lock held for a
    // while would have: its session's proof of renewal is then in its steady state, trailing the
    // last answer by four heartbeats (a younger session's proof is its connect request).
    tokio::time::sleep(session).await;

    let faulted_at = Instant::now();
    let paused = match fault {
        Fault::FollowerCutFromLeader => {
            cluster.cut(holder_server, leader);
            None
        }
        Fault::LeaderIsolated => {
            cluster.isolate(leader);
            None
        }
        Fault::LeaderPaused(pause) => {
            cluster.pause(leader).expect("pause the leader");
            Some(pause)
        }
        Fault::SlowLink(delay) => {
            cluster.delay(holder_server, leader, delay);
            None
        }
    };
    if let Some(pause) = paused {
        tokio::time::sleep(pause).await;
        cluster.resume(leader).expect("resume the leader");
    }

    // A slow link may cost the holder nothing: then nobody else may be granted meanwhile.
    let watch_for = session * 3 + TICK * SYNC_LIMIT + Duration::from_secs(10);
    let (grant, lost) =
        tokio::join!(tokio::time::timeout(watch_for, granted), tokio::time::timeout(watch_for, lost_at));
    let lost = lost.ok().map(|joined| joined.expect("the lost() task"));
    let grant = grant.ok().map(|joined| joined.expect("the grant task"));
    let outcome = Outcome {
        lost_after: lost.as_ref().map(|(_, at)| *at - faulted_at),
        granted_after: grant.as_ref().map(|(at, _)| *at - faulted_at),
    };
    eprintln!("{recipe}, {fault:?}, session timeout {session:?}: {outcome}");

    match (&lost, &grant) {
        (Some((reason, lost_at)), Some((granted_at, _))) => {
            assert!(lost_at < granted_at, "{recipe}, {fault:?}: the holder was told after the other grant: {outcome}");
            // Its client's connection state says so too, before the grant.
            let state_lost_at = tokio::time::timeout(PATIENCE, state_lost_at).await;
            let state_lost_at = state_lost_at.expect("ConnectionState::Lost within the patience").expect("the task");
            let state_lost_at = state_lost_at.expect("the holder's client went through ConnectionState::Lost");
            assert!(
                state_lost_at < *granted_at,
                "{recipe}, {fault:?}: ConnectionState::Lost came {:?} after the other grant",
                state_lost_at - *granted_at
            );
            assert_ne!(*reason, LostReason::NodeDeleted, "{recipe}, {fault:?}");
            assert!(!held.is_held(), "{recipe}, {fault:?}: is_held() after lost()");
        }
        (None, Some(_)) => {
            panic!("{recipe}, {fault:?}: the other client was granted, the holder never told: {outcome}")
        }
        (_, None) => assert!(matches!(fault, Fault::SlowLink(_)), "{recipe}, {fault:?}: nobody was granted: {outcome}"),
    }

    cluster.heal_all();
    if let Some((_, new_holder)) = grant {
        new_holder.fenced_write(&store, b"new holder").await.expect("the new holder writes");
        // The old holder, late: refused, and the store keeps the new holder's value.
        let late = held.fenced_write(&store, b"old holder, late").await;
        assert!(late.is_err(), "{recipe}, {fault:?}: the old holder's late write was accepted");
        let (data, _) = other.zookeeper().get_data(&store).await.unwrap();
        assert_eq!(data, b"new holder", "{recipe}, {fault:?}");
        new_holder.release().await.expect("the new holder releases");
        drop(held);
    } else {
        held.release().await.expect("the holder, never told, releases");
    }

    // No node of the holder's sessions is left, once the links are back.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let found = audit(&holder, &path).await;
        match found {
            Ok(audit) if audit.orphans.is_empty() && audit.retiring.is_empty() => break,
            _ if Instant::now() >= deadline => panic!("{recipe}, {fault:?}: after the heal: {found:?}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    wait_for_children(&other, &recipe.queue(&path), <[String]>::is_empty).await.expect("the queue empties");
    // A health check's ready() reconnects the old holder's client (on a new session if needed).
    tokio::time::timeout(PATIENCE, holder.ready()).await.expect("ready within the patience").expect("ready");
    assert!(holder.connection_state().is_connected(), "{recipe}, {fault:?}: {:?}", holder.connection_state());
    // The lock can be taken at once, by the old holder's client (on a new session if needed).
    let again = recipe.try_take(&holder, &path).await.expect("the lock is free at once after the heal");
    again.release().await.unwrap();
    holder.close().await;
    other.close().await;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_on_a_follower_cut_from_the_leader_is_told_first_with_a_timeout_below_sync_limit() {
    let _one = ONE_AT_A_TIME.lock().await;
    for recipe in RECIPES {
        let outcome = told_first(recipe, Fault::FollowerCutFromLeader, SHORT_SESSION).await;
        assert!(outcome.granted_after.is_some(), "{recipe}: the leader expires the session");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_on_a_follower_cut_from_the_ensembles_leader_is_told_first() {
    let _one = ONE_AT_A_TIME.lock().await;
    let outcome = told_first(Recipe::Leader, Fault::FollowerCutFromLeader, SHORT_SESSION).await;
    assert!(outcome.granted_after.is_some(), "the next participant leads once the session expires");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_on_a_follower_cut_from_the_leader_is_told_first_with_a_timeout_above_sync_limit() {
    let _one = ONE_AT_A_TIME.lock().await;
    told_first(Recipe::Mutex, Fault::FollowerCutFromLeader, LONG_SESSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_on_a_leader_cut_from_both_followers_is_told_first() {
    let _one = ONE_AT_A_TIME.lock().await;
    told_first(Recipe::Mutex, Fault::LeaderIsolated, SHORT_SESSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_is_told_first_when_the_leader_is_paused_past_the_session_timeout() {
    let _one = ONE_AT_A_TIME.lock().await;
    // Past the timeout, short of `syncLimit x tickTime`: the followers wait for the leader, which
    // expires the session as soon as it runs again.
    told_first(Recipe::Mutex, Fault::LeaderPaused(SHORT_SESSION * 3 / 2), SHORT_SESSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_on_a_follower_with_a_slow_link_to_the_leader_is_told_first() {
    let _one = ONE_AT_A_TIME.lock().await;
    told_first(Recipe::Mutex, Fault::SlowLink(SHORT_SESSION / 4), SHORT_SESSION).await;
}
