//! A session's end: asked for by `Client::close` (or by the shutdown of the runtime its I/O ran
//! on), and confirmed once ZooKeeper said the session is over (which deleted every ephemeral
//! node of it).

use std::sync::Mutex;

use super::node_table::{self, NodeTable};
use crate::state_cell::StateCell;

/// `Client::close` asked for the session to be ended on the server at once.
const CLOSE_ASKED: u8 = 1;
/// ZooKeeper confirmed that the session ended.
const ENDED: u8 = 2;
/// Someone took charge of closing it on the server (`retire`).
const RETIRING: u8 = 4;
/// The runtime that ran the session's I/O shut down: nothing more can be sent on it.
const IO_GONE: u8 = 8;

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

    /// The runtime that ran the session's I/O shut down: asks for the end at once.
    pub(super) fn io_gone(&self) {
        self.state.update(|state| (state & IO_GONE == 0).then_some(state | IO_GONE | CLOSE_ASKED), |_| {});
    }

    /// Whether [`io_gone`](Self::io_gone) was called.
    pub(super) fn is_io_gone(&self) -> bool {
        self.state.get() & IO_GONE != 0
    }

    /// Whether [`ask_close`](Self::ask_close) was called.
    pub(super) fn is_close_asked(&self) -> bool {
        self.state.get() & CLOSE_ASKED != 0
    }

    /// Resolves once [`ask_close`](Self::ask_close) was called.
    pub(super) async fn close_asked(&self) {
        self.state.wait_for(|state| (state & CLOSE_ASKED != 0).then_some(())).await;
    }

    /// Takes charge of closing the session on the server: `true` for the first caller only, so
    /// one retirement runs however many paths lead to it.
    pub(super) fn take_retirement(&self) -> bool {
        self.state.update(|state| (state & RETIRING == 0).then_some(state | RETIRING), |_| {})
    }

    /// Whether the end is confirmed.
    pub(super) fn is_confirmed(&self) -> bool {
        self.state.get() & ENDED != 0
    }

    /// Records that ZooKeeper confirmed the session's end: its nodes are gone.
    pub(super) fn confirm(&self, nodes: &Mutex<NodeTable>) {
        node_table::lock(nodes).end();
        self.state.update(|state| (state & ENDED == 0).then_some(state | ENDED), |_| {});
    }

    /// Resolves once the end is confirmed.
    pub(super) async fn confirmed(&self) {
        self.state.wait_for(|state| (state & ENDED != 0).then_some(())).await;
    }
}
