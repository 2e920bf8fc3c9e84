//! The orphan oracle: every ephemeral node a client's sessions own on the server must be a node
//! the library still holds, waits with, or is deleting. Any other node is one the library
//! abandoned, which would block its lock path until the session ends.

use std::fmt;

use zookeeper_client::Error as ZkError;

use crate::{Client, Error, Result};

/// A node on the server that the library does not account for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// The node's path, as the client sees it (under its namespace).
    pub path: String,
    /// The session that owns it.
    pub session: i64,
    /// The node's data (the holder description of lock nodes: `host=.. pid=.. task=..`).
    pub data: Vec<u8>,
}

impl fmt::Display for Orphan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (session {:#x}, data {:?})", self.path, self.session, String::from_utf8_lossy(&self.data))
    }
}

/// What [`audit`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    /// Nodes of the client's live sessions that the library does not account for.
    pub orphans: Vec<Orphan>,
    /// Ephemeral nodes of the client's live sessions under the root, orphans included.
    pub ephemerals: usize,
    /// Sessions whose locks were declared lost and that are waiting to be closed on the server
    /// (the server is unreachable from them yet). Their nodes cannot be listed and are all the
    /// library's to end; an audit at a quiet moment should find none.
    pub retiring: Vec<i64>,
}

/// Compares the ephemeral nodes under `root` of each live session of `client` with the nodes
/// the library is responsible for on it (held, waiting, or being deleted), and returns the
/// difference.
///
/// # Errors
///
/// The ZooKeeper error of a listing that failed on a usable session (not connected, say).
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn audit(client: &Client, root: &str) -> Result<Audit> {
    let mut audit = Audit::default();
    for session in client.open_sessions() {
        let id = session.zk.session_id().0;
        if !session.is_usable() {
            if !session.nodes().has_ended() {
                audit.retiring.push(id);
            }
            continue;
        }
        let ephemerals = match session.zk.list_ephemerals(root).await {
            Ok(paths) => paths,
            Err(ZkError::SessionExpired | ZkError::ClientClosed) => continue,
            Err(error) => return Err(Error::from_zk(error)),
        };
        // Read after the listing: a node made since is in the node table by now.
        let owned = session.nodes().nodes();
        // The server lists every path that starts with `root`, `/run1` and `/run10/..` alike.
        let under_root = |path: &String| path == root || path.starts_with(&format!("{}/", root.trim_end_matches('/')));
        for path in ephemerals.into_iter().filter(under_root) {
            audit.ephemerals += 1;
            if owned.iter().any(|node| node.matches(&path)) {
                continue;
            }
            let data = match session.zk.get_data(&path).await {
                Ok((data, _)) => data,
                // Deleted since it was listed: it was going anyway.
                Err(ZkError::NoNode) => continue,
                Err(error) => return Err(Error::from_zk(error)),
            };
            audit.orphans.push(Orphan { path, session: id, data });
        }
    }
    Ok(audit)
}
