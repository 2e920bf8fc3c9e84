//! The first lock on a path that does not exist yet (new, or its empty container removed by the
//! server, which is where a quiet per-entity lock such as `/product_<id>` usually is): how many
//! round trips and requests it costs. A server of its own counts the requests; a proxy that
//! holds every message for [`DELAY`] makes each round trip far longer than anything the client
//! or the server does, so a call's time says how many round trips it waited for.

use std::time::Duration;

use tokio::time::Instant;
use zk_lock::testing::{wait_for_children, Proxy, TestingServer};
use zk_lock::{Client, Mutex, RwLock};
use zookeeper_client::{Acls, CreateMode};

/// Each way, so a round trip takes twice this.
const DELAY: Duration = Duration::from_millis(400);

struct Delayed {
    server: TestingServer,
    _proxy: Proxy,
    client: Client,
}

/// A server of its own (its counters see no other test's traffic) with `root` made, and a client
/// whose every message the proxy holds for [`DELAY`].
async fn delayed(root: &str) -> Delayed {
    let server = TestingServer::start().expect("start server");
    let proxy = Proxy::start(server.addr()).expect("start proxy");
    // A long session timeout keeps pings (also counted) out of the way.
    let client =
        Client::builder(proxy.connect_string()).session_timeout(Duration::from_secs(60)).connect().await.unwrap();
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.zookeeper().create(root, b"", &persistent).await.unwrap();
    proxy.delay(DELAY);
    Delayed { server, _proxy: proxy, client }
}

impl Delayed {
    fn packets_received(&self) -> u64 {
        self.server.counters().expect("mntr").packets_received
    }

    /// Runs `take` (one lock call) and returns the round trips it waited for and the requests it
    /// sent (the counter's own reading is one packet). The session's heartbeat, one request
    /// every T/9 (6.7 s here), may fall in the window of a call: it is not counted when the
    /// call's requests are one more than expected (see [`assert_requests`]).
    async fn cost<T>(&self, take: impl std::future::Future<Output = T>) -> (u32, u64, T) {
        let before = self.packets_received();
        let started = Instant::now();
        let taken = take.await;
        let round_trips = started.elapsed().as_secs_f64() / (2 * DELAY).as_secs_f64();
        let requests = self.packets_received() - before - 1;
        eprintln!("{round_trips:.2} round trips, {requests} requests");
        // At least the whole round trips it waited for, and far less than one more.
        let whole = round_trips.floor();
        assert!(round_trips - whole < 0.5, "{round_trips:.2} round trips: something else took {DELAY:?} or more");
        (whole as u32, requests, taken)
    }
}

/// `requests` were `expected`, or one more: the session's heartbeat (a call waits far less than
/// the heartbeat's period, so no two beats fall in its window).
fn assert_requests(requests: u64, expected: u64) {
    assert!(requests == expected || requests == expected + 1, "{requests} requests, expected {expected}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_lock_path_is_made_in_the_round_trip_of_the_next_create() {
    let root = "/new-paths";
    let delayed = delayed(root).await;

    // The path exists: the create and the listing in one round trip.
    let existing = format!("{root}/existing");
    delayed
        .client
        .zookeeper()
        .create(&existing, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all()))
        .await
        .unwrap();
    let (round_trips, requests, guard) = delayed.cost(Mutex::with_client(&delayed.client, &existing).lock()).await;
    assert_eq!(round_trips, 1);
    assert_requests(requests, 2);
    guard.unwrap().release().await.unwrap();

    // Missing: the create and listing that find it so, then the path's create sent with the
    // next create and listing. Made alone first, as zookeeper-client's lock and Curator do, it
    // took three round trips for the same five requests.
    let new = format!("{root}/product_1");
    let (round_trips, requests, guard) = delayed.cost(Mutex::with_client(&delayed.client, &new).lock()).await;
    assert_eq!(round_trips, 2);
    assert_requests(requests, 5);
    let guard = guard.unwrap();
    assert!(guard.node_path().starts_with(&format!("{new}/")), "{}", guard.node_path());
    guard.release().await.unwrap();

    // The same for a read-write lock's writer and reader (each on a new path of its own).
    let (round_trips, _, write) =
        delayed.cost(RwLock::with_client(&delayed.client, format!("{root}/product_2")).write()).await;
    assert_eq!(round_trips, 2);
    write.unwrap().release().await.unwrap();
    let (round_trips, _, read) =
        delayed.cost(RwLock::with_client(&delayed.client, format!("{root}/product_3")).read()).await;
    assert_eq!(round_trips, 2);
    read.unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_path_whose_parent_is_missing_too_has_its_ancestors_made_first() {
    let root = "/new-paths-deep";
    let delayed = delayed(root).await;

    // Two levels missing: the first round trip finds the path missing, the second its parent
    // too (the path's create, sent ahead of the node's, fails), the third makes the parent, the
    // fourth the path, the node and the listing.
    let path = format!("{root}/orders/order_1");
    let (round_trips, requests, guard) = delayed.cost(Mutex::with_client(&delayed.client, &path).lock()).await;
    assert_eq!(round_trips, 4);
    assert_requests(requests, 9);
    let guard = guard.unwrap();
    let zk = delayed.client.zookeeper();
    assert_eq!(zk.list_children(&path).await.unwrap().len(), 1, "our node, in the path made for it");
    guard.release().await.unwrap();

    // Three levels: the walk from the parent goes up one more (two more requests, two more
    // round trips).
    let path = format!("{root}/eu/shops/shop_1");
    let (round_trips, requests, guard) = delayed.cost(Mutex::with_client(&delayed.client, &path).lock()).await;
    assert_eq!(round_trips, 6);
    assert_requests(requests, 11);
    guard.unwrap().release().await.unwrap();
}

/// A call cancelled while the path's `create` and its node's are on their way leaves no node:
/// the node, made after the cancellation, is deleted, and the path serves the next caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_while_the_path_is_being_made_leaves_no_node() {
    let root = "/new-paths-cancelled";
    let delayed = delayed(root).await;
    let direct = Client::builder(delayed.server.connect_string()).connect().await.unwrap();
    let path = format!("{root}/product_1");

    // The first round trip ends after 2 DELAY; the second round trip's requests reach the
    // server at 3 DELAY, after the call is dropped at 2.5 DELAY.
    let mutex = Mutex::with_client(&delayed.client, &path);
    let cancelled = tokio::time::timeout(DELAY * 5 / 2, mutex.lock()).await;
    assert!(cancelled.is_err(), "the call ended before it was cancelled: {cancelled:?}");

    // Made after the call was dropped (so this test is about that case), then deleted.
    wait_for_children(&direct, &path, |children| children.len() == 1).await.expect("our node is made");
    wait_for_children(&direct, &path, |children| children.is_empty()).await.expect("our node is deleted");
    let guard = Mutex::with_client(&direct, &path).try_lock().await.expect("the path serves the next caller");
    guard.release().await.unwrap();
}
