//! No panic crosses from zk-lock's threads, whatever the order in which runtimes, sessions and
//! guards end (issue 34): a panic there prints in users' test suites, and aborts a service built
//! with `panic = "abort"`.
//!
//! A binary of its own: it installs a panic hook that counts every panic of the process, which
//! the other tests' failures would disturb.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};
use zk_lock::testing::{shared_server, wait_for_children};
use zk_lock::{Client, Mutex};

/// Panics seen anywhere in the process since it started.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// One test at a time, so that a test counts only its own panics.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn count_panics() {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

fn runtime() -> Runtime {
    Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// A client of the shared server, its session's I/O on `runtime`.
fn connect_on(runtime: &Runtime) -> Client {
    runtime.block_on(Client::builder(shared_server().connect_string()).connect()).expect("connect")
}

/// Runs `test`, one test at a time, with a lock path of its own (`/it-no-panics/<name>-...`) and
/// an [`Observer`], and asserts that no panic happened anywhere in the process meanwhile.
fn without_panics(name: &str, test: impl FnOnce(&str, &Arc<Observer>)) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    count_panics();
    let before = PANICS.load(Ordering::SeqCst);
    let path = format!("/it-no-panics/{name}-{}", fastrand::u64(..));
    let observer = Arc::new(Observer::new());
    test(&path, &observer);
    assert_eq!(PANICS.load(Ordering::SeqCst), before, "a panic happened (its message is printed above)");
}

/// A client that watches the lock from a runtime of its own, whose worker runs its session's I/O
/// whatever the test's threads do.
struct Observer {
    runtime: Runtime,
    client: Client,
}

impl Observer {
    fn new() -> Self {
        let runtime = Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
        let client = connect_on(&runtime);
        Self { runtime, client }
    }

    /// Waits until the lock at `path` has `nodes` nodes.
    fn until_nodes(&self, path: &str, nodes: usize) {
        let client = self.client.clone();
        let path = path.to_owned();
        let waited = self.runtime.spawn(async move { wait_for_children(&client, &path, |c| c.len() == nodes).await });
        self.runtime.block_on(waited).expect("the watching task").expect("the lock's nodes");
    }
}

/// Two threads, each with a runtime of its own, take the same lock once through one client (the
/// second waits behind the first, a node of the same process, and is granted by the local
/// hand-off), and end their runtimes.
#[test]
fn two_runtimes_that_take_a_lock_once_and_end_cause_no_panic() {
    without_panics("two-runtimes", |path, observer| {
        let client = connect_on(&observer.runtime);
        let first_holds = Arc::new(Barrier::new(2));

        let first = {
            let (client, path, observer) = (client.clone(), path.to_owned(), observer.clone());
            let first_holds = first_holds.clone();
            std::thread::spawn(move || {
                let runtime = runtime();
                let guard = runtime.block_on(Mutex::with_client(&client, &path).lock()).expect("the first takes it");
                first_holds.wait();
                observer.until_nodes(&path, 2);
                runtime.block_on(guard.release()).expect("the first releases");
            })
        };
        let second = {
            let (client, path) = (client.clone(), path.to_owned());
            std::thread::spawn(move || {
                let runtime = runtime();
                first_holds.wait();
                let guard = runtime.block_on(Mutex::with_client(&client, &path).lock()).expect("the second is granted");
                // Dropped, not released: its delete is sent, and the runtime ends before its reply.
                drop(guard);
            })
        };
        first.join().expect("the first thread");
        second.join().expect("the second thread");
        // The sessions of the runtimes that ended were closed from zk-lock's own runtime, which
        // therefore ran after they ended.
        observer.until_nodes(path, 0);
    });
}

/// One runtime with a holder and a waiter of the same process is dropped while the waiter waits.
#[test]
fn a_runtime_dropped_with_a_holder_and_a_waiter_of_the_same_process_causes_no_panic() {
    without_panics("holder-and-waiter", |path, observer| {
        let runtime = runtime();
        let client = connect_on(&runtime);
        let guard = runtime.block_on(Mutex::with_client(&client, path).lock()).expect("the holder");
        let waiter = {
            let (client, path) = (client.clone(), path.to_owned());
            runtime.spawn(async move { Mutex::with_client(&client, &path).lock().await })
        };
        // Behind a node of this process, the waiter watches its own node: wait for that watch.
        runtime.block_on(async {
            let nodes = wait_for_children(&client, path, |nodes| nodes.len() == 2).await.expect("the waiter queues");
            let waiting = nodes.iter().map(|name| format!("{path}/{name}")).find(|node| node != guard.node_path());
            let waiting = waiting.expect("the waiter's node");
            let since = std::time::Instant::now();
            while !shared_server().four_letter("wchp").expect("wchp").lines().any(|line| line.trim() == waiting) {
                assert!(since.elapsed() < Duration::from_secs(30), "the waiter never watched `{waiting}`");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        // The guard is dropped once the runtime is gone: outside any runtime.
        drop(runtime);
        drop(waiter);
        drop(guard);
        observer.until_nodes(path, 0);
    });
}

/// A shared count started on a runtime that then ends: its follower was polled on zk-lock's own
/// thread after its session's I/O ended, and zookeeper-client panicked there (issue 34). Now it
/// follows on the runtime of that I/O, and the next call from another runtime follows the count
/// again: a change made elsewhere reaches it.
#[test]
fn a_shared_count_whose_runtime_ended_causes_no_panic_and_is_followed_again() {
    without_panics("shared-count", |path, observer| {
        let first = runtime();
        let client = connect_on(&first);
        let count = zk_lock::SharedCount::with_client(&client, path, 3);
        first.block_on(count.start()).expect("started");
        drop(first);

        let second = runtime();
        let read = second.block_on(count.read()).expect("read from another runtime");
        assert_eq!(read.value, 3);
        let elsewhere = zk_lock::SharedCount::with_client(&observer.client, path, 3);
        observer.runtime.block_on(elsewhere.set(7)).expect("set by another client");
        let mut changes = count.subscribe();
        let seen = second.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), changes.wait_for(|count| count.value == 7)).await.map(|_| ())
        });
        assert!(seen.is_ok(), "the change made elsewhere never reached the count (it shows {})", count.get());
    });
}
