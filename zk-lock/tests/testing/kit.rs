//! Tests of `zk_lock::testing` against real ZooKeeper servers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use zk_lock::testing::{
    children, find_java, four_letter_word, server_counters, shared_server, wait_for_children, wait_for_children_within,
    zookeeper_classpath, TestingCluster, TestingError, TestingServer,
};
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, SessionState};

/// Bounds every wait of these tests, so that a broken kit fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(30);

fn persistent() -> zookeeper_client::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

fn unique_path(name: &str) -> String {
    crate::unique_path("kit", name)
}

async fn connect(connect_string: &str) -> Client {
    let connecting = Client::connector().with_session_timeout(Duration::from_secs(20)).connect(connect_string);
    match tokio::time::timeout(DEADLINE, connecting).await {
        Ok(Ok(client)) => client,
        Ok(Err(err)) => panic!("cannot connect to {connect_string}: {err}"),
        Err(_) => panic!("connecting to {connect_string} took longer than {DEADLINE:?}"),
    }
}

/// Creates a node, retrying requests lost while the client fails over to another server.
/// Lost requests need no pause: the client queues new ones until it has reconnected.
async fn create_through_failover(client: &Client, path: &str, data: &[u8]) {
    let started = Instant::now();
    loop {
        match client.create(path, data, &persistent()).await {
            Ok(_) => return,
            // The first attempt may have been applied before its answer was lost.
            Err(ZkError::NodeExists) => return,
            Err(ZkError::ConnectionLoss) if started.elapsed() < DEADLINE => continue,
            Err(err) => panic!("cannot create {path}: {err}"),
        }
    }
}

/// Whether a process with this pid runs the ZooKeeper server (a zombie has no command line).
fn is_zookeeper_running(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("org.apache.zookeeper"))
}

/// Polls `condition` until it holds; the kit offers nothing to wait on for a foreign process.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < DEADLINE, "{what}: still not the case after {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn a_client_creates_and_reads_a_node() {
    let server = shared_server();
    let client = connect(&server.connect_string()).await;
    let path = unique_path("node");

    client.create(&path, b"hello", &persistent()).await.unwrap();
    let (data, _stat) = client.get_data(&path).await.unwrap();

    assert_eq!(data, b"hello");
    assert_eq!(server.connect_string(), format!("127.0.0.1:{}", server.port()));
    assert_eq!(server.addr().port(), server.port());
    assert!(server.data_dir().is_dir());
}

#[test]
fn shared_server_is_one_per_process() {
    let first = shared_server();
    let second = shared_server();

    assert!(std::ptr::eq(first, second));
    let pid = first.pid().expect("the shared server runs");
    assert!(is_zookeeper_running(pid));
}

#[test]
fn four_letter_words_reach_the_server() {
    let server = shared_server();

    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    assert!(four_letter_word(server.addr(), "srvr").unwrap().contains("Mode: standalone"));
    assert!(server.four_letter("mntr").unwrap().contains("zk_server_state\tstandalone"));
    let err = server.four_letter("ruok?").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn the_counters_count_the_requests_and_the_ephemeral_nodes() {
    // A server of its own: no other test's requests in the counts.
    let server = TestingServer::start().unwrap();
    let client = connect(&server.connect_string()).await;
    let before = server.counters().unwrap();
    assert_eq!(before.server_state, "standalone");
    assert_eq!(before.ephemerals, 0);
    assert!(before.alive_connections >= 1, "{before:?}");
    client.create(&unique_path("counted"), b"", &CreateMode::Ephemeral.with_acls(Acls::anyone_all())).await.unwrap();

    let after = server_counters(server.addr()).unwrap();
    assert_eq!(after.ephemerals, 1);
    assert!(after.znodes > before.znodes);
    // The create and this reading itself; a ping may fall in between.
    let received = after.packets_received - before.packets_received;
    assert!((2..=3).contains(&received), "{received} packets");
    assert_eq!(after.count("zk_packets_received"), Some(after.packets_received));
    assert!(after.get("zk_version").is_some_and(|version| version.starts_with("3.")), "{:?}", after.all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_children_sees_changes_and_names_what_it_last_saw() {
    let server = shared_server();
    let client = zk_lock::Client::builder(server.connect_string()).connect().await.unwrap();
    let writer = connect(&server.connect_string()).await;
    let parent = unique_path("children");
    assert!(children(&client, &parent).await.unwrap().is_empty(), "a missing node has no children");

    // Waits through the parent's creation, then through its first child's.
    let waiting = {
        let (client, parent) = (client.clone(), parent.clone());
        tokio::spawn(async move { wait_for_children(&client, &parent, |c| c.len() == 1).await })
    };
    writer.create(&parent, b"", &persistent()).await.unwrap();
    writer.create(&format!("{parent}/a"), b"", &persistent()).await.unwrap();
    let seen = tokio::time::timeout(DEADLINE, waiting).await.expect("woken by the changes").unwrap().unwrap();
    assert_eq!(seen, ["a"]);
    assert_eq!(children(&client, &parent).await.unwrap(), ["a"]);

    match wait_for_children_within(&client, &parent, Duration::from_millis(200), <[String]>::is_empty).await {
        Err(err @ TestingError::ChildrenNotReached { .. }) => {
            let TestingError::ChildrenNotReached { path, waited, last } = &err else { unreachable!() };
            assert_eq!((path, last.as_slice()), (&parent, ["a".to_owned()].as_slice()));
            assert!(*waited >= Duration::from_millis(200));
            assert!(err.to_string().contains(&parent), "{err}");
        }
        other => panic!("expected ChildrenNotReached, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_and_restart_keep_the_data() {
    let server = TestingServer::start().unwrap();
    let port = server.port();
    let path = unique_path("kept");
    let client = connect(&server.connect_string()).await;
    client.create(&path, b"survives", &persistent()).await.unwrap();

    server.stop().unwrap();
    assert_eq!(server.pid(), None);
    assert!(server.four_letter("ruok").is_err(), "a stopped server must not answer");

    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert!(server.pid().is_some());
    let client = connect(&server.connect_string()).await;
    let (data, _stat) = client.get_data(&path).await.unwrap();
    assert_eq!(data, b"survives");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_refuses_clients() {
    let server = TestingServer::start().unwrap();
    let pid = server.pid().unwrap();

    server.kill().unwrap();

    assert_eq!(server.pid(), None);
    assert!(!is_zookeeper_running(pid));
    let connect_string = server.connect_string();
    let connecting = Client::connector().with_fail_eagerly().connect(&connect_string);
    match tokio::time::timeout(DEADLINE, connecting).await {
        Ok(Ok(_)) => panic!("connected to a killed server"),
        Ok(Err(_)) => {}
        Err(_) => panic!("connecting to a killed server did not fail within {DEADLINE:?}"),
    }
}

#[test]
fn restart_on_a_taken_port_quotes_the_server_log() {
    let server = TestingServer::start().unwrap();
    server.stop().unwrap();
    let _squatter = std::net::TcpListener::bind(server.addr()).unwrap();

    let err = server.restart().unwrap_err();

    assert!(matches!(err, TestingError::Exited { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("Address already in use"), "{message}");
    assert!(message.contains(&server.log_file().display().to_string()), "{message}");
    assert_eq!(server.pid(), None);
}

#[tokio::test]
async fn expire_session_expires_the_client() {
    let server = shared_server();
    let client = connect(&server.connect_string()).await;
    let observer = connect(&server.connect_string()).await;
    let path = unique_path("ephemeral");
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    client.create(&path, b"", &ephemeral).await.unwrap();

    server.expire_session(&client).await.unwrap();

    assert_eq!(client.state(), SessionState::Expired);
    assert_eq!(client.get_data(&path).await.unwrap_err(), ZkError::SessionExpired);
    assert_eq!(observer.check_stat(&path).await.unwrap(), None, "the ephemeral node must be gone");
    // Expiring an expired session is a no-op.
    server.expire_session(&client).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_survives_the_loss_of_its_leader() {
    let cluster = TestingCluster::start(3).unwrap();
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.connect_string().split(',').count(), 3);
    let old_leader = cluster.leader().expect("a started cluster has a leader");
    let client = connect(&cluster.connect_string()).await;
    let before = unique_path("before");
    client.create(&before, b"1", &persistent()).await.unwrap();

    let killed = cluster.kill_leader().unwrap();
    assert_eq!(killed, old_leader);
    assert_eq!(cluster.pid(killed), None);
    let new_leader = cluster.wait_for_leader().unwrap();
    assert_ne!(new_leader, killed);
    let after = unique_path("after");
    create_through_failover(&client, &after, b"2").await;
    assert_eq!(client.state(), SessionState::SyncConnected, "the session survives the failover");

    cluster.restart(killed).unwrap();
    let srvr = cluster.four_letter(killed, "srvr").unwrap();
    assert!(srvr.contains("Mode: follower") || srvr.contains("Mode: leader"), "{srvr}");
    let rejoined = connect(&cluster.server_connect_string(killed)).await;
    rejoined.sync(&after).await.unwrap();
    assert_eq!(rejoined.get_data(&after).await.unwrap().0, b"2");
    assert_eq!(rejoined.get_data(&before).await.unwrap().0, b"1");

    cluster.stop_all().unwrap();
    assert_eq!(cluster.leader(), None);
    assert!((0..cluster.len()).all(|i| cluster.pid(i).is_none()));
    cluster.restart_all().unwrap();
    assert!(cluster.leader().is_some());
    let client = connect(&cluster.connect_string()).await;
    assert_eq!(client.get_data(&after).await.unwrap().0, b"2");

    cluster.expire_session(&client).await.unwrap();
    assert_eq!(client.get_data(&after).await.unwrap_err(), ZkError::SessionExpired);
}

#[test]
fn missing_jars_are_reported_with_the_package_to_install() {
    let java_dir = Path::new("/nonexistent-zk-lock-testing/java");

    let from_env = zookeeper_classpath(Some("/nonexistent-zk-lock-testing/zookeeper.jar".as_ref()), java_dir);
    let default = zookeeper_classpath(None, java_dir);

    for result in [from_env, default] {
        let err = result.unwrap_err();
        assert!(matches!(err, TestingError::ZookeeperNotFound { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains("/nonexistent-zk-lock-testing/"), "{message}");
        assert!(message.contains("apt-get install zookeeper"), "{message}");
        assert!(message.contains("scripts/install-deps"), "{message}");
    }
}

#[test]
fn classpath_defaults_to_the_debian_jars() {
    let java_dir = Path::new("/usr/share/java");

    let classpath = zookeeper_classpath(None, java_dir).unwrap();
    let verbatim = zookeeper_classpath(Some("/usr/share/java/zookeeper.jar:/usr/share/java/*".as_ref()), java_dir);

    assert!(classpath.to_string_lossy().starts_with("/usr/share/java/zookeeper.jar"));
    assert_eq!(verbatim.unwrap(), "/usr/share/java/zookeeper.jar:/usr/share/java/*");
}

#[test]
fn missing_java_is_reported_with_the_package_to_install() {
    let err = find_java(Some("/nonexistent-zk-lock-testing/bin".as_ref()), None).unwrap_err();

    assert!(matches!(err, TestingError::JavaNotFound), "{err:?}");
    assert!(err.to_string().contains("default-jre-headless"), "{err}");
    let from_home = find_java(Some("".as_ref()), std::env::var_os("JAVA_HOME").as_deref());
    let from_path = find_java(std::env::var_os("PATH").as_deref(), None);
    assert!(from_path.is_ok() || from_home.is_ok(), "java is installed on this machine");
}

/// Set in the child process of [`a_leaked_server_dies_with_its_process`], which leaks the server.
const LEAK_CHILD: &str = "ZK_LOCK_TESTING_LEAK_CHILD";

/// Starts a server that is never dropped and lets the process exit: the watchdog must kill
/// the JVM anyway. The test runs itself in a child process for the leaking part.
#[test]
fn a_leaked_server_dies_with_its_process() {
    if std::env::var_os(LEAK_CHILD).is_some() {
        let server = shared_server();
        let pid = server.pid().expect("the server runs");
        let dir = server.data_dir().parent().expect("the data dir is in the server dir");
        println!("leaked-pid={pid}");
        println!("leaked-dir={}", dir.display());
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        // The test's name in this binary: its module path without the crate's name.
        .args(["kit::a_leaked_server_dies_with_its_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(LEAK_CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let value = |key: &str| {
        // libtest prints `test a_leaked_server_dies_with_its_process ... ` on the line of the first value.
        let found = stdout.lines().find_map(|line| line.split_once(key).map(|(_, value)| value));
        found.unwrap_or_else(|| panic!("child printed no {key}: {stdout}")).to_owned()
    };
    let pid: u32 = value("leaked-pid=").parse().unwrap();
    let dir = PathBuf::from(value("leaked-dir="));

    eventually("the leaked JVM is killed", || !is_zookeeper_running(pid));
    eventually("the leaked server directory is deleted", || !dir.exists());
}
