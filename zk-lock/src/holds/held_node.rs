//! A held node: a granted lock node, followed by its session while held (by a watch, once held
//! for a heartbeat period), deleted exactly once when let go.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use zookeeper_client::Error as ZkError;

use super::grant_log::Granted;
use super::hold_events::{self, HoldEvents};
use super::hold_limit::{self, HoldLimit};
use super::revocation_watch::watch_for_revocation;
use crate::background;
use crate::engine::{Claim, Grant};
use crate::error::{Error, LostReason, Result};
use crate::layout::Recipe;
use crate::lock_order;
use crate::session::{Change, End, HeldStatus, Session};
use crate::zk::delete_with_retry;

/// One granted lock node, shared by the guards of re-entrant acquisitions (code nested in its
/// holder's scope): it is deleted when the last of them is released or dropped.
pub(crate) struct HeldNode {
    /// The client it was acquired through: only that client's acquisitions re-enter it.
    client: u64,
    recipe: Recipe,
    pub token: i64,
    session: Arc<Session>,
    /// Lost, revoked, released: the one record of its state, written by its session (a loss, a
    /// watch's news) and by our release.
    status: Arc<HeldStatus<HoldEvents>>,
    /// Our responsibility for the node until ZooKeeper confirms it is gone.
    claim: Option<Claim>,
    /// Its entry in its session's node table.
    entry: u64,
    /// Its `max_hold`, which its guards may extend: the limit it was granted with (a nested
    /// call's own limit on a borrowed hold is not kept here).
    limit: OnceLock<Arc<HoldLimit>>,
}

impl HeldNode {
    /// A lock of `recipe` at `path` (whose template, for the metrics, is `template`) granted in
    /// `granted` to the client `client` as `what`; `order` places it among the locks held.
    pub(crate) fn new(
        client: u64,
        recipe: Recipe,
        (path, template): (&str, &'static str),
        granted: Grant,
        order: Option<lock_order::Held>,
        what: Granted<'_>,
    ) -> Arc<Self> {
        let grant = hold_events::Grant { recipe, path, template, node: &granted.node_path, token: granted.token, what };
        let events = HoldEvents::granted(grant, order, granted.local);
        let claimed = granted.claim.as_ref().map(Claim::id);
        let (status, entry) = granted.session.hold(claimed, granted.node_path, granted.losses_seen, events);
        Arc::new(Self {
            client,
            recipe,
            token: granted.token,
            session: granted.session,
            status,
            claim: granted.claim,
            entry,
            limit: OnceLock::new(),
        })
    }

    /// The hold's status, which its session and its `max_hold` write.
    pub(crate) fn status(&self) -> &Arc<HeldStatus<HoldEvents>> {
        &self.status
    }

    /// The `max_hold` the hold was granted with, which its guards extend (the first one given).
    pub(crate) fn set_limit(&self, limit: Arc<HoldLimit>) {
        let _ = self.limit.set(limit);
    }

    /// Extends the hold's `max_hold` by its limit from now, tells the metrics and, when the node
    /// carries zk-lock's holder description, writes the new end into it (in the background) for
    /// `zk-lock inspect`. Not a leader's node, whose data Curator reads as its id. `borrowed`:
    /// asked by the guard of a call nested in the holder, which may not extend the holder's limit.
    pub(crate) fn extend_max_hold(&self, borrowed: bool) -> Result<()> {
        if let Some(reason) = self.lost_reason() {
            return Err(self.lost_error(reason));
        }
        if borrowed {
            return Err(Error::invalid_argument(
                self.path(),
                "this guard borrows its holder's lock (a call nested in the holder); extend the max_hold \
                 from the holder's guard",
            ));
        }
        let Some(limit) = self.limit.get() else {
            return Err(Error::invalid_argument(
                self.path(),
                "this lock has no max_hold to extend; set one with `with_max_hold` or the attribute's `max_hold`",
            ));
        };
        let Some(ends_at) = limit.extend() else {
            // The end came: the timer is ending the hold, and tells it lost.
            return Err(self.lost_error(LostReason::MaxHoldReached { limit: limit.limit() }));
        };
        self.status.events().max_hold_extended(self.node_path(), limit.limit(), limit.extensions());
        if self.recipe != Recipe::Leader {
            background::spawn(hold_limit::note_in_node(self.session.zk.clone(), self.node_path().clone(), ends_at));
        }
        Ok(())
    }

    /// The lock path.
    pub(crate) fn path(&self) -> &str {
        self.status.events().path(self.node_path())
    }

    /// The granted node's path.
    pub(crate) fn node_path(&self) -> &Arc<str> {
        self.status.node_path()
    }

    /// Which recipe's lock it is.
    pub(crate) fn recipe(&self) -> Recipe {
        self.recipe
    }

    /// Whether this is a hold at `path` through the client `client`.
    pub(crate) fn is_at(&self, client: u64, path: &str) -> bool {
        self.client == client && self.path() == path
    }

    /// Its place among the locks held, for lock-order checking (`None` while checking is off).
    pub(crate) fn order_key(&self) -> Option<lock_order::HeldKey> {
        self.status.events().order_key()
    }

    /// The session the lock was granted on.
    pub(crate) fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Another share of this hold for a re-entrant acquisition, unless the lock was lost.
    pub(crate) fn reenter(self: Arc<Self>) -> Result<Arc<Self>> {
        match self.lost_reason() {
            Some(reason) => Err(self.lost_error(reason)),
            None => Ok(self),
        }
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.status.lost()
    }

    /// Whether a revocation was seen: by the session's watch on the node, or by a watch set
    /// while someone awaits [`revoked`](Self::revoked).
    pub(crate) fn is_revoked(&self) -> bool {
        self.status.is_revoked()
    }

    /// Resolves once someone asked the holder to give the lock up (Curator's `__REVOKE__`):
    /// while it is awaited, a watch on the node's data tells at once; the session's own follow-up
    /// tells within two heartbeat periods anyway.
    pub(crate) fn revoked(&self) -> impl Future<Output = ()> + Send + 'static {
        let (zk, status) = (self.session.zk.clone(), self.status.clone());
        async move {
            tokio::select! {
                () = status.until_revoked() => {}
                () = watch_for_revocation(&zk, &*status) => {}
            }
        }
    }

    /// Neither released nor lost, as the node's status says (a session's loss reaches it before
    /// anyone is told), and the client has not ended the session a moment before its monitor
    /// could record it.
    pub(crate) fn is_held(&self) -> bool {
        self.status.is_followed() && !self.session.zk.state().is_terminated()
    }

    pub(crate) fn lost_error(&self, reason: LostReason) -> Error {
        Error::lost(self.path(), reason)
    }

    /// Resolves when the lock is lost; never, if it is released first.
    pub(crate) fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let status = self.status.clone();
        async move { status.until_lost().await }
    }

    /// The annotated function holding this share finished its body; its guard is dropped next.
    /// Told to the testing kit's recordings when it is the last share (the drop releases).
    pub(crate) fn finished(hold: &Arc<Self>) {
        if Arc::strong_count(hold) == 1 {
            hold.status.tell(Change::Finished);
        }
    }

    /// Gives up one guard's share: the last share deletes the node and reports whether the
    /// lock was still ours; an inner re-entrant share only reports a loss.
    pub(crate) async fn release_shared(hold: Arc<Self>) -> Result<()> {
        match Arc::try_unwrap(hold) {
            Ok(hold) => hold.release().await,
            Err(shared) => match shared.lost_reason() {
                Some(reason) => Err(shared.lost_error(reason)),
                None => Ok(()),
            },
        }
    }

    /// Deletes the node now and reports whether the lock was still ours.
    async fn release(mut self) -> Result<()> {
        let delete = self.start_release(false);
        if let Some(reason) = self.lost_reason() {
            // Its reply settles the claim; dropped, the claim would send a second delete.
            if let Some(delete) = delete {
                background::spawn(delete);
            }
            return Err(self.lost_error(reason));
        }
        let Some(delete) = delete else { return Ok(()) };
        let mut delete = Box::pin(delete);
        let deleted = tokio::select! {
            biased;
            deleted = &mut delete => deleted,
            // Declared lost while the delete waits for a reconnect: say so now; the reply (or
            // the session's retirement) settles the node in the background.
            reason = self.session.lost_after(self.status.losses_seen()) => {
                background::spawn(delete);
                self.status.end(End::Lost(reason), false);
                return Err(self.lost_error(reason));
            }
        };
        match deleted {
            Ok(()) => {
                self.status.end(End::Released, false);
                Ok(())
            }
            Err(error) => match lost_by(&error) {
                Some(reason) => {
                    self.status.end(End::Lost(reason), false);
                    Err(self.lost_error(reason))
                }
                None => {
                    self.status.end(End::Failed(&error.to_string()), false);
                    Err(Error::from_zookeeper(error, self.path()))
                }
            },
        }
    }

    /// Lets the node go (`dropped`: by dropping the last guard) and sends the delete; the
    /// returned future awaits its reply and settles what it tells: the claim, and the waiters
    /// of this process behind the node. `None` if it was let go before.
    fn start_release(
        &mut self,
        dropped: bool,
    ) -> Option<impl Future<Output = std::result::Result<(), ZkError>> + Send + 'static> {
        if !self.status.let_go(dropped) {
            return None;
        }
        self.session.let_go(self.entry);
        let delete = delete_with_retry(&self.session.zk, self.node_path().clone());
        let (claim, status) = (self.claim.take(), self.status.clone());
        Some(async move {
            let deleted = delete.await;
            status.tell(Change::DeleteReplied(&deleted));
            if let Some(claim) = claim {
                claim.gone_if_deleted(&deleted);
            }
            deleted
        })
    }
}

/// The loss that a failed delete of a held node reveals, if it reveals one.
fn lost_by(error: &ZkError) -> Option<LostReason> {
    match error {
        ZkError::NoNode => Some(LostReason::NodeDeleted),
        ZkError::SessionExpired => Some(LostReason::SessionExpired),
        ZkError::ClientClosed | ZkError::AuthFailed => Some(LostReason::SessionClosed),
        _ => None,
    }
}

impl Drop for HeldNode {
    fn drop(&mut self) {
        // The delete request is sent here, in order; its reply is awaited in the background.
        if let Some(delete) = self.start_release(true) {
            let status = self.status.clone();
            background::spawn(async move {
                let how = match delete.await {
                    Ok(()) => End::Released,
                    Err(error) => match lost_by(&error) {
                        Some(reason) => End::Lost(reason),
                        // The error's text goes only to a released hold's recording.
                        None => End::Failed(""),
                    },
                };
                // A lock lost before ended then: this tells nothing.
                status.end(how, true);
            });
        }
    }
}
