//! Listing a node's children across broken connections.

use zookeeper_client::{Client as ZkClient, Error as ZkError};

use super::retry::Reconnects;

/// The children of `path`, retried after a broken connection (a listing is safe to repeat).
pub(crate) async fn list_children(zk: &ZkClient, path: &str) -> Result<Vec<String>, ZkError> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        match zk.list_children(path).await {
            Err(error) => reconnects.wait(error).await?,
            ok => return ok,
        }
    }
}
