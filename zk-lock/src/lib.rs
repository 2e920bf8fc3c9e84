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
//! - [`testing`] (feature `testing`) starts real ZooKeeper servers for tests.

mod background;
mod client;
mod engine;
mod error;
mod guard;
mod hold;
mod holder;
mod multi_lock;
mod mutex;
mod node_watch;
mod participants;
mod path;
mod registry;
mod revoke;
mod rwlock;
mod semaphore;
mod semaphore_mutex;
mod session;
mod shared_count;
mod target;
#[cfg(feature = "testing")]
pub mod testing;

/// Support for the code the attributes generate. Not public API: no semver promises.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use client::{Client, ClientBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_SESSION_TIMEOUT};
pub use error::{Error, LostReason, Result};
pub use holder::HolderDescription;
pub use multi_lock::*;
pub use mutex::{Mutex, MutexGuard};
pub use participants::*;
pub use path::{validate_lock_path, validate_rendered_value, MAX_PATH_LEN};
pub use registry::{connect, default_client, named_client, CONNECT_ENV, DEFAULT_CONNECT_STRING};
pub use revoke::*;
pub use rwlock::*;
pub use semaphore::*;
pub use semaphore_mutex::*;
pub use shared_count::*;
