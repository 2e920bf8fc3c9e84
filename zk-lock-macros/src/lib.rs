//! Attribute macros for [`zk-lock`](https://docs.rs/zk-lock): `#[zk_lock]`, `#[zk_read_lock]`,
//! `#[zk_write_lock]`, `#[zk_semaphore]` and `#[zk_multi_lock]`.
//!
//! This crate is re-exported by `zk-lock`; depend on `zk-lock` and write `use zk_lock::zk_lock;`.
//! The code the attributes generate calls `zk_lock::__private`, which is not public API, so the
//! two crates are released together (`zk-lock` pins this crate with `=x.y.z`). `zk-lock`'s crate
//! documentation shows what an attribute expands to.
//!
//! Each attribute goes through three stages: the arguments are parsed into a typed configuration
//! (`args`, with the `template` and `duration` parsers), checked against the function
//! (`validate`), and the function is regenerated around its body (`expand`). Every problem is a
//! compile error at the token that causes it, and the function is still emitted unchanged, so a
//! mistake shows up as one error and not as a cascade.

mod args;
mod duration;
mod expand;
mod template;
mod validate;

use proc_macro::TokenStream;

use crate::args::Attribute;

/// Runs an `async fn` while holding a distributed mutex (`zk_lock::Mutex`, Curator's
/// `InterProcessMutex`).
///
/// ```text
/// #[zk_lock(path = "/product_<id>", timeout = "5s")]
/// async fn reduce_stock(db: &Db, id: u64) -> Result<(), AppError> {
///     // runs while this process holds `/product_<id>`, in this process and every other one
/// }
/// ```
///
/// # Arguments
///
/// - `path = "<template>"` (required): the lock path. `<name>` placeholders are replaced by the
///   `Display` of a parameter, of a binding in a parameter pattern (`Path(id): Path<u64>`), of
///   `self`, or of a field of one of them (`<req.user_id>`, `<self.shard>`). A rendered value that
///   would change the shape of the path (empty, `.`, `..`, containing `/` or control
///   characters) makes the call fail with `Error::InvalidPath`, never take another lock.
/// - `timeout = "<duration>"`: how long to wait for the lock, like `"5s"`, `"250ms"` or
///   `"1m30s"` (see [Durations](#durations) below), counted from the call: it also bounds connecting the default client on its
///   first use. Then the call returns `Error::Timeout` (`Error::ConnectionDown` if the
///   connection to ZooKeeper was down then, `Error::Connect` if the default client was still
///   connecting). `"0s"` tries once and returns
///   `Error::Busy` if the lock is held. Without it the client's default applies (none unless
///   configured: wait as long as it takes).
/// - `max_hold = "<duration>"`: the longest the lock may be held, like `"30s"`. At the limit
///   the library ends the hold whatever the body is doing: the body is dropped, the call
///   returns `Error::Lost` with `LostReason::MaxHoldReached` (naming the path and the limit),
///   and the lock's node is deleted by the library's own thread, so the next waiter is granted
///   even if this function's runtime is blocked; a late write of this body carries a fencing
///   token older than the next holder's. Not zero.
/// - `client = "<name>"`: the client installed with `ClientBuilder::install_as("<name>")`
///   instead of the default one.
/// - `guard = <ident>`: binds a reference to the guard in the body, for
///   `<ident>.fencing_token()`.
/// - `on_lost = "abort" | "ignore"`: with `"abort"` (the default) the body is dropped as soon
///   as the lock is lost (session expiry, node deleted, `max_hold` reached) and the call
///   returns `Error::Lost`; `"ignore"` lets the body finish.
/// - `queue_reports = <function>`: called with a `&zk_lock::QueuePosition` each time a waiting
///   call learns of a change in its place in line (its place, the holder's node and data once
///   read), as `Mutex::with_queue_reports` is; a call granted at once, or re-entering its
///   holder, is told nothing. The value is a `fn(&zk_lock::QueuePosition)`: a function's path
///   (`report_place`, `Self::report`) or a closure that captures nothing (`|position|
///   tracing::info!("{position}")`). The position's `path` is the rendered path, which tells the
///   calls apart. It runs inside the acquisition: keep it short.
///
/// # Durations
///
/// `timeout` and `max_hold` take the syntax of [`humantime::parse_duration`], as `zk-lock
/// --timeout` does: numbers, each with its unit, summed, with or without spaces between them:
/// `"5s"`, `"250ms"`, `"1.5s"`, `"1m30s"`, `"1m 30s"`, `"2 hours 37 min"`. The units are `h`,
/// `m`, `s`, `ms`, `us` (`µs`), `ns`, and `d`, `w`, `M` (months: 30.44 days, not minutes) and
/// `y`, with the names humantime knows (`sec`, `secs`, `min`, `hours`, `millis`, ...); they are
/// case-sensitive. A string it refuses is a compile error at the string that says why, and
/// names the unit meant when it can (`timeout = "5 Secs"`, `"250milliseconds"`: did you mean
/// `"5 s"`, `"250ms"`?).
///
/// [`humantime::parse_duration`]: https://docs.rs/humantime/2/humantime/fn.parse_duration.html
///
/// # Requirements
///
/// The function must be an `async fn` returning `Result<_, E>` (or an alias such as
/// `anyhow::Result<T>`) where `E: From<zk_lock::Error>`. Free functions, methods with any
/// receiver, trait-impl methods, generics, `where` clauses and `impl Trait` are all fine.
///
/// The lock is re-entrant for code nested in the body: an annotated function called from the
/// body with the same rendered path (and client) holds the lock once, without deadlock (two such
/// calls joined in the body take turns). Calls that are not nested, such as two calls joined
/// with `tokio::join!` or run by `buffer_unordered`, exclude each other like any contenders.
#[proc_macro_attribute]
pub fn zk_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Attribute::Mutex, args.into(), item.into()).into()
}

/// Runs an `async fn` while holding the read side of a distributed read/write lock
/// (`zk_lock::RwLock`, Curator's `InterProcessReadWriteLock`): readers share it, writers wait.
///
/// Takes the same arguments as [`zk_lock`](macro@zk_lock). A read call nested in a write lock's
/// body may take the read lock of the same path (a downgrade); the reverse is
/// `Error::WouldDeadlock`. A read call joined beside a write body waits for it.
///
/// ```text
/// #[zk_read_lock(path = "/catalog/<sku>")]
/// async fn read_price(sku: &str) -> Result<Price, AppError> { /* .. */ }
/// ```
#[proc_macro_attribute]
pub fn zk_read_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Attribute::Read, args.into(), item.into()).into()
}

/// Runs an `async fn` while holding the write side of a distributed read/write lock
/// (`zk_lock::RwLock`): nobody else reads or writes meanwhile.
///
/// Takes the same arguments as [`zk_lock`](macro@zk_lock).
///
/// ```text
/// #[zk_write_lock(path = "/catalog/<sku>")]
/// async fn set_price(sku: &str, price: Price) -> Result<(), AppError> { /* .. */ }
/// ```
#[proc_macro_attribute]
pub fn zk_write_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Attribute::Write, args.into(), item.into()).into()
}

/// Runs an `async fn` while holding one of `permits` leases of a distributed semaphore
/// (`zk_lock::Semaphore`, Curator's `InterProcessSemaphoreV2`).
///
/// Takes the arguments of [`zk_lock`](macro@zk_lock) but `queue_reports` (a semaphore's request
/// waits for any of the permits, not in a line behind one holder: `zk_lock::Semaphore` reports no
/// place), plus `permits = N` (at least 1, default 1): how many calls may run at once, across all
/// processes. Every user of a path must give the same number. With `guard = g`, `g` is the lease
/// (`zk_lock::SemaphorePermit`).
///
/// Leases are not re-entrant: an annotated call nested in the body on the same path takes a
/// lease of its own. With one permit (the default) that would wait for itself, so the lock is a
/// `zk_lock::SemaphoreMutex` (Curator's `InterProcessSemaphoreMutex`, the same nodes) and the
/// nested call fails at once with `Error::WouldDeadlock`; `g` is then a `SemaphoreMutexGuard`.
///
/// ```text
/// #[zk_semaphore(path = "/workers/transcode", permits = 4)]
/// async fn transcode(job: Job) -> Result<(), AppError> { /* .. */ }
/// ```
#[proc_macro_attribute]
pub fn zk_semaphore(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Attribute::Semaphore, args.into(), item.into()).into()
}

/// Runs an `async fn` while holding several distributed mutexes at once (`zk_lock::MultiLock`,
/// Curator's `InterProcessMultiLock`): all of them or none.
///
/// Takes `paths = ["<template>", ..]` instead of `path`, and otherwise the arguments of
/// [`zk_lock`](macro@zk_lock). The rendered paths are sorted and de-duplicated before any lock
/// is taken, so two calls naming the same locks in different orders cannot deadlock. With
/// `guard = g`, `g.fencing_token()` is the largest token of the locks. With `queue_reports = f`,
/// `f` is told the place of the call in the line of each lock it waits for, `position.path`
/// naming that lock.
///
/// ```text
/// #[zk_multi_lock(paths = ["/account_<from>", "/account_<to>"])]
/// async fn transfer(from: u64, to: u64, amount: u64) -> Result<(), AppError> { /* .. */ }
/// ```
#[proc_macro_attribute]
pub fn zk_multi_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Attribute::Multi, args.into(), item.into()).into()
}

/// Runs an `async fn` only while this process leads a leader election (`zk_lock::LeaderElection`,
/// Curator's `LeaderSelector`: Java and Rust participants of one path elect one leader).
///
/// Takes the same arguments as [`zk_lock`](macro@zk_lock). A call waits until its participant
/// leads (within `timeout`, if given), runs the body while leading, and gives the leadership up
/// when the body returns, so the next participant in line leads. If the leadership is lost
/// while the body runs (the session's silence past the told-first bound, its expiry, the node
/// deleted, `max_hold`), the body is dropped and the call returns `Error::Lost`, before any other
/// participant can lead; calling the function again waits to lead again. With `guard = g`, `g`
/// is the `zk_lock::Leadership` (`g.fencing_token()` grows with each leader).
///
/// ```text
/// #[zk_leader(path = "/jobs/billing")]
/// async fn run_billing() -> Result<(), AppError> { /* .. runs in one process at a time .. */ }
///
/// // A worker that runs the job whenever it leads, until it fails otherwise:
/// loop {
///     match run_billing().await {
///         Err(AppError::Lock(zk_lock::Error::Lost { .. })) => continue, // lost it: lead again
///         outcome => break outcome,
///     }
/// }
/// ```
#[proc_macro_attribute]
pub fn zk_leader(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Attribute::Leader, args.into(), item.into()).into()
}
