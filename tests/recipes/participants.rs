//! `participants` against a real ZooKeeper: zk-lock mutexes, kazoo locks, and Curator's
//! read/write and semaphore layouts made by hand. All tests share one server; each uses its own
//! lock path.

use std::time::{Duration, SystemTime};

use zk_lock::holder::HolderDescription;
use zk_lock::testing::{wait_for_children, Proxy, TestingServer};
use zk_lock::{participants_with, Client, Error, Mutex, Participant, ParticipantKind, Role};
use zookeeper_client::{Acls, CreateMode};

use crate::support::kazoo::{KazooLock, Recipe};
use crate::support::{new_client, server};

const PATH: &str = "/it-participants";

fn kinds(found: &[Participant]) -> Vec<ParticipantKind> {
    found.iter().map(|p| p.kind).collect()
}

fn roles(found: &[Participant]) -> Vec<Role> {
    found.iter().map(|p| p.role).collect()
}

/// Creates a node `<parent>/_c_<uuid>-<lock_name><sequence>` on `client`'s session, as Curator
/// would, and returns its path.
async fn curator_node(client: &Client, parent: &str, lock_name: &str, data: &[u8]) -> String {
    let zk = client.zookeeper();
    zk.mkdir(parent, &CreateMode::Container.with_acls(Acls::anyone_all())).await.expect("create the parent");
    let prefix = format!("{parent}/_c_0f8e7d6c-1b2a-4c3d-8e9f-0123456789ab-{lock_name}");
    let (_, sequence) =
        zk.create(&prefix, data, &CreateMode::EphemeralSequential.with_acls(Acls::anyone_all())).await.expect("create");
    format!("{prefix}{sequence}")
}

#[tokio::test]
async fn a_mutex_holder_and_its_waiters_in_queue_order() {
    let path = format!("{PATH}/mutex");
    let holder_client = new_client().await;
    let guard = Mutex::with_client(&holder_client, &path).lock().await.unwrap();
    let mut waiters = Vec::new();
    for queued in 1..=2 {
        // Separate sessions, so each node shows its own owner.
        let client = new_client().await;
        let mutex = Mutex::with_client(&client, &path);
        let task = tokio::spawn(async move { mutex.lock().await.unwrap().release().await.unwrap() });
        wait_for_children(&holder_client, &path, |c| c.len() == queued + 1).await.unwrap();
        waiters.push((client, task));
    }

    let found = participants_with(&holder_client, &path).await.unwrap();
    assert_eq!(kinds(&found), [ParticipantKind::Mutex; 3]);
    assert_eq!(roles(&found), [Role::Holder, Role::Waiter, Role::Waiter]);
    assert!(found.windows(2).all(|w| w[0].sequence < w[1].sequence), "queue order");
    let sessions: Vec<i64> = found.iter().map(|p| p.session_id).collect();
    let expected: Vec<i64> =
        [&holder_client, &waiters[0].0, &waiters[1].0].iter().map(|client| client.zookeeper().session_id().0).collect();
    assert_eq!(sessions, expected);

    let holder = &found[0];
    assert_eq!(holder.node_path, guard.node_path());
    assert_eq!(holder.node_path, format!("{path}/{}", holder.node_name));
    assert_eq!(holder.fencing_token, guard.fencing_token());
    // The waiters queued from their own spawned tasks; the holder from the test's body.
    let task_ids = [tokio::task::try_id(), Some(waiters[0].1.id()), Some(waiters[1].1.id())];
    for (p, task) in found.iter().zip(task_ids) {
        let described = p.holder.as_ref().unwrap_or_else(|| panic!("unparsed data {:?}", p.data));
        assert_eq!(described.pid, std::process::id());
        // The kernel's name of this machine (gethostname), as an operator would compare it.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("Linux names its host");
        assert_eq!(described.host, host.trim());
        assert_eq!(described.task, task.map(|id| id.to_string().parse().unwrap()));
        assert_eq!(HolderDescription::parse(&p.data).as_ref(), Some(described));
        assert!(p.age < Duration::from_secs(60), "age {:?}", p.age);
        assert!(p.created <= SystemTime::now() + Duration::from_secs(5));
    }

    guard.release().await.unwrap();
    for (_, task) in waiters {
        task.await.unwrap();
    }
    assert!(participants_with(&holder_client, &path).await.unwrap().is_empty());
}

#[tokio::test]
async fn kazoo_locks_show_beside_ours() {
    let path = format!("{PATH}/kazoo");
    let client = new_client().await;
    let connect = server().connect_string();
    let mut writer = KazooLock::start(&connect, &path, Recipe::Lock, "kazoo-writer");
    let (writer_session, writer_node) = writer.locked().await;
    // A Curator-style mutex on the same path ignores kazoo's nodes, and kazoo ignores it.
    let ours = Mutex::with_client(&client, &path).lock().await.unwrap();
    let mut reader = KazooLock::start(&connect, &path, Recipe::ReadLock, "kazoo-reader");
    wait_for_children(&client, &path, |c| c.len() == 3).await.unwrap();

    let found = participants_with(&client, &path).await.unwrap();
    assert_eq!(kinds(&found), [ParticipantKind::KazooLock, ParticipantKind::Mutex, ParticipantKind::KazooRead]);
    assert_eq!(roles(&found), [Role::Holder, Role::Holder, Role::Waiter], "the reader waits for kazoo's writer");
    assert_eq!(found[0].node_name, writer_node);
    assert_eq!(found[0].session_id, writer_session);
    assert_eq!(found[0].data, b"kazoo-writer");
    assert_eq!(found[0].holder, None, "kazoo data is an identifier, not our description");
    assert_eq!(found[1].node_path, ours.node_path());
    assert_eq!(found[2].data, b"kazoo-reader");

    writer.release().await;
    let (reader_session, reader_node) = reader.locked().await;
    let found = participants_with(&client, &path).await.unwrap();
    assert_eq!(kinds(&found), [ParticipantKind::Mutex, ParticipantKind::KazooRead]);
    assert_eq!(roles(&found), [Role::Holder, Role::Holder]);
    assert_eq!((found[1].session_id, found[1].node_name.as_str()), (reader_session, reader_node.as_str()));
    reader.release().await;
    ours.release().await.unwrap();
}

#[tokio::test]
async fn readers_share_and_writers_queue_in_the_read_write_layout() {
    let path = format!("{PATH}/rw");
    let client = new_client().await;
    for lock_name in ["__READ__", "__READ__", "__WRIT__", "__READ__"] {
        curator_node(&client, &path, lock_name, b"10.0.0.7").await;
    }
    let found = participants_with(&client, &path).await.unwrap();
    use ParticipantKind::{Read, Write};
    assert_eq!(kinds(&found), [Read, Read, Write, Read]);
    assert_eq!(
        roles(&found),
        [Role::Holder, Role::Holder, Role::Waiter, Role::Waiter],
        "readers before the writer hold; the writer waits for them; a reader behind it waits"
    );
    assert!(found.iter().all(|p| p.data == b"10.0.0.7" && p.holder.is_none()));
}

#[tokio::test]
async fn semaphore_leases_hold_and_lease_requests_wait() {
    let path = format!("{PATH}/semaphore");
    let client = new_client().await;
    let zk = client.zookeeper();
    // Two granted leases; then a request holding the internal mutex, which made its lease and
    // waits for the count (Curator's order): that lease is a waiter.
    let mut leases = vec![
        curator_node(&client, &format!("{path}/leases"), "lease-", b"").await,
        curator_node(&client, &format!("{path}/leases"), "lease-", b"").await,
    ];
    let request = curator_node(&client, &format!("{path}/locks"), "lock-", b"").await;
    leases.push(curator_node(&client, &format!("{path}/leases"), "lease-", b"").await);
    // Other children: an unknown recipe's contender is listed; persistent nodes are not.
    let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let (_, sequence) = zk.create(&format!("{path}/latch-"), b"", &ephemeral).await.unwrap();
    let persistent = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    zk.create(&format!("{path}/item-"), b"", &persistent).await.unwrap();

    let found = participants_with(&client, &path).await.unwrap();
    use ParticipantKind::{Lease, LeaseRequest, Unknown};
    assert_eq!(kinds(&found), [Unknown, Lease, Lease, Lease, LeaseRequest]);
    assert_eq!(roles(&found), [Role::Unknown, Role::Holder, Role::Holder, Role::Waiter, Role::Waiter]);
    assert_eq!(found[0].node_name, format!("latch-{sequence}"));
    let paths: Vec<&str> = found[1..].iter().map(|p| p.node_path.as_str()).collect();
    assert_eq!(paths, [leases[0].as_str(), leases[1].as_str(), leases[2].as_str(), request.as_str()]);
}

#[tokio::test]
async fn missing_and_empty_paths_have_no_participants() {
    let client = new_client().await;
    assert!(participants_with(&client, &format!("{PATH}/never-created")).await.unwrap().is_empty());
    let empty = format!("{PATH}/empty");
    client.zookeeper().mkdir(&empty, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    assert!(participants_with(&client, &empty).await.unwrap().is_empty());
}

#[tokio::test]
async fn invalid_paths_are_refused() {
    let client = new_client().await;
    for path in ["relative", "/trailing/", "/a//b", "/zookeeper/x", ""] {
        match participants_with(&client, path).await {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: expected InvalidPath, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_default_client_lists_too() {
    let path = format!("{PATH}/default");
    let client = Client::builder(server().connect_string()).install().await.unwrap();
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let found = zk_lock::participants(&path).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].node_path, guard.node_path());
    assert_eq!(found[0].role, Role::Holder);
    guard.release().await.unwrap();
}

/// Issue 34 (4): lock nodes of almost 1 MB each (anyone may create them on an open ensemble)
/// brought the server down: their data was read in one multi-read of some 80 MB, which the server
/// (512 MB of heap in the kit) died serialising, and the reader lost its connection. Now no reply
/// is larger than one node's data, and data over `Participant::MAX_DATA` is reported, not read.
/// A server of its own: it may die.
#[tokio::test]
async fn nodes_of_large_data_neither_bring_the_server_down_nor_go_unreported() {
    const BIG: usize = 1_000_000;
    let server = TestingServer::start().expect("start a server of our own");
    let client = Client::builder(server.connect_string()).connect().await.unwrap();
    let zk = client.zookeeper();
    let path = "/big-data";
    let guard = Mutex::with_client(&client, path).lock().await.unwrap();
    // Persistent nodes named like a Curator mutex's, behind our holder: its waiters.
    let prefix = format!("{path}/_c_0f8e7d6c-1b2a-4c3d-8e9f-0123456789ab-lock-");
    let persistent = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let big = vec![b'x'; BIG];
    let check_big = |p: &Participant| {
        assert!(p.data_too_large && p.data.is_empty() && p.holder.is_none(), "{p:?}");
        assert_eq!((p.data_length, p.role), (BIG, Role::Waiter), "{}", p.node_name);
    };

    // A short queue: each node read on its own, the large ones dropped.
    for _ in 0..2 {
        zk.create(&prefix, &big, &persistent).await.expect("create a node of almost 1 MB");
    }
    let found = participants_with(&client, path).await.unwrap();
    assert_eq!(found.len(), 3);
    assert!(!found[0].data_too_large && found[0].holder.is_some(), "{:?}", found[0]);
    assert_eq!(found[0].data_length, found[0].data.len());
    found[1..].iter().for_each(check_big);

    // A long queue: 80 nodes of almost 1 MB, and one within the limit, read whole.
    for _ in 2..80 {
        zk.create(&prefix, &big, &persistent).await.expect("create a node of almost 1 MB");
    }
    let within = vec![b'y'; Participant::MAX_DATA];
    zk.create(&prefix, &within, &persistent).await.unwrap();
    let read = tokio::time::timeout(Duration::from_secs(60), participants_with(&client, path)).await;
    let alive = server.four_letter("ruok");
    let log = std::fs::read_to_string(server.log_file()).unwrap_or_default();
    let died = log.lines().find(|line| line.contains("OutOfMemoryError"));
    assert_eq!(alive.as_deref().ok(), Some("imok"), "the server is down ({alive:?}): {died:?}");
    let found = read.expect("participants within 60 s").expect("participants");
    assert_eq!(found.len(), 82);
    assert_eq!(found[0].node_path, guard.node_path());
    assert_eq!(found[0].holder.as_ref().map(|h| h.pid), Some(std::process::id()));
    found[1..81].iter().for_each(check_big);
    let last = &found[81];
    assert!(!last.data_too_large && last.data == within && last.data_length == within.len(), "{}", last.node_name);

    // The other readers of a lock's nodes read them the same way.
    assert_eq!(zk_lock::revoke_with(&client, path).await.unwrap(), 1, "our holder, asked");
    let released = zk_lock::force_release_node(&client, path, &found[1].node_name).await.unwrap();
    assert!(released.data_too_large, "{released:?}");
    assert_eq!(server.four_letter("ruok").ok().as_deref(), Some("imok"));
    guard.release().await.unwrap();
}

/// What reading a queue costs, on a server of its own (its counter sees no other test's
/// requests) behind a proxy that holds every message for `DELAY`, so a call's time says how many
/// round trips it waited for: two for a queue of up to eight nodes (the listing, then every
/// node's data at once), three for a longer one (its nodes' stats first). Each read is timed
/// twice and the faster kept: a busy machine can stall one by a fraction of a round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_queue_costs_two_round_trips_and_a_long_one_three() {
    const DELAY: Duration = Duration::from_millis(400);
    let server = TestingServer::start().expect("start a server of our own");
    let proxy = Proxy::start(server.addr()).expect("start a proxy");
    // A long session timeout keeps the heartbeat out of most windows.
    let client =
        Client::builder(proxy.connect_string()).session_timeout(Duration::from_secs(60)).connect().await.unwrap();
    let zk = client.zookeeper();
    let persistent = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    for (path, nodes) in [("/short", 3), ("/long", 20)] {
        zk.mkdir(path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
        let prefix = format!("{path}/_c_0f8e7d6c-1b2a-4c3d-8e9f-0123456789ab-lock-");
        for _ in 0..nodes {
            zk.create(&prefix, b"10.0.0.7", &persistent).await.unwrap();
        }
    }
    proxy.delay(DELAY);
    // The listing, then a read per node; for the long queue, a stat per node, then one multi-read.
    let expected = [("/short", 3, 2, 1 + 3), ("/long", 20, 3, 1 + 20 + 1)];
    for (path, nodes, expected_round_trips, expected_requests) in expected {
        let mut fastest = (f64::MAX, 0);
        for _ in 0..2 {
            let before = server.counters().expect("mntr").packets_received;
            let started = tokio::time::Instant::now();
            let found = participants_with(&client, path).await.unwrap();
            let round_trips = started.elapsed().as_secs_f64() / (2 * DELAY).as_secs_f64();
            // The counter's own reading is one packet.
            let requests = server.counters().expect("mntr").packets_received - before - 1;
            eprintln!("{path}: {nodes} nodes, {round_trips:.2} round trips, {requests} requests");
            assert_eq!(found.len(), nodes);
            assert!(found.iter().all(|p| p.data == b"10.0.0.7"));
            if round_trips < fastest.0 {
                fastest = (round_trips, requests);
            }
        }
        let (round_trips, requests) = fastest;
        assert_eq!(round_trips.floor() as u32, expected_round_trips, "{path}: {round_trips:.2} round trips");
        assert!(round_trips.fract() < 0.5, "{path}: {round_trips:.2} round trips: something else took long");
        // The session's heartbeat may add one.
        assert!(
            requests == expected_requests || requests == expected_requests + 1,
            "{path}: {requests} requests, expected {expected_requests}"
        );
    }
}
