//! Counts the requests an uncontended lock cycle sends, with the server's own counter.

use std::time::Duration;

use zk_lock::testing::TestingServer;
use zk_lock::{Client, Mutex, Semaphore, SemaphoreMutex};

fn packets_received(server: &TestingServer) -> u64 {
    let mntr = server.four_letter("mntr").expect("mntr");
    mntr.lines()
        .find_map(|line| line.strip_prefix("zk_packets_received\t"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zk_packets_received in mntr output:\n{mntr}"))
}

/// Two writes (create, delete) and two reads (the listing sent with the create, and the watch on
/// our own node that lets `lost()` see a deletion, sent without waiting for its reply). The
/// watch must end by firing on our delete: a watch dropped earlier costs a fifth request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_cycle_sends_four_requests() {
    const CYCLES: u64 = 50;
    // A server of its own: the counter must see no other test's traffic.
    let server = TestingServer::start().expect("start server");
    // A long session timeout keeps pings (also counted) out of the window.
    let client =
        Client::builder(server.connect_string()).session_timeout(Duration::from_secs(60)).connect().await.unwrap();
    let mutex = Mutex::with_client(&client, "/requests/cycle");
    // The first cycle also creates the parent node.
    mutex.lock().await.unwrap().release().await.unwrap();

    let before = packets_received(&server);
    for _ in 0..CYCLES {
        let guard = mutex.lock().await.unwrap();
        guard.release().await.unwrap();
    }
    let sent = packets_received(&server) - before;
    let per_cycle = sent as f64 / CYCLES as f64;
    eprintln!("{sent} requests in {CYCLES} cycles: {per_cycle:.2} per cycle");
    // A ping or two may fall in the window; a fifth request per cycle may not.
    assert!((4.0..4.2).contains(&per_cycle), "{per_cycle:.2} requests per cycle");
}

/// Uncontended, a lease costs six requests in two round trips (acquire, release): the lock node
/// and the lease node created and both parents listed in one multi-read (one round trip), then
/// the lock node's delete and the watch on our lease node sent without waiting, and the lease's
/// delete on release. Curator's `InterProcessSemaphoreV2` sends seven in six round trips.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_cycle_sends_six_requests() {
    const CYCLES: u64 = 50;
    // A server of its own: the counter must see no other test's traffic.
    let server = TestingServer::start().expect("start server");
    // A long session timeout keeps pings (also counted) out of the window.
    let client =
        Client::builder(server.connect_string()).session_timeout(Duration::from_secs(60)).connect().await.unwrap();
    let semaphore = Semaphore::with_client(&client, "/requests/semaphore", 3);
    let mutex = SemaphoreMutex::with_client(&client, "/requests/semaphore-mutex");
    // The first cycles also create the parent nodes.
    semaphore.acquire().await.unwrap().release().await.unwrap();
    mutex.lock().await.unwrap().release().await.unwrap();

    let before = packets_received(&server);
    let started = tokio::time::Instant::now();
    for _ in 0..CYCLES {
        let permit = semaphore.acquire().await.unwrap();
        permit.release().await.unwrap();
    }
    let elapsed = started.elapsed();
    let sent = packets_received(&server) - before;
    let per_cycle = sent as f64 / CYCLES as f64;
    eprintln!(
        "semaphore: {sent} requests in {CYCLES} cycles: {per_cycle:.2} per cycle, {:?} per cycle",
        elapsed / CYCLES as u32
    );
    assert!((6.0..6.2).contains(&per_cycle), "{per_cycle:.2} requests per cycle");

    let before = packets_received(&server);
    for _ in 0..CYCLES {
        let guard = mutex.lock().await.unwrap();
        guard.release().await.unwrap();
    }
    let per_cycle = (packets_received(&server) - before) as f64 / CYCLES as f64;
    eprintln!("semaphore mutex: {per_cycle:.2} requests per cycle");
    assert!((6.0..6.2).contains(&per_cycle), "{per_cycle:.2} requests per cycle");
}

/// A queue that drains inside one process costs one request per hand-off, the delete: each
/// waiter set the watch on its own node while it waited, and knows, when the node ahead of it
/// goes, that it was granted in this process and so had nothing ahead of it any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_drained_in_one_process_costs_one_request_per_hand_off() {
    const WAITERS: u64 = 20;
    let server = TestingServer::start().expect("start server");
    let connect = || Client::builder(server.connect_string()).session_timeout(Duration::from_secs(60)).connect();
    let clients = [connect().await.unwrap(), connect().await.unwrap()];
    let path = "/requests/drain";
    let holder = Mutex::with_client(&clients[0], path).lock().await.unwrap();
    let queued_before = packets_received(&server);

    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let mutex = Mutex::with_client(&clients[i as usize % 2], path);
        waiters.push(tokio::spawn(async move { mutex.lock().await.unwrap().release().await.unwrap() }));
    }
    // A waiter has queued once the server got its four requests: the create and the listing,
    // then the watches on the node ahead of it and on its own node.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while packets_received(&server) < queued_before + 4 * WAITERS {
        assert!(tokio::time::Instant::now() < deadline, "the waiters did not all queue");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let before = packets_received(&server);
    holder.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    let sent = packets_received(&server) - before;
    let per_hand_off = sent as f64 / WAITERS as f64;
    eprintln!("{sent} requests for {WAITERS} hand-offs: {per_hand_off:.2} per hand-off");
    // The holder's delete and one delete per waiter; a ping may fall in the window.
    assert!(sent <= WAITERS + 2, "{sent} requests for {WAITERS} hand-offs");
}
