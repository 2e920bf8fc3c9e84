//! The attributes against a real ZooKeeper: exclusion, fencing, timeouts, rendered paths, loss,
//! re-entry through nested calls, cancellation. Each test installs a client under its own name
//! (`client = "macros-<test>"`) and uses its own lock paths, so the tests run in parallel on the
//! shared server without seeing each other.

use std::future::pending;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use zk_lock::testing::{children, wait_for_children};
use zk_lock::{
    named_client, zk_lock, zk_multi_lock, zk_read_lock, zk_semaphore, zk_write_lock, Error, LostReason, Mutex,
    MutexGuard,
};

use crate::support::{install, new_client, server, PATIENCE};

/// The expansion under `clippy::pedantic` and `unused_qualifications`, with decoy `core` and
/// `std` modules (also a trybuild pass case).
#[path = "../ui/pass/lints-and-decoys.rs"]
mod lints;

/// Bounds a future that should finish, so that a broken lock fails the test instead of hanging it.
async fn bounded<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future).await.unwrap_or_else(|_| panic!("{what} did not finish in {PATIENCE:?}"))
}

#[test]
fn the_lints_case_builds_its_futures() {
    lints::main();
}

// --- exclusion -------------------------------------------------------------------------------

static COUNTER: AtomicU64 = AtomicU64::new(0);
static HOLDERS: AtomicUsize = AtomicUsize::new(0);

#[zk_lock(path = "/it-macros/exclusion/<key>", client = "macros-exclusion")]
async fn increment(key: &str) -> Result<(), Error> {
    assert_eq!(HOLDERS.fetch_add(1, Ordering::SeqCst), 0, "two holders of {key} at once");
    // Read, yield so any other holder could run, then write: a lost update shows in the count.
    let seen = COUNTER.load(Ordering::SeqCst);
    tokio::task::yield_now().await;
    COUNTER.store(seen + 1, Ordering::SeqCst);
    HOLDERS.fetch_sub(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_annotated_function_runs_in_one_task_at_a_time() {
    const TASKS: u64 = 4;
    const CALLS: u64 = 25;
    let client = install("macros-exclusion").await;
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            tokio::spawn(async {
                for _ in 0..CALLS {
                    increment("counter").await.expect("increment");
                }
            })
        })
        .collect();
    for task in tasks {
        bounded("an incrementing task", task).await.expect("task panicked");
    }
    assert_eq!(COUNTER.load(Ordering::SeqCst), TASKS * CALLS);
    wait_for_children(&client, "/it-macros/exclusion/counter", <[String]>::is_empty).await.unwrap();
}

// --- guard, fencing, release ---------------------------------------------------------------------

#[zk_lock(path = "/it-macros/fencing", client = "macros-fencing", guard = g)]
async fn fencing_token() -> Result<(i64, String), Error> {
    assert!(g.is_held());
    Ok((g.fencing_token(), g.node_path().to_owned()))
}

#[tokio::test]
async fn the_guard_gives_a_growing_fencing_token_and_the_delete_is_sent_before_return() {
    let client = install("macros-fencing").await;
    let mut last = 0;
    for _ in 0..3 {
        let (token, node) = fencing_token().await.unwrap();
        assert!(token > last, "token {token} after {last}");
        assert!(node.starts_with("/it-macros/fencing/_c_"), "{node}");
        last = token;
        // Requests of one session are answered in order: the delete was sent before the
        // function returned, so this listing, sent after, no longer shows the node.
        assert_eq!(children(&client, "/it-macros/fencing").await.unwrap(), Vec::<String>::new());
    }
}

// --- timeout ---------------------------------------------------------------------------------

#[zk_lock(path = "/it-macros/busy/<job>", client = "macros-busy", timeout = "0s")]
async fn skip_if_busy(job: &str) -> Result<&str, Error> {
    Ok(job)
}

#[zk_lock(path = "/it-macros/busy/<job>", client = "macros-busy", timeout = "300ms")]
async fn wait_a_little(job: &str) -> Result<&str, Error> {
    Ok(job)
}

#[tokio::test]
async fn zero_timeout_returns_busy_while_another_holds_and_a_timeout_gives_up() {
    let client = install("macros-busy").await;
    let path = "/it-macros/busy/nightly";
    let other = new_client().await;
    let holder = Mutex::with_client(&other, path).lock().await.unwrap();

    assert_eq!(skip_if_busy("nightly").await, Err(Error::Busy { path: path.to_owned() }));
    match wait_a_little("nightly").await {
        Err(Error::Timeout { path: p, waited, .. }) => {
            assert_eq!(p, path);
            assert!(waited >= Duration::from_millis(300), "{waited:?}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(children(&client, path).await.unwrap().len(), 1, "only the holder's node is left");

    holder.release().await.unwrap();
    assert_eq!(skip_if_busy("nightly").await, Ok("nightly"));
}

// --- rendered values -------------------------------------------------------------------------

#[zk_lock(path = "/it-macros/invalid/<name>", client = "macros-invalid")]
async fn by_name(name: &str) -> Result<(), Error> {
    unreachable!("the body of {name} must not run")
}

#[tokio::test]
async fn a_value_that_would_change_the_path_is_invalid_and_creates_nothing() {
    let client = install("macros-invalid").await;
    for value in ["a/b", "..", ".", "", "tab\there"] {
        match by_name(value).await {
            Err(Error::InvalidPath { path, reason }) => {
                assert_eq!(path, format!("/it-macros/invalid/{value}"));
                assert!(reason.contains("`<name>`"), "{reason}");
            }
            other => panic!("{value:?}: expected InvalidPath, got {other:?}"),
        }
    }
    let created = client.zookeeper().check_stat("/it-macros/invalid").await.unwrap();
    assert!(created.is_none(), "nothing was created");
}

// --- loss --------------------------------------------------------------------------------------

#[zk_lock(path = "/it-macros/lost/abort", client = "macros-lost-abort")]
async fn work_forever(started: Arc<Notify>, dropped: Arc<()>) -> Result<(), Error> {
    let _witness = dropped;
    started.notify_one();
    pending().await
}

#[tokio::test]
async fn a_lost_lock_aborts_the_body_and_returns_lost() {
    let client = install("macros-lost-abort").await;
    let (started, witness) = (Arc::new(Notify::new()), Arc::new(()));
    let call = tokio::spawn(work_forever(started.clone(), witness.clone()));
    bounded("the body's start", started.notified()).await;

    server().expire_session(&client).await.expect("expire the session");
    let outcome = bounded("the aborted call", call).await.unwrap();
    // The server deletes the session's nodes as it closes it, so the node watch may report the
    // deletion before the client learns of the expiry.
    match outcome {
        Err(Error::Lost { path, reason: LostReason::SessionExpired | LostReason::NodeDeleted }) => {
            assert_eq!(path, "/it-macros/lost/abort");
        }
        other => panic!("expected the lock to be reported lost, got {other:?}"),
    }
    assert_eq!(Arc::strong_count(&witness), 1, "the body was dropped");
}

#[zk_lock(path = "/it-macros/lost/ignore", client = "macros-lost-ignore", on_lost = "ignore", guard = g)]
async fn finish_anyway(started: Arc<Notify>) -> Result<String, Error> {
    started.notify_one();
    let reason = g.lost().await;
    // Still running after the loss: this is what `on_lost = "ignore"` allows.
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(format!("finished after: {reason}"))
}

#[tokio::test]
async fn on_lost_ignore_lets_the_body_finish() {
    let client = install("macros-lost-ignore").await;
    let path = "/it-macros/lost/ignore";
    let started = Arc::new(Notify::new());
    let call = tokio::spawn(finish_anyway(started.clone()));
    bounded("the body's start", started.notified()).await;
    let nodes = children(&client, path).await.unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    // Someone else deletes the lock node.
    let other = new_client().await;
    other.zookeeper().delete(&format!("{path}/{}", nodes[0]), None).await.unwrap();

    let outcome = bounded("the ignoring call", call).await.unwrap();
    assert_eq!(outcome, Ok(format!("finished after: {}", LostReason::NodeDeleted)));
}

// --- re-entry through nested annotated calls ----------------------------------------------------

#[zk_lock(path = "/it-macros/reentry/<id>", client = "macros-reentry", guard = g)]
async fn outer(id: u64) -> Result<(i64, i64, usize), Error> {
    let (inner_token, nodes) = inner(id).await?;
    Ok((g.fencing_token(), inner_token, nodes))
}

#[zk_lock(path = "/it-macros/reentry/<id>", client = "macros-reentry", timeout = "2s", guard = g)]
async fn inner(id: u64) -> Result<(i64, usize), Error> {
    let nodes = children(&named_client("macros-reentry")?, &format!("/it-macros/reentry/{id}")).await.unwrap().len();
    Ok((g.fencing_token(), nodes))
}

#[zk_write_lock(path = "/it-macros/reentry-rw/<id>", client = "macros-reentry")]
async fn write_then_read(id: u64) -> Result<u64, Error> {
    read_inside(id).await
}

#[zk_read_lock(path = "/it-macros/reentry-rw/<id>", client = "macros-reentry", timeout = "2s")]
async fn read_inside(id: u64) -> Result<u64, Error> {
    Ok(id)
}

#[zk_read_lock(path = "/it-macros/reentry-rw/<id>", client = "macros-reentry")]
async fn read_then_write(id: u64) -> Result<u64, Error> {
    write_inside(id).await
}

#[zk_write_lock(path = "/it-macros/reentry-rw/<id>", client = "macros-reentry", timeout = "2s")]
async fn write_inside(id: u64) -> Result<u64, Error> {
    Ok(id)
}

#[tokio::test]
async fn nested_annotated_calls_on_the_same_path_re_enter() {
    let client = install("macros-reentry").await;
    let (outer_token, inner_token, nodes) = bounded("nested calls", outer(7)).await.unwrap();
    assert_eq!(outer_token, inner_token, "the inner call holds the outer call's node");
    assert_eq!(nodes, 1, "re-entry creates no node");
    assert!(children(&client, "/it-macros/reentry/7").await.unwrap().is_empty());

    assert_eq!(bounded("write, then read inside", write_then_read(8)).await, Ok(8), "a writer may read");
    match bounded("read, then write inside", read_then_write(9)).await {
        Err(Error::WouldDeadlock { path, .. }) => assert_eq!(path, "/it-macros/reentry-rw/9"),
        other => panic!("a reader asking for the write lock must be refused at once, got {other:?}"),
    }
    assert!(children(&client, "/it-macros/reentry-rw/9").await.unwrap().is_empty());
}

// --- semaphores ---------------------------------------------------------------------------------

static RUNNING: AtomicUsize = AtomicUsize::new(0);
static MOST_RUNNING: AtomicUsize = AtomicUsize::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);

#[zk_semaphore(path = "/it-macros/semaphore/transcode", permits = 2, client = "macros-semaphore", guard = permit)]
async fn transcode() -> Result<(), Error> {
    assert!(permit.node_path().starts_with("/it-macros/semaphore/transcode/leases/"), "{}", permit.node_path());
    let running = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
    MOST_RUNNING.fetch_max(running, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(5)).await;
    RUNNING.fetch_sub(1, Ordering::SeqCst);
    DONE.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[zk_semaphore(path = "/it-macros/semaphore/<job>", client = "macros-semaphore")]
async fn one_at_a_time(job: &str) -> Result<(), Error> {
    let _ = job;
    Ok(())
}

#[zk_semaphore(path = "/it-macros/semaphore/<job>", client = "macros-semaphore")]
async fn nested_one_at_a_time(job: &str) -> Result<(), Error> {
    one_at_a_time(job).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_admits_its_permits_and_a_nested_single_permit_is_refused() {
    const TASKS: u64 = 4;
    const CALLS: u64 = 3;
    install("macros-semaphore").await;
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            tokio::spawn(async {
                for _ in 0..CALLS {
                    transcode().await.expect("transcode");
                }
            })
        })
        .collect();
    for task in tasks {
        bounded("a transcoding task", task).await.unwrap();
    }
    assert_eq!(DONE.load(Ordering::SeqCst), TASKS * CALLS);
    let most = MOST_RUNNING.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "{most} ran at once with 2 permits");

    assert_eq!(one_at_a_time("flat").await, Ok(()));
    match bounded("a nested semaphore call", nested_one_at_a_time("nested")).await {
        Err(Error::WouldDeadlock { path, .. }) => assert_eq!(path, "/it-macros/semaphore/nested"),
        other => panic!("a nested call on a one-permit semaphore must be refused at once, got {other:?}"),
    }
}

// --- methods and patterns ----------------------------------------------------------------------

struct Shard {
    shard: u32,
}

impl Shard {
    #[zk_lock(path = "/it-macros/shards/<self.shard>", client = "macros-shapes", guard = g)]
    async fn node(&self) -> Result<String, Error> {
        Ok(format!("{} for shard {}", g.node_path(), self.shard))
    }
}

/// An axum-style extractor.
struct Path<T>(T);

#[zk_lock(path = "/it-macros/orders/<id>", client = "macros-shapes", guard = g)]
async fn order(Path(id): Path<u64>) -> Result<String, Error> {
    Ok(format!("{} for order {id}", g.node_path()))
}

#[tokio::test]
async fn methods_and_pattern_parameters_render_their_paths() {
    install("macros-shapes").await;
    let node = Shard { shard: 3 }.node().await.unwrap();
    assert!(node.starts_with("/it-macros/shards/3/_c_") && node.ends_with(" for shard 3"), "{node}");
    let node = order(Path(42)).await.unwrap();
    assert!(node.starts_with("/it-macros/orders/42/_c_") && node.ends_with(" for order 42"), "{node}");
}

#[zk_multi_lock(paths = ["/it-macros/accounts/<from>", "/it-macros/accounts/<to>"], client = "macros-multi", guard = g)]
async fn transfer(from: u32, to: u32) -> Result<Vec<String>, Error> {
    tokio::task::yield_now().await;
    Ok(g.node_paths().iter().map(|node| node.rsplit_once('/').map_or("", |(parent, _)| parent).to_owned()).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_lock_paths_are_sorted_so_opposite_transfers_never_deadlock() {
    install("macros-multi").await;
    let locked = transfer(2, 1).await.unwrap();
    assert_eq!(locked, ["/it-macros/accounts/1", "/it-macros/accounts/2"]);
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            tokio::spawn(async move {
                for _ in 0..5 {
                    if i % 2 == 0 { transfer(1, 2).await } else { transfer(2, 1).await }.expect("transfer");
                }
            })
        })
        .collect();
    for task in tasks {
        bounded("opposite transfers", task).await.unwrap();
    }
}

// --- cancellation and panics -------------------------------------------------------------------

#[zk_lock(path = "/it-macros/cancel/<what>", client = "macros-cancel")]
async fn hold_until_dropped(what: &str) -> Result<(), Error> {
    let _ = what;
    pending().await
}

#[zk_lock(path = "/it-macros/cancel/<what>", client = "macros-cancel")]
async fn panic_while_holding(what: &str) -> Result<(), Error> {
    tokio::task::yield_now().await;
    panic!("the body of {what} panics")
}

#[tokio::test]
async fn a_cancelled_or_panicking_call_releases_its_lock() {
    let client = install("macros-cancel").await;
    let call = tokio::spawn(hold_until_dropped("dropped"));
    wait_for_children(&client, "/it-macros/cancel/dropped", |c| c.len() == 1).await.unwrap();
    call.abort();
    wait_for_children(&client, "/it-macros/cancel/dropped", <[String]>::is_empty).await.unwrap();

    let panicked = tokio::spawn(panic_while_holding("panicked")).await;
    assert!(panicked.unwrap_err().is_panic());
    wait_for_children(&client, "/it-macros/cancel/panicked", <[String]>::is_empty).await.unwrap();
    let guard: MutexGuard = Mutex::with_client(&client, "/it-macros/cancel/panicked").try_lock().await.unwrap();
    guard.release().await.unwrap();
}
