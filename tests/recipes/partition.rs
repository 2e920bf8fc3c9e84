//! Network partitions between a client and its server, made with `zk_lock::testing::Proxy`, on
//! the mutex, the write side of the read/write lock and a one-lease semaphore:
//!
//! - a partitioned holder learns of its loss strictly before another client is granted the lock
//!   (many trials per recipe; the margins are printed);
//! - a client cut off while it waits, during its `create`, during its release or during the
//!   hand-off to it leaves no node behind once the partition heals, and the lock can be taken at
//!   once;
//! - a session that survives a partition longer than its timeout (the server restarted meanwhile
//!   and gave it a fresh timeout) is retired: its locks are free again soon after the heal.
//!
//! After each scenario the orphan oracle (`zk_lock::testing::audit`) must find no node of the
//! partitioned client that the library does not account for.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use zk_lock::testing::{audit, wait_for_children, wait_for_children_within, Direction, Proxy, TestingServer};
use zk_lock::{Client, Error, LostReason};

use crate::support::one_lock::{Held, Recipe, RECIPES};
use crate::support::{new_client, server, PATIENCE};

/// The partitioned clients' session timeout: the loss is declared 4/5 of it after the latest
/// renewal the leader provably made, so this leaves at least 0.4 s between that and the earliest
/// expiry on the server.
const SESSION: Duration = Duration::from_secs(2);
/// Short, so that a partitioned client's attempt to open a new session fails before the server
/// could expire the old one: the old one must then be closed by its retirement.
const CONNECT: Duration = Duration::from_millis(300);

/// A client whose every connection goes through `proxy`.
async fn client_through(proxy: &Proxy) -> Client {
    Client::builder(proxy.connect_string())
        .session_timeout(SESSION)
        .connect_timeout(CONNECT)
        .connect()
        .await
        .expect("connect through the proxy")
}

fn unique(name: &str) -> String {
    format!("/partition/{name}-{}", std::process::id())
}

/// Polls `probe` every 10 ms until it gives `Ok`; panics with its last `Err` after `within`.
async fn poll_until<T, F: Future<Output = Result<T, String>>>(within: Duration, mut probe: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + within;
    loop {
        match probe().await {
            Ok(done) => return done,
            Err(last) if Instant::now() >= deadline => panic!("after {within:?}: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Waits until the partitioned client's sessions own no node the library does not account for,
/// and none is still being retired.
async fn no_orphans(client: &Client, root: &str) {
    poll_until(PATIENCE, || async move {
        match audit(client, root).await {
            Ok(audit) if audit.orphans.is_empty() && audit.retiring.is_empty() => Ok(()),
            found => Err(format!("orphan oracle under {root}: {found:?}")),
        }
    })
    .await;
}

/// Waits until `client`'s session is declared lost and being retired (it cannot be closed while
/// the partition lasts).
async fn until_retiring(client: &Client, root: &str) {
    poll_until(PATIENCE, || async move {
        match audit(client, root).await {
            Ok(audit) if !audit.retiring.is_empty() => Ok(()),
            found => Err(format!("the partitioned session was never declared lost: {found:?}")),
        }
    })
    .await;
}

/// Waits (watching) until no node is left in `queue`; returns how long it took.
async fn queue_empties(observer: &Client, queue: &str, within: Duration) -> Duration {
    let started = Instant::now();
    wait_for_children_within(observer, queue, within, |left| left.is_empty()).await.unwrap_or_else(|e| panic!("{e}"));
    started.elapsed()
}

// --- a partitioned holder learns first ------------------------------------------------------

/// Trials per recipe; `ZK_LOCK_PARTITION_TRIALS` overrides it.
fn trials() -> usize {
    std::env::var("ZK_LOCK_PARTITION_TRIALS").ok().and_then(|n| n.parse().ok()).unwrap_or(100)
}

/// Trials run at once, each with its own proxy, holder session and path.
const AT_ONCE: usize = 20;

/// One trial: a holder behind `proxy` takes the lock, `other` (connected directly) queues
/// behind it, the proxy cuts every byte. Returns by how much the holder's `lost()` came before
/// `other`'s grant (negative if after).
async fn holder_trial(recipe: Recipe, path: String, other: Client) -> (f64, LostReason) {
    let proxy = Proxy::start(server().connect_string()).expect("start proxy");
    let holder = client_through(&proxy).await;
    let held = recipe.take(&holder, &path, PATIENCE).await.expect("holder takes the lock");
    let lost = held.lost();
    let lost_at = tokio::spawn(async move { (lost.await, Instant::now()) });
    let waiter_client = other.clone();
    let waiter_path = path.clone();
    let granted = tokio::spawn(async move {
        let guard = recipe.take(&waiter_client, &waiter_path, PATIENCE).await.expect("other is granted");
        (Instant::now(), guard)
    });
    recipe.until_someone_waits(&other, &path).await;
    proxy.cut();
    let (reason, lost_at) = lost_at.await.expect("lost task");
    let (granted_at, guard) = granted.await.expect("grant task");
    assert!(!held.is_held(), "{recipe}: is_held() after lost()");
    guard.release().await.expect("other releases");
    let margin =
        if lost_at < granted_at { (granted_at - lost_at).as_secs_f64() } else { -(lost_at - granted_at).as_secs_f64() };
    drop(held);
    proxy.heal();
    no_orphans(&holder, &path).await;
    (margin, reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_holder_learns_of_its_loss_before_anyone_else_is_granted_the_lock() {
    let other = new_client().await;
    let trials = trials();
    let mut report = Vec::new();
    for recipe in RECIPES {
        let mut margins = Vec::with_capacity(trials);
        for batch in 0..trials.div_ceil(AT_ONCE) {
            let runs: Vec<_> = (batch * AT_ONCE..trials.min((batch + 1) * AT_ONCE))
                .map(|n| tokio::spawn(holder_trial(recipe, unique(&format!("holder-{recipe}-{n}")), other.clone())))
                .collect();
            for run in runs {
                let (margin, reason) = run.await.expect("trial");
                assert_eq!(reason, LostReason::ConnectionLost, "{recipe}");
                margins.push(margin);
            }
        }
        margins.sort_by(f64::total_cmp);
        let late: Vec<_> = margins.iter().filter(|m| **m <= 0.0).collect();
        assert!(
            late.is_empty(),
            "{recipe}: lost() came after another grant in {} of {trials} trials: {late:?}",
            late.len()
        );
        report.push(format!(
            "{recipe}: {trials} trials, lost() before the other grant by min {:.3} s, median {:.3} s, max {:.3} s",
            margins[0],
            margins[margins.len() / 2],
            margins[margins.len() - 1]
        ));
    }
    eprintln!("session timeout {SESSION:?}; margins of lost() over the next grant:\n  {}", report.join("\n  "));
}

// --- nothing left behind ------------------------------------------------------------------------

/// Where in its life a partitioned client is cut off.
#[derive(Debug, Clone, Copy)]
enum CutOff {
    /// While it waits behind another holder.
    Waiting,
    /// Its `create` reaches the server, the reply does not come back.
    Creating,
    /// It holds the lock and releases it.
    Releasing,
    /// The holder ahead releases while the waiter is cut off.
    HandOff,
}

/// The client behind the proxy is cut off at `when`, long enough for its session to be declared
/// lost and retired; after the heal, no node of the retired session is left, the cut-off
/// acquisition (if any) is granted on a new session, and then a third client takes the lock at
/// once.
async fn cut_off(recipe: Recipe, when: CutOff) {
    let path = unique(&format!("cut-{when:?}-{recipe}").to_lowercase());
    let observer = new_client().await;
    let proxy = Proxy::start(server().connect_string()).expect("start proxy");
    let partitioned = client_through(&proxy).await;
    let queue = recipe.queue(&path);
    let mut ahead = None;
    let mut waiting = None;
    match when {
        CutOff::Waiting | CutOff::HandOff => {
            ahead = Some(recipe.take(&observer, &path, PATIENCE).await.expect("holder ahead"));
            waiting = Some(spawn_take(recipe, &partitioned, &path));
            recipe.until_someone_waits(&observer, &path).await;
            proxy.cut();
            if let CutOff::HandOff = when {
                // The hand-off happens while the waiter cannot hear of it.
                ahead.take().expect("holder ahead").release().await.expect("holder ahead releases");
            }
        }
        CutOff::Creating => {
            // The lock's parents must exist, or the create would fail without creating anything.
            recipe.try_take(&observer, &path).await.expect("make the parents").release().await.expect("release");
            proxy.cut_one_way(Direction::ToClient);
            waiting = Some(spawn_take(recipe, &partitioned, &path));
            let reached = wait_for_children(&observer, &queue, |c| !c.is_empty()).await.unwrap();
            assert_eq!(reached.len(), 1, "{recipe}: {reached:?}");
        }
        CutOff::Releasing => {
            let held = recipe.take(&partitioned, &path, PATIENCE).await.expect("take");
            proxy.cut();
            let released = held.release().await;
            assert!(
                matches!(released, Err(Error::Lost { reason: LostReason::ConnectionLost, .. })),
                "{recipe}: {released:?}"
            );
        }
    }
    until_retiring(&partitioned, &path).await;
    let healed = Instant::now();
    proxy.heal();
    if let Some(waiting) = waiting {
        if let Some(ahead) = ahead.take() {
            ahead.release().await.expect("holder ahead releases");
        }
        let guard = waiting.await.expect("waiter task").expect("granted on a new session after the heal");
        guard.release().await.expect("release");
    }
    queue_empties(&observer, &queue, PATIENCE).await;
    let emptied = healed.elapsed();
    let third = recipe.try_take(&observer, &path).await.expect("taken at once after the heal");
    third.release().await.expect("release");
    no_orphans(&partitioned, &path).await;
    eprintln!("{recipe}, cut off {when:?}: nothing left {:.3} s after the heal", emptied.as_secs_f64());
    assert!(healed.elapsed() < SESSION * 3, "{recipe}: {:?} after the heal", healed.elapsed());
}

/// The acquisition of the partitioned client, under way in a task.
fn spawn_take(recipe: Recipe, client: &Client, path: &str) -> tokio::task::JoinHandle<zk_lock::Result<Held>> {
    let (client, path) = (client.clone(), path.to_owned());
    tokio::spawn(async move { recipe.take(&client, &path, PATIENCE).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_cut_off_leaves_no_node_behind() {
    for recipe in RECIPES {
        cut_off(recipe, CutOff::Waiting).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cut_off_during_its_create_leaves_no_node_behind() {
    for recipe in RECIPES {
        cut_off(recipe, CutOff::Creating).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_during_its_release_leaves_no_node_behind() {
    for recipe in RECIPES {
        cut_off(recipe, CutOff::Releasing).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_cut_off_during_the_hand_off_leaves_no_node_behind() {
    for recipe in RECIPES {
        cut_off(recipe, CutOff::HandOff).await;
    }
}

// --- a session that survives its partition ---------------------------------------------------

/// The server restarts during a partition of 1.2 session timeouts: it gives every session it
/// restores a fresh timeout, so the partitioned holders' sessions are alive when the partition
/// heals, before zookeeper-client gives them up (1.4 timeouts). They were declared lost, so they
/// are retired: closed, their nodes deleted, within half a session timeout of the heal, before
/// the server would have expired them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_survives_a_partition_longer_than_its_timeout_is_retired() {
    // Long enough for a server restart inside the partition.
    const LONG_SESSION: Duration = Duration::from_secs(6);
    let server = TestingServer::start().expect("start a server of our own");
    let proxy = Proxy::start(server.connect_string()).expect("start proxy");
    let observer = Client::builder(server.connect_string()).connect().await.expect("connect");
    let mut holders = Vec::new();
    for recipe in RECIPES {
        let client = Client::builder(proxy.connect_string())
            .session_timeout(LONG_SESSION)
            .connect_timeout(CONNECT)
            .connect()
            .await
            .expect("connect through the proxy");
        let path = format!("/survivor/{recipe}");
        let held = recipe.take(&client, &path, PATIENCE).await.expect("take");
        holders.push((recipe, path, client, held));
    }
    proxy.cut();
    let cut = Instant::now();
    for (recipe, _, _, held) in &holders {
        assert_eq!(held.lost().await, LostReason::ConnectionLost, "{recipe}");
    }
    let told = cut.elapsed();
    // Kept until the end of the test: dropping it stops the server.
    let _server = tokio::task::spawn_blocking(move || {
        server.restart().expect("restart the server");
        server
    })
    .await
    .expect("restart task");
    let restarted = cut.elapsed();
    assert!(restarted < LONG_SESSION, "the restart took {restarted:?}: the scenario needs it inside the timeout");
    // The scenario: a partition of 1.2 timeouts, measured from the cut.
    tokio::time::sleep_until(cut + LONG_SESSION * 6 / 5).await;
    proxy.heal();
    let healed = Instant::now();
    for (recipe, path, client, _) in &holders {
        let queue = recipe.queue(path);
        let emptied = queue_empties(&observer, &queue, LONG_SESSION).await;
        let free_after = healed.elapsed();
        recipe.try_take(&observer, path).await.expect("free again").release().await.expect("release");
        no_orphans(client, path).await;
        eprintln!(
            "{recipe}: told {:.2} s after the cut, restart done at {:.2} s, healed at 1.2 T; free {:.3} s after the heal \
             (queue emptied after {:.3} s of watching)",
            told.as_secs_f64(),
            restarted.as_secs_f64(),
            free_after.as_secs_f64(),
            emptied.as_secs_f64()
        );
        assert!(free_after < LONG_SESSION / 2, "{recipe}: free only {free_after:?} after the heal");
    }
}

/// A lock asked for while the client's session is being retired (the partition goes on) waits
/// for a new session, as long as its timeout allows, and is granted once the partition heals:
/// it does not fail because the first attempts to open a session could not reach the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_asked_for_during_a_partition_is_granted_after_the_heal() {
    for recipe in RECIPES {
        let path = unique(&format!("asked-during-{recipe}"));
        let proxy = Proxy::start(server().connect_string()).expect("start proxy");
        let partitioned = client_through(&proxy).await;
        proxy.cut();
        until_retiring(&partitioned, &path).await;
        let asked = spawn_take(recipe, &partitioned, &path);
        // The scenario: the partition lasts several failed attempts to open a session.
        tokio::time::sleep(CONNECT * 4).await;
        assert!(!asked.is_finished(), "{recipe}: gave up while the partition lasted");
        proxy.heal();
        let held = asked.await.expect("task").expect("granted after the heal");
        held.release().await.expect("release");
        no_orphans(&partitioned, &path).await;
    }
}
