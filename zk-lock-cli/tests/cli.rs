//! The `zk-lock` binary against a real ZooKeeper, while zk-lock guards in this test really hold
//! and wait for the locks it shows. All tests share one server; each uses its own paths.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use zk_lock::testing::{shared_server, wait_for_children};
use zk_lock::{Client, Mutex, RwLock, Semaphore};
use zookeeper_client::{Acls, CreateMode};

const ROOT: &str = "/it-cli";
/// How long a test waits for ZooKeeper to show an expected state before failing.
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs the binary with `args` against the shared server (unless `args` names another
/// `--connect`), off the test's runtime so the guards' tasks keep running meanwhile.
async fn zk_lock(args: &[&str]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_zk-lock"));
    command.args(args).env_remove("ZK_LOCK_CONNECT");
    if !args.iter().any(|arg| arg.starts_with("--connect")) {
        command.env("ZK_LOCK_CONNECT", shared_server().connect_string());
    }
    tokio::task::spawn_blocking(move || command.output().expect("run zk-lock")).await.unwrap()
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited, not killed")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Runs the binary, expects exit code 0, and parses its `--json` output.
async fn zk_lock_json(args: &[&str]) -> Value {
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let output = zk_lock(&with_json).await;
    assert_eq!(code(&output), 0, "{args:?}: stderr {}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stdout(&output)))
}

async fn new_client() -> Client {
    Client::builder(shared_server().connect_string()).connect().await.expect("connect to the test server")
}

fn session_hex(client: &Client) -> String {
    format!("{:#x}", client.zookeeper().session_id().0)
}

fn participants(doc: &Value) -> &Vec<Value> {
    doc["participants"].as_array().expect("a participants array")
}

/// Checks one participant of `inspect --json`.
fn check(p: &Value, position: u64, role: &str, kind: &str, session: &str) {
    assert_eq!(p["position"], position, "{p}");
    assert_eq!(p["role"], role, "{p}");
    assert_eq!(p["kind"], kind, "{p}");
    assert_eq!(p["session_id"], session, "{p}");
    assert_eq!(p["holder"]["pid"], std::process::id(), "our holder description: {p}");
    assert!(p["age_ms"].as_u64().unwrap() < PATIENCE.as_millis() as u64 * 4, "{p}");
}

#[tokio::test]
async fn inspect_shows_a_mutex_holder_then_its_waiter() {
    let path = format!("{ROOT}/mutex");
    let (holder_client, waiter_client) = (new_client().await, new_client().await);
    let guard = Mutex::with_client(&holder_client, &path).lock().await.unwrap();
    let mutex = Mutex::with_client(&waiter_client, &path);
    let waiter = tokio::spawn(async move { mutex.lock().await.unwrap().release().await.unwrap() });
    wait_for_children(&holder_client, &path, |c| c.len() == 2).await.unwrap();

    let doc = zk_lock_json(&["inspect", &path]).await;
    assert_eq!(
        (&doc["path"], &doc["exists"], &doc["kind"]),
        (&Value::from(path.clone()), &Value::Bool(true), &"mutex".into())
    );
    assert_eq!((&doc["holders"], &doc["waiters"]), (&1.into(), &1.into()));
    let found = participants(&doc);
    assert_eq!(found.len(), 2, "{doc}");
    check(&found[0], 1, "holder", "mutex", &session_hex(&holder_client));
    check(&found[1], 2, "waiter", "mutex", &session_hex(&waiter_client));
    assert_eq!(found[0]["node"], guard.node_path());
    assert_eq!(found[0]["fencing_token"], guard.fencing_token());
    let task = tokio::task::try_id().map(|id| id.to_string().parse::<u64>().unwrap());
    assert_eq!(found[0]["holder"]["task"], serde_json::json!(task));
    assert_eq!(found[1]["holder"]["task"], waiter.id().to_string().parse::<u64>().unwrap());

    // The table: a summary line, a header, then one aligned row per node in queue order.
    let output = zk_lock(&["inspect", &path]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("{path}: mutex, 1 holder, 1 waiter"), "{text}");
    assert!(lines[1].starts_with("POS  ROLE    KIND   SESSION"), "{text}");
    let holder_row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        holder_row[..5],
        ["1", "holder", "mutex", &session_hex(&holder_client), &guard.fencing_token().to_string()]
    );
    assert!(holder_row[6].starts_with("host=") && lines[2].contains(&format!("pid={}", std::process::id())), "{text}");
    let waiter_row: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(waiter_row[..4], ["2", "waiter", "mutex", &session_hex(&waiter_client)]);
    assert_eq!(lines[2].find("host="), lines[3].find("host="), "columns aligned:\n{text}");
    assert_eq!(lines.len(), 4, "{text}");

    guard.release().await.unwrap();
    waiter.await.unwrap();
    let doc = zk_lock_json(&["inspect", &path]).await;
    assert!(participants(&doc).is_empty() && doc["exists"] == true, "released: {doc}");
}

#[tokio::test]
async fn inspect_shows_a_writer_holding_and_a_reader_waiting() {
    let path = format!("{ROOT}/rw");
    let (writer_client, reader_client) = (new_client().await, new_client().await);
    let write = RwLock::with_client(&writer_client, &path).write().await.unwrap();
    let rw = RwLock::with_client(&reader_client, &path);
    let reader = tokio::spawn(async move { rw.read().await.unwrap().release().await.unwrap() });
    wait_for_children(&writer_client, &path, |c| c.len() == 2).await.unwrap();

    let doc = zk_lock_json(&["inspect", &path]).await;
    assert_eq!(doc["kind"], "rwlock", "{doc}");
    let found = participants(&doc);
    assert_eq!(found.len(), 2, "{doc}");
    check(&found[0], 1, "holder", "write", &session_hex(&writer_client));
    check(&found[1], 2, "waiter", "read", &session_hex(&reader_client));
    assert_eq!(found[0]["fencing_token"], write.fencing_token());

    let text = stdout(&zk_lock(&["inspect", &path]).await);
    assert!(text.starts_with(&format!("{path}: rwlock, 1 holder, 1 waiter\n")), "{text}");
    write.release().await.unwrap();
    reader.await.unwrap();
}

#[tokio::test]
async fn inspect_shows_a_semaphore_lease_holder_then_the_requester_waiting() {
    let path = format!("{ROOT}/semaphore");
    let (holder_client, waiter_client) = (new_client().await, new_client().await);
    let permit = Semaphore::with_client(&holder_client, &path, 1).acquire().await.unwrap();
    let semaphore = Semaphore::with_client(&waiter_client, &path, 1);
    let waiter = tokio::spawn(async move { semaphore.acquire().await.unwrap().release().await.unwrap() });
    // Curator's algorithm: the waiter holds the internal mutex and waits with a lease node.
    wait_for_children(&holder_client, &format!("{path}/locks"), |c| c.len() == 1).await.unwrap();
    wait_for_children(&holder_client, &format!("{path}/leases"), |c| c.len() == 2).await.unwrap();

    let doc = zk_lock_json(&["inspect", &path]).await;
    assert_eq!(doc["kind"], "semaphore", "{doc}");
    // Three nodes, two requesters: the waiting requester's lease and request count once.
    assert_eq!((&doc["holders"], &doc["waiters"]), (&1.into(), &1.into()), "{doc}");
    let found = participants(&doc);
    assert_eq!(found.len(), 3, "{doc}");
    check(&found[0], 1, "holder", "lease", &session_hex(&holder_client));
    check(&found[1], 2, "waiter", "lease", &session_hex(&waiter_client));
    check(&found[2], 3, "waiter", "lease-request", &session_hex(&waiter_client));
    assert_eq!(found[0]["node"], permit.node_path());
    assert!(found[2]["node"].as_str().unwrap().starts_with(&format!("{path}/locks/")), "{doc}");

    permit.release().await.unwrap();
    waiter.await.unwrap();
}

#[tokio::test]
async fn revoke_asks_the_holder_and_names_its_node() {
    let path = format!("{ROOT}/revoke");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let revoked = guard.revoked();
    assert!(!guard.is_revoked());

    let output = zk_lock(&["revoke", &path]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with(&format!("{path}: asked 1 holder(s)")), "{text}");
    assert!(text.contains(guard.node_path()) && text.contains(&session_hex(&client)), "{text}");
    tokio::time::timeout(PATIENCE, revoked).await.expect("revoked() resolves");
    assert!(guard.is_held(), "revocation only asks");

    // Asked again, with JSON: the node is named, and `inspect` shows the request.
    let doc = zk_lock_json(&["revoke", &path]).await;
    assert_eq!(doc["revoked"][0]["node"], guard.node_path(), "{doc}");
    assert_eq!(doc["revoked"][0]["session_id"], session_hex(&client), "{doc}");
    let inspected = zk_lock_json(&["inspect", &path]).await;
    assert_eq!(participants(&inspected)[0]["revoke_requested"], true, "{inspected}");
    guard.release().await.unwrap();

    // Nothing left to revoke: exit code 1, the JSON still printed, the reason on stderr.
    let output = zk_lock(&["revoke", &path, "--json"]).await;
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["revoked"], serde_json::json!([]));
    assert!(stderr(&output).contains("nothing to revoke"), "{}", stderr(&output));
}

#[tokio::test]
async fn tree_lists_every_lock_with_its_kind_and_counts() {
    let root = format!("{ROOT}/tree");
    let client = new_client().await;
    let other = new_client().await;
    let mutex = Mutex::with_client(&client, format!("{root}/orders/42")).lock().await.unwrap();
    let read = RwLock::with_client(&client, format!("{root}/catalog/sku-1")).read().await.unwrap();
    let rw = RwLock::with_client(&other, format!("{root}/catalog/sku-1"));
    let writer = tokio::spawn(async move { rw.write().await.unwrap().release().await.unwrap() });
    let permit = Semaphore::with_client(&client, format!("{root}/workers"), 2).acquire().await.unwrap();
    wait_for_children(&client, &format!("{root}/catalog/sku-1"), |c| c.len() == 2).await.unwrap();
    // A plain node with no lock under it is not a lock.
    let plain = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.zookeeper().mkdir(&format!("{root}/empty/dir"), &plain).await.unwrap();

    let doc = zk_lock_json(&["tree", &root]).await;
    let locks: Vec<(String, String, u64, u64)> = doc["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let text = |k: &str| l[k].as_str().unwrap().to_owned();
            (text("path"), text("kind"), l["holders"].as_u64().unwrap(), l["waiters"].as_u64().unwrap())
        })
        .collect();
    let expected = [
        (format!("{root}/catalog/sku-1"), "rwlock".to_owned(), 1, 1),
        (format!("{root}/orders/42"), "mutex".to_owned(), 1, 0),
        (format!("{root}/workers"), "semaphore".to_owned(), 1, 0),
    ];
    assert_eq!(locks, expected, "{doc}");

    let output = zk_lock(&["tree", &root]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<Vec<&str>> = text.lines().map(|line| line.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["LOCK", "KIND", "HOLDERS", "WAITERS"], "{text}");
    assert_eq!(lines[1], [format!("{root}/").as_str()], "{text}");
    assert_eq!(lines[2], ["catalog/"], "{text}");
    assert_eq!(lines[3], ["sku-1", "rwlock", "1", "1"], "{text}");
    assert_eq!(lines[5], ["42", "mutex", "1", "0"], "{text}");
    assert_eq!(lines[6], ["workers", "semaphore", "1", "0"], "{text}");
    assert!(text.lines().nth(3).unwrap().starts_with("    sku-1"), "indented under catalog/:\n{text}");
    assert!(text.ends_with("3 locks under /it-cli/tree\n"), "{text}");

    // `/` walks everything and finds the same locks among the other tests'.
    let everything = zk_lock_json(&["tree", "/"]).await;
    let all: Vec<&str> = everything["locks"].as_array().unwrap().iter().map(|l| l["path"].as_str().unwrap()).collect();
    assert!(expected.iter().all(|(path, ..)| all.contains(&path.as_str())), "{all:?}");

    read.release().await.unwrap();
    writer.await.unwrap();
    mutex.release().await.unwrap();
    permit.release().await.unwrap();
}

#[tokio::test]
async fn a_missing_path_is_exit_code_1_and_named() {
    for command in ["inspect", "tree", "revoke"] {
        let output = zk_lock(&[command, "/it-cli/no/such/lock"]).await;
        assert_eq!(code(&output), 1, "{command}: {}", stderr(&output));
        assert!(stderr(&output).contains("`/it-cli/no/such/lock` does not exist"), "{command}: {}", stderr(&output));
        assert!(output.stdout.is_empty(), "{command}: only the JSON form prints a result");
    }
    let output = zk_lock(&["inspect", "/it-cli/no/such/lock", "--json"]).await;
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((code(&output), &doc["exists"]), (1, &Value::Bool(false)));
}

#[tokio::test]
async fn usage_errors_are_exit_code_2_and_say_what_is_allowed() {
    let cases: &[(&[&str], &str)] = &[
        (&["frobnicate", "/a"], "unrecognized subcommand 'frobnicate'\n\n  tip: commands are inspect, revoke, tree"),
        // No command: the help, on stderr.
        (&[], "Usage: zk-lock [OPTIONS] <COMMAND>\n\nCommands:\n  inspect "),
        (&["inspect"], "the following required arguments were not provided:\n  <PATH>"),
        (&["tree", "/", "--bogus"], "unexpected argument '--bogus' found\n\n  tip: options are --connect"),
        (&["inspect", "locks/orders"], "invalid lock path `locks/orders`: lock paths must start with `/`"),
        (&["inspect", "/a//b"], "empty segment"),
        (&["tree", "/zookeeper"], "reserved"),
        (&["inspect", "/a", "--timeout", "5"], "invalid value '5' for '--timeout <DUR>': time unit needed"),
        (&["inspect", "/a", "--timeout", "0s"], "invalid value '0s' for '--timeout <DUR>': zero gives up"),
        (
            &["inspect", "/a", "--connect", "127.0.0.1:notaport"],
            "invalid `--connect 127.0.0.1:notaport`: port `notaport`",
        ),
        (&["inspect", "/a", "--connect", ""], "no host given"),
    ];
    for (args, expected) in cases {
        let output = zk_lock(args).await;
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

#[tokio::test]
async fn an_unreachable_server_is_exit_code_3_within_the_timeout() {
    // A port nobody listens on: bound, then freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let connect = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let output = zk_lock(&["inspect", "/a", "--connect", &connect, "--timeout", "500ms"]).await;
    let took = started.elapsed();
    assert_eq!(code(&output), 3, "{}", stderr(&output));
    assert!(stderr(&output).contains(&format!("cannot connect to ZooKeeper at `{connect}`")), "{}", stderr(&output));
    assert!(took < Duration::from_secs(5), "bounded by --timeout, took {took:?}");
}

#[tokio::test]
async fn help_and_version() {
    let output = zk_lock(&["--help"]).await;
    assert_eq!(code(&output), 0);
    let help = stdout(&output);
    let needles =
        ["\n  inspect ", "\n  revoke ", "\n  tree ", "--connect <HOSTS>", "--json", "--timeout <DUR>", "Exit codes:"];
    for needle in needles {
        assert!(help.contains(needle), "{needle:?} missing from --help:\n{help}");
    }
    let summary = help.split("\nExit codes:").next().unwrap();
    assert!(include_str!("../README.md").contains(summary), "the README's usage is stale; --help says:\n{help}");
    let output = zk_lock(&["inspect", "--help"]).await;
    assert_eq!(code(&output), 0);
    let help = stdout(&output);
    assert!(help.contains("Usage: zk-lock inspect [OPTIONS] <PATH>"), "{help}");
    assert!(help.contains("fencing token") && help.contains("--timeout <DUR>"), "{help}");
    let output = zk_lock(&["--version"]).await;
    assert_eq!((code(&output), stdout(&output)), (0, format!("zk-lock {}\n", env!("CARGO_PKG_VERSION"))));
}
