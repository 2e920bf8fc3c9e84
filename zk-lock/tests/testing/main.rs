//! Tests of the testing kit, `zk_lock::testing`, against real ZooKeeper servers: one binary,
//! one shared server; the tests that stop, kill or count the traffic of a server start their own,
//! and those of a cluster's faults share one ensemble, taking turns.
//! The history checker's rules are tested on crafted histories, without a server.
//!
//! Run with `cargo test -p zk-lock --features testing --test testing` (`cargo test --workspace`
//! enables the feature through the root package's dev-dependency).
#![cfg(feature = "testing")]

/// A node path under `/testing-<area>` that no other test (or earlier run against the shared
/// server) uses.
fn unique_path(area: &str, name: &str) -> String {
    format!("/testing-{area}-{name}-{}-{}", std::process::id(), zk_lock::testing::now_ns())
}

mod cluster_faults;
mod history_recording;
mod history_rules;
mod kit;
mod proxy;
