//! The engine: one attempt at a lock, or at semaphore leases, on one session. It creates our
//! node in the queue, lists the queue, waits for the nodes the layout says must go first, and
//! cleans up on every way out; each node is claimed in
//! its session's node table before its `create` is sent.
//!
//! May use: `session`, `zk`, `layout` and the foundations (`error`, `trace`, `background`).
//! It knows nothing of clients, holds or recipes: retrying on a new session is the recipes'
//! loop, and a granted node becomes a hold one layer up.

mod attempt;
mod claim;
mod lease;
mod lease_count;
mod local_handoff;
mod lock_attempt;
mod not_granted;
mod own_watch;
mod pipelined;
mod position;
mod queue;
mod ungranted;

pub(crate) use attempt::Attempt;
pub(crate) use claim::Claim;
pub(crate) use lease::{LeaseAttempt, LeaseGrant, LeaseSpec};
pub(crate) use lease_count::LeaseLimit;
pub(crate) use local_handoff::LocalHandoff;
pub(crate) use lock_attempt::{Grant, LockAttempt};
pub(crate) use not_granted::NotGranted;
pub(crate) use position::PositionReport;
pub use position::{QueueHolder, QueuePosition};
pub(crate) use queue::LockSpec;
