//! Holds: what a granted node becomes. A held node is shared by the guards of re-entrant
//! acquisitions, followed by its session for loss and revocation, and deleted exactly
//! once when the last guard goes; a holder's scope is the code nested in it, the only code that
//! may re-enter it; `lock_guard!` makes the public guard types.
//!
//! May use: `engine` (a grant), `session`, `zk`, `layout` and the foundations. Not clients:
//! a held node knows its client by a number only.

pub(crate) mod grant_log;
pub(crate) mod guard;
mod held_node;
mod hold_events;
pub(crate) mod hold_limit;
mod revocation_watch;
pub(crate) mod scope;

pub(crate) use held_node::HeldNode;
pub(crate) use scope::Share;
