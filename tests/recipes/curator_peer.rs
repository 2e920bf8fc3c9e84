//! Self-check of the Java side of the interop tests: real Curator peers against real ZooKeeper,
//! without any Rust lock involved. If this fails, Rust-vs-Curator failures mean nothing.

use crate::support::java_peer::JavaPeer;
use crate::support::{scratch_dir, unique_name};

#[tokio::test(flavor = "multi_thread")]
async fn two_curator_mutexes_exclude_each_other() {
    const ITERATIONS: u32 = 50;
    let connect = zk_lock::testing::shared_server().connect_string();
    let lock_path = format!("/zk-lock-tests/{}", unique_name("curator-mutex-counter"));
    let dir = scratch_dir("curator_peer", "mutex-counter");
    let counter = dir.join("counter");
    let counter = counter.to_str().expect("UTF-8 temp path");
    let iterations = ITERATIONS.to_string();

    let mut peers: Vec<JavaPeer> =
        (0..2).map(|_| JavaPeer::spawn(&connect, &["mutex-counter", &lock_path, &iterations, counter])).collect();
    // Both connect before either starts, so they really contend.
    for peer in &mut peers {
        peer.expect_line("ready").await;
    }
    for peer in &mut peers {
        peer.send("go").await;
    }
    for peer in &mut peers {
        assert_eq!(peer.expect_line("done ").await, format!("done {ITERATIONS}"));
    }
    for peer in peers {
        peer.wait_success().await;
    }

    let total = std::fs::read_to_string(counter).expect("read counter");
    assert_eq!(total.trim(), (2 * ITERATIONS).to_string(), "lost updates under the lock");
    let _ = std::fs::remove_dir_all(dir);
}
