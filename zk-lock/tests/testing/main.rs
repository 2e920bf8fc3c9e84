//! Tests of the testing kit, `zk_lock::testing`, against real ZooKeeper servers: one binary,
//! one shared server; the tests that stop, kill or count the traffic of a server start their own.
//! The history checker's rules are tested on crafted histories, without a server.
//!
//! Run with `cargo test -p zk-lock --features testing --test testing` (`cargo test --workspace`
//! enables the feature through the root package's dev-dependency).
#![cfg(feature = "testing")]

mod history_recording;
mod history_rules;
mod kit;
mod proxy;
