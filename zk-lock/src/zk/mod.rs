//! ZooKeeper operations every layer above needs: riding out broken connections, deleting and
//! listing across them, creating container parents, finding a protected node again.
//!
//! May use: `session` and the foundations; nothing above. No lock logic: these are single
//! operations on one zookeeper-client session.

mod containers;
mod list;
mod protected;
mod retry;

pub(crate) use containers::{create_containers, CreatedParents};
pub(crate) use list::list_children;
pub(crate) use protected::find_protected;
pub(crate) use retry::{broke_connection, delete_with_retry, until_connected, Reconnects};
