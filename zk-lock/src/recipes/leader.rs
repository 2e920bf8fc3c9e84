//! [`LeaderElection`]: Curator's `LeaderSelector`, a mutex whose holder leads.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use futures::FutureExt;

use super::participants::participants_with;
use super::patience::Patience;
use super::target::LockTarget;
use crate::error::Result;
use crate::layout::{ParticipantKind, Recipe};
use crate::recipes::participants::{Participant, Role};

/// Leader election at a ZooKeeper path, compatible with Curator's `LeaderSelector`: one
/// participant leads at a time, in the order they asked, among Rust and Java processes alike.
///
/// The leader holds a [`Mutex`](crate::Mutex) at the election's path, as Curator's leader holds
/// an `InterProcessMutex` there: [`lead`](Self::lead) waits for it and returns a [`Leadership`],
/// whose [`lost`](Leadership::lost) resolves when the process may no longer act as the leader
/// (told before anyone else can lead: the session's silence, its expiry, the node deleted,
/// `max_hold`), whose fencing token grows with each leader, and which
/// [`resign`](Leadership::resign)s (or is dropped) to let the next participant lead. An
/// id set with [`with_id`](Self::with_id) is the node's data, as `LeaderSelector.setId` writes
/// it: Curator's `getLeader()` and [`leader`](Self::leader) read it back.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// let election = zk_lock::LeaderElection::new("/jobs/billing").with_id("billing-worker-7");
/// loop {
///     let leadership = election.lead().await?;
///     // Run while leading; stop as soon as the leadership is lost.
///     tokio::select! {
///         reason = leadership.lost() => eprintln!("no longer leading: {reason}"),
///         () = run_billing(leadership.fencing_token()) => leadership.resign().await?,
///     }
/// }
/// # }
/// # async fn run_billing(_token: i64) {}
/// ```
///
/// For a function that runs only while this process leads, see `#[zk_leader]`.
#[derive(Clone)]
pub struct LeaderElection {
    target: LockTarget,
}

impl LeaderElection {
    lock_path_api!(constructors: "leader election");
    lock_path_api!(settings: "leader election", target);
    lock_path_api!(queue_reports: "leader election");

    pub(crate) fn on(target: LockTarget) -> Self {
        Self { target }
    }

    /// This participant's id, the data of its node (Curator's `LeaderSelector.setId`; default:
    /// `host=.. pid=.. task=..`): what [`leader`](Self::leader), `participants` and
    /// `zk-lock inspect` show of the leader.
    #[must_use]
    pub fn with_id(self, id: impl Into<String>) -> Self {
        self.with_data(id.into())
    }

    /// Waits until this participant leads, for at most the client's default timeout (none
    /// unless configured: as long as it takes, like Curator's `LeaderSelector`).
    ///
    /// # Errors
    ///
    /// As [`Mutex::lock`](crate::Mutex::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves the election (its node is deleted in the
    /// background).
    pub async fn lead(&self) -> Result<Leadership> {
        self.acquire(Patience::client_default()).await
    }

    /// Waits until this participant leads, for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`](crate::Error::Timeout) if another participant still leads (or was
    /// ahead) when `timeout` passes; otherwise as [`lead`](Self::lead).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lead`](Self::lead).
    pub async fn lead_timeout(&self, timeout: Duration) -> Result<Leadership> {
        self.acquire(Patience::timeout(timeout)).await
    }

    /// Leads now if nobody else leads or waits ahead, without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`](crate::Error::Busy) if another participant leads or is ahead; otherwise
    /// as [`lead`](Self::lead).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lead`](Self::lead).
    pub async fn try_lead(&self) -> Result<Leadership> {
        self.acquire(Patience::one_attempt()).await
    }

    /// The participant that leads now, if any: this process's or another's, zk-lock's or
    /// Curator's (its node's data is its id). Read from ZooKeeper now.
    ///
    /// # Errors
    ///
    /// As [`participants_with`](crate::participants_with).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Participant>> {
        let client = self.target.client_within(Patience::client_default()).await?;
        let participants = participants_with(&client, &self.target.path).await?;
        let leads = |p: &Participant| p.kind == ParticipantKind::Mutex && p.role == Role::Holder;
        Ok(participants.into_iter().find(leads))
    }

    /// Not an `async fn`, whose frame would keep `patience` twice in every waiting participant.
    pub(crate) fn acquire(&self, patience: Patience) -> impl Future<Output = Result<Leadership>> + '_ {
        self.target.acquire(Recipe::Leader, patience).map(|share| share.map(Leadership::new))
    }
}

impl fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElection").field("path", &self.target.path).finish_non_exhaustive()
    }
}

crate::holds::guard::lock_guard! {
    /// Proof that its owner leads a [`LeaderElection`]: act as the leader only while it is held,
    /// and stop when [`lost`](Self::lost) resolves.
    ///
    /// [`resign`](Self::resign) (or [`release`](Self::release)) gives the leadership up and says
    /// whether it was still held until then; dropping it does the same in the background, which
    /// also covers cancellation and panics. The next participant in line leads then.
    Leadership
}

impl Leadership {
    /// Gives the leadership up: [`release`](Self::release), by its election's name.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release): [`Error::Lost`](crate::Error::Lost) if the leadership was
    /// lost before (the next leader may have acted meanwhile).
    ///
    /// # Cancel safety
    ///
    /// As [`release`](Self::release).
    pub async fn resign(self) -> Result<()> {
        self.release().await
    }
}
