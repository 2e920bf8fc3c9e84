//! What every attempt of the engine offers the loop that retries across sessions.

use std::future::Future;

use super::not_granted::NotGranted;

/// One try at a lock (or at leases) on one session, from the first `create` to the grant. Every
/// node it made is its own until it is granted: on the way out it is let go with the session,
/// or removed.
pub(crate) trait Attempt: Send {
    /// What a successful attempt hands over.
    type Grant;

    /// Joins the queue and waits until granted. Cancel safe: dropping the future leaves every
    /// node made so far in the attempt, for [`remove`](Self::remove) or its drop to delete.
    fn run(&mut self) -> impl Future<Output = Result<(), NotGranted>> + Send;

    /// The grant, once [`run`](Self::run) succeeded.
    fn grant(self) -> Self::Grant;

    /// The session must not be used any more: the nodes go with it (they are deleted in the
    /// background while it can be used, and its retirement ends it otherwise).
    fn let_go(self);

    /// Deletes every node the attempt made, for the ways out that return to the caller. What
    /// ZooKeeper does not confirm is deleted in the background.
    fn remove(self) -> impl Future<Output = ()> + Send;
}
