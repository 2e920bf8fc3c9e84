//! A session's end: asked for by `Client::close`, and confirmed once ZooKeeper said the session
//! is over (which deleted every ephemeral node of it).

use std::sync::Mutex;

use super::ledger::{self, Ledger};
use crate::state_cell::StateCell;

/// `Client::close` asked for the session to be ended on the server at once.
const CLOSE_ASKED: u8 = 1;
/// ZooKeeper confirmed that the session ended.
const ENDED: u8 = 2;

/// Shared by the session, its monitor and its retirement.
#[derive(Debug)]
pub(super) struct SessionEnd {
    state: StateCell,
}

impl SessionEnd {
    pub(super) fn new() -> Self {
        Self { state: StateCell::new(0) }
    }

    /// Asks for the session to be ended at once.
    pub(super) fn ask_close(&self) {
        self.state.update(|state| (state & CLOSE_ASKED == 0).then_some(state | CLOSE_ASKED), |_| {});
    }

    /// Whether [`ask_close`](Self::ask_close) was called.
    pub(super) fn is_close_asked(&self) -> bool {
        self.state.get() & CLOSE_ASKED != 0
    }

    /// Resolves once [`ask_close`](Self::ask_close) was called.
    pub(super) async fn close_asked(&self) {
        self.state.wait_for(|state| (state & CLOSE_ASKED != 0).then_some(())).await;
    }

    /// Records that ZooKeeper confirmed the session's end: its nodes are gone.
    pub(super) fn confirm(&self, ledger: &Mutex<Ledger>) {
        ledger::lock(ledger).end();
        self.state.update(|state| (state & ENDED == 0).then_some(state | ENDED), |_| {});
    }

    /// Resolves once the end is confirmed.
    pub(super) async fn confirmed(&self) {
        self.state.wait_for(|state| (state & ENDED != 0).then_some(())).await;
    }
}
