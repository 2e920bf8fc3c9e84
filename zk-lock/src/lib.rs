//! ZooKeeper distributed locks for async Rust, wire-compatible with Apache Curator.

mod error;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{Error, LostReason, Result};
