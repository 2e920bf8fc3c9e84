//! Nothing to use: this library of the workspace's root package (`zk-lock-workspace`, not
//! published) exists for its doctests. Every Rust block of docs/guide.md and README.md is compiled
//! (and the quick ones run) by `cargo test --workspace`, or alone by
//! `cargo test -p zk-lock-workspace --doc`, with the root package's dev-dependencies: zk-lock
//! with its features `testing`, `tls` and `metrics`, Tokio, axum, SQLite, the Prometheus exporter.
//!
//! They are here rather than in zk-lock's own doctests: the two documents lie outside zk-lock's
//! package (a packaged zk-lock would name files it does not hold), and their examples use crates
//! and features that are dev-dependencies of this package, not of zk-lock.
//!
//! Writing an example of the guide:
//!
//! - A fragment gets its setup on hidden lines (`# ` at the start: rustdoc compiles them, the
//!   rendered page hides them): the imports, an `async fn` around statements that `.await`,
//!   stand-ins for the application's types. [`guide_stubs!`] declares the usual ones (`AppError`,
//!   `Db`, `Price`, `Job`, `do_work`).
//! - `no_run` for what needs a ZooKeeper it cannot start (`127.0.0.1:2181`, an ensemble);
//!   `test_harness` for a block of `#[test]` or `#[tokio::test]` functions, which are compiled
//!   only that way, and run when they need no more than the testing kit's `shared_server()`.
//! - Other languages are tagged (`toml`, `sh`, `text`, `sql`): an untagged block is Rust to
//!   rustdoc. `ignore` only for a block that cannot compile here, with a comment saying why.

/// The examples of docs/guide.md.
#[cfg(doctest)]
#[doc = include_str!("../docs/guide.md")]
pub struct GuideExamples;

/// The examples of README.md.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

/// The application's stand-ins that the guide's fragments use without showing them (an error
/// type, a database, a unit of work), so that a block shows only what it is about. A block calls
/// it on a hidden line: `# zk_lock_workspace::guide_stubs!();`.
#[doc(hidden)]
#[macro_export]
macro_rules! guide_stubs {
    () => {
        /// The application's error: every lock error converts into it.
        #[derive(Debug)]
        #[allow(dead_code)]
        enum AppError {
            Lock(::zk_lock::Error),
            LockLost(::zk_lock::LostReason),
            SoldOut,
            SoldOutOrFenced,
        }

        impl ::core::convert::From<::zk_lock::Error> for AppError {
            fn from(e: ::zk_lock::Error) -> Self {
                AppError::Lock(e)
            }
        }

        impl ::core::fmt::Display for AppError {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::core::fmt::Debug::fmt(self, f)
            }
        }

        impl ::std::error::Error for AppError {}

        /// A database whose writes take a fencing token.
        struct Db;

        #[allow(dead_code)]
        impl Db {
            async fn deduct(&self, _id: u64, _token: i64) -> ::core::result::Result<(), AppError> {
                Ok(())
            }

            async fn deduct_stock(&self, _id: u64, _token: i64) -> ::core::result::Result<(), AppError> {
                Ok(())
            }
        }

        #[allow(dead_code)]
        struct Price(u64);

        #[allow(dead_code)]
        struct Job(u64);

        /// The work done under a lock.
        #[allow(dead_code)]
        async fn do_work() -> ::core::result::Result<(), AppError> {
            Ok(())
        }
    };
}
