//! Lock-order checking: what kernel developers call lockdep, for distributed locks.
//!
//! When code nested in the holder of a lock (an annotated function's body, a guard's `scope`)
//! starts to acquire another, the edge between the two lock *classes* is recorded: for a lock taken by an annotated function its class is the path
//! template with the placeholders' names left out (`/account_<from>` and `/account_<to>` are
//! `/account_<_>`), for one taken through the API its path. Two tasks, in one process
//! or in two, that take the same classes in opposite orders can deadlock, even when no test ever
//! runs them at once; a cycle in the graph shows that ([`check_lock_order`], as at the end of a
//! test).
//!
//! - Recorded when the acquisition starts (a deadlock never gets to the grant), from every lock
//!   it is nested in: the holders' scopes around it, the one re-entry knows. Sibling futures of
//!   one task are not nested in each other and make no edge between their locks; sequential API
//!   code makes one only when it takes the second lock inside the first guard's `scope`. A
//!   re-entry, a read lock under the holder's own write lock (a downgrade) and an acquisition
//!   refused with `WouldDeadlock` take no new node and make no edge; nor does a single attempt
//!   (`try_`, a zero timeout), which never waits.
//! - A task starting to acquire a lock it took itself outside the acquiring code gets a warning
//!   event: it may be waiting for itself (sequential code that should have used `scope`).
//! - A re-entry waits for its holder's loan while another acquisition nested in the same holder
//!   has it: an edge from each lock between it and the holder that lends is recorded (a sibling
//!   with the loan may be waiting for one of them), and an actual wait gets a warning event.
//! - A multi-lock's members are taken in sorted order: members of one class make no edges among
//!   themselves (two multi-locks on them cannot deadlock), members of different classes do, in
//!   the order taken (code taking those classes one by one the other way round can deadlock).
//! - Read locks count as exclusive: the queue is fair, so a reader waits behind a queued writer.
//!
//! On by default in debug builds of zk-lock; [`LOCK_ORDER_ENV`] and [`set_lock_order_checking`]
//! turn it on or off. Off, an acquisition pays two atomic loads (at its start and its grant); on,
//! a short critical section at its start, grant and release.

// A foundation: it uses `declared` (the site of an annotated lock) and `trace` only.
mod graph;
mod owner;
mod record;
mod switch;

pub use graph::{LockOrder, LockOrderCycle, LockOrderCycles, LockOrderEdge};
pub(crate) use record::{acquiring, borrowing, granted, holds_outside, together, Held, HeldKey, OrderedLock};
pub use switch::{lock_order_checking, set_lock_order_checking, LOCK_ORDER_ENV};

/// The lock-order graph recorded so far in this process: which lock classes tasks started to
/// acquire while holding which, with the annotated functions (file and line) that did it first.
/// Empty while checking is off (see [`set_lock_order_checking`]).
///
/// A class is the path template of an annotated function, its placeholders without their names
/// (`/account_<from>` and `/account_<to>` are both `/account_<_>`), or the path of a lock taken
/// through the API (`Mutex::new("/locks/orders")`): a constant path is one class, a
/// path made per value through the API (`format!("/product_{id}")`) one class per value, so
/// the graph grows with the values and an inversion shows only for values that met. Give such
/// locks an attribute, whose template is one class.
pub fn lock_order() -> LockOrder {
    record::recorded()
}

/// Checks the lock-order graph recorded so far for cycles: sets of acquisitions that tasks
/// running at the same time, in this process or in others running the same code, could each be
/// waiting in, for a lock another one holds. Run it after the code paths that take locks ran, as
/// at the end of a test; see [`lock_order`] for what a class is.
///
/// # Errors
///
/// Every cycle found (at most 100), each with the functions (file:line) that made its edges. A
/// lock class taken while a lock of the same class is held (`/account_<from>` then
/// `/account_<to>`) is a cycle of one edge: two calls with the values swapped deadlock.
pub fn check_lock_order() -> Result<(), LockOrderCycles> {
    let cycles = lock_order().cycles();
    if cycles.is_empty() {
        Ok(())
    } else {
        Err(LockOrderCycles::new(cycles))
    }
}
