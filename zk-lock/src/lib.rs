//! ZooKeeper distributed locks for async Rust, wire-compatible with Apache Curator.
//!
//! ```no_run
//! # async fn demo() -> zk_lock::Result<()> {
//! zk_lock::connect("127.0.0.1:2181").await?;
//! let guard = zk_lock::Mutex::new("/locks/product_42").lock().await?;
//! println!("fencing token {}", guard.fencing_token());
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! - [`Mutex`] is Curator's `InterProcessMutex`: same node layout
//!   (`<path>/_c_<uuid>-lock-<sequence>`), so Rust and Java processes share locks.
//! - The registry ([`connect`], [`ClientBuilder`], [`default_client`], [`named_client`]) keeps
//!   one client per name and opens a new session after an expiry.
//! - Guards report loss ([`MutexGuard::lost`]) and carry a fencing token.
//! - `zk_lock::testing` (feature `testing`) starts real ZooKeeper servers for tests.
//! - Lock-order checking ([`lock_order::check_lock_order()`]; on in debug builds) reports lock
//!   classes that tasks take in opposite orders, which can deadlock across processes.
//! - Feature `tls` connects to ZooKeeper over TLS (`ClientBuilder::tls_ca_pem`); digest
//!   credentials and ACLs ([`ClientBuilder::auth`], [`ClientBuilder::acl`]) need no feature.
//! - The root holds the everyday API; the rest is in modules: [`lock_order`] (the lock-order
//!   graph and its switch), [`declared`] (the attributes' templates and their conflicts),
//!   [`path`] (the lock path rules), [`holder`] (who a lock node says holds it), [`config`] (the
//!   defaults and the environment variable of the default client) and [`metrics`].
//!   [`zookeeper`] is zookeeper-client, the client zk-lock runs on: a zk-lock release that moves
//!   to an incompatible version of it is a breaking release.
//!
//! # Expansion
//!
//! The attributes ([`zk_lock`](macro@zk_lock), [`zk_read_lock`](macro@zk_read_lock),
//! [`zk_write_lock`](macro@zk_write_lock), [`zk_semaphore`](macro@zk_semaphore),
//! [`zk_multi_lock`](macro@zk_multi_lock)) keep the function's signature and run its body while
//! the lock is held. This function:
//!
//! ```no_run
//! # use zk_lock::zk_lock;
//! # struct Db;
//! # impl Db { async fn reduce(&self, _: u64, _: i64) -> Result<(), AppError> { Ok(()) } }
//! # #[derive(Debug)] struct AppError;
//! # impl From<zk_lock::Error> for AppError { fn from(_: zk_lock::Error) -> Self { AppError } }
//! #[zk_lock(path = "/product_<id>", timeout = "5s", guard = g)]
//! async fn reduce_stock(db: &Db, id: u64) -> Result<(), AppError> {
//!     db.reduce(id, g.fencing_token()).await
//! }
//! ```
//!
//! expands to this (formatted; a unit test of `zk-lock-macros` checks that it is the real output):
//!
//! ```no_run
//! # struct Db;
//! # impl Db { async fn reduce(&self, _: u64, _: i64) -> Result<(), AppError> { Ok(()) } }
//! # #[derive(Debug)] struct AppError;
//! # impl From<zk_lock::Error> for AppError { fn from(_: zk_lock::Error) -> Self { AppError } }
//! async fn reduce_stock(db: &Db, id: u64) -> Result<(), AppError> {
//!     let __zk_lock_sites = {
//!         static SITES: [::zk_lock::__private::Declaration; 1] = [::zk_lock::__private::Declaration::new(
//!             "/product_<id>", ::zk_lock::Recipe::Mutex, "reduce_stock", ::core::file!(), ::core::line!()
//!         )];
//!         ::zk_lock::__private::inventory::submit! { ::zk_lock::__private::Declared(&SITES) }
//!         &SITES
//!     };
//!     let __zk_lock_path =
//!         ::zk_lock::__private::Template::new().lit("/product_").value("id", &id).finish();
//!     let __zk_lock_outcome = match ::zk_lock::__private::Lock::declared(__zk_lock_sites)
//!         .timeout(5, 0)
//!         .mutex(__zk_lock_path)
//!         .await
//!     {
//!             ::core::result::Result::Ok(__zk_lock_guard) => {
//!                 let g = &__zk_lock_guard;
//!                 let __zk_lock_body = async move {
//!                     #[allow(unreachable_code)]
//!                     if let ::core::option::Option::Some(__zk_lock_ret) =
//!                         ::core::option::Option::None::<Result<(), AppError>>
//!                     {
//!                         return __zk_lock_ret;
//!                     }
//!                     {
//!                         db.reduce(id, g.fencing_token()).await
//!                     }
//!                 };
//!                 let __zk_lock_outcome =
//!                     ::zk_lock::__private::abort_on_lost(&__zk_lock_guard, __zk_lock_body).await;
//!                 ::zk_lock::__private::AnnotatedGuard::finish(__zk_lock_guard);
//!                 __zk_lock_outcome
//!             }
//!             ::core::result::Result::Err(__zk_lock_error) =>
//!                 ::core::result::Result::Err(__zk_lock_error),
//!         };
//!     match __zk_lock_outcome {
//!         ::core::result::Result::Ok(__zk_lock_ret) => __zk_lock_ret,
//!         ::core::result::Result::Err(__zk_lock_error) =>
//!             ::core::result::Result::Err(::zk_lock::__private::LockError::lock_error(__zk_lock_error)),
//!     }
//! }
//! ```
//!
//! Step by step:
//!
//! 0. The template, with its recipe, the function's name and the attribute's location, is a
//!    [`Declaration`](declared::Declaration) in a static (one per path), registered at link time
//!    for [`declared()`](declared::declared()) and [`check_declared()`](declared::check_declared()),
//!    which report the same template used by different recipes and templates nested under each
//!    other (Curator Tech Note 7). The acquisition gets the same static as the lock's site:
//!    [`lock_order()`](lock_order::lock_order()) names the template as the lock's class, and
//!    the function and line that took it. The static is inside a block: the body cannot name it.
//! 1. The path is rendered from the parameters with `Display` before anything else. A value that
//!    would change the shape of the path (empty, `.`, `..`, containing `/`) or that ZooKeeper
//!    rejects (control characters, emoji) makes the call return [`Error::InvalidPath`]; it never
//!    selects another lock.
//! 2. The lock is taken with the client and timeout of the arguments (here the default client and
//!    five seconds). Mutexes and read/write locks are re-entrant for code nested in the holder:
//!    an annotated function called from inside another one's body with the same path holds the
//!    same node. A one-permit `#[zk_semaphore]` is not, and refuses such a call with
//!    [`Error::WouldDeadlock`]. Calls that are not nested (sibling futures of one task, spawned
//!    tasks) wait their turn.
//! 3. The body runs as an `async move` block. The `if let` before it pins the block's output to the
//!    declared return type, so `?` and `return` in the body mean exactly what they meant in the
//!    function. `guard = g` binds a reference to the guard; the `__zk_lock_` locals have mixed-site
//!    hygiene, so the body cannot name them.
//! 4. With `on_lost = "abort"` (the default), the body is raced against the guard's
//!    [`lost()`](MutexGuard::lost): if the lock is lost first, the body is dropped where it is
//!    waiting and the call returns [`Error::Lost`]. `on_lost = "ignore"` awaits the body alone.
//! 5. Dropping the guard sends the delete request before the function returns; its reply is
//!    awaited in the background, so an uncontended call costs one round trip. Cancelling the call
//!    or a panic in the body drops the guard the same way.
//! 6. A failure to take or keep the lock becomes the function's error through
//!    `From<zk_lock::Error>`. That conversion is located at the error type in the signature, which
//!    is where the compiler reports a missing `From` implementation.
//!
//! # Tracing
//!
//! The library reports to [`tracing`](https://docs.rs/tracing) under the target `zk_lock`
//! (`RUST_LOG=zk_lock=debug` with `tracing-subscriber`'s `EnvFilter`). Without a subscriber the
//! spans and events cost a few atomic loads per acquisition (and a granted lock keeps one small
//! allocation for the events it may report). Field names are stable:
//!
//! | span / event | level | fields |
//! |---|---|---|
//! | span `zk_lock.acquire` | DEBUG | `recipe` (`mutex`, `read`, `write`, `semaphore`, `semaphore-mutex`), `path`; once granted `node` (full path) and `fencing_token` |
//! | `joined the lock queue` | DEBUG | `node` (name), `queue_position` (its place in line as [`QueuePosition::place`] numbers it: the holder is 1st), `ahead` (nodes it waits for) |
//! | `lock acquired` | DEBUG | `waited_ms` |
//! | `lock not acquired` | DEBUG | `waited_ms`, `error` (timeout, busy, ...) |
//! | `lock released` | DEBUG | `recipe`, `path`, `node`, `held_ms`, `dropped` (`true`: by dropping the guard) |
//! | `lock lost` | WARN | `recipe`, `path`, `node`, `held_ms`, `reason` |
//! | `lock revocation requested` | INFO | `recipe`, `path`, `node`, `held_ms` |
//! | `found our node again after a lost create reply` | DEBUG | `parent`, `node` |
//! | `our node was deleted while it waited: joining the queue again` | INFO | `node` |
//! | `ignored an invalid ZK_LOCK_ORDER (it takes 1, true, on, 0, false or off)` | WARN | `value`, `checking` (the build's default, kept) |
//! | `zookeeper refused to authenticate the session (AuthFailed), ..` (its locks are lost as `SessionClosed`) | WARN | `session` (its id) |
//!
//! The first four happen inside the `zk_lock.acquire` span, so they carry its fields; the others
//! happen wherever the guard is, and carry their own. A held lock ends with exactly one of
//! `lock released` (once ZooKeeper confirmed the delete; in the background for a dropped guard)
//! and `lock lost` (seen by the watch on its node, or revealed by the release's delete). A
//! multi-lock has one `zk_lock.acquire` span per member; a semaphore's `acquire_many` records the
//! node and token of its last lease on the span.
//!
//! # Architecture
//!
//! The crate is built in layers, each using only those below it (docs/architecture.md draws
//! them and lists a glossary; `scripts/module-graph` checks that no module imports one above it):
//!
//! | layer | concern |
//! |---|---|
//! | attribute support | what `#[zk_lock]` and friends expand to |
//! | recipes | [`Mutex`], [`RwLock`], [`Semaphore`], [`SemaphoreMutex`], [`MultiLock`], [`SharedCount`], [`participants`], [`revoke`]; how long to wait; the loop that retries an acquisition across sessions, written once |
//! | registry | the process-wide default and named clients ([`connect`], [`default_client`], [`named_client`]) |
//! | client | [`Client`] and [`ClientBuilder`]: the current session, its renewal, the settings |
//! | holds | a granted node shared by re-entrant guards, its loss watch, the holders' scopes, the guard types |
//! | engine | one attempt at a lock or at leases on one session: join, wait, clean up |
//! | ZooKeeper operations | retries over broken connections, container parents, protected lookup, listing |
//! | session | one ZooKeeper session: its health, the table of its nodes (owned and held), its retirement |
//! | foundations | Curator's layout ([`Recipe`], [`ParticipantKind`], who blocks whom), errors, [`path`]s, tracing; the link-time [`declared`] templates and the [`lock_order`] graph |
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layers, bottom up: each module uses only those above it in this list (docs/architecture.md,
// checked by scripts/module-graph).
//
// Foundations: no I/O of their own, used by every layer; among them the annotated templates
// collected at link time (`declared`) and the lock-order graph (`lock_order`).
//
// Public modules hold what is not everyday API (`declared`, `holder`, `lock_order`, `path`,
// `metrics`, and `config` below); the everyday names are re-exported at the root.
mod background;
pub mod declared;
mod error;
pub mod holder;
mod layout;
pub mod lock_order;
pub mod metrics;
pub mod path;
mod state_cell;
mod trace;
// One ZooKeeper session: its health, its table of nodes, its retirement.
mod session;
// ZooKeeper operations across broken connections.
mod zk;
// One attempt at a lock or at leases, on one session.
mod engine;
// Granted nodes, their loss watch, the holders' scopes, the guard types.
mod holds;
// `Client`: the current session, renewal, settings.
mod client;
// The process-wide clients: default and named.
mod registry;
// The recipes and the loop that retries them across sessions.
mod recipes;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

// What the attributes expand to.
/// Support for the code the attributes generate. Not public API: no semver promises.
#[doc(hidden)]
#[path = "private/mod.rs"]
pub mod __private;

pub use client::{Client, ClientBuilder, ConnectionState, ConnectionStates};
pub use error::{Error, LostReason, Result, ZookeeperError, ZookeeperErrorKind};
pub use layout::{ParticipantKind, Recipe};
// Named one by one: a new `pub` item of a recipe's module is not public until it is listed here.
pub use engine::{QueueHolder, QueuePosition};
pub use recipes::force_release::{force_release, force_release_node, force_release_participant};
pub use recipes::leader::{LeaderElection, Leadership};
pub use recipes::multi_lock::{MultiGuard, MultiLock, MultiMember};
pub use recipes::mutex::{Mutex, MutexGuard};
pub use recipes::participants::{participants, participants_with, Participant, Role};
pub use recipes::revoke::{revoke, revoke_node, revoke_with};
pub use recipes::rwlock::{ReadGuard, RwLock, WriteGuard};
pub use recipes::semaphore::{Semaphore, SemaphorePermit};
pub use recipes::semaphore_mutex::{SemaphoreMutex, SemaphoreMutexGuard};
pub use recipes::shared_count::{SharedCount, VersionedCount};
pub use registry::{connect, default_client, named_client, shutdown};
pub use zk_lock_macros::{zk_leader, zk_lock, zk_multi_lock, zk_read_lock, zk_semaphore, zk_write_lock};
/// [zookeeper-client](https://docs.rs/zookeeper-client) 0.11, the ZooKeeper client zk-lock runs
/// on, for what zk-lock does not wrap: the ACL types of [`ClientBuilder::acl`] (`Acls`, `Acl`,
/// `AuthId`, `Permission`), [`ClientBuilder::tls_options`]'s `TlsOptions`, the raw client of
/// [`Client::zookeeper`] and the multi-op writer of a guard's `fenced_writer()`.
///
/// **Its version is part of zk-lock's API.** Everything zk-lock's API takes or returns from
/// zookeeper-client is named through this module, and nothing else is: errors are zk-lock's own
/// ([`ZookeeperError`], with zookeeper-client's error as its `source()`), and no `From`
/// conversion between the two crates' types is public. So:
///
/// - a zookeeper-client release compatible with the one zk-lock uses (0.11.x) changes nothing
///   here, and `cargo update` may pick it;
/// - moving zk-lock to an incompatible one (0.12, 1.0) is a **breaking zk-lock release** (the
///   minor version before 1.0, the major one after), even where zk-lock's own items did not
///   change, and the CHANGELOG names it.
///
/// Name these types as `zk_lock::zookeeper::..`: they are then always the ones zk-lock takes. A
/// program that also depends on zookeeper-client directly must ask for the same version, or its
/// `Acls` are a different type from zk-lock's.
pub use zookeeper_client as zookeeper;

/// The settings used when the program gives none: where the default client connects (the
/// environment variable [`CONNECT_ENV`](crate::config::CONNECT_ENV), else
/// [`DEFAULT_CONNECT_STRING`](crate::config::DEFAULT_CONNECT_STRING)) and a client's timeouts
/// ([`ClientBuilder::session_timeout`](crate::ClientBuilder::session_timeout),
/// [`ClientBuilder::connect_timeout`](crate::ClientBuilder::connect_timeout)).
pub mod config {
    pub use crate::client::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_SESSION_TIMEOUT};
    pub use crate::registry::{CONNECT_ENV, DEFAULT_CONNECT_STRING};
}
