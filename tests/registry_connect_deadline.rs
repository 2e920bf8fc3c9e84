//! An annotated call's `timeout` is its whole deadline, connecting the registry's default client
//! included (issue 34, point 9): with no server where `ZK_LOCK_CONNECT` points, a call with
//! `timeout = "1s"` fails after about a second, saying it was still connecting and to which
//! servers, not after the client's 15 s connect timeout. So does the API's `lock_timeout` (and
//! every recipe's `_timeout`). A binary of its own, because it sets the process environment and
//! the default client is process-wide.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use zk_lock::config::CONNECT_ENV;
use zk_lock::{zk_lock, Error};

/// The call's timeout.
const TIMEOUT: Duration = Duration::from_secs(1);
/// Generous room above the timeout for a loaded machine; far below the 15 s connect timeout.
const BOUND: Duration = Duration::from_secs(3);

#[zk_lock(path = "/shop/product_<id>", timeout = "1s")]
async fn update_product(id: u32) -> Result<u32, Error> {
    Ok(id)
}

/// Calls [`update_product`] with the default client pointed at `connect_string`; asserts it
/// fails within [`BOUND`] with an error that says it was connecting there when the call's
/// timeout ran out.
async fn assert_bounded_by_the_timeout(connect_string: &str) {
    assert_call_bounded(connect_string, "/shop/product_1", update_product(1)).await;
}

/// As [`assert_bounded_by_the_timeout`], for `call`, an acquisition of the lock at `path` with a
/// timeout of [`TIMEOUT`].
async fn assert_call_bounded<T: std::fmt::Debug>(
    connect_string: &str,
    path: &str,
    call: impl std::future::Future<Output = Result<T, Error>>,
) {
    std::env::set_var(CONNECT_ENV, connect_string);
    let started = Instant::now();
    let outcome = call.await;
    let took = started.elapsed();
    match &outcome {
        Err(error @ Error::Connect { connect_string: tried, reason }) => {
            assert_eq!(tried, connect_string);
            assert!(reason.contains("connecting"), "{error}");
            assert!(reason.contains("the call's timeout of 1s"), "{error}");
            assert!(reason.contains(&format!("`{path}`")), "{error}");
            assert!(reason.contains("connects to $ZK_LOCK_CONNECT"), "{error}");
            eprintln!("{error}");
        }
        other => panic!("{connect_string}, {path}: expected Error::Connect, got {other:?}"),
    }
    assert!(took >= TIMEOUT - Duration::from_millis(250), "{connect_string}: gave up early, after {took:?}");
    assert!(took < BOUND, "{connect_string}: the 1s timeout did not bound connecting: took {took:?}");
}

#[tokio::test]
async fn a_calls_timeout_bounds_connecting_the_default_client() {
    // A closed port: every dial is refused at once, and retried until the deadline.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    assert_bounded_by_the_timeout(&closed.to_string()).await;

    // A port that accepts connections (the kernel's backlog) and never answers: the session
    // handshake is what the deadline cuts short.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    assert_bounded_by_the_timeout(&silent.local_addr().unwrap().to_string()).await;

    // The API's timeouts count connecting the default client too (they took the 15 s connect
    // timeout before). In this test, not one of its own: the environment is the process's.
    let closed = closed.to_string();
    let mutex = zk_lock::Mutex::new("/shop/api_mutex");
    assert_call_bounded(&closed, "/shop/api_mutex", mutex.lock_timeout(TIMEOUT)).await;
    let lock = zk_lock::RwLock::new("/shop/api_rw");
    assert_call_bounded(&closed, "/shop/api_rw", lock.write_timeout(TIMEOUT)).await;
    let semaphore = zk_lock::Semaphore::new("/shop/api_pool", 2);
    assert_call_bounded(&closed, "/shop/api_pool", semaphore.acquire_timeout(TIMEOUT)).await;
}
