//! `LeaderElection` against a real ZooKeeper (issue 36, point 1): one leader at a time, in the
//! order they asked, each with a larger fencing token; the id each participant gives is what
//! `leader()` reads; a leadership lost with its session is told before the next participant leads;
//! `max_hold` ends a leadership as it ends a hold. Curator's `LeaderSelector` on the same path:
//! `curator_leader`.

use std::time::Duration;

use zk_lock::{Error, LeaderElection, LostReason};

use crate::support::{new_client, queue_of, server, unique_name, PATIENCE};

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
