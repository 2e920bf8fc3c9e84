//! Bad input is refused clearly: each error names the offending string or path and says what is
//! allowed, arrives in bounded time, and leaves no node behind. The registry's unconfigured
//! default is tested in `registry_unconfigured.rs`, a binary of its own because it changes the
//! environment.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use zk_lock::__private::{Lock, Template};
use zk_lock::path::{validate_lock_path, MAX_PATH_LEN};
use zk_lock::testing::{children, wait_for_children};
use zk_lock::{
    participants_with, revoke_with, zk_lock, Client, Error, LostReason, MultiLock, Mutex, RwLock, Semaphore,
    SemaphoreMutex, SharedCount,
};
use zookeeper_client::{Acls, CreateMode};

use crate::support::{new_client, server, PATIENCE};

/// How long a connection that cannot succeed may try in these tests.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Slack on top of a timeout for a loaded machine.
const SLACK: Duration = Duration::from_secs(3);

fn connect_error(result: zk_lock::Result<Client>, input: &str) -> String {
    match result {
        Err(Error::Connect { connect_string, reason }) => {
            assert_eq!(connect_string, input, "the error names the connect string");
            let message = Error::Connect { connect_string, reason: reason.clone() }.to_string();
            assert!(message.contains(&format!("`{input}`")), "{message}");
            reason
        }
        other => panic!("{input:?}: expected Error::Connect, got {other:?}"),
    }
}

// --- connect strings ---------------------------------------------------------------------------

#[tokio::test]
async fn malformed_connect_strings_are_refused_at_once_with_the_expected_form() {
    let started = Instant::now();
    for bad in [
        "",
        "127.0.0.1:notaport",
        ":2181",
        "127.0.0.1:0",
        "127.0.0.1:65536",
        "127.0.0.1:2181,,127.0.0.1:2182",
        "[::1:2181",
        "127.0.0.1:2181/bad//chroot",
        "127.0.0.1:2181/trailing/",
        "127.0.0.1:2181/a/../b",
        "127.0.0.1:2181/ctl\u{1}char",
    ] {
        let result = Client::builder(bad).connect_timeout(CONNECT_TIMEOUT).connect().await;
        let reason = connect_error(result, bad);
        assert!(reason.contains("malformed connect string"), "{bad:?}: {reason}");
        assert!(reason.contains("host:port[,host:port...][/chroot]"), "{bad:?}: {reason}");
    }
    assert!(started.elapsed() < CONNECT_TIMEOUT, "refused before connecting, took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_chroot_that_does_not_exist_is_named_when_locking() {
    let client = Client::builder(format!("{}/it-bad-input-missing-chroot", server().connect_string()))
        .connect()
        .await
        .expect("the server accepts a chroot it does not have");
    match Mutex::with_client(&client, "/orders").try_lock().await {
        Err(Error::InvalidPath { path, reason }) => {
            assert_eq!(path, "/orders");
            assert!(reason.contains("namespace (chroot) node does not exist"), "{reason}");
        }
        other => panic!("expected InvalidPath, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_never_answers_or_refuses_fails_within_the_connect_timeout_naming_the_cause() {
    // A socket that accepts connections (the kernel completes the handshake) but never speaks
    // ZooKeeper: a hung server.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let hung = silent.local_addr().unwrap().to_string();
    // A port nobody listens on any more: a dead server.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let refused = format!("connection refused at {dead}");
    let unresolvable = "no-such-host.invalid:2181";
    let cases = [
        (hung, "hung", None),
        (dead.clone(), "dead", Some(refused.clone())),
        (format!("{dead},{unresolvable}"), "dead and unresolvable", Some(format!("`{unresolvable}` did not resolve"))),
    ];
    for (address, what, cause) in cases {
        let started = Instant::now();
        let result = Client::builder(&address).connect_timeout(CONNECT_TIMEOUT).connect().await;
        let waited = started.elapsed();
        let reason = connect_error(result, &address);
        assert!(reason.contains("no session within 2s, the connect timeout"), "{what}: {reason}");
        assert!(reason.contains("server running"), "{what}: {reason}");
        if let Some(cause) = cause {
            assert!(reason.contains(&cause), "{what}: the cause is not named: {reason}");
        }
        assert!(waited < CONNECT_TIMEOUT + SLACK, "{what}: took {waited:?}");
    }
    drop(silent);
}

// --- paths ---------------------------------------------------------------------------------------

#[zk_lock(path = "/it-bad-input/attr/<name>", client = "bad-input-attr")]
async fn by_name(name: &str) -> Result<(), Error> {
    unreachable!("the body must not run for {name:?}")
}

/// Values that would change the lock's path, or that ZooKeeper rejects.
fn bad_values() -> Vec<(String, &'static str)> {
    vec![
        ("a/b".to_owned(), "contains `/`"),
        ("/".to_owned(), "contains `/`"),
        ("nul\0byte".to_owned(), "U+0000"),
        (String::new(), "empty"),
        ("..".to_owned(), "`..`"),
        ("x".repeat(MAX_PATH_LEN), "at most 1024"),
    ]
}

#[tokio::test]
async fn rendered_values_that_break_the_path_are_refused_before_any_request() {
    let client = Client::builder(server().connect_string()).install_as("bad-input-attr").await.unwrap();
    for (value, rule) in bad_values() {
        let expected_path = format!("/it-bad-input/attr/{value}");
        // The attribute, and the same through the support code it expands to.
        let rendered = Template::new().lit("/it-bad-input/attr/").value("name", &value).finish();
        for outcome in [by_name(&value).await, Lock::new().client("bad-input-attr").mutex(rendered).await.map(drop)] {
            match outcome {
                Err(Error::InvalidPath { path, reason }) => {
                    assert_eq!(path, expected_path, "the error names the rendered path");
                    assert!(reason.contains(rule), "{value:?}: {reason}");
                    if rule != "at most 1024" {
                        assert!(reason.contains("`<name>`"), "the placeholder is named: {reason}");
                    }
                }
                other => panic!("{value:?}: expected InvalidPath, got {other:?}"),
            }
        }
    }
    let created = client.zookeeper().check_stat("/it-bad-input/attr").await.unwrap();
    assert!(created.is_none(), "nothing was created");
}

#[zk_lock(path = "/it-bad-input-empty/sku_<id>", client = "bad-input-empty")]
async fn by_sku(id: &str) -> Result<(), Error> {
    unreachable!("the body must not run for {id:?}")
}

#[zk_lock(path = "/it-bad-input-empty/<id>/stock", client = "bad-input-empty")]
async fn by_segment(id: &str) -> Result<(), Error> {
    unreachable!("the body must not run for {id:?}")
}

/// A placeholder that renders empty inside a segment (`sku_<id>`) leaves no empty segment: the
/// error names the placeholder, the path and what a value needs, and speaks of no `//`. One that
/// is a whole segment does leave one, and says so.
#[tokio::test]
async fn an_empty_value_is_named_as_its_placeholder_rendering_empty() {
    let client = Client::builder(server().connect_string()).install_as("bad-input-empty").await.unwrap();
    let refusal = |outcome: zk_lock::Result<()>, expected_path: &str| match outcome {
        Err(error @ Error::InvalidPath { .. }) => {
            let message = error.to_string();
            let Error::InvalidPath { path, reason } = error else { unreachable!() };
            assert_eq!(path, expected_path, "the error names the rendered path");
            assert!(message.contains(&format!("`{expected_path}`")), "{message}");
            assert!(reason.contains("`<id>` rendered empty"), "the placeholder is named: {reason}");
            assert!(reason.contains("at least one character") && reason.contains("allowed are"), "{reason}");
            reason
        }
        other => panic!("{expected_path}: expected InvalidPath, got {other:?}"),
    };
    let inside = refusal(by_sku("").await, "/it-bad-input-empty/sku_");
    assert!(!inside.contains("//") && !inside.contains("empty segment"), "there is no empty segment: {inside}");
    let whole = refusal(by_segment("").await, "/it-bad-input-empty//stock");
    assert!(whole.contains("empty segment (`//`)"), "{whole}");
    assert!(client.zookeeper().check_stat("/it-bad-input-empty").await.unwrap().is_none(), "nothing was created");
}

#[tokio::test]
async fn every_recipe_refuses_bad_paths_before_any_request() {
    let client = new_client().await;
    let long = format!("/it-bad-input-paths/{}", "x".repeat(MAX_PATH_LEN));
    for (path, rule) in [
        ("", "empty"),
        ("relative", "must start with `/`"),
        ("/it-bad-input-paths/a//b", "empty segment"),
        ("/it-bad-input-paths/nul\0", "U+0000"),
        ("/it-bad-input-paths/trailing/", "must not end with `/`"),
        (long.as_str(), "at most 1024"),
    ] {
        let outcomes = [
            Mutex::with_client(&client, path).try_lock().await.map(drop),
            RwLock::with_client(&client, path).try_read().await.map(drop),
            Semaphore::with_client(&client, path, 2).try_acquire().await.map(drop),
            SharedCount::with_client(&client, path, 1).start().await,
            // Without a client (that it is refused before any default client is looked up is
            // checked where none is installed: tests/registry_unconfigured.rs).
            Mutex::new(path).try_lock().await.map(drop),
        ];
        for outcome in outcomes {
            match outcome {
                Err(Error::InvalidPath { path: p, reason }) => {
                    assert_eq!(p, path);
                    assert!(reason.contains(rule), "{path:?}: {reason}");
                }
                other => panic!("{path:?}: expected InvalidPath, got {other:?}"),
            }
        }
    }
    assert!(client.zookeeper().check_stat("/it-bad-input-paths").await.unwrap().is_none(), "nothing was created");
}

#[tokio::test]
async fn the_path_length_limit_is_far_below_what_the_server_rejects() {
    let client = new_client().await;
    // The longest lock path allowed works, lock node and all.
    let prefix = "/it-bad-input/long/";
    let longest = format!("{prefix}{}", "y".repeat(MAX_PATH_LEN - prefix.len()));
    assert_eq!(longest.len(), MAX_PATH_LEN);
    let guard = Mutex::with_client(&client, &longest).try_lock().await.expect("the longest path allowed");
    guard.release().await.unwrap();
    let permit = Semaphore::with_client(&client, &longest, 1).try_acquire().await.expect("semaphore nodes too");
    permit.release().await.unwrap();

    // ZooKeeper has no path limit of its own, only its packet limit (`jute.maxbuffer`, 1 MiB
    // less a byte): it drops the connection of a client that sends more. A lock path that long
    // would make every acquisition reconnect and retry forever; the library refuses it first.
    let raw = zookeeper_client::Client::connect(&server().connect_string()).await.unwrap();
    let huge = format!("/it-bad-input/{}", "z".repeat(1 << 20));
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let sent = tokio::time::timeout(PATIENCE, raw.create(&huge, b"", &ephemeral)).await.expect("an answer");
    assert!(sent.is_err(), "the server refused a 1 MiB path: {:?}", sent.map(drop));
    let refused = Mutex::with_client(&client, &huge).try_lock().await;
    assert!(
        matches!(&refused, Err(Error::InvalidPath { reason, .. }) if reason.contains("1048590 bytes")),
        "{refused:?}"
    );
}

#[zk_lock(path = "/it-bad-input-bmp/attr/<name>", client = "bad-input-bmp")]
async fn by_bmp_name(name: &str) -> Result<(), Error> {
    unreachable!("the body must not run for {name:?}")
}

/// A character above U+FFFF (an emoji) passes zookeeper-client's own check, and the server
/// answers "bad arguments": Java holds it as a surrogate pair, which `PathUtils.validatePath`
/// refuses. Every way to a lock refuses it first, naming the path.
#[tokio::test]
async fn characters_above_u_ffff_are_refused_before_any_request() {
    let root = "/it-bad-input-bmp";
    let client = Client::builder(server().connect_string()).install_as("bad-input-bmp").await.unwrap();
    let mut wrong = Vec::new();
    let mut check = |what: &str, expected: &str, outcome: zk_lock::Result<()>| match outcome {
        Err(Error::InvalidPath { path, reason })
            if path == expected && reason.contains("U+1F600") && reason.contains("allowed are") => {}
        other => wrong.push(format!("{what} {expected:?}: {other:?}")),
    };
    let nested = format!("{root}/lock_😀");
    for path in ["/lock_😀", nested.as_str()] {
        check("Mutex (default client)", path, Mutex::new(path).lock().await.map(drop));
        check("Mutex", path, Mutex::with_client(&client, path).lock().await.map(drop));
        check("RwLock", path, RwLock::with_client(&client, path).try_write().await.map(drop));
        check("Semaphore", path, Semaphore::with_client(&client, path, 2).try_acquire().await.map(drop));
        check("SemaphoreMutex", path, SemaphoreMutex::with_client(&client, path).try_lock().await.map(drop));
        // `a` sorts first: it must not be taken either.
        let multi = MultiLock::with_client(&client, [format!("{root}/a"), path.to_owned()]);
        check("MultiLock", path, multi.try_lock().await.map(drop));
        check("participants", path, participants_with(&client, path).await.map(drop));
        check("revoke", path, revoke_with(&client, path).await.map(drop));
    }
    // A placeholder's value, through the attribute and the support code it expands to.
    let rendered = format!("{root}/attr/lock_😀");
    check("attribute", &rendered, by_bmp_name("lock_😀").await);
    let template = Template::new().lit("/it-bad-input-bmp/attr/").value("name", "lock_😀").finish();
    check("Template", &rendered, Lock::new().client("bad-input-bmp").mutex(template).await.map(drop));
    assert!(wrong.is_empty(), "expected InvalidPath naming the path and U+1F600:\n{}", wrong.join("\n"));

    let zk = client.zookeeper();
    assert!(zk.check_stat(root).await.unwrap().is_none(), "nothing was created under {root}");
    let top = children(&client, "/").await.unwrap();
    assert!(!top.iter().any(|name| name == "lock_😀"), "nothing was created at the root: {top:?}");
}

/// The library's character rule is the server's: the last character allowed before each refused
/// range makes a node, and a character above U+FFFF is refused by the server itself.
/// (zookeeper-client refuses the ranges below U+FFFF before sending; the rest of the rule is
/// `PathUtils.validatePath`'s, read from its source.)
#[tokio::test]
async fn the_character_rule_is_the_servers() {
    let root = "/it-bad-input-chars";
    let raw = zookeeper_client::Client::connect(&server().connect_string()).await.unwrap();
    raw.create(root, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.ok();
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    for c in ['\u{20}', '\u{7e}', '\u{a0}', '\u{d7ff}', '\u{f900}', '\u{ffef}'] {
        let path = format!("{root}/x{c}");
        validate_lock_path(&path).unwrap_or_else(|e| panic!("U+{:04X}: {e}", u32::from(c)));
        raw.create(&path, b"", &ephemeral).await.unwrap_or_else(|e| panic!("U+{:04X}: {e}", u32::from(c)));
    }
    for c in ['\u{10000}', '😀', '\u{10ffff}'] {
        let path = format!("{root}/x{c}");
        assert!(matches!(validate_lock_path(&path), Err(Error::InvalidPath { .. })), "U+{:04X}", u32::from(c));
        let refused = raw.create(&path, b"", &ephemeral).await.map(drop);
        assert!(
            matches!(&refused, Err(e @ zookeeper_client::Error::BadArguments(_)) if e.to_string().contains("server error")),
            "U+{:04X}: {refused:?}",
            u32::from(c)
        );
    }
}

// --- foreign children ----------------------------------------------------------------------------

/// A persistent node `path` holding `data`, with persistent children `a` and `b` (Curator Tech
/// Note 7: a lock path that is also used for something else).
async fn config_node_with_children(client: &Client, path: &str) {
    let zk = client.zookeeper();
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    zk.mkdir(&path[..path.rfind('/').unwrap()], &persistent).await.ok();
    zk.create(path, b"config", &persistent).await.unwrap();
    for child in ["a", "b"] {
        zk.create(&format!("{path}/{child}"), child.as_bytes(), &persistent).await.unwrap();
    }
}

#[tokio::test]
async fn foreign_children_of_a_lock_path_take_no_part_and_are_left_alone() {
    let path = "/it-bad-input/foreign/config";
    let client = new_client().await;
    config_node_with_children(&client, path).await;

    let mutex = Mutex::with_client(&client, path);
    let held = mutex.try_lock().await.expect("foreign children do not block the lock");
    let waiter = tokio::spawn({
        let mutex = Mutex::with_client(&new_client().await, path);
        async move { mutex.lock_timeout(PATIENCE).await }
    });
    wait_for_children(&client, path, |children| children.len() == 4).await.unwrap();
    held.release().await.unwrap();
    waiter
        .await
        .unwrap()
        .expect("the waiter is granted after the holder, not after `a` or `b`")
        .release()
        .await
        .unwrap();
    let read = RwLock::with_client(&client, path).try_read().await.expect("read lock");
    let write = RwLock::with_client(&new_client().await, path).try_write().await;
    assert!(matches!(write, Err(Error::Busy { .. })), "only the reader blocks the writer");
    read.release().await.unwrap();
    let permit = Semaphore::with_client(&client, path, 1).try_acquire().await.expect("semaphore");
    permit.release().await.unwrap();

    // Untouched: the node with its data, and its children with theirs.
    let zk = client.zookeeper();
    assert_eq!(zk.get_data(path).await.unwrap().0, b"config");
    for child in ["a", "b"] {
        assert_eq!(zk.get_data(&format!("{path}/{child}")).await.unwrap().0, child.as_bytes());
    }
    let mut left = children(&client, path).await.unwrap();
    left.sort();
    assert_eq!(left, ["a", "b", "leases", "locks"], "only the semaphore's (container) parents were added");
}

#[tokio::test]
async fn a_persistent_child_named_like_a_lock_node_is_reported_instead_of_waited_for_forever() {
    let path = "/it-bad-input/squatted/config";
    let client = new_client().await;
    config_node_with_children(&client, path).await;
    let squatter = format!("{path}/_c_00000000-0000-4000-8000-000000000000-lock-0000000000");
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.zookeeper().create(&squatter, b"not a holder", &persistent).await.unwrap();

    let started = Instant::now();
    match Mutex::with_client(&client, path).lock_timeout(PATIENCE).await {
        Err(Error::InvalidPath { path: p, reason }) => {
            assert_eq!(p, path);
            assert!(reason.contains("-lock-0000000000") && reason.contains("not ephemeral"), "{reason}");
            assert!(reason.contains("choose another lock path"), "{reason}");
        }
        other => panic!("expected InvalidPath, got {other:?}"),
    }
    assert!(started.elapsed() < PATIENCE, "reported, not waited out");
    assert_eq!(children(&client, path).await.unwrap().len(), 3, "our queue node was removed, the others left");
}

/// Issue 24: the same for a semaphore. A persistent node named like a lease in `P/leases` is
/// counted (as Curator counts every child) and never released: when it leaves no room, the
/// acquisition says so instead of ending with a plain `Timeout`. With room beside it, waiters
/// wait for the real holders as usual.
#[tokio::test]
async fn a_persistent_child_named_like_a_lease_is_reported_instead_of_waited_for_forever() {
    let path = "/it-bad-input/squatted-leases/workers";
    let client = new_client().await;
    let zk = client.zookeeper();
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    zk.mkdir(&format!("{path}/leases"), &persistent).await.unwrap();
    let name = "_c_00000000-0000-4000-8000-000000000000-lease-0000000000";
    zk.create(&format!("{path}/leases/{name}"), b"not a holder", &persistent).await.unwrap();

    let started = Instant::now();
    match Semaphore::with_client(&client, path, 1).acquire_timeout(PATIENCE).await {
        Err(Error::InvalidPath { path: p, reason }) => {
            assert_eq!(p, path);
            assert!(reason.contains(&format!("`leases/{name}` counted among the leases")), "{reason}");
            assert!(reason.contains("not ephemeral") && reason.contains("choose another lock path"), "{reason}");
        }
        other => panic!("expected InvalidPath, got {other:?}"),
    }
    assert!(started.elapsed() < PATIENCE, "reported, not waited out");
    assert_eq!(children(&client, &format!("{path}/leases")).await.unwrap(), [name], "our lease was removed");
    assert!(children(&client, &format!("{path}/locks")).await.unwrap().is_empty(), "and our request");

    // Two leases: one beside the foreign node; a second acquisition waits for the holder.
    let holder = Semaphore::with_client(&client, path, 2).acquire_timeout(PATIENCE).await.expect("room for one");
    let waiter = tokio::spawn({
        let semaphore = Semaphore::with_client(&new_client().await, path, 2);
        async move { semaphore.acquire_timeout(PATIENCE).await }
    });
    wait_for_children(&client, &format!("{path}/leases"), |leases| leases.len() == 3).await.unwrap();
    assert!(!waiter.is_finished(), "the waiter waits for the holder");
    holder.release().await.unwrap();
    waiter.await.unwrap().expect("granted after the holder").release().await.unwrap();
}

// --- limits --------------------------------------------------------------------------------------

#[tokio::test]
async fn a_semaphore_of_zero_leases_is_refused_and_a_shared_count_of_zero_waits_for_a_raise() {
    let path = "/it-bad-input/zero";
    let client = new_client().await;
    let none = Semaphore::with_client(&client, path, 0);
    for outcome in [none.try_acquire().await, none.acquire_timeout(PATIENCE).await] {
        match outcome {
            Err(Error::InvalidArgument { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(reason.contains("allows 0 leases") && reason.contains("at least 1"), "{reason}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    assert!(client.zookeeper().check_stat(path).await.unwrap().is_none(), "nothing was created");

    // A shared count of 0 (Curator's `SharedCountReader`) is a limit that may rise: busy now,
    // granted once it does.
    let count_path = "/it-bad-input/zero-count";
    let count = SharedCount::with_client(&client, count_path, 0);
    let counted = Semaphore::with_client_and_count(&client, path, count.clone());
    assert!(matches!(counted.try_acquire().await, Err(Error::Busy { .. })));
    assert!(matches!(counted.acquire_timeout(Duration::from_millis(200)).await, Err(Error::Timeout { .. })));
    let waiting = tokio::spawn({
        let counted = counted.clone();
        async move { counted.acquire_timeout(PATIENCE).await }
    });
    wait_for_children(&client, &format!("{path}/leases"), |leases| leases.len() == 1).await.unwrap();
    count.set(1).await.unwrap();
    waiting.await.unwrap().expect("granted once the count rose").release().await.unwrap();
}

// --- release after loss --------------------------------------------------------------------------

#[tokio::test]
async fn releasing_a_lost_guard_reports_the_loss_and_dropping_one_is_harmless() {
    let path = "/it-bad-input/lost";
    let client = new_client().await;
    let admin = new_client().await;

    let mutex = Mutex::with_client(&client, format!("{path}/mutex"));
    let read = RwLock::with_client(&client, format!("{path}/rw"));
    let semaphore = Semaphore::with_client(&client, format!("{path}/semaphore"), 1);
    let guard = mutex.try_lock().await.unwrap();
    let reader = read.try_read().await.unwrap();
    let permit = semaphore.try_acquire().await.unwrap();
    for node in [guard.node_path(), reader.node_path(), permit.node_path()] {
        admin.zookeeper().delete(node, None).await.unwrap();
    }
    let lost = async { tokio::join!(guard.lost(), reader.lost(), permit.lost()) };
    let reasons = tokio::time::timeout(PATIENCE, lost).await.expect("lost() resolves");
    assert_eq!(reasons, (LostReason::NodeDeleted, LostReason::NodeDeleted, LostReason::NodeDeleted));
    let outcomes = [
        (guard.release().await, format!("{path}/mutex")),
        (reader.release().await, format!("{path}/rw")),
        (permit.release().await, format!("{path}/semaphore")),
    ];
    for (outcome, expected) in outcomes {
        match outcome {
            Err(error @ Error::Lost { .. }) => {
                assert!(matches!(&error, Error::Lost { path, reason: LostReason::NodeDeleted } if *path == expected));
                assert!(error.to_string().contains("deleted by someone else"), "{error}");
            }
            other => panic!("{expected}: expected Error::Lost, got {other:?}"),
        }
    }

    // Dropping a lost guard neither panics nor leaves a trace: the same task takes the lock anew.
    let again = mutex.try_lock().await.unwrap();
    admin.zookeeper().delete(again.node_path(), None).await.unwrap();
    tokio::time::timeout(PATIENCE, again.lost()).await.expect("lost() resolves");
    drop(again);
    let fresh = mutex.try_lock().await.expect("a new lock, not a re-entry of the lost one");
    assert!(fresh.is_held());
    fresh.release().await.unwrap();
    assert!(children(&client, &format!("{path}/mutex")).await.unwrap().is_empty(), "nothing left behind");
}
