//! zk-lock's `LeaderElection` and Apache Curator's `LeaderSelector` (a real Java peer) in one
//! election: one leader at a time whichever library it runs, each waiting for the other in turn,
//! and each library reading the other's id as the leader's.

use zk_lock::{Error, LeaderElection};

use crate::support::java_peer::JavaPeer;
use crate::support::{new_client, queue_of, server, unique_name, PATIENCE};

/// What Curator's `LeaderSelector.getLeader()` says of the election at `path`.
async fn curator_reads_the_leader(path: &str) -> String {
    let mut peer = JavaPeer::spawn(&server().connect_string(), &["leader-of", path]);
    peer.expect_line("ready").await;
    peer.send("go").await;
    let line = peer.expect_line("leader ").await;
    peer.wait_success().await;
    line.trim_start_matches("leader ").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_lead_one_at_a_time_and_read_each_others_ids() {
    let path = format!("/zk-lock-tests/leader/{}", unique_name("curator"));
    let client = new_client().await;
    let election = LeaderElection::with_client(&client, &path).with_id("rust-worker");

    // Curator leads first: Rust cannot, and reads Curator's id as the leader's.
    let mut curator = JavaPeer::spawn(&server().connect_string(), &["leader-hold", &path, "java-worker"]);
    curator.expect_line("ready").await;
    curator.send("go").await;
    curator.expect_line("leading").await;
    assert!(matches!(election.try_lead().await, Err(Error::Busy { .. })), "Curator leads");
    let leader = election.leader().await.unwrap().expect("someone leads");
    assert_eq!(leader.data, b"java-worker", "Curator's id, as LeaderSelector.setId wrote it");

    // Rust waits its turn, and leads when Curator gives the leadership up.
    let waiting = {
        let election = election.clone();
        tokio::spawn(async move { election.lead_timeout(PATIENCE).await })
    };
    queue_of(&client, &path, 2).await;
    curator.send("resign").await;
    curator.expect_line("resigned").await;
    curator.wait_success().await;
    let leading = waiting.await.unwrap().expect("Rust leads after Curator");
    assert_eq!(curator_reads_the_leader(&path).await, "rust-worker", "Curator reads Rust's id");

    // Now Curator waits its turn behind Rust.
    let mut curator = JavaPeer::spawn(&server().connect_string(), &["leader-hold", &path, "java-worker-2"]);
    curator.expect_line("ready").await;
    curator.send("go").await;
    curator.expect_line("started").await;
    queue_of(&client, &path, 2).await;
    assert!(leading.is_held(), "Rust still leads while Curator waits");
    leading.resign().await.expect("Rust resigns");
    curator.expect_line("leading").await;
    assert_eq!(election.leader().await.unwrap().expect("someone leads").data, b"java-worker-2");
    curator.send("resign").await;
    curator.expect_line("resigned").await;
    curator.wait_success().await;
    assert!(election.leader().await.unwrap().is_none(), "nobody leads once both resigned");
}
