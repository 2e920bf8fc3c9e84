//! The `zk-lock` binary against a real ZooKeeper, while zk-lock guards in this test really hold
//! and wait for the locks it shows. All tests share one server, each with its own paths; one
//! test starts an ensemble of its own. `watch` runs in a real terminal: a tmux pane.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;
use zk_lock::testing::{shared_server, wait_for_children, TestingCluster, TestingServer};
use zk_lock::{Client, Mutex, RwLock, Semaphore};
use zookeeper_client::{Acls, CreateMode};

const ROOT: &str = "/it-cli";
const BIN: &str = env!("CARGO_BIN_EXE_zk-lock");
/// How long a test waits for ZooKeeper to show an expected state before failing.
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs the binary with `args` against the shared server (unless `args` names another
/// `--connect`), off the test's runtime so the guards' tasks keep running meanwhile.
async fn zk_lock(args: &[&str]) -> Output {
    zk_lock_with(args, &[]).await
}

/// [`zk_lock`] with these environment variables set (and no credentials unless they give some).
async fn zk_lock_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BIN);
    command.args(args).env_remove("ZK_LOCK_CONNECT").env_remove("ZK_LOCK_DIGEST").envs(env.iter().copied());
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
    assert!(lines[1].starts_with("POS  ROLE    KIND   SESSION            EXPIRES-IN  FENCING"), "{text}");
    let holder_row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(holder_row[..4], ["1", "holder", "mutex", &session_hex(&holder_client)]);
    assert!(holder_row[4].ends_with('s'), "the session's time left, in seconds: {text}");
    assert_eq!(holder_row[5], guard.fencing_token().to_string());
    assert!(holder_row[7].starts_with("host=") && lines[2].contains(&format!("pid={}", std::process::id())), "{text}");
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
async fn revoke_force_deletes_the_holders_node_says_who_held_it_and_the_waiter_moves_up() {
    let path = format!("{ROOT}/revoke-force");
    let (client, other) = (new_client().await, new_client().await);
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let lost = guard.lost();
    let waiter = {
        let mutex = Mutex::with_client(&other, &path);
        tokio::spawn(async move { mutex.lock().await })
    };
    wait_for_children(&client, &path, |c| c.len() == 2).await.unwrap();

    let output = zk_lock(&["revoke", "--force", &path]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with(&format!("{path}: released by force")), "{text}");
    assert!(text.contains(guard.node_path()) && text.contains(&session_hex(&client)), "{text}");
    assert!(text.contains(&format!("pid={}", std::process::id())), "who held it: {text}");
    assert_eq!(tokio::time::timeout(PATIENCE, lost).await.unwrap(), zk_lock::LostReason::NodeDeleted);
    let next = tokio::time::timeout(PATIENCE, waiter).await.unwrap().unwrap().expect("the waiter is granted");

    // --node without --force is a usage error; several holders need --node.
    let output = zk_lock(&["revoke", "--node", "x", &path]).await;
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    next.release().await.unwrap();
    let rw = RwLock::with_client(&client, format!("{path}-rw"));
    let (first, second) = (rw.read().await.unwrap(), rw.read().await.unwrap());
    let output = zk_lock(&["revoke", "--force", &format!("{path}-rw")]).await;
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    assert!(
        stderr(&output).contains("has 2 holders (read); name the one to release with --node NAME"),
        "{}",
        stderr(&output)
    );
    let output = zk_lock(&["revoke", "--force", "--node", "_c_nope-__READ__0000000099", &format!("{path}-rw")]).await;
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    assert!(stderr(&output).contains("is not a node of"), "{}", stderr(&output));
    let name = second.node_path().rsplit('/').next().unwrap();
    let doc = zk_lock_json(&["revoke", "--force", "--node", name, &format!("{path}-rw")]).await;
    assert_eq!(doc["released"]["node"], second.node_path(), "{doc}");
    assert_eq!(tokio::time::timeout(PATIENCE, second.lost()).await.unwrap(), zk_lock::LostReason::NodeDeleted);
    assert!(first.is_held());
    first.release().await.unwrap();

    // A node named on a path without lock nodes: the error says there are none (issue 34), not
    // an empty list.
    let empty = format!("{path}-empty");
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    client.zookeeper().create(&empty, b"", &persistent).await.unwrap();
    let output = zk_lock(&["revoke", "--force", "--node", "_c_nope-lock-0000000001", &empty]).await;
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("is not a node of") && said.contains("it has no lock nodes"), "{said}");

    // Nobody holds it any more: exit code 1.
    let output = zk_lock(&["revoke", "--force", &path]).await;
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    assert!(stderr(&output).contains("nothing to release"), "{}", stderr(&output));
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
        (
            &["frobnicate", "/a"],
            "unrecognized subcommand 'frobnicate'\n\n  tip: commands are inspect, watch, revoke, tree",
        ),
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

/// A path no lock can have is refused before connecting: at once, with no server at all, and
/// named (it used to spend the whole connect timeout and then speak of the connection).
#[tokio::test]
async fn a_bad_path_is_refused_before_connecting() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let connect = format!("127.0.0.1:{port}");
    for (command, path) in [("inspect", "bad path"), ("watch", "/a//b"), ("revoke", "relative"), ("tree", "/x/")] {
        let started = Instant::now();
        let output = zk_lock(&[command, path, "--connect", &connect, "--timeout", "5s"]).await;
        let took = started.elapsed();
        assert_eq!(code(&output), 2, "{command} {path}: {}", stderr(&output));
        assert!(stderr(&output).contains(&format!("invalid lock path `{path}`")), "{command}: {}", stderr(&output));
        assert!(!stderr(&output).contains("connect"), "{command}: {}", stderr(&output));
        assert!(took < Duration::from_secs(2), "{command} {path} took {took:?}: it tried to connect");
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
    let needles = [
        "\n  inspect ",
        "\n  watch ",
        "\n  revoke ",
        "\n  tree ",
        "--connect <HOSTS>",
        "--json",
        "--timeout <DUR>",
        "--auth-file <FILE>",
        "$ZK_LOCK_DIGEST",
        "Exit codes:",
    ];
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
    assert!(help.contains("EXPIRES-IN") && help.contains("4lw.commands.whitelist"), "{help}");
    let output = zk_lock(&["watch", "--help"]).await;
    assert_eq!(code(&output), 0);
    let help = stdout(&output);
    assert!(help.contains("Usage: zk-lock watch [OPTIONS] <PATH>") && help.contains("--interval <DUR>"), "{help}");
    assert!(help.contains("[default: 1s]") && help.contains("Ctrl-C"), "{help}");
    let output = zk_lock(&["--version"]).await;
    assert_eq!((code(&output), stdout(&output)), (0, format!("zk-lock {}\n", env!("CARGO_PKG_VERSION"))));
}

/// The server's tickTime, from `conf`: it rounds session expiry up to a multiple of it.
fn tick_time() -> Duration {
    let conf = shared_server().four_letter("conf").expect("conf");
    let tick = conf.lines().find_map(|line| line.strip_prefix("tickTime=")).expect("tickTime in conf");
    Duration::from_millis(tick.trim().parse().unwrap())
}

fn millis(value: &Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("a number of milliseconds: {value}"))
}

/// The cells of the table row of `session` in `text`.
fn row_of<'a>(text: &'a str, session: &str) -> Vec<&'a str> {
    let row =
        text.lines().find(|line| line.contains(session)).unwrap_or_else(|| panic!("no row of {session}:\n{text}"));
    row.split_whitespace().collect()
}

/// `850ms`, `1.2s` or `37s` in milliseconds.
fn human_millis(text: &str) -> u64 {
    match text.strip_suffix("ms") {
        Some(ms) => ms.parse().unwrap(),
        None => (text.strip_suffix('s').unwrap().parse::<f64>().unwrap() * 1000.0) as u64,
    }
}

#[tokio::test]
async fn inspect_shows_the_time_held_growing_and_the_session_time_left() {
    let path = format!("{ROOT}/held");
    let client = new_client().await;
    let session = session_hex(&client);
    let timeout = client.zookeeper().session_timeout();
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    // The figure is a lower bound, at most 2s + tickTime (and the CLI's reads) below the truth,
    // and the holder's heartbeat renews the session every 1/9 of its timeout: a third of the
    // timeout is a safe floor. The server rounds expiry up to a tick: timeout + tick at most.
    let (least, most) = (timeout / 3, timeout + tick_time());

    let first = zk_lock_json(&["inspect", &path]).await;
    assert_eq!(first["session_expiry_from"], shared_server().addr().to_string(), "{first}");
    assert!(first["session_expiry_unknown"].is_null(), "{first}");
    let held_first = millis(&participants(&first)[0]["age_ms"]);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let doc = zk_lock_json(&["inspect", &path]).await;
        let holder = &participants(&doc)[0];
        assert_eq!(holder["session_id"], session, "{doc}");
        let left = Duration::from_millis(millis(&holder["session_expires_in_ms"]));
        assert!(least <= left && left <= most, "{left:?} left of a {timeout:?} session: {doc}");
        assert_eq!(holder["session_expires_in"], format!("{}s", left.as_secs()), "{doc}");
        if millis(&holder["age_ms"]) >= held_first + 1500 {
            break;
        }
        assert!(Instant::now() < deadline, "the time held did not grow from {held_first}ms: {doc}");
        // Paces the polling (each pass starts a process and a session), as `Tmux::wait_for` does.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The table shows the same: whole seconds left, held for more than 1.5s.
    let output = zk_lock(&["inspect", &path]).await;
    assert!(stderr(&output).is_empty(), "no warning: {}", stderr(&output));
    let text = stdout(&output);
    let row = row_of(&text, &session);
    let left: u64 = row[4].strip_suffix('s').and_then(|secs| secs.parse().ok()).unwrap_or_else(|| panic!("{text}"));
    assert!(least.as_secs() <= left && left <= most.as_secs(), "{text}");
    assert!(human_millis(row[6]) >= 1500, "{text}");
    guard.release().await.unwrap();
}

#[tokio::test]
async fn session_expiry_comes_from_the_leader_and_without_it_the_reasons_are_said_once() {
    let cluster = tokio::task::spawn_blocking(|| TestingCluster::start(3)).await.unwrap().expect("start an ensemble");
    let leader = cluster.leader().expect("a leader");
    let follower = (0..cluster.len()).find(|&i| i != leader).unwrap();
    let client = Client::builder(cluster.connect_string()).connect().await.unwrap();
    let session = session_hex(&client);
    let path = format!("{ROOT}/ensemble");
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();

    // The whole ensemble in --connect: the leader is found and answers.
    let doc = zk_lock_json(&["inspect", &path, "--connect", &cluster.connect_string()]).await;
    assert_eq!(doc["session_expiry_from"], cluster.server_connect_string(leader), "{doc}");
    let left = Duration::from_millis(millis(&participants(&doc)[0]["session_expires_in_ms"]));
    assert!(!left.is_zero() && left <= client.zookeeper().session_timeout() + Duration::from_secs(1), "{doc}");

    // A follower and a port nobody listens on: `-`, and why, once on stderr; still exit code 0.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (follower, closed) = (cluster.server_connect_string(follower), format!("127.0.0.1:{closed}"));
    let connect = format!("{follower},{closed}");
    let output = zk_lock(&["inspect", &path, "--connect", &connect]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(row_of(&stdout(&output), &session)[4], "-", "{}", stdout(&output));
    let errors = stderr(&output);
    assert_eq!(errors.lines().count(), 1, "{errors}");
    assert!(errors.starts_with("zk-lock: session expiry unknown (EXPIRES-IN: -): "), "{errors}");
    assert!(errors.contains(&format!("{follower}: a follower or observer")), "{errors}");
    assert!(errors.contains(&format!("{closed}: cannot ask it for `dump`: Connection refused")), "{errors}");
    let doc = zk_lock_json(&["inspect", &path, "--connect", &connect]).await;
    assert!(participants(&doc)[0]["session_expires_in_ms"].is_null(), "{doc}");
    assert!(doc["session_expiry_from"].is_null(), "{doc}");
    assert!(doc["session_expiry_unknown"].as_str().unwrap().contains(&format!("{follower}: a follower")), "{doc}");
    guard.release().await.unwrap();
}

/// A tmux server of the test's own (its own socket) with one pane of 200 x 40, killed on drop.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Runs the binary with `args` in a pane, under bash, which then says how it exited and
    /// stays, keeping the pane.
    async fn start(name: &str, args: &[&str]) -> Tmux {
        let socket = std::env::temp_dir().join(format!("zk-lock-cli-{}-{name}.tmux", std::process::id()));
        let tmux = Tmux { socket };
        let script = r#""$@"; echo "zk-lock exited with $?"; exec sleep 3600"#;
        let mut command = vec!["-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "40"];
        command.extend(["bash", "-c", script, "bash", BIN]);
        command.extend(args);
        tmux.run(&command).await;
        tmux
    }

    /// Runs a tmux command on this server; returns its stdout.
    async fn run(&self, args: &[&str]) -> String {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.socket).args(args);
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("cannot run tmux ({e}); scripts/install-deps installs it"));
        assert!(output.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    /// Values of the pane, by tmux format, like `#{alternate_on}`.
    async fn pane(&self, format: &str) -> String {
        self.run(&["display-message", "-p", format]).await.trim_end().to_owned()
    }

    /// Polls the pane's text until `condition` holds, then returns it.
    async fn wait_for(&self, what: &str, condition: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.run(&["capture-pane", "-p"]).await;
            if condition(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "no {what} on screen within {PATIENCE:?}:\n{screen}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").arg("-S").arg(&self.socket).arg("kill-server").output();
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[tokio::test]
async fn watch_redraws_a_terminal_on_changes_and_restores_it_on_ctrl_c() {
    let path = format!("{ROOT}/watch-tty");
    let client = new_client().await;
    let session = session_hex(&client);
    // An hour between refreshes: only the watch on PATH can show the changes below.
    let connect = shared_server().connect_string();
    let tmux = Tmux::start("watch", &["watch", &path, "--connect", &connect, "--interval", "1h"]).await;
    let screen = tmux.wait_for("missing path", |screen| screen.contains("does not exist (yet)")).await;
    assert!(
        screen.starts_with(char::is_numeric) && screen.contains("Z: refreshed on changes and every 1h"),
        "{screen}"
    );
    assert_eq!(tmux.pane("#{alternate_on} #{cursor_flag}").await, "1 0", "the alternate screen, no cursor");

    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let screen = tmux.wait_for("holder", |screen| screen.contains(&session)).await;
    let row = row_of(&screen, &session);
    assert_eq!(row[..3], ["1", "holder", "mutex"], "{screen}");
    assert!(screen.contains(&format!("pid={}", std::process::id())), "{screen}");
    assert!(!screen.contains("does not exist"), "drawn over the previous frame:\n{screen}");

    guard.release().await.unwrap();
    let screen = tmux.wait_for("release", |screen| !screen.contains(&session)).await;
    // Empty, or gone if the server has reaped the container node meanwhile.
    assert!(screen.contains("no holders or waiters") || screen.contains("does not exist"), "{screen}");

    tmux.run(&["send-keys", "C-c"]).await;
    let screen = tmux.wait_for("exit", |screen| screen.contains("zk-lock exited with")).await;
    assert!(screen.contains("zk-lock exited with 0"), "{screen}");
    assert!(!screen.contains("refreshed on changes"), "the screen from before is back:\n{screen}");
    assert_eq!(tmux.pane("#{alternate_on} #{cursor_flag}").await, "0 1", "the terminal restored");
}

/// `zk-lock watch` against the shared server, its stdout a pipe read line by line by a thread.
struct Watching {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Watching {
    fn start(args: &[&str]) -> Watching {
        Self::start_on(&shared_server().connect_string(), args)
    }

    fn start_on(connect: &str, args: &[&str]) -> Watching {
        Self::start_with_stderr(connect, args, Stdio::inherit())
    }

    /// [`Watching::start_on`] with its stderr sent to `stderr`.
    fn start_with_stderr(connect: &str, args: &[&str], stderr: impl Into<Stdio>) -> Watching {
        let mut child = Command::new(BIN)
            .args(args)
            .env("ZK_LOCK_CONNECT", connect)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("run zk-lock");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Watching { child, lines }
    }

    async fn next_line(&mut self, what: &str) -> String {
        match tokio::time::timeout(PATIENCE, self.lines.recv()).await {
            Ok(Some(line)) => line,
            Ok(None) => panic!("zk-lock watch closed stdout before {what}"),
            Err(_) => panic!("no {what} within {PATIENCE:?}"),
        }
    }

    /// The next block (lines up to a blank line) for which `condition` holds.
    async fn block_where(&mut self, what: &str, condition: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let mut block = String::new();
            loop {
                let line = self.next_line(what).await;
                if line.is_empty() {
                    break;
                }
                block.push_str(&line);
                block.push('\n');
            }
            assert!(block.lines().next().unwrap().ends_with("Z: refreshed on changes and every 200ms"), "{block}");
            if condition(&block) {
                return block;
            }
            assert!(Instant::now() < deadline, "no block with {what} within {PATIENCE:?}; the last:\n{block}");
        }
    }

    /// Sends SIGINT, as Ctrl-C would, and waits for the exit.
    async fn interrupt(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let kill = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(kill.success());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "zk-lock watch still runs {PATIENCE:?} after SIGINT");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn watch_prints_blocks_to_a_pipe_as_the_durations_tick_and_exits_0_on_sigint() {
    let path = format!("{ROOT}/watch-pipe");
    let client = new_client().await;
    let session = session_hex(&client);
    let mut watch = Watching::start(&["watch", &path, "--interval", "200ms"]);
    watch.block_where("missing path", |block| block.contains("does not exist (yet)")).await;

    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let first = watch.block_where("holder", |block| block.contains(&session)).await;
    assert!(!first.contains("Ctrl-C"), "a pipe is no terminal: {first}");
    // Nothing changes, and the interval's refreshes show it held longer.
    let held = |block: &str| human_millis(row_of(block, &session)[6]);
    let held_first = held(&first);
    let later = watch.block_where("longer hold", |block| block.contains(&session) && held(block) > held_first).await;
    assert_eq!(row_of(&later, &session)[..3], ["1", "holder", "mutex"], "{later}");

    guard.release().await.unwrap();
    watch.block_where("release", |block| !block.contains(&session)).await;
    let status = watch.interrupt().await;
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// The session ids a server's `dump` lists (`Session Sets`: one `0x..` id a line).
fn sessions(server: &TestingServer) -> Vec<String> {
    let dump = server.four_letter("dump").expect("dump");
    let ids = dump.lines().map(str::trim).filter(|line| line.starts_with("0x") && !line.ends_with(':'));
    let mut ids: Vec<String> = ids.map(str::to_owned).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

#[tokio::test]
async fn watch_closes_its_session_when_interrupted() {
    // A server of its own: the sessions it lists are this test's only.
    let server = TestingServer::start().expect("start a server");
    let mut watch = Watching::start_on(&server.connect_string(), &["watch", "/it-cli/closing", "--interval", "200ms"]);
    watch.block_where("missing path", |block| block.contains("does not exist (yet)")).await;
    // The server's `dump` may list a new session a moment after the session answered (seen in
    // CI): wait for it to show, bounded.
    let listed = async {
        while sessions(&server).len() != 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let shown = tokio::time::timeout(Duration::from_secs(10), listed).await;
    assert!(shown.is_ok(), "the command's session is never listed alone: {:?}", sessions(&server));
    let status = watch.interrupt().await;
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(sessions(&server), Vec::<String>::new(), "closed on the way out, not left to its timeout");
}

#[tokio::test]
async fn watch_json_prints_one_document_a_line() {
    let path = format!("{ROOT}/watch-json");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let mut watch = Watching::start(&["watch", &path, "--interval", "200ms", "--json"]);
    let mut times = Vec::new();
    for _ in 0..2 {
        let line = watch.next_line("JSON document").await;
        let doc: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert_eq!((&doc["path"], &doc["holders"]), (&Value::from(path.clone()), &1.into()), "{doc}");
        assert_eq!(participants(&doc)[0]["session_id"], session_hex(&client), "{doc}");
        assert!(participants(&doc)[0]["session_expires_in_ms"].is_u64(), "{doc}");
        times.push(millis(&doc["time_ms"]));
    }
    assert!(times[0] < times[1], "{times:?}");
    assert_eq!(watch.interrupt().await.code(), Some(0));
    guard.release().await.unwrap();
}

#[tokio::test]
async fn watch_rejects_a_bad_interval_before_connecting() {
    for (interval, reason) in [
        ("0s", "0s is too often: at least 100ms"),
        ("50ms", "50ms is too often"),
        ("1", "time unit needed"),
        ("soon", "; like 500ms, 1s or 1m"),
    ] {
        // Nobody listens on port 1: the error comes before any connection is tried.
        let output = zk_lock(&["watch", "/a", "--interval", interval, "--connect", "127.0.0.1:1"]).await;
        assert_eq!(code(&output), 2, "{interval}: {}", stderr(&output));
        let expected = format!("invalid value '{interval}' for '--interval <DUR>': ");
        assert!(stderr(&output).contains(&expected) && stderr(&output).contains(reason), "{}", stderr(&output));
        assert!(output.stdout.is_empty());
    }
}

/// Holder data that clears the screen, moves the cursor home, retitles the terminal, rings the
/// bell and forges a table row (the sample of issue 24).
const HOSTILE_DATA: &str = "host=web-1\x1b[2J\x1b[H\x1b]0;pwned\x07\nFORGED\trow pid=1 task=none";
/// How `HOSTILE_DATA` shows in a table (cut at 60 characters).
const HOSTILE_DATA_SHOWN: &str = r"host=web-1\x1b[2J\x1b[H\x1b]0;pwned\x07\nFORGED\trow pid=...";
/// A lock node name that ZooKeeper accepts (it refuses C0 and C1 controls in paths, not these):
/// a right-to-left override, a zero-width space and a line separator before `-lock-`.
const HOSTILE_NODE: &str = "gro\u{202e}gnp\u{200b}\u{2028}x-lock-";
/// How `HOSTILE_NODE` shows.
const HOSTILE_NODE_SHOWN: &str = r"gro\u{202e}gnp\u{200b}\u{2028}x-lock-";
/// A lock path segment with a right-to-left override, and how it shows.
const HOSTILE_SEGMENT: (&str, &str) = ("ord\u{202e}sre", r"ord\u{202e}sre");

/// Creates, with zookeeper-client directly, what anyone who may create nodes under a lock path
/// can: the lock path (open to all) and an ephemeral sequential node named [`HOSTILE_NODE`]
/// holding [`HOSTILE_DATA`], owned by `client`'s session. Returns the node's path.
async fn plant_hostile_holder(client: &Client, path: &str) -> String {
    let zk = client.zookeeper();
    zk.mkdir(path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let (_, sequence) = zk.create(&format!("{path}/{HOSTILE_NODE}"), HOSTILE_DATA.as_bytes(), &options).await.unwrap();
    format!("{path}/{HOSTILE_NODE}{sequence}")
}

/// Fails if `text` holds anything that drives a terminal or breaks a line other than a line
/// feed: C0 and C1 controls, DEL, and the bidirectional and invisible characters planted here.
fn assert_terminal_safe(what: &str, text: &str) {
    let raw = text.chars().find(|&c| (c.is_control() && c != '\n') || "\u{202e}\u{200b}\u{2028}".contains(c));
    assert_eq!(raw, None, "{what} prints a raw {raw:?}:\n{text:?}");
}

#[tokio::test]
async fn hostile_holder_data_and_node_names_print_escaped_and_on_one_row() {
    let parent = format!("{ROOT}/hostile");
    let path = format!("{parent}/{}", HOSTILE_SEGMENT.0);
    let shown_path = format!("{parent}/{}", HOSTILE_SEGMENT.1);
    let client = new_client().await;
    let node = plant_hostile_holder(&client, &path).await;
    let sequence = node.rsplit("-lock-").next().unwrap().to_owned();

    // The table: the summary, the header, one row; the hostile parts escaped.
    let output = zk_lock(&["inspect", &path]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    assert_terminal_safe("inspect", &text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "no forged row:\n{text}");
    assert_eq!(lines[0], format!("{shown_path}: mutex, 1 holder, 0 waiters"), "{text}");
    assert!(lines[2].starts_with("1    holder  mutex") && lines[2].ends_with(HOSTILE_DATA_SHOWN), "{text}");

    // JSON: the exact data and node name (JSON escapes, which parsers undo); none of them raw.
    let output = zk_lock(&["inspect", &path, "--json"]).await;
    assert_terminal_safe("inspect --json", &stdout(&output));
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    let holder = &participants(&doc)[0];
    assert_eq!((&holder["data"], &holder["holder"]), (&Value::from(HOSTILE_DATA), &Value::Null), "{doc}");
    assert_eq!((&holder["node"], &doc["path"]), (&Value::from(node.clone()), &Value::from(path.clone())), "{doc}");
    assert!(stdout(&output).contains(r#"\u001b]0;pwned\u0007\nFORGED\trow"#), "{}", stdout(&output));
    assert!(stdout(&output).contains(r#"gro\u202egnp\u200b\u2028x-lock-"#), "{}", stdout(&output));

    // `tree` names the lock by its escaped segment.
    let output = zk_lock(&["tree", &parent]).await;
    let text = stdout(&output);
    assert_terminal_safe("tree", &text);
    assert!(text.lines().any(|line| line.starts_with(&format!("  {}  mutex", HOSTILE_SEGMENT.1))), "{text}");

    // `revoke` names the node it wrote to, escaped, with the data it read before writing.
    let output = zk_lock(&["revoke", &path]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    assert_terminal_safe("revoke", &text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "no forged row:\n{text}");
    assert!(lines[0].starts_with(&format!("{shown_path}: asked 1 holder(s)")), "{text}");
    let node_shown = format!("{shown_path}/{HOSTILE_NODE_SHOWN}{sequence}");
    assert!(lines[2].contains(&format!("  {node_shown}  {HOSTILE_DATA_SHOWN}")), "{text}");

    // Errors quote paths escaped too: a missing one, and one that is no valid path.
    let missing = format!("{path}/\u{202e}missing");
    let output = zk_lock(&["inspect", &missing]).await;
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!("`{shown_path}/\\u{{202e}}missing` does not exist")),
        "{}",
        stderr(&output)
    );
    let output = zk_lock(&["inspect", "/a\x1b]0;pwned\x07"]).await;
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    assert_terminal_safe("a usage error", &stderr(&output));
    assert!(stderr(&output).contains(r"`/a\x1b]0;pwned\x07`"), "{}", stderr(&output));
}

#[tokio::test]
async fn watch_shows_hostile_data_escaped_in_a_terminal_and_in_a_pipe() {
    let path = format!("{ROOT}/hostile-watch/{}", HOSTILE_SEGMENT.0);
    let client = new_client().await;
    plant_hostile_holder(&client, &path).await;
    let session = session_hex(&client);

    // A real terminal: the escapes show as text, the title stays, nothing is cleared or forged.
    let connect = shared_server().connect_string();
    let tmux = Tmux::start("hostile", &["watch", &path, "--connect", &connect, "--interval", "1h"]).await;
    let screen = tmux.wait_for("holder", |screen| screen.contains(&session)).await;
    assert!(screen.contains(r"host=web-1\x1b[2J\x1b[H\x1b]0;pwned\x07\nFORGED\trow"), "{screen}");
    assert!(screen.lines().next().unwrap().contains("Z: refreshed on changes"), "the heading stays:\n{screen}");
    assert!(screen.contains(&format!("{}: mutex, 1 holder", HOSTILE_SEGMENT.1)), "{screen}");
    assert!(!screen.lines().any(|line| line.starts_with("FORGED")), "{screen}");
    assert!(!tmux.pane("#{pane_title}").await.contains("pwned"), "the terminal was retitled");
    assert_eq!(tmux.pane("#{alternate_on}").await, "1");
    tmux.run(&["send-keys", "C-c"]).await;
    let screen = tmux.wait_for("exit", |screen| screen.contains("zk-lock exited with")).await;
    assert!(screen.contains("zk-lock exited with 0"), "{screen}");

    // A pipe: one block, each line safe, the holder's row whole.
    let mut watch = Watching::start(&["watch", &path, "--interval", "200ms"]);
    let block = watch.block_where("holder", |block| block.contains(&session)).await;
    assert_terminal_safe("watch", &block);
    assert_eq!(block.lines().count(), 4, "heading, summary, header, one row:\n{block}");
    assert!(row_of(&block, &session).join(" ").ends_with(HOSTILE_DATA_SHOWN), "{block}");
    assert_eq!(watch.interrupt().await.code(), Some(0));

    // JSON lines: one document a line, nothing raw.
    let mut watch = Watching::start(&["watch", &path, "--interval", "200ms", "--json"]);
    let line = watch.next_line("JSON document").await;
    assert_terminal_safe("watch --json", &line);
    let doc: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(participants(&doc)[0]["data"], HOSTILE_DATA, "{doc}");
    assert_eq!(watch.interrupt().await.code(), Some(0));
}

/// Credentials for the guide's ACL setup, and their password (which must never be printed).
const OWNER: &str = "it-cli-owner:s3cret-cli";
const PASSWORD: &str = "s3cret-cli";

/// A client with the guide's ACL setup: digest credentials, and `creator_all` on every node it
/// creates (the container parents of its lock paths too). [`ROOT`] is made first, open to all,
/// so that the other tests' clients can still create their nodes under it.
async fn owner_client() -> Client {
    let client = Client::builder(shared_server().connect_string())
        .auth("digest", OWNER)
        .acl(&Acls::creator_all())
        .connect()
        .await
        .expect("connect with credentials");
    client.zookeeper().mkdir(ROOT, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    client
}

/// A file holding `content`, with permissions `mode`, removed on drop.
struct AuthFile(PathBuf);

impl AuthFile {
    fn new(name: &str, content: &str, mode: u32) -> AuthFile {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("zk-lock-cli-{}-{name}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        AuthFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for AuthFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Fails if the password shows anywhere in what the command printed.
fn assert_no_password(what: &str, output: &Output) {
    for (stream, text) in [("stdout", stdout(output)), ("stderr", stderr(output))] {
        assert!(!text.contains(PASSWORD), "{what} prints the password on {stream}: {text}");
    }
}

#[tokio::test]
async fn a_lock_behind_an_acl_needs_credentials_from_the_environment_or_a_file() {
    let path = format!("{ROOT}/acl/orders");
    let owner = owner_client().await;
    let guard = Mutex::with_client(&owner, &path).lock().await.unwrap();
    let session = session_hex(&owner);

    // Without credentials: exit code 4, the path named, and how to give credentials.
    let output = zk_lock(&["inspect", &path]).await;
    assert_eq!(code(&output), 4, "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        format!(
            "zk-lock: no permission for `{path}` (ZooKeeper NoAuth): its ACL does not allow this client without \
             credentials; give digest credentials `user:password` in $ZK_LOCK_DIGEST or in a file named by --auth-file\n"
        )
    );
    assert!(output.stdout.is_empty());

    // From the environment: the holder shows.
    let output = zk_lock_with(&["inspect", &path], &[("ZK_LOCK_DIGEST", OWNER)]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(row_of(&stdout(&output), &session)[..3], ["1", "holder", "mutex"], "{}", stdout(&output));
    assert_no_password("inspect with $ZK_LOCK_DIGEST", &output);

    // A wrong password: refused, naming the user and where the credentials came from, not them.
    let output = zk_lock_with(&["inspect", &path], &[("ZK_LOCK_DIGEST", "it-cli-owner:wrong-s3cret")]).await;
    assert_eq!(code(&output), 4, "{}", stderr(&output));
    let expected = format!(
        "zk-lock: no permission for `{path}` (ZooKeeper NoAuth): its ACL does not allow this client with digest user \
         `it-cli-owner` (from $ZK_LOCK_DIGEST); check the user and password"
    );
    assert!(stderr(&output).starts_with(&expected), "{}", stderr(&output));
    assert!(!stderr(&output).contains("wrong-s3cret"), "{}", stderr(&output));

    // From a file only its owner may read: `revoke` writes into the holder's node with them.
    let file = AuthFile::new("owner", &format!("{OWNER}\n"), 0o600);
    let output = zk_lock(&["revoke", &path, "--auth-file", file.path()]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(stdout(&output).contains(guard.node_path()), "{}", stdout(&output));
    assert_no_password("revoke with --auth-file", &output);
    tokio::time::timeout(PATIENCE, guard.revoked()).await.expect("revoked() resolves");
    let output = zk_lock(&["revoke", &path]).await;
    assert_eq!(code(&output), 4, "without credentials, no revocation: {}", stderr(&output));

    // The file wins over the environment.
    let doc =
        zk_lock_with(&["inspect", &path, "--json", "--auth-file", file.path()], &[("ZK_LOCK_DIGEST", "x:y")]).await;
    assert_eq!(code(&doc), 0, "{}", stderr(&doc));
    assert_no_password("inspect --json", &doc);

    // A file other users may read is refused before connecting (port 1: nobody listens).
    let readable = AuthFile::new("readable", OWNER, 0o644);
    let output = zk_lock(&["inspect", &path, "--auth-file", readable.path(), "--connect", "127.0.0.1:1"]).await;
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    let expected = format!(
        "zk-lock: `--auth-file {}`: other users of this machine may read or write it (mode 644)",
        readable.path()
    );
    assert!(stderr(&output).starts_with(&expected), "{}", stderr(&output));
    assert_no_password("a refused file", &output);
    let output = zk_lock_with(&["inspect", &path, "--connect", "127.0.0.1:1"], &[("ZK_LOCK_DIGEST", PASSWORD)]).await;
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    assert!(
        stderr(&output).starts_with("zk-lock: $ZK_LOCK_DIGEST: expected digest credentials `user:password`"),
        "{}",
        stderr(&output)
    );
    assert_no_password("a malformed $ZK_LOCK_DIGEST", &output);
    guard.release().await.unwrap();
}

#[tokio::test]
async fn tree_skips_what_it_may_not_read_reports_it_and_shows_the_rest() {
    let root = format!("{ROOT}/acl-tree");
    let client = new_client().await;
    // Open first, so that `root` is created open to all; then another application's, behind an ACL.
    let open = Mutex::with_client(&client, format!("{root}/open/job")).lock().await.unwrap();
    let owner = owner_client().await;
    let owned = Mutex::with_client(&owner, format!("{root}/owned/job")).lock().await.unwrap();
    let skipped = format!("{root}/owned");

    let output = zk_lock(&["tree", &root]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1..3].iter().map(|l| l.trim()).collect::<Vec<_>>(),
        [format!("{root}/"), "open/".to_owned()],
        "{text}"
    );
    assert_eq!(lines[3].split_whitespace().collect::<Vec<_>>(), ["job", "mutex", "1", "0"], "{text}");
    assert_eq!(lines[4], format!("{skipped}: not readable (no permission), skipped"), "{text}");
    assert_eq!(lines[5], format!("{} lock under {root}; 1 node not readable (no permission)", 1), "{text}");
    assert_eq!(lines.len(), 6, "{text}");
    let warning = stderr(&output);
    assert!(
        warning.starts_with(&format!("zk-lock: 1 node under {root} not readable (no permission), skipped")),
        "{warning}"
    );

    let doc = zk_lock_json(&["tree", &root]).await;
    assert_eq!(doc["locks"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["locks"][0]["path"], format!("{root}/open/job"), "{doc}");
    assert_eq!(doc["unreadable"], serde_json::json!([skipped]), "{doc}");

    // `/` is walked whole: another application's nodes no longer stop it.
    let everything = zk_lock_json(&["tree", "/"]).await;
    let paths = |key: &str| -> Vec<String> {
        let values = everything[key].as_array().unwrap().iter();
        values.map(|v| v.as_str().or(v["path"].as_str()).unwrap().to_owned()).collect()
    };
    assert!(paths("locks").contains(&format!("{root}/open/job")), "{everything}");
    assert!(paths("unreadable").contains(&skipped), "{everything}");

    // With the credentials, both locks and nothing skipped.
    let output = zk_lock_with(&["tree", &root, "--json"], &[("ZK_LOCK_DIGEST", OWNER)]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(stderr(&output).is_empty(), "{}", stderr(&output));
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    let locks: Vec<&str> = doc["locks"].as_array().unwrap().iter().map(|l| l["path"].as_str().unwrap()).collect();
    assert_eq!(locks, [format!("{root}/open/job"), format!("{root}/owned/job")], "{doc}");
    assert_eq!(doc["unreadable"], serde_json::json!([]), "{doc}");

    open.release().await.unwrap();
    owned.release().await.unwrap();
}

/// Issue 34 (4): 80 lock nodes of almost 1 MB each (anyone may create them on an open ensemble)
/// brought the server down: `inspect` read their data in one reply of some 80 MB, the server
/// died serialising it, and the command said it lost the connection (exit 3). Now every output
/// marks those nodes as too large to show, and the server stays up. A server of its own: it may
/// die.
#[tokio::test]
async fn inspect_tree_and_revoke_mark_nodes_whose_data_is_too_large_and_the_server_stays_up() {
    const BIG: usize = 1_000_000;
    let server = TestingServer::start().expect("start a server of our own");
    let connect = server.connect_string();
    let client = Client::builder(connect.as_str()).connect().await.unwrap();
    let path = format!("{ROOT}/big-data");
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    // Persistent nodes named like a Curator mutex's, behind our holder: its waiters.
    let prefix = format!("{path}/_c_0f8e7d6c-1b2a-4c3d-8e9f-0123456789ab-lock-");
    let persistent = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let big = vec![b'x'; BIG];
    for _ in 0..80 {
        client.zookeeper().create(&prefix, &big, &persistent).await.expect("create a node of almost 1 MB");
    }
    let marker = format!("(data too large to show: {BIG} bytes, over 64 KiB; not read)");

    let output = zk_lock(&["inspect", &path, "--connect", &connect]).await;
    let alive = server.four_letter("ruok");
    assert_eq!(alive.as_deref().ok(), Some("imok"), "the server is down ({alive:?}): {}", stderr(&output));
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("{path}: mutex, 1 holder, 80 waiters"), "{text}");
    assert!(lines[2].contains(&format!("pid={}", std::process::id())), "{text}");
    assert_eq!(lines.len(), 2 + 81, "{text}");
    assert!(lines[3..].iter().all(|line| line.ends_with(&marker)), "{text}");

    let doc = zk_lock_json(&["inspect", &path, "--connect", &connect]).await;
    let found = participants(&doc);
    assert_eq!(found.len(), 81, "{doc}");
    assert_eq!((&found[0]["data_too_large"], &found[0]["holder"]["pid"]), (&false.into(), &std::process::id().into()));
    for p in &found[1..] {
        assert_eq!((&p["data_too_large"], &p["data_length"], &p["data"]), (&true.into(), &BIG.into(), &Value::Null));
        assert_eq!((&p["role"], &p["holder"]), (&"waiter".into(), &Value::Null), "{p}");
    }

    let tree = zk_lock_json(&["tree", ROOT, "--connect", &connect]).await;
    let lock = &tree["locks"][0];
    assert_eq!((&lock["path"], &lock["holders"], &lock["waiters"]), (&path.clone().into(), &1.into(), &80.into()));

    // Releasing one such node by force shows it with the same note.
    let node = found[80]["node"].as_str().unwrap();
    let output = zk_lock(&["revoke", "--force", &path, "--node", node, "--connect", &connect]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(stdout(&output).contains(&marker), "{}", stdout(&output));
    assert_eq!(server.four_letter("ruok").ok().as_deref(), Some("imok"));
    guard.release().await.unwrap();
}

/// Creates `depth` persistent nodes named `c`, each below the last, under `base` (which must
/// exist), in multi-operations of at most about 256 KB (a request must stay under the server's
/// 1 MB `jute.maxbuffer`); returns the deepest path.
async fn create_chain(client: &Client, base: &str, depth: usize) -> String {
    let zk = client.zookeeper();
    let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let mut path = base.to_owned();
    let mut left = depth;
    while left > 0 {
        let mut multi = zk.new_multi_writer();
        let mut bytes = 0;
        while left > 0 && bytes < 256 * 1024 {
            path.push_str("/c");
            multi.add_create(&path, b"", &options).unwrap();
            (left, bytes) = (left - 1, bytes + path.len());
        }
        multi.commit().await.expect("create a part of the chain");
    }
    path
}

/// Deletes what [`create_chain`] made below `base`, from `deepest` up, in multi-operations as
/// large.
async fn delete_chain(client: &Client, base: &str, deepest: &str) {
    let zk = client.zookeeper();
    let mut path = deepest.to_owned();
    while path.len() > base.len() {
        let mut multi = zk.new_multi_writer();
        let mut bytes = 0;
        while path.len() > base.len() && bytes < 256 * 1024 {
            multi.add_delete(&path, None).unwrap();
            bytes += path.len();
            path.truncate(path.rfind('/').unwrap());
        }
        multi.commit().await.expect("delete a part of the chain");
    }
}

/// Creates an ephemeral mutex node (`n-lock-` and a sequence number) under `path`, which is
/// made first, with `data`; owned by `client`'s session.
async fn plant_lock_node(client: &Client, path: &str, data: &[u8]) -> String {
    let zk = client.zookeeper();
    zk.mkdir(path, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let (_, sequence) = zk.create(&format!("{path}/n-lock-"), data, &options).await.unwrap();
    format!("{path}/n-lock-{sequence}")
}

/// Why zk-lock refuses `path` as a lock path, in its words.
fn invalid_path_reason(path: &str) -> String {
    match zk_lock::path::validate_lock_path(path) {
        Err(zk_lock::Error::InvalidPath { reason, .. }) => reason,
        other => panic!("{path}: {other:?}"),
    }
}

/// Issue 34 (8): a lock whose path is over the 1,024 bytes of a lock path made `tree` fail
/// whole (exit code 2, nothing on stdout): anyone who could create a node broke `tree /` for
/// everyone. Now the rest is shown and that lock is reported, its path cut.
#[tokio::test]
async fn tree_reports_a_lock_whose_path_is_too_long_and_shows_the_rest() {
    let root = format!("{ROOT}/long-path");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, format!("{root}/ok")).lock().await.unwrap();
    let long = format!("{root}/{}", "x".repeat(1100));
    plant_lock_node(&client, &long, b"").await;

    let output = zk_lock(&["tree", &root]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>(), ["ok", "mutex", "1", "0"], "{text}");
    let reported = lines[3];
    assert!(reported.starts_with(&format!("{root}/xxxx")) && reported.len() < 400, "cut:\n{text}");
    // zk-lock's own words for the rule, which name the path's length.
    let rule = invalid_path_reason(&long);
    assert!(rule.contains(&format!("{} bytes long", long.len())), "{rule}");
    assert!(reported.ends_with(&format!(": lock not shown: {rule}")), "{text}");
    assert_eq!(lines[4], format!("1 lock under {root}; 1 node not shown (path too long)"), "{text}");
    let warning = stderr(&output);
    assert!(warning.starts_with(&format!("zk-lock: 1 node under {root} not shown (path too long)")), "{warning}");
    assert!(warning.contains("listed after the table with the rule each path breaks"), "{warning}");

    let doc = zk_lock_json(&["tree", &root]).await;
    let locks: Vec<&str> = doc["locks"].as_array().unwrap().iter().map(|l| l["path"].as_str().unwrap()).collect();
    assert_eq!(locks, [format!("{root}/ok")], "{doc}");
    let not_shown = &doc["not_shown"][0];
    assert_eq!((&not_shown["path"], &not_shown["path_length"]), (&long.clone().into(), &long.len().into()), "{doc}");
    assert_eq!(not_shown["reason"], format!("lock not shown: {rule}"), "{doc}");

    // `/` too: one node does not break it for everyone.
    let everything = zk_lock_json(&["tree", "/"]).await;
    let all: Vec<&str> = everything["locks"].as_array().unwrap().iter().map(|l| l["path"].as_str().unwrap()).collect();
    assert!(all.contains(&format!("{root}/ok").as_str()), "{all:?}");
    let skipped = everything["not_shown"].as_array().unwrap().iter().map(|n| n["path"].as_str().unwrap());
    assert!(skipped.collect::<Vec<_>>().contains(&long.as_str()), "{everything}");
    guard.release().await.unwrap();
}

/// Issue 34 (8): a chain of thousands of nodes with a lock node at its end cost `tree` seconds of
/// CPU, then failed whole for the lock's path. Now the walk stops where paths grow past what a
/// lock path may be, says so, and shows the rest.
#[tokio::test]
async fn tree_stops_a_deep_chain_where_no_lock_can_be_and_shows_the_rest() {
    let root = format!("{ROOT}/deep-chain");
    let client = new_client().await;
    let guard = Mutex::with_client(&client, format!("{root}/ok")).lock().await.unwrap();
    let base = format!("{root}/chain");
    client.zookeeper().mkdir(&base, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let started = Instant::now();
    let deepest = create_chain(&client, &base, 2000).await;
    let node = plant_lock_node(&client, &deepest, b"").await;
    eprintln!("created a chain of 2000 nodes in {:?}", started.elapsed());
    // The first node of the chain whose path is over 1024 bytes.
    let cut = deepest[..deepest[1025..].find('/').map_or(deepest.len(), |i| 1025 + i)].to_owned();
    assert!(cut.len() > 1024 && cut.len() - 2 <= 1024, "{}", cut.len());

    let started = Instant::now();
    let output = zk_lock(&["tree", &root]).await;
    eprintln!("tree of the chain: {:?}", started.elapsed());
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>(), ["ok", "mutex", "1", "0"], "{text}");
    let rule = invalid_path_reason(&cut);
    assert!(rule.contains(&format!("{} bytes long", cut.len())), "{rule}");
    assert!(lines[3].ends_with(&format!(": not walked, no lock below it can be shown: {rule}")), "{text}");
    assert_eq!(lines[4], format!("1 lock under {root}; 1 node not shown (path too long)"), "{text}");

    let doc = zk_lock_json(&["tree", &root]).await;
    assert_eq!(doc["locks"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["not_shown"][0]["path"], cut, "{doc}");
    assert!(doc["not_shown"][0]["reason"].as_str().unwrap().contains("not walked"), "{doc}");

    client.zookeeper().delete(&node, None).await.unwrap();
    delete_chain(&client, &base, &deepest).await;
    guard.release().await.unwrap();
}

/// Issue 34 (8): `--json` showed a node's data as lossy UTF-8 (`\xff\xfe` became two U+FFFD).
/// Now `"data"` is the text when the data is UTF-8 (else null), and `"data_base64"` the exact
/// bytes, in `inspect`, `watch` and `revoke`.
#[tokio::test]
async fn json_carries_binary_data_exactly_in_base64() {
    let path = format!("{ROOT}/binary-data");
    let client = new_client().await;
    let binary = plant_lock_node(&client, &path, b"\xff\xfe").await;
    let text = plant_lock_node(&client, &path, b"10.0.0.7").await;

    let doc = zk_lock_json(&["inspect", &path]).await;
    let found = participants(&doc);
    assert_eq!((&found[0]["node"], &found[1]["node"]), (&binary.clone().into(), &text.clone().into()), "{doc}");
    assert_eq!((&found[0]["data"], &found[0]["data_base64"]), (&Value::Null, &"//4=".into()), "{doc}");
    assert_eq!((&found[1]["data"], &found[1]["data_base64"]), (&"10.0.0.7".into(), &"MTAuMC4wLjc=".into()), "{doc}");

    let mut watch = Watching::start(&["watch", &path, "--interval", "1h", "--json"]);
    let line = watch.next_line("JSON document").await;
    let doc: Value = serde_json::from_str(&line).unwrap();
    assert_eq!((&participants(&doc)[0]["data"], &participants(&doc)[0]["data_base64"]), (&Value::Null, &"//4=".into()));
    assert_eq!(watch.interrupt().await.code(), Some(0));

    let output = zk_lock(&["revoke", "--force", &path, "--json"]).await;
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((&doc["released"]["node"], &doc["released"]["data_base64"]), (&binary.into(), &"//4=".into()), "{doc}");
}

/// A loopback port that forwards ZooKeeper's traffic to the shared server but answers the
/// four-letter word `dump` as a server whose whitelist lacks it does: sessions work through it,
/// their expiry is unknown. Its threads live as long as the test process.
fn without_dump() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = shared_server().addr();
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || forward_or_refuse_dump(client, server));
        }
    });
    address.to_string()
}

fn forward_or_refuse_dump(mut client: std::net::TcpStream, server: std::net::SocketAddr) -> std::io::Result<()> {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};
    // A session's first 4 bytes are a length, never these letters.
    let mut first = [0; 4];
    client.read_exact(&mut first)?;
    if &first == b"dump" {
        return client.write_all(b"dump is not executed because it is not in the whitelist.\n");
    }
    let mut upstream = TcpStream::connect(server)?;
    upstream.write_all(&first)?;
    let (mut from_client, mut to_server) = (client.try_clone()?, upstream.try_clone()?);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_server);
        let _ = to_server.shutdown(Shutdown::Write);
    });
    std::io::copy(&mut upstream, &mut client)?;
    client.shutdown(Shutdown::Write)
}

/// Issue 34 (11): why the sessions' expiry is unknown, which stderr says once, was printed in
/// every block of `watch`. Now it is said once on stderr, in blocks and in JSON lines alike.
#[tokio::test]
async fn watch_says_once_on_stderr_why_session_expiry_is_unknown() {
    let path = format!("{ROOT}/watch-no-dump");
    let client = new_client().await;
    let session = session_hex(&client);
    let guard = Mutex::with_client(&client, &path).lock().await.unwrap();
    let connect = without_dump();
    for json in [false, true] {
        let log = std::env::temp_dir().join(format!("zk-lock-cli-watch-no-dump-{}-{json}", std::process::id()));
        let mut args = vec!["watch", path.as_str(), "--interval", "200ms"];
        if json {
            args.push("--json");
        }
        let mut watch = Watching::start_with_stderr(&connect, &args, std::fs::File::create(&log).unwrap());
        for _ in 0..3 {
            match json {
                true => {
                    let doc: Value = serde_json::from_str(&watch.next_line("JSON document").await).unwrap();
                    assert!(doc["session_expiry_unknown"].as_str().unwrap().contains("whitelist"), "{doc}");
                }
                false => {
                    let block = watch.block_where("holder", |block| block.contains(&session)).await;
                    assert_eq!(row_of(&block, &session)[4], "-", "{block}");
                    assert!(!block.contains("session expiry unknown"), "said on stderr, not in blocks:\n{block}");
                }
            }
        }
        assert_eq!(watch.interrupt().await.code(), Some(0));
        let errors = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_file(&log);
        assert_eq!(errors.lines().count(), 1, "json: {json}: {errors}");
        let expected = format!("zk-lock: session expiry unknown (EXPIRES-IN: -): {connect}: `dump` is not in its");
        assert!(errors.starts_with(&expected), "json: {json}: {errors}");
    }
    guard.release().await.unwrap();
}
