//! The registry used before anything is configured: no client installed, `ZK_LOCK_CONNECT`
//! unset, nothing on 127.0.0.1:2181. A binary of its own with a single test, because it changes
//! the process environment.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use zk_lock::config::{CONNECT_ENV, DEFAULT_CONNECT_STRING, DEFAULT_CONNECT_TIMEOUT};
use zk_lock::testing::TestingServer;
use zk_lock::{Error, Mutex, Semaphore, SemaphoreMutex};

/// Slack on top of the connect timeout for a loaded machine.
const SLACK: Duration = Duration::from_secs(5);

fn default_port_is_free() -> bool {
    let default = SocketAddr::from((Ipv4Addr::LOCALHOST, 2181));
    TcpStream::connect_timeout(&default, Duration::from_secs(1)).is_err()
}

#[tokio::test]
async fn an_unconfigured_default_client_says_how_to_configure_it_in_bounded_time() {
    std::env::remove_var(CONNECT_ENV);

    // A bad path is refused before the default client would have to connect, whatever its fault.
    let started = Instant::now();
    for path in ["", "relative", "/it-unconfigured//orders", "/it-unconfigured/nul\0", "/it-unconfigured/orders/"] {
        let bad = Mutex::new(path).try_lock().await;
        assert!(matches!(&bad, Err(Error::InvalidPath { path: p, .. }) if p == path), "{path:?}: {bad:?}");
    }
    // So is a semaphore that could never grant a lease, and a bad semaphore mutex path.
    let none = Semaphore::new("/it-unconfigured/slots", 0).acquire().await;
    assert!(matches!(none, Err(Error::InvalidArgument { .. })), "{none:?}");
    let too_many = Semaphore::new("/it-unconfigured/slots", 2).acquire_many(3).await;
    assert!(matches!(too_many, Err(Error::InvalidArgument { .. })), "{too_many:?}");
    let bad = SemaphoreMutex::new("/it-unconfigured//job").try_lock().await;
    assert!(matches!(bad, Err(Error::InvalidPath { .. })), "{bad:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "no connection was tried");

    if default_port_is_free() {
        let started = Instant::now();
        let outcome = Mutex::new("/it-unconfigured/orders").lock().await;
        let waited = started.elapsed();
        match outcome {
            Err(error @ Error::Connect { .. }) => {
                let Error::Connect { connect_string, reason } = &error else { unreachable!() };
                assert_eq!(connect_string, DEFAULT_CONNECT_STRING);
                assert!(reason.contains("the fallback for an unset $ZK_LOCK_CONNECT"), "{reason}");
                assert!(reason.contains("set ZK_LOCK_CONNECT to `host:port"), "{reason}");
                assert!(reason.contains("zk_lock::connect(..)"), "{reason}");
                eprintln!("{error}");
            }
            other => panic!("expected Error::Connect, got {other:?}"),
        }
        assert!(waited < DEFAULT_CONNECT_TIMEOUT + SLACK, "took {waited:?}");
    } else {
        eprintln!("something listens on 127.0.0.1:2181: the unset-variable case cannot be tested here");
    }

    // The variable is read on every attempt until a client is installed.
    std::env::set_var(CONNECT_ENV, "zk1.internal:notaport");
    let started = Instant::now();
    match zk_lock::default_client().await {
        Err(Error::Connect { connect_string, reason }) => {
            assert_eq!(connect_string, "zk1.internal:notaport");
            assert!(reason.contains("malformed connect string"), "{reason}");
            assert!(reason.contains("connects to $ZK_LOCK_CONNECT"), "{reason}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(1), "a malformed string fails at once");

    // A client connected with the builder is not the default; the default's failure says so.
    let server = TestingServer::start().expect("a ZooKeeper server");
    let built = zk_lock::Client::builder(server.connect_string()).connect().await.expect("connects");
    match zk_lock::default_client().await {
        Err(Error::Connect { connect_string, reason }) => {
            assert_eq!(connect_string, "zk1.internal:notaport");
            assert!(reason.contains(&format!("clients were connected to {}", built.connect_string())), "{reason}");
            assert!(reason.contains("`.install()` makes one the default"), "{reason}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    built.close().await;
}
