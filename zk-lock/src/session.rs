//! One ZooKeeper session and the watch on its health that tells guards when their locks are lost.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zookeeper_client::{SessionState, StateWatcher};

use crate::background;
use crate::error::LostReason;

/// What guards need to know about their session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Health {
    /// How many times locks of this session were lost; a guard compares it with the value it
    /// saw when its lock was granted, so a loss followed by a reconnect is still seen.
    pub losses: u64,
    /// Why the last loss happened.
    pub reason: Option<LostReason>,
    /// The session can never serve requests again; new acquisitions need a new session.
    pub terminated: bool,
}

/// A live ZooKeeper session shared by the client and every guard acquired on it.
#[derive(Debug)]
pub(crate) struct Session {
    pub zk: zookeeper_client::Client,
    health: watch::Receiver<Health>,
    monitor: JoinHandle<()>,
}

impl Session {
    pub(crate) fn new(zk: zookeeper_client::Client) -> Arc<Self> {
        let (sender, health) = watch::channel(Health::default());
        let states = zk.state_watcher();
        let monitor = background::spawn(monitor(states, zk.session_timeout(), sender));
        Arc::new(Self { zk, health, monitor })
    }

    pub(crate) fn health(&self) -> Health {
        *self.health.borrow()
    }

    pub(crate) fn is_usable(&self) -> bool {
        !self.health().terminated && !self.zk.state().is_terminated()
    }

    /// Resolves with the reason once the session loses its locks after `losses_seen` losses.
    pub(crate) async fn lost_after(&self, losses_seen: u64) -> LostReason {
        let mut health = self.health.clone();
        // The monitor only stops after a terminal state, which it reports first.
        let reason = health.wait_for(|h| h.losses > losses_seen).await.ok().and_then(|h| h.reason);
        reason.unwrap_or(LostReason::SessionClosed)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The monitor would otherwise wait forever on a session that no one uses.
        self.monitor.abort();
    }
}

/// Follows the session's states: a terminal state loses every lock at once; a disconnection
/// loses them once it has lasted a whole session timeout, as Curator's LOST does, because by
/// then the server has most likely expired the session and another holder may have the lock.
async fn monitor(mut states: StateWatcher, session_timeout: Duration, health: watch::Sender<Health>) {
    let mut state = states.state();
    loop {
        if let Some(reason) = terminal_reason(state) {
            health.send_modify(|h| lose(h, reason, true));
            return;
        }
        if state == SessionState::Disconnected {
            match tokio::time::timeout(session_timeout, states.changed()).await {
                Ok(next) => {
                    state = next;
                    continue;
                }
                Err(_) => health.send_modify(|h| lose(h, LostReason::ConnectionLost, false)),
            }
        }
        state = states.changed().await;
    }
}

fn terminal_reason(state: SessionState) -> Option<LostReason> {
    match state {
        SessionState::Expired => Some(LostReason::SessionExpired),
        SessionState::Closed | SessionState::AuthFailed => Some(LostReason::SessionClosed),
        _ => None,
    }
}

fn lose(health: &mut Health, reason: LostReason, terminated: bool) {
    health.losses += 1;
    health.reason = Some(reason);
    health.terminated |= terminated;
}
