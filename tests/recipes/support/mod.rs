//! What the tests of this binary share: clients of the one test server, and the Curator, kazoo
//! and example processes run beside the Rust code. The scenarios every exclusive recipe passes
//! are in `scenarios.rs`.
//! Reading and waiting for a lock's queue is `zk_lock::testing::{children, wait_for_children}`.

pub mod examples;
pub mod java_peer;
pub mod kazoo;
pub mod one_lock;

use std::path::{Path, PathBuf};
use std::time::Duration;

use zk_lock::testing::{shared_server, TestingServer};
use zk_lock::Client;

/// How long a test waits for ZooKeeper to show an expected state before failing.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The server shared by all tests of this binary. Never stop or restart it: a test that must,
/// starts a `TestingServer` of its own.
pub fn server() -> &'static TestingServer {
    shared_server()
}

/// Installs a client of the shared server under `name`, for `client = "<name>"` (a name of the
/// test's own: the tests run in parallel in one process).
pub async fn install(name: &str) -> Client {
    Client::builder(server().connect_string()).install_as(name).await.expect("install a named client")
}

/// A new client of the shared server through a proxy of its own, which the test cuts and heals.
pub async fn behind_a_proxy(session_timeout: Duration) -> (zk_lock::testing::Proxy, Client) {
    let proxy = zk_lock::testing::Proxy::start(server().connect_string()).expect("start a proxy");
    let client = Client::builder(proxy.connect_string())
        .session_timeout(session_timeout)
        .connect_timeout(PATIENCE)
        .connect()
        .await
        .expect("connect through the proxy");
    (proxy, client)
}

/// A new client (its own session) of the shared server.
pub async fn new_client() -> Client {
    client_with_session_timeout(Duration::from_secs(10)).await
}

/// A new client of the shared server with the given session timeout.
pub async fn client_with_session_timeout(timeout: Duration) -> Client {
    Client::builder(server().connect_string())
        .session_timeout(timeout)
        .connect()
        .await
        .expect("connect to the test server")
}

/// The session timeout of [`client_with_fast_heartbeat`]: its heartbeat beats every 1/9 of it,
/// 500 ms.
const FAST_HEARTBEAT_SESSION: Duration = Duration::from_millis(4500);

/// A new client whose session's heartbeat beats every 500 ms.
pub async fn client_with_fast_heartbeat() -> Client {
    client_with_session_timeout(FAST_HEARTBEAT_SESSION).await
}

/// How soon a [`client_with_fast_heartbeat`] reports a deletion of a held node or a revocation
/// request, however young the hold: two heartbeat periods and a round trip (a hold is followed by
/// a watch once it lasted a period; docs/reliability.md), plus room for the scheduling of a busy
/// 2-core machine.
pub fn within_the_follow_up_bound() -> Duration {
    FAST_HEARTBEAT_SESSION * 2 / 9 + Duration::from_millis(400)
}

/// Waits until the lock queue at `path` has `len` nodes (`wait_for_children` bounds the wait),
/// and returns them.
pub async fn queue_of(observer: &Client, path: &str, len: usize) -> Vec<String> {
    zk_lock::testing::wait_for_children(observer, path, |nodes| nodes.len() == len)
        .await
        .unwrap_or_else(|e| panic!("`{path}` never had {len} nodes: {e}"))
}

/// A name no earlier run used (process id and clock), so a reused ZooKeeper or target directory
/// cannot interfere.
pub fn unique_name(name: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock after 1970").as_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

/// A new empty directory under the target's temporary directory, `<group>/<unique name>`, for
/// files a test shares with the processes it runs (Java peers, examples).
pub fn scratch_dir(group: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(group).join(unique_name(name));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// The last segment of a node path: the node's name, as its parent lists it.
pub fn node_name(node_path: &str) -> &str {
    node_path.rsplit('/').next().expect("rsplit yields at least one item")
}

/// The data of the node at `node_path`.
pub async fn node_data(client: &Client, node_path: &str) -> Vec<u8> {
    client.zookeeper().get_data(node_path).await.unwrap_or_else(|e| panic!("read {node_path}: {e}")).0
}

/// A random generator for random cancellation points and delays, with its seed printed, so a
/// failing run can be replayed (`fastrand::Rng::with_seed`).
pub fn rng() -> fastrand::Rng {
    let seed = fastrand::u64(..);
    eprintln!("rng seed {seed}");
    fastrand::Rng::with_seed(seed)
}

/// Waits until the shared server has (or, with `watched` false, no longer has) a watch on
/// `node`: its `wchp` answer lists the path.
pub async fn until_watched(node: &str, watched: bool) {
    let since = tokio::time::Instant::now();
    while server().four_letter("wchp").expect("wchp").lines().any(|line| line.trim() == node) != watched {
        assert!(since.elapsed() < PATIENCE, "`{node}` watched: never {watched}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
