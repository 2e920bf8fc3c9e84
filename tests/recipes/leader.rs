//! `LeaderElection` against a real ZooKeeper (issue 36, point 1): one leader at a time, in the
//! order they asked, each with a larger fencing token; the id each participant gives is what
//! `leader()` reads; a leadership lost with its session is told before the next participant leads;
//! `max_hold` ends a leadership as it ends a hold; `#[zk_leader]` runs a job only while leading. Curator's `LeaderSelector` on the same path:
//! `curator_leader`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use zk_lock::{zk_leader, Error, LeaderElection, LostReason};

use crate::support::{install, new_client, queue_of, server, unique_name, PATIENCE};

fn election_path(name: &str) -> String {
    format!("/it-leader/{}", unique_name(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leads_at_a_time_in_the_order_they_asked() {
    let path = election_path("order");
    let (first, second, third) = (new_client().await, new_client().await, new_client().await);
    let elect = |client, id: &str| LeaderElection::with_client(client, &path).with_id(id);
    let (a, b, c) = (elect(&first, "worker-a"), elect(&second, "worker-b"), elect(&third, "worker-c"));

    let leading_a = a.lead().await.expect("the first participant leads");
    assert!(leading_a.is_held());
    assert!(matches!(b.try_lead().await, Err(Error::Busy { .. })), "one leader at a time");
    let leader = a.leader().await.expect("read the leader").expect("someone leads");
    assert_eq!(leader.data, b"worker-a", "the leader's id is its node's data");

    let waiting_b = tokio::spawn(async move { b.lead_timeout(PATIENCE).await });
    queue_of(&first, &path, 2).await;
    let waiting_c = tokio::spawn(async move { c.lead_timeout(PATIENCE).await });
    queue_of(&first, &path, 3).await;

    let token_a = leading_a.fencing_token();
    leading_a.resign().await.expect("resign while leading");
    let leading_b = waiting_b.await.unwrap().expect("the second participant leads next");
    assert!(leading_b.fencing_token() > token_a, "each leader's token is larger");
    let leader = a.leader().await.unwrap().expect("someone leads");
    assert_eq!(leader.data, b"worker-b");
    assert!(!waiting_c.is_finished(), "the third waits for the second");
    let token_b = leading_b.fencing_token();
    drop(leading_b);
    let leading_c = waiting_c.await.unwrap().expect("the third participant leads after the second");
    assert!(leading_c.fencing_token() > token_b);
    leading_c.resign().await.unwrap();
    assert!(a.leader().await.unwrap().is_none(), "nobody leads once all resigned");
}

/// A forced expiry (the testing kit closes the session from a connection of its own) deletes the
/// leader's node before its client can learn of it: `lost()` says so, and the next participant
/// leads. That a leader is told first of a real expiry is tests/server_partitions.rs, on an
/// ensemble.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_session_expires_loses_the_leadership_and_the_next_one_leads() {
    let path = election_path("expiry");
    let (first, second) = (new_client().await, new_client().await);
    let election = LeaderElection::with_client(&first, &path).with_id("expired");
    let leading = election.lead().await.expect("lead");
    let next = LeaderElection::with_client(&second, &path).with_id("next");
    let waiting = tokio::spawn(async move { next.lead_timeout(PATIENCE).await });
    queue_of(&second, &path, 2).await;

    server().expire_session(&first).await.expect("expire the leader's session");
    let reason = tokio::time::timeout(PATIENCE, leading.lost()).await.expect("told");
    assert!(matches!(reason, LostReason::SessionExpired | LostReason::NodeDeleted), "{reason:?}");
    assert!(!leading.is_held());
    let next_leader = waiting.await.unwrap().expect("the next participant leads");
    assert!(next_leader.fencing_token() > leading.fencing_token());
    assert_eq!(election.leader().await.unwrap().expect("someone leads").data, b"next");
    assert!(matches!(leading.resign().await, Err(Error::Lost { .. })), "a lost leadership cannot resign");
    next_leader.resign().await.unwrap();
    // The expired participant's client leads again, on a new session.
    election.lead_timeout(PATIENCE).await.expect("lead again").resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_hold_ends_a_leadership_and_the_next_participant_leads() {
    let path = election_path("max-hold");
    let (first, second) = (new_client().await, new_client().await);
    let limit = Duration::from_millis(500);
    let leading = LeaderElection::with_client(&first, &path).with_max_hold(limit).lead().await.expect("lead");
    let next = LeaderElection::with_client(&second, &path);
    let reason = tokio::time::timeout(PATIENCE, leading.lost()).await.expect("the limit ends the leadership");
    assert_eq!(reason, LostReason::MaxHoldReached { limit });
    let led = tokio::time::timeout(PATIENCE, next.lead()).await.expect("the next leads").expect("lead");
    assert!(led.fencing_token() > leading.fencing_token());
    led.resign().await.unwrap();
}

/// A mutex and a leader election at one path share one queue: either taken inside a holder of
/// the other through the same client would wait for itself, so it is refused at once.
#[tokio::test]
async fn a_mutex_inside_a_leader_of_the_same_path_is_refused_not_left_waiting_for_itself() {
    let path = election_path("mutex-inside");
    let client = new_client().await;
    let leading = LeaderElection::with_client(&client, &path).lead().await.expect("lead");
    let inside = leading.scope(zk_lock::Mutex::with_client(&client, &path).lock()).await;
    assert!(matches!(inside, Err(Error::WouldDeadlock { .. })), "{inside:?}");
    let again = leading.scope(LeaderElection::with_client(&client, &path).lead()).await;
    let nested = again.expect("a leader nested in its own leadership re-enters it");
    assert_eq!(nested.fencing_token(), leading.fencing_token(), "the same node");
    drop(nested);
    leading.resign().await.unwrap();

    let held = zk_lock::Mutex::with_client(&client, &path).lock().await.expect("lock");
    let inside = held.scope(LeaderElection::with_client(&client, &path).lead()).await;
    assert!(matches!(inside, Err(Error::WouldDeadlock { .. })), "{inside:?}");
    held.release().await.unwrap();
}

// --- #[zk_leader] ------------------------------------------------------------------------------

/// A job that runs only while its client's participant leads: says it started, runs until told
/// to stop, returns its leadership's fencing token.
#[zk_leader(path = "/it-leader/job/<run>", client = "leader-macro-a", guard = leading)]
async fn job_a(run: u64, started: Arc<Notify>, stop: Arc<Notify>) -> Result<i64, Error> {
    started.notify_one();
    stop.notified().await;
    Ok(leading.fencing_token())
}

/// The same job in another participant (another client: another process, for the election).
#[zk_leader(path = "/it-leader/job/<run>", client = "leader-macro-b", guard = leading)]
async fn job_b(run: u64, started: Arc<Notify>, stop: Arc<Notify>) -> Result<i64, Error> {
    started.notify_one();
    stop.notified().await;
    Ok(leading.fencing_token())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotated_job_runs_only_while_its_participant_leads() {
    let (a, _b) = (install("leader-macro-a").await, install("leader-macro-b").await);
    let run = fastrand::u64(..);
    let path = format!("/it-leader/job/{run}");
    let (started_a, stop_a, started_b, stop_b) =
        (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));

    let first = tokio::spawn(job_a(run, started_a.clone(), stop_a.clone()));
    tokio::time::timeout(PATIENCE, started_a.notified()).await.expect("the first participant leads and runs");
    let second = tokio::spawn(job_b(run, started_b.clone(), stop_b.clone()));
    queue_of(&a, &path, 2).await;
    assert!(!second.is_finished());

    stop_a.notify_one();
    let token_a = first.await.unwrap().expect("the first job ran while leading");
    // The first job's return gave the leadership up: the second runs now, and only now.
    tokio::time::timeout(PATIENCE, started_b.notified()).await.expect("the second participant leads and runs");
    stop_b.notify_one();
    let token_b = second.await.unwrap().expect("the second job ran while leading");
    assert!(token_b > token_a, "{token_b} after {token_a}");
}

#[zk_leader(path = "/it-leader/lost/<run>", client = "leader-macro-lost")]
async fn job_until_stopped(run: u64, started: Arc<Notify>) -> Result<(), Error> {
    started.notify_one();
    std::future::pending().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotated_job_whose_leadership_is_lost_is_stopped_and_leads_again_when_called_again() {
    let client = install("leader-macro-lost").await;
    let run = fastrand::u64(..);
    let path = format!("/it-leader/lost/{run}");
    let started = Arc::new(Notify::new());
    let job = tokio::spawn(job_until_stopped(run, started.clone()));
    tokio::time::timeout(PATIENCE, started.notified()).await.expect("the job leads and runs");

    // An operator deletes the leader's node: the job is stopped, and says why.
    zk_lock::force_release(&client, &path).await.expect("force the leadership away");
    let outcome = tokio::time::timeout(PATIENCE, job).await.expect("the job stops").unwrap();
    match outcome {
        Err(Error::Lost { path: lost, reason: LostReason::NodeDeleted }) => assert_eq!(lost, path),
        other => panic!("expected Error::Lost (NodeDeleted), got {other:?}"),
    }
    // Called again, it leads again.
    let again = tokio::spawn(job_until_stopped(run, started.clone()));
    tokio::time::timeout(PATIENCE, started.notified()).await.expect("the job leads again");
    again.abort();
}

/// The grant recording records leaderships as mutex grants (a mutex on the wire), in order, with
/// their tokens, and the history checker finds one leader at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaderships_are_recorded_and_checked_as_mutex_grants() {
    let path = election_path("recorded");
    let history = std::sync::Arc::new(zk_lock::testing::History::new());
    let recording = history.record_grants_under(&path);
    let (first, second) = (new_client().await, new_client().await);
    for client in [&first, &second, &first] {
        let leading = LeaderElection::with_client(client, &path).lead().await.expect("lead");
        leading.resign().await.expect("resign");
    }
    drop(recording);
    let report = history.check();
    assert!(report.is_clean(), "{report}");
    let grants = history.grants();
    assert_eq!(grants.len(), 3, "{grants:#?}");
    assert!(grants.iter().all(|grant| grant.kind == zk_lock::testing::GrantKind::Mutex), "{grants:#?}");
    assert!(grants.windows(2).all(|pair| pair[0].token < pair[1].token && pair[0].end <= pair[1].start));
}
