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
    /// Connected on a session: the first one, or a new one after [`Lost`](Self::Lost) (for a
    /// client of `Client::from_zookeeper`, its one session, once its connection came back after
    /// the loss).
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

    /// The state after `self` once the session followed has the connection `link`; `look`:
    /// what else this look saw.
    fn next(self, link: Link, look: Look) -> Self {
        match self {
            Self::Closed => Self::Closed,
            _ if link.terminated || look.new_losses => Self::Lost,
            // Lost until a connection is up that the loss did not see: a new session's, or the
            // same session's after it went down (a session the user opened outlives its loss).
            Self::Lost if !link.up || !look.came_back => Self::Lost,
            Self::Lost => Self::Connected,
            _ if !link.up => Self::Suspended,
            Self::Suspended => Self::Reconnected,
            connected => connected,
        }
    }
}

/// What a look at the session followed saw besides its connection.
#[derive(Debug, Clone, Copy, Default)]
struct Look {
    /// Its locks were lost since the last look.
    new_losses: bool,
    /// Its connection came up since its last loss: it is a new session, or went down since.
    came_back: bool,
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
    /// A listener that falls more than 64 changes behind skips the oldest. The state is taken
    /// from the session's connection as the client's follower looks at it: a flap shorter than
    /// that look (a few microseconds) may show as no change; a loss always shows.
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
    /// Its connection came up since its last loss (see [`Look::came_back`]).
    came_back: bool,
    /// It was seen down since its last loss.
    down_since_loss: bool,
}

impl Followed {
    /// Takes a look at the session followed: its connection, and what else changed.
    fn look(&mut self) -> Option<(Link, Look)> {
        let now = *self.link.as_ref()?.borrow();
        let new_losses = now.losses > self.losses;
        self.losses = now.losses;
        if new_losses {
            (self.came_back, self.down_since_loss) = (false, false);
        }
        self.down_since_loss |= !now.up;
        self.came_back |= now.up && self.down_since_loss;
        Some((now, Look { new_losses, came_back: self.came_back }))
    }
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
        self.follow_link(session.link());
    }

    fn follow_link(self: &Arc<Self>, link: watch::Receiver<Link>) {
        let generation = {
            let mut followed = self.followed();
            if followed.generation > 0 && followed.link.is_none() {
                return; // closed
            }
            // A last look at the session followed so far: its loss may not have been looked at
            // yet (a new session is opened as soon as the loss wakes an acquisition, before its
            // follower runs), and must be told before the new session's state.
            if let Some((old, look)) = followed.look() {
                self.set(|state| state.next(old, look));
            }
            followed.generation += 1;
            followed.losses = link.borrow().losses;
            // A new session: its connection is one the loss did not see.
            (followed.came_back, followed.down_since_loss) = (true, true);
            followed.link = Some(link.clone());
            if let Some((now, look)) = followed.look() {
                self.set(|state| state.next(now, look));
            }
            followed.generation
        };
        background::spawn(follow(Arc::downgrade(self), generation, link));
    }

    /// Takes a look at the session followed, and tells what changed.
    pub(super) fn refresh(&self) {
        let mut followed = self.followed();
        if let Some((now, look)) = followed.look() {
            self.set(|state| state.next(now, look));
        }
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
    const LOSS: Look = Look { new_losses: true, came_back: false };
    const SAME: Look = Look { new_losses: false, came_back: false };
    const BACK: Look = Look { new_losses: false, came_back: true };

    #[test]
    fn a_flap_on_one_session_is_suspended_then_reconnected() {
        assert_eq!(Connected.next(DOWN, SAME), Suspended);
        assert_eq!(Suspended.next(UP, SAME), Reconnected);
        assert_eq!(Reconnected.next(DOWN, SAME), Suspended);
        assert_eq!(Reconnected.next(UP, SAME), Reconnected);
    }

    #[test]
    fn a_loss_is_lost_until_a_connection_the_loss_did_not_see_is_up_then_connected() {
        assert_eq!(Suspended.next(ENDED, LOSS), Lost);
        assert_eq!(Connected.next(UP, LOSS), Lost, "locks lost on a session kept (a user's own)");
        assert_eq!(Lost.next(UP, SAME), Lost, "the connection that was up through the loss proves nothing");
        assert_eq!(Lost.next(DOWN, BACK), Lost, "a new session still connecting");
        assert_eq!(Lost.next(UP, BACK), Connected);
    }

    #[test]
    fn closed_stays_closed() {
        for link in [UP, DOWN, ENDED] {
            assert_eq!(Closed.next(link, LOSS), Closed);
        }
    }

    /// A session lost and replaced before its follower looked at the loss: the loss is told
    /// first, then the new session, never `Connected` (or `Reconnected`) alone.
    #[tokio::test]
    async fn a_loss_not_looked_at_before_a_new_session_is_told_first() {
        let tracker = StateTracker::new();
        let mut changes = tracker.changes();
        let (old, old_link) = watch::channel(UP);
        tracker.follow_link(old_link);
        old.send_replace(DOWN);
        tracker.refresh();
        assert_eq!(changes.next().await, Some(Suspended));
        // The old session ends and a new one is up at once, before anyone looks at the old.
        old.send_replace(ENDED);
        let (_new, new_link) = watch::channel(UP);
        tracker.follow_link(new_link);
        assert_eq!(changes.next().await, Some(Lost));
        assert_eq!(changes.next().await, Some(Connected));
        assert_eq!(tracker.get(), Connected);
    }
}
