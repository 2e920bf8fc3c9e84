//! Holds: what a granted node becomes. A held node is shared by the guards of re-entrant
//! acquisitions, followed by its session's heartbeat for loss and revocation, and deleted exactly
//! once when the last guard goes; the hold
//! table finds the node a task already holds; `lock_guard!` makes the public guard types.
//!
//! May use: `engine` (a grant), `session`, `zk`, `layout` and the foundations. Not clients:
//! a client owns a hold table, and a held node keeps only that table.

pub(crate) mod guard;
mod held_node;
mod hold_events;
mod revocation_watch;
mod table;

pub(crate) use held_node::{HeldNode, HoldTable};
