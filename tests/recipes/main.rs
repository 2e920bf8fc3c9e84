//! The recipes against real ZooKeeper, and their interop with real Curator and kazoo: one test
//! binary, so one build and one shared server (`zk_lock::testing::shared_server`) for all of
//! them. Every test uses lock paths of its own (each module a root of its own: `/it-mutex`,
//! `/it-rwlock`, ...), so the tests run in parallel without seeing each other's nodes. A test
//! that must stop, restart or count the traffic of a server starts one of its own.
//!
//! Run one module, or one test, with a filter: `cargo test --test recipes mutex::` or
//! `cargo test --test recipes waiters_are_served`.
//!
//! What is where:
//!
//! - one module per recipe: [`mutex`], [`rwlock`], [`semaphore`], [`semaphore_mutex`],
//!   [`multi_lock`], [`shared_count`], [`leader`] (leader election); the scenarios every exclusive recipe passes alike
//!   (exclusion under contention, `Busy` and timeouts leaving no node) are written once, in
//!   [`scenarios`], and run from each recipe's module;
//! - around the recipes: [`revoke`], [`participants`], [`fenced_writes`], [`acl`], [`tls`],
//!   [`bad_input`], [`close`] (`Client::close`), [`connection_state`], [`api`] (compile-time promises), [`requests_per_cycle`] (the server's
//!   counters), [`new_paths`] (the first lock on a missing path: requests and round trips);
//! - the attributes: [`macros`], [`macro_tracing`], [`macro_queue_reports`], [`declared`] (their
//!   compile errors are `tests/ui.rs`), [`lock_order`] (lock-order checking, with the API too);
//! - interop: [`curator_peer`] (the Java side alone), [`curator_interop`], [`curator_rwlock`],
//!   [`curator_semaphore`], [`curator_revoke`], [`curator_leader`]; kazoo in [`participants`];
//! - failures: [`partition`] (proxies between a client and the server), [`ensemble`] (a
//!   three-server ensemble of its own losing its leader), [`runtimes`] (runtimes that end
//!   while a client lives on);
//! - the programs of `examples/`: [`examples`], [`stock_demo`], [`stock_http`].
//!
//! The other test binaries of `tests/` each need a process of their own; their first lines say
//! why.

mod support;

mod scenarios;

mod acl;
mod api;
mod bad_input;
mod close;
mod connection_state;
mod curator_interop;
mod curator_leader;
mod curator_peer;
mod curator_revoke;
mod curator_rwlock;
mod curator_semaphore;
mod declared;
mod ensemble;
mod examples;
mod fenced_writes;
mod force_release;
mod grant_recording;
mod holders;
mod leader;
mod lock_order;
mod macro_queue_reports;
mod macro_tracing;
mod macros;
mod max_hold;
mod multi_lock;
mod mutex;
mod new_paths;
mod outage_errors;
mod participants;
mod partition;
mod queue_position;
mod requests_per_cycle;
mod revoke;
mod runtimes;
mod rwlock;
mod semaphore;
mod semaphore_mutex;
mod shared_count;
mod stock_demo;
mod stock_http;
mod tls;
