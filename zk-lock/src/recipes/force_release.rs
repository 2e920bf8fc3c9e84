//! Releasing a stuck lock by hand, for operators: deleting the node of its holder (Redisson's
//! `forceUnlock`). A zk-lock holder is told through its follow-up of held nodes (its guard's
//! `lost()` resolves with `NodeDeleted`) and the waiters move up as after any release. A
//! holder that does not watch its own node (Curator, kazoo, a frozen process) is not told: only
//! fencing protects what it writes afterwards.

use super::participants::{participants_with, Participant, Role};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::zk::delete_with_retry;

/// Deletes the node of the one holder of the lock at `path`, as [`participants_with`] saw it
/// just before, and returns that holder (its node, session, data, age). A lock shared by several
/// holders (readers, semaphore leases) needs [`force_release_node`] naming one.
///
/// A zk-lock holder learns it within the follow-up bound of held nodes (docs/reliability.md);
/// the next waiter is granted as after a release.
///
/// # Errors
///
/// - [`Error::InvalidArgument`] naming `path` if no one holds the lock, or several do (the
///   message lists their nodes).
/// - As [`participants_with`] for reading the lock, and [`Error::NoAuth`] naming the node if
///   its parent's ACL does not let this client delete it.
/// - [`Error::Zookeeper`] of kind [`NoNode`](crate::ZookeeperErrorKind::NoNode) if the holder released it
///   between the read and the delete.
/// - [`Error::ClientClosed`] once the client is closed.
///
/// # Cancel safety
///
/// The delete is sent once the holder was read; cancelled after that, it may or may not be
/// carried out.
pub async fn force_release(client: &Client, path: &str) -> Result<Participant> {
    let found = participants_with(client, path).await?;
    let mut holders: Vec<Participant> = found.into_iter().filter(|p| p.role == Role::Holder).collect();
    match holders.len() {
        0 => Err(Error::invalid_argument(path, "no one holds the lock; there is nothing to release")),
        1 => force_release_participant(client, holders.remove(0)).await,
        n => {
            let nodes: Vec<&str> = holders.iter().map(|holder| holder.node_name.as_str()).collect();
            Err(Error::invalid_argument(
                path,
                format!(
                    "{n} holders share the lock ({}); name the one to release with `force_release_node` \
                     (`zk-lock revoke --force --node NAME`): {}",
                    holders[0].kind,
                    nodes.join(", ")
                ),
            ))
        }
    }
}

/// Deletes the node `node` (its name, or its full path) of the lock at `path`, holder or
/// waiter, and returns it as [`participants_with`] saw it just before.
///
/// # Errors
///
/// [`Error::InvalidArgument`] naming `path` if `node` is not one of its nodes (the message
/// lists them); otherwise as [`force_release`].
///
/// # Cancel safety
///
/// As [`force_release`].
pub async fn force_release_node(client: &Client, path: &str, node: &str) -> Result<Participant> {
    let found = participants_with(client, path).await?;
    let names: Vec<String> = found.iter().map(|p| p.node_name.clone()).collect();
    match found.into_iter().find(|p| p.node_path == node || p.node_name == node) {
        Some(participant) => force_release_participant(client, participant).await,
        None => Err(Error::invalid_argument(
            path,
            format!(
                "`{node}` is not a node of this lock; its nodes: {}",
                if names.is_empty() { "none".to_owned() } else { names.join(", ") }
            ),
        )),
    }
}

/// Deletes the node of `participant`, as [`participants_with`] read it (a caller that has the
/// lock's participants already, to choose one, need not have them read again), and returns it.
///
/// # Errors
///
/// [`Error::NoAuth`] naming the node if its parent's ACL does not let this client delete it;
/// [`Error::Zookeeper`] of kind [`NoNode`](crate::ZookeeperErrorKind::NoNode) if it is gone
/// already; [`Error::ClientClosed`] once the client is closed.
///
/// # Cancel safety
///
/// The delete is sent on the first poll; cancelled after that, it may or may not be carried
/// out.
pub async fn force_release_participant(client: &Client, participant: Participant) -> Result<Participant> {
    let node: std::sync::Arc<str> = participant.node_path.as_str().into();
    let session = client.session(&node).await?;
    tracing::warn!(
        target: "zk_lock",
        node = &*node,
        session = format_args!("0x{:x}", participant.session_id),
        holder = %String::from_utf8_lossy(&participant.data).escape_debug(),
        age_ms = participant.age.as_millis() as u64,
        "forcing the release of a lock node"
    );
    delete_with_retry(&session.zk, node.clone()).await.map_err(|e| Error::from_zookeeper(e, &node))?;
    Ok(participant)
}
