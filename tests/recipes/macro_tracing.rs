//! The attributes together with `#[tracing::instrument]`, in either order.

use std::time::Duration;

use zk_lock::{zk_lock, Client};

const CLIENT: &str = "it-macro-tracing";

#[tracing::instrument]
#[zk_lock(path = "/it-macro-tracing/instrument-first/<id>", client = "it-macro-tracing", guard = g)]
async fn instrument_first(id: u64) -> zk_lock::Result<i64> {
    assert!(g.is_held());
    Ok(g.fencing_token())
}

#[zk_lock(path = "/it-macro-tracing/lock-first/<id>", client = "it-macro-tracing", guard = g)]
#[tracing::instrument]
async fn lock_first(id: u64) -> zk_lock::Result<i64> {
    assert!(g.is_held());
    Ok(g.fencing_token())
}

#[tokio::test]
async fn both_orders_take_the_lock() {
    Client::builder(zk_lock::testing::shared_server().connect_string())
        .session_timeout(Duration::from_secs(10))
        .install_as(CLIENT)
        .await
        .unwrap();
    let first = instrument_first(7).await.unwrap();
    let second = lock_first(7).await.unwrap();
    assert!(first > 0 && second > first, "both held a lock node: tokens {first}, {second}");
    let declared: Vec<_> = zk_lock::declared::declared().into_iter().map(|d| d.template).collect();
    assert!(declared.contains(&"/it-macro-tracing/instrument-first/<id>"));
    assert!(declared.contains(&"/it-macro-tracing/lock-first/<id>"));
}
