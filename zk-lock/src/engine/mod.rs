//! The sequence-node engine shared by every recipe: create a node in the queue, list the queue,
//! wait for the nodes a recipe says must go first, and clean up on every way out.

mod acquire;
mod claim;
mod failed;
mod handoff;
mod lease;
mod local_nodes;
pub(crate) mod node_name;
mod parents;
mod pending;
mod retry;

pub(crate) use acquire::{acquire, Granted, LockSpec, Wait};
pub(crate) use claim::Claim;
pub(crate) use lease::{acquire_leases, LeaseLimit, LeaseSpec};
pub(crate) use local_nodes::LocalNode;
pub(crate) use parents::create_containers;
pub(crate) use retry::{delete_with_retry, Reconnects};
