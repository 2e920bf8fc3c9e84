//! `zk_lock::shutdown`: every client of the registry is closed, its locks reported lost and
//! their nodes deleted at once; acquisitions through the registry are refused afterwards.
//!
//! A binary of its own: `shutdown` closes the process-wide default client, which every other
//! test binary goes on using.

use std::time::Duration;

use tokio::time::timeout;
use zk_lock::testing::{children, shared_server as server};
use zk_lock::{Client, Error, LostReason, Mutex};

#[tokio::test]
async fn shutdown_closes_every_client_of_the_registry() {
    let observer = Client::builder(server().connect_string()).connect().await.unwrap();
    let default = zk_lock::connect(&server().connect_string()).await.unwrap();
    let named = Client::builder(server().connect_string()).install_as("it-shutdown-orders").await.unwrap();
    // Not in the registry: left alone.
    let private = Client::builder(server().connect_string()).connect().await.unwrap();

    let by_default = Mutex::new("/it-shutdown/default").lock().await.unwrap();
    let by_name = Mutex::with_client(&named, "/it-shutdown/named").lock().await.unwrap();
    let by_private = Mutex::with_client(&private, "/it-shutdown/private").lock().await.unwrap();

    timeout(Duration::from_secs(10), zk_lock::shutdown()).await.expect("shutdown returns once the server confirmed");

    for guard in [&by_default, &by_name] {
        assert_eq!(timeout(Duration::ZERO, guard.lost()).await, Ok(LostReason::SessionClosed), "{}", guard.path());
        let nodes = children(&observer, guard.path()).await.unwrap();
        assert!(nodes.is_empty(), "the node under {} went with its session: {nodes:?}", guard.path());
    }
    // No credentials were configured: the loss does not speak of any.
    let loss = by_default.release().await.expect_err("the lock was lost").to_string();
    assert!(loss.contains("/it-shutdown/default") && loss.contains("zk_lock::shutdown"), "{loss}");
    assert!(!loss.contains("credential") && !loss.contains("auth"), "{loss}");
    assert!(default.is_closed() && named.is_closed());
    assert!(by_private.is_held(), "a client outside the registry is not closed");
    assert!(!private.is_closed());

    let refused = Mutex::new("/it-shutdown/after").try_lock().await.map(drop);
    assert!(matches!(&refused, Err(Error::ClientClosed { path }) if path == "/it-shutdown/after"), "{refused:?}");
    let named_again = zk_lock::named_client("it-shutdown-orders").unwrap();
    let refused = Mutex::with_client(&named_again, "/it-shutdown/after").try_lock().await.map(drop);
    assert!(matches!(refused, Err(Error::ClientClosed { .. })), "{refused:?}");

    // A new default can be installed after a shutdown, for a process that goes on.
    zk_lock::connect(&server().connect_string()).await.unwrap();
    Mutex::new("/it-shutdown/after").try_lock().await.expect("the new default takes locks").release().await.unwrap();
    by_private.release().await.unwrap();
}
