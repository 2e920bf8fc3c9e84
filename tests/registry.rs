//! The client registry and connection errors. The registry is process-wide, so this binary
//! keeps everything that touches the default client in one test.
//!
//! A binary of its own: its first test sets `ZK_LOCK_CONNECT` in the process environment and
//! depends on no default client being installed before it (the `recipes` binary installs one).

use std::time::{Duration, Instant};

use zk_lock::testing::{children, shared_server as server};
use zk_lock::{Client, Error, Mutex};

/// A new client (its own session) of the shared server.
async fn new_client() -> Client {
    Client::builder(server().connect_string()).connect().await.expect("connect to the test server")
}

#[tokio::test]
async fn the_default_client_comes_from_the_environment_then_from_connect() {
    // Before anything is installed, the default client follows ZK_LOCK_CONNECT. This is the
    // only test of this binary that reads or writes the environment.
    std::env::set_var(zk_lock::config::CONNECT_ENV, server().connect_string());
    let lazy = zk_lock::default_client().await.expect("lazy default");
    assert_eq!(lazy.connect_string(), server().connect_string());
    let guard = Mutex::new("/it-registry/lazy").lock().await.expect("lock through the default client");
    assert!(guard.is_held());
    guard.release().await.unwrap();

    // `connect` replaces the default; a guard of the old default keeps its lock meanwhile.
    let held_by_old = Mutex::new("/it-registry/old").lock().await.unwrap();
    let installed = zk_lock::connect(&server().connect_string()).await.expect("connect");
    assert_ne!(
        installed.zookeeper().session_id(),
        lazy.zookeeper().session_id(),
        "connect installs a new client with its own session"
    );
    let current = zk_lock::default_client().await.unwrap();
    assert_eq!(current.zookeeper().session_id(), installed.zookeeper().session_id());
    assert!(held_by_old.is_held());
    held_by_old.release().await.expect("the replaced client still serves its guard");
}

#[tokio::test]
async fn named_clients_are_found_by_name_and_unknown_names_are_explained() {
    let named = Client::builder(server().connect_string()).install_as("it-registry-orders").await.unwrap();
    let found = zk_lock::named_client("it-registry-orders").unwrap();
    assert_eq!(found.zookeeper().session_id(), named.zookeeper().session_id());

    let error = zk_lock::named_client("it-registry-missing").unwrap_err();
    assert!(
        matches!(&error, Error::UnknownClient { name, installed } if name == "it-registry-missing" && installed.contains("it-registry-orders"))
    );
    assert!(error.to_string().contains("install_as"), "{error}");
}

#[tokio::test]
async fn a_namespace_puts_locks_under_its_node_and_is_created_on_demand() {
    let spaced = Client::builder(server().connect_string()).namespace("/it-registry-ns/app").connect().await.unwrap();
    let guard = Mutex::with_client(&spaced, "/orders").lock().await.unwrap();
    assert_eq!(guard.node_path().split('/').nth(1), Some("orders"), "paths are relative to the namespace");
    let plain = new_client().await;
    assert_eq!(children(&plain, "/it-registry-ns/app/orders").await.unwrap().len(), 1);
    guard.release().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_server_fails_within_the_connect_timeout() {
    // Port 1 on loopback: nothing listens there, the connection is refused every time.
    let started = Instant::now();
    let result = Client::builder("127.0.0.1:1").connect_timeout(Duration::from_secs(2)).connect().await;
    let waited = started.elapsed();
    match result {
        Err(Error::Connect { connect_string, reason }) => {
            assert_eq!(connect_string, "127.0.0.1:1");
            assert!(reason.contains("server running"), "{reason}");
            assert!(reason.contains("connection refused at 127.0.0.1:1"), "{reason}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    assert!(waited < Duration::from_secs(5), "took {waited:?}");
}

#[tokio::test]
async fn malformed_connect_strings_are_refused_with_the_expected_form() {
    for bad in ["", "127.0.0.1:notaport", "127.0.0.1:99999"] {
        match Client::builder(bad).connect_timeout(Duration::from_secs(2)).connect().await {
            Err(Error::Connect { connect_string, reason }) => {
                assert_eq!(connect_string, bad);
                assert!(reason.contains("malformed") && reason.contains("host:port"), "{bad:?}: {reason}");
            }
            other => panic!("{bad:?}: expected Error::Connect, got {other:?}"),
        }
    }
    let error = Client::builder("127.0.0.1:2181").namespace("relative").connect().await.unwrap_err();
    assert!(matches!(error, Error::InvalidPath { path, .. } if path == "relative"));
}
