//! [`ConnectionState`]: what a client can do with ZooKeeper now, for health checks and
//! listeners, followed from its current session.
//!
//! ```text
//!            connection down               not back within the told-first bound,
//!  Connected ───────────────▶ Suspended ─── or the session expired or was closed ──▶ Lost
//!      ▲  ▲                    │    ▲                                                  │
//!      │  │   connection back  │    │ down again                                       │
//!      │  │   (same session,   ▼    │                                                  │
//!      │  └── Reconnected ◀────┘────┘                                                  │
//!      │                                                                               │
//!      └─────────── a new session's connection is up (an acquisition or `ready()`) ◀───┘
//!
//!  any state ── Client::close ──▶ Closed
//! ```

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::{broadcast, watch};

use crate::background;
use crate::session::{Link, Session};

/// What a [`Client`](crate::Client) can do with ZooKeeper now: Curator's `ConnectionState`,
/// with zk-lock's told-first bound deciding when a silent connection means the locks are lost.
///
/// Read it with [`Client::connection_state`](crate::Client::connection_state), follow its
/// changes with [`Client::connection_states`](crate::Client::connection_states), and answer a
/// readiness probe with [`Client::is_ready`](crate::Client::is_ready) or
/// [`Client::ready`](crate::Client::ready). It describes the client's most recent session; a
/// held lock reports its own loss through its guard's `lost()`, which is the signal to stop
/// work, and comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Connected on a session: the first one, or a new one after [`Lost`](Self::Lost).
    Connected,
    /// The connection is down. The session and its locks may survive: they are lost if the
    /// connection is not back within the told-first bound (0.8 × the session timeout after the
    /// last proof that the leader renewed the session; docs/reliability.md).
    Suspended,
    /// The connection is back on the same session after [`Suspended`](Self::Suspended): its
    /// locks were kept.
    Reconnected,
    /// The session's locks were lost: it expired, it was closed, or its connection stayed silent
    /// past the told-first bound (the session is then ended on the server). The next
    /// acquisition, or [`Client::ready`](crate::Client::ready), opens a new session.
    Lost,
    /// [`Client::close`](crate::Client::close) was called: nothing more happens.
    Closed,
}

impl ConnectionState {
    /// Whether locks can be taken now without opening a session: [`Connected`](Self::Connected)
    /// or [`Reconnected`](Self::Reconnected).
    pub fn is_connected(self) -> bool {
        matches!(self, Self::Connected | Self::Reconnected)
    }

    /// The state after `self` once the current session's connection is `link`; `new_losses`:
    /// its locks were lost since the last look.
    fn next(self, link: Link, new_losses: bool) -> Self {
        match self {
            Self::Closed => Self::Closed,
            _ if link.terminated || new_losses => Self::Lost,
            Self::Lost if !link.up => Self::Lost,
            _ if !link.up => Self::Suspended,
            Self::Suspended => Self::Reconnected,
            Self::Lost => Self::Connected,
            connected => connected,
        }
    }
}

/// Changes of a client's [`ConnectionState`], in order, from
/// [`Client::connection_states`](crate::Client::connection_states).
#[derive(Debug)]
pub struct ConnectionStates {
    changes: broadcast::Receiver<ConnectionState>,
    closed: bool,
}

impl ConnectionStates {
    /// The next change, in the order they happened; `None` after [`Closed`](ConnectionState::Closed).
    /// A listener that falls more than 64 changes behind skips the oldest.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a change is taken only when it is returned.
    pub async fn next(&mut self) -> Option<ConnectionState> {
        if self.closed {
            return None;
        }
        loop {
            match self.changes.recv().await {
                Ok(state) => {
                    self.closed = state == ConnectionState::Closed;
                    return Some(state);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// A client's state, and who is told of its changes.
#[derive(Debug)]
pub(super) struct StateTracker {
    state: watch::Sender<ConnectionState>,
    changes: broadcast::Sender<ConnectionState>,
    /// The session followed: the client's most recent. Under its lock each look at it is taken
    /// and told in turn.
    followed: Mutex<Followed>,
}

#[derive(Debug, Default)]
struct Followed {
    /// Counts the sessions followed: a follower task of an earlier one stops.
    generation: u64,
    /// The session's connection; `None` once the client is closed.
    link: Option<watch::Receiver<Link>>,
    /// Its loss count at the last look.
    losses: u64,
}

impl StateTracker {
    /// Changes kept for a listener that does not keep up.
    const KEPT: usize = 64;

    pub(super) fn new() -> Arc<Self> {
        let (state, _) = watch::channel(ConnectionState::Connected);
        let (changes, _) = broadcast::channel(Self::KEPT);
        Arc::new(Self { state, changes, followed: Mutex::default() })
    }

    pub(super) fn get(&self) -> ConnectionState {
        *self.state.borrow()
    }

    pub(super) fn changes(&self) -> ConnectionStates {
        ConnectionStates { changes: self.changes.subscribe(), closed: self.get() == ConnectionState::Closed }
    }

    /// From now on the state follows `session` (the client's most recent), until a later one.
    pub(super) fn follow(self: &Arc<Self>, session: &Session) {
        let link = session.link();
        let generation = {
            let mut followed = self.followed();
            if followed.generation > 0 && followed.link.is_none() {
                return; // closed
            }
            followed.generation += 1;
            followed.losses = link.borrow().losses;
            followed.link = Some(link.clone());
            followed.generation
        };
        self.refresh();
        background::spawn(follow(Arc::downgrade(self), generation, link));
    }

    /// Takes a look at the session followed, and tells what changed.
    pub(super) fn refresh(&self) {
        let mut followed = self.followed();
        let Some(link) = &followed.link else { return };
        let now = *link.borrow();
        let new_losses = now.losses > followed.losses;
        followed.losses = now.losses;
        self.set(|state| state.next(now, new_losses));
    }

    /// [`Client::close`](crate::Client::close) was called.
    pub(super) fn close(&self) {
        let mut followed = self.followed();
        followed.generation += 1;
        followed.link = None;
        self.set(|_| ConnectionState::Closed);
    }

    fn followed(&self) -> MutexGuard<'_, Followed> {
        self.followed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, next: impl FnOnce(ConnectionState) -> ConnectionState) {
        let mut changed = None;
        self.state.send_if_modified(|state| {
            let next = next(*state);
            changed = (next != *state).then_some(next);
            *state = next;
            changed.is_some()
        });
        if let Some(state) = changed {
            // Nobody listening is no error.
            let _ = self.changes.send(state);
        }
    }
}

/// Has `tracker` look at a session's connection (`link`) at each change, while it is the session
/// followed (`generation`) and it can still change.
async fn follow(tracker: Weak<StateTracker>, generation: u64, mut link: watch::Receiver<Link>) {
    while link.changed().await.is_ok() {
        let Some(tracker) = tracker.upgrade() else { return };
        if tracker.followed().generation != generation {
            return;
        }
        tracker.refresh();
        if link.borrow().terminated {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ConnectionState::*;
    use super::*;

    const UP: Link = Link { up: true, losses: 0, terminated: false };
    const DOWN: Link = Link { up: false, losses: 0, terminated: false };
    const ENDED: Link = Link { up: false, losses: 1, terminated: true };

    #[test]
    fn a_flap_on_one_session_is_suspended_then_reconnected() {
        assert_eq!(Connected.next(DOWN, false), Suspended);
        assert_eq!(Suspended.next(UP, false), Reconnected);
        assert_eq!(Reconnected.next(DOWN, false), Suspended);
        assert_eq!(Reconnected.next(UP, false), Reconnected);
    }

    #[test]
    fn a_loss_is_lost_until_a_connection_is_up_again_then_connected() {
        assert_eq!(Suspended.next(ENDED, true), Lost);
        assert_eq!(Connected.next(UP, true), Lost, "locks lost on a session kept (a user's own)");
        assert_eq!(Lost.next(DOWN, false), Lost, "a new session still connecting");
        assert_eq!(Lost.next(UP, false), Connected);
    }

    #[test]
    fn closed_stays_closed() {
        for link in [UP, DOWN, ENDED] {
            assert_eq!(Closed.next(link, true), Closed);
        }
    }
}
