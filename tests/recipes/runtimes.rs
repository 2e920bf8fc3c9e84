//! A session's I/O runs on the runtime that opened it, one session per runtime that acquires
//! through a client: what happens when runtimes end while a client lives on. Each test builds
//! its runtimes itself, on threads of its own, and ends them.

use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Runtime};
use zk_lock::{Client, LostReason, Mutex};

use crate::support::{server, PATIENCE};

const PATH: &str = "/it-runtimes";

fn runtime() -> Runtime {
    Builder::new_current_thread().enable_all().build().expect("a runtime")
}

fn connect(runtime: &Runtime) -> Client {
    runtime.block_on(Client::builder(server().connect_string()).connect()).expect("connect")
}

/// The runtime that opened a client's first session ends; the client is used on another one,
/// which gets a session of its own.
#[test]
fn a_client_outlives_the_runtime_that_opened_its_session() {
    let path = format!("{PATH}/outlives");
    let first = runtime();
    let client = connect(&first);
    first.block_on(async { Mutex::with_client(&client, &path).lock().await?.release().await }).unwrap();
    drop(first);

    let second = runtime();
    second
        .block_on(async {
            let guard = Mutex::with_client(&client, &path).lock_timeout(PATIENCE).await?;
            assert!(guard.is_held());
            guard.release().await
        })
        .expect("the client works on a later runtime");
}

/// A lock held by a task of a runtime that shuts down: its delete is never sent from there, and
/// the session is closed from zk-lock's own runtime, so another client is granted at once, not
/// after the session timeout.
#[test]
fn a_runtime_that_ends_holding_a_lock_frees_it_at_once() {
    let path = format!("{PATH}/ends-holding");
    let session_timeout = Duration::from_secs(20);
    let holder_runtime = runtime();
    let holder = holder_runtime
        .block_on(Client::builder(server().connect_string()).session_timeout(session_timeout).connect())
        .unwrap();
    let mutex = Mutex::with_client(&holder, &path);
    let guard = holder_runtime.block_on(mutex.lock()).unwrap();
    // A task that keeps the guard until its runtime drops it.
    holder_runtime.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await
    });
    let other_runtime = runtime();
    let other = connect(&other_runtime);
    let shut_down_at = Instant::now();
    drop(holder_runtime);
    other_runtime.block_on(async {
        let guard = Mutex::with_client(&other, &path).lock_timeout(PATIENCE).await.expect("granted");
        let waited = shut_down_at.elapsed();
        assert!(waited < session_timeout / 4, "granted {waited:?} after the holder's runtime ended");
        guard.release().await.unwrap();
    });
}

/// Two runtimes acquire through one client, each on its own session: the end of the runtime that
/// opened the client's first session takes nothing from the other.
#[test]
fn the_end_of_one_runtime_leaves_another_runtimes_locks_held() {
    let path = format!("{PATH}/two-runtimes");
    let first = runtime();
    let client = connect(&first);
    first
        .block_on(async { Mutex::with_client(&client, format!("{path}-first")).lock().await?.release().await })
        .unwrap();

    let second = runtime();
    let guard = second.block_on(Mutex::with_client(&client, &path).lock()).unwrap();
    drop(first);
    second.block_on(async {
        // Another acquisition on this runtime finds its session usable: the first runtime's end
        // did not close it.
        let again = Mutex::with_client(&client, format!("{path}-again")).lock().await.unwrap();
        again.release().await.unwrap();
        assert!(guard.is_held());
        guard.release().await.expect("still ours");
    });
}

/// A guard moved to another runtime outlives the runtime whose session it was granted on: that
/// session is closed when its runtime ends, and the guard is told.
#[test]
fn a_guard_moved_off_a_runtime_that_ends_is_told_of_its_loss() {
    let path = format!("{PATH}/moved");
    let first = runtime();
    let client = connect(&first);
    let guard = first.block_on(Mutex::with_client(&client, &path).lock()).unwrap();
    let lost = guard.lost();
    let second = runtime();
    drop(first);
    let reason = second.block_on(async { tokio::time::timeout(PATIENCE, lost).await }).expect("lost() resolves");
    assert_eq!(reason, LostReason::SessionClosed);
    assert!(!guard.is_held());
    let other = connect(&second);
    second.block_on(async {
        let next = Mutex::with_client(&other, &path).lock_timeout(PATIENCE).await.expect("granted");
        next.release().await.unwrap();
    });
}
