//! Counts the requests an uncontended lock cycle sends, with the server's own counter.

use std::time::Duration;

use zk_lock::testing::{ServerCounters, TestingServer};
use zk_lock::{Client, Mutex, Semaphore, SemaphoreMutex};

/// The server's counters (`mntr`); each reading is itself one packet.
fn counters(server: &TestingServer) -> ServerCounters {
    server.counters().expect("mntr")
}

fn packets_received(server: &TestingServer) -> u64 {
    counters(server).packets_received
}

/// Two writes (create, delete) and one read (the listing sent with the create): no watch on our
/// own node, which the session's heartbeat reads instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_cycle_sends_three_requests() {
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
    // A ping or two may fall in the window; a fourth request per cycle may not.
    assert!((3.0..3.2).contains(&per_cycle), "{per_cycle:.2} requests per cycle");
}

/// Uncontended, a lease costs five requests in two round trips (acquire, release): the lock node
/// and the lease node created and both parents listed in one multi-read (one round trip), then
/// the lock node's delete sent without waiting, and the lease's delete on release. Curator's
/// `InterProcessSemaphoreV2` sends seven in six round trips.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lease_cycle_sends_five_requests() {
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
    assert!((5.0..5.2).contains(&per_cycle), "{per_cycle:.2} requests per cycle");

    let before = packets_received(&server);
    for _ in 0..CYCLES {
        let guard = mutex.lock().await.unwrap();
        guard.release().await.unwrap();
    }
    let per_cycle = (packets_received(&server) - before) as f64 / CYCLES as f64;
    eprintln!("semaphore mutex: {per_cycle:.2} requests per cycle");
    assert!((5.0..5.2).contains(&per_cycle), "{per_cycle:.2} requests per cycle");
}

/// A queue of tasks on one session drains at one request per hand-off, the delete: each waiter
/// knows, when the node ahead of it goes, that it was granted in this process and so had nothing
/// ahead of it any more, and the watch it set on its own node while it waited shows that its
/// node is still there. Joining the queue costs three (create, listing, that watch): the node
/// ahead belongs to the same session, whose owner tells the waiter when it is deleted, so the
/// waiter sets no watch on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_drained_on_one_session_costs_one_request_per_hand_off() {
    const WAITERS: u64 = 20;
    let server = TestingServer::start().expect("start server");
    let client =
        Client::builder(server.connect_string()).session_timeout(Duration::from_secs(60)).connect().await.unwrap();
    let path = "/requests/drain";
    let holder = Mutex::with_client(&client, path).lock().await.unwrap();
    let queued_before = counters(&server);

    let mut waiters = Vec::new();
    for _ in 0..WAITERS {
        let mutex = Mutex::with_client(&client, path);
        waiters.push(tokio::spawn(async move { mutex.lock().await.unwrap().release().await.unwrap() }));
    }
    // A waiter has queued once the server got its create, its listing and the watch on its own
    // node: one watch more per waiter.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut readings = 0;
    let queued = loop {
        let now = counters(&server);
        readings += 1;
        if now.packets_received >= queued_before.packets_received + readings + 3 * WAITERS
            && now.watches >= queued_before.watches + WAITERS
        {
            break now;
        }
        assert!(tokio::time::Instant::now() < deadline, "the waiters did not all queue");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let joined = queued.packets_received - queued_before.packets_received - readings;
    // A ping may fall in the window.
    assert!(joined <= 3 * WAITERS + 2, "{joined} requests for {WAITERS} waiters to join the queue");

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

/// Contenders taking turns on one path, zero hold time, `sessions` sessions in this process
/// shared round-robin by `contenders` tasks: the requests per grant, by the server's counter.
async fn requests_per_contended_grant(sessions: usize, contenders: usize) -> f64 {
    const GRANTS_EACH: usize = 25;
    let server = TestingServer::start().expect("start server");
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(
            Client::builder(server.connect_string()).session_timeout(Duration::from_secs(60)).connect().await.unwrap(),
        );
    }
    let path = "/requests/contended";
    // The parent exists before counting starts.
    Mutex::with_client(&clients[0], path).lock().await.unwrap().release().await.unwrap();

    let before = packets_received(&server);
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(contenders));
    let mut tasks = Vec::new();
    for i in 0..contenders {
        let mutex = Mutex::with_client(&clients[i % sessions], path);
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            for _ in 0..GRANTS_EACH {
                mutex.lock().await.unwrap().release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let per_grant = (packets_received(&server) - before) as f64 / (contenders * GRANTS_EACH) as f64;
    eprintln!("{sessions} sessions, {contenders} tasks: {per_grant:.2} requests per grant");
    per_grant
}

/// Tasks of one session taking turns: every grant costs an uncontended cycle (create, listing,
/// delete) and the watch on the waiter's own node. The node each waiter waits behind belongs to
/// its session, whose owner tells it of the deletion, so no watch is set on it; and it was
/// granted here, so nothing ahead of it needs checking once it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_one_session_contending_send_four_requests_per_grant() {
    let per_grant = requests_per_contended_grant(1, 4).await;
    // Now and then a waiter finds its turn has come in its own listing: slightly under 4.
    assert!((3.8..4.1).contains(&per_grant), "{per_grant:.2} requests per grant");
}

/// Sessions of one process taking turns: a waiter cannot take another session's word for a
/// deletion (its own session may be gone, its server behind), so it watches the node ahead on the
/// server, one request more; listing the queue again is still skipped behind a grant of this
/// process, the watch on its own node standing in for it. (Across processes, that listing is
/// the fifth request and there is no watch on the waiter's own node, as in Curator; the
/// benchmark's `contended-processes` row counts them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_one_process_contending_send_five_requests_per_grant() {
    let per_grant = requests_per_contended_grant(4, 4).await;
    // Now and then a waiter finds its turn has come in its own listing: slightly under 5.
    assert!((4.8..5.1).contains(&per_grant), "{per_grant:.2} requests per grant");
}

/// A held lock costs nothing while idle: the session's heartbeat is one `sync` a period
/// whatever it holds, and each hold is followed by a watch set once, when it has lasted a period.
/// Holding 600 locks, the server hears one request per heartbeat period and answers one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_locks_cost_one_request_per_heartbeat_while_idle() {
    const HELD: u64 = 600;
    const PERIOD: Duration = Duration::from_millis(500);
    const WINDOW: Duration = Duration::from_secs(3);
    let server = TestingServer::start().expect("start server");
    let client = Client::builder(server.connect_string()).session_timeout(PERIOD * 9).connect().await.unwrap();
    let mutexes: Vec<_> = (0..HELD).map(|i| Mutex::with_client(&client, format!("/requests/idle/{i}"))).collect();
    let guards = futures::future::try_join_all(mutexes.iter().map(Mutex::lock)).await.unwrap();

    // Each hold gets its watch within two periods.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while counters(&server).watches < HELD {
        assert!(tokio::time::Instant::now() < deadline, "the holds were never all watched");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = counters(&server);
    tokio::time::sleep(WINDOW).await;
    let after = counters(&server);
    // A reading counts itself: one packet received, three sent (ZooKeeper 3.8).
    let received = after.packets_received - before.packets_received - 1;
    let sent = after.packets_sent - before.packets_sent - 3;
    let beats = (WINDOW.as_millis() / PERIOD.as_millis()) as u64;
    eprintln!("holding {HELD} locks for {WINDOW:?}: {received} requests received, {sent} packets sent");
    // A beat more or less, by where the window falls.
    assert!(received <= beats + 1, "{received} requests in {beats} heartbeat periods");
    assert!(sent <= beats + 1, "{sent} packets sent in {beats} heartbeat periods");
    for guard in guards {
        guard.release().await.unwrap();
    }
}
