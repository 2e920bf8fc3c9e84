//! The runtime a session's I/O runs on: the one that opened it, so that a request and its reply
//! never cross threads (a hop between the caller's thread and another one cost 20 to 60 µs of
//! CPU per request, measured on a 2-core VM, and a grant takes five requests). When that runtime
//! shuts down (the end of `main`, of a `#[tokio::test]`, of a `block_on`), the session can send
//! nothing more, and deletes still queued on it are never sent: it is then closed as
//! `Client::close` closes it, its locks reported lost first, through a connection of zk-lock's
//! own runtime, so its nodes go at once instead of at its expiry. The client opens a new session
//! for its next acquisition, on the runtime that makes it.

use std::sync::Weak;

use tokio::time::Instant;

use super::retire::Retirement;
use super::Session;

/// Watches, from a task of the runtime that opened `session`, for that runtime's shutdown
/// (which drops the task). Does nothing outside a tokio runtime.
pub(super) fn watch_for_shutdown(session: Weak<Session>, retirement: Retirement) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let end = retirement.end().clone();
    let mut on_shutdown = OnShutdown { session, retirement: Some(retirement) };
    runtime.spawn(async move {
        end.confirmed().await;
        // Ended on the server: nothing is left to close.
        on_shutdown.disarm();
    });
}

/// Dropped with its task: when the runtime shuts down before the session's end was confirmed.
struct OnShutdown {
    session: Weak<Session>,
    retirement: Option<Retirement>,
}

impl OnShutdown {
    fn disarm(&mut self) {
        self.retirement = None;
    }
}

impl Drop for OnShutdown {
    fn drop(&mut self) {
        let Some(retirement) = self.retirement.take() else { return };
        retirement.end().io_gone();
        // A session still in use is closed by its monitor, which tells its guards first; one
        // that was dropped has no guard to tell, and no monitor.
        if self.session.upgrade().is_none() {
            retirement.start(Instant::now());
        }
    }
}
