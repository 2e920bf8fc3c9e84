//! [`revoke`]: Curator's cooperative revocation. Writing `__REVOKE__` into a holder's node asks
//! it to let go; the holder's guard reports the request and the holder decides.

use std::future::Future;

use zookeeper_client::{Client as ZkClient, Error as ZkError, Stat};

use super::participants::{read_participants, Role};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::layout::{trailing_sequence, REVOKE_MESSAGE};
use crate::path::validate_lock_path;
use crate::registry::default_client;

/// Asks every current holder of the lock at `path`, on the default client, to release it. See
/// [`revoke_with`].
///
/// # Errors
///
/// As [`revoke_with`], and [`Error::Connect`] if the default client has to be connected and that
/// fails.
///
/// # Cancel safety
///
/// As [`revoke_with`].
pub async fn revoke(path: &str) -> Result<usize> {
    revoke_with(&default_client().await?, path).await
}

/// Asks every current holder of the lock at `path` to release it, and returns how many were
/// asked.
///
/// The holders are those [`participants_with`](crate::participants_with) reports as
/// [`Role::Holder`]; into each of their nodes this writes `__REVOKE__`, as Curator's
/// `Revoker.attemptRevoke` does. zk-lock guards then resolve `revoked()` and Curator locks made
/// revocable call their `RevocationListener`; the lock stays held until its holder releases it.
/// Waiters are not asked. A holder that released its lock since the listing is skipped, and a
/// path with no holder (or no node at all) gives `0`.
///
/// ```no_run
/// # async fn demo(client: &zk_lock::Client) -> zk_lock::Result<()> {
/// let asked = zk_lock::revoke_with(client, "/locks/orders").await?;
/// println!("asked {asked} holder(s) to let go");
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// - [`Error::InvalidPath`] if `path` is not a valid lock path.
/// - [`Error::NoAuth`] naming `path` if the ACL of the lock's nodes does not let this client list
///   or read them, or write into a holder's node.
/// - [`Error::Zookeeper`] if ZooKeeper refuses a read or a write for another reason (session
///   expired).
/// - [`Error::ClientClosed`] once the client is closed
///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
///
/// # Cancel safety
///
/// Not atomic: if cancelled, the requests already sent are carried out and the others are not.
/// Asking twice is harmless, so calling it again completes the job.
pub async fn revoke_with(client: &Client, path: &str) -> Result<usize> {
    validate_lock_path(path)?;
    let session = client.session(path).await?;
    let zk = &session.zk;
    let holders: Vec<String> = read_participants(zk, path)
        .await
        .map_err(|e| e.at_path(path))?
        .into_iter()
        .filter(|p| p.role == Role::Holder)
        .map(|p| p.node_path)
        .collect();
    // Every write is sent before the first reply is awaited: one round trip for any number of holders.
    let writes: Vec<_> = holders.iter().map(|node| zk.set_data(node, REVOKE_MESSAGE, None)).collect();
    let mut asked = 0;
    for (node, write) in holders.iter().zip(writes) {
        match finish_write(zk, node, write).await {
            Ok(()) => asked += 1,
            // Released since the listing: nobody to ask.
            Err(ZkError::NoNode) => {}
            Err(error) => return Err(Error::from_zookeeper(error, path)),
        }
    }
    Ok(asked)
}

/// Asks the owner of the lock node `node_path` to release it, like Curator's
/// `Revoker.attemptRevoke`: writes `__REVOKE__` into the node, whoever owns it and whether or not
/// it holds the lock yet. Take node paths from [`participants_with`](crate::participants_with).
///
/// # Errors
///
/// - [`Error::InvalidPath`] if `node_path` is not a valid path, or its name does not end in a
///   sequence number as every lock node's does: this keeps a mistyped lock path or a shared
///   count from being overwritten.
/// - [`Error::Zookeeper`] of kind [`NoNode`](crate::ZookeeperErrorKind::NoNode) if the node does not exist
///   (its owner released it, or the path is wrong). Curator's `Revoker` ignores that case;
///   [`revoke_with`] skips it too.
/// - [`Error::NoAuth`] naming `node_path` if the node's ACL does not let this client write it.
/// - [`Error::Zookeeper`] if ZooKeeper refuses the write for another reason.
/// - [`Error::ClientClosed`] once the client is closed
///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
///
/// # Cancel safety
///
/// The write is sent on the first poll; if cancelled after that it may or may not be carried
/// out. Asking twice is harmless.
pub async fn revoke_node(client: &Client, node_path: &str) -> Result<()> {
    validate_lock_path(node_path)?;
    let name = node_path.rsplit('/').next().unwrap_or_default();
    if trailing_sequence(name).is_none() {
        return Err(Error::invalid_path(
            node_path,
            format!(
                "`{name}` is not a lock node, whose name ends in a sequence number; pass a node path \
                 from `participants()`, like `/locks/orders/_c_<uuid>-lock-0000000001`"
            ),
        ));
    }
    let session = client.session(node_path).await?;
    let zk = &session.zk;
    finish_write(zk, node_path, zk.set_data(node_path, REVOKE_MESSAGE, None))
        .await
        .map_err(|e| Error::from_zookeeper(e, node_path))
}

/// Awaits a `__REVOKE__` write, writing again after a broken connection hid its outcome: the
/// write is idempotent.
async fn finish_write(
    zk: &ZkClient,
    node_path: &str,
    first: impl Future<Output = std::result::Result<Stat, ZkError>>,
) -> std::result::Result<(), ZkError> {
    let mut reconnects = crate::zk::Reconnects::new(zk);
    let mut result = first.await;
    while let Err(error) = result {
        reconnects.wait(error).await?;
        result = zk.set_data(node_path, REVOKE_MESSAGE, None).await;
    }
    Ok(())
}
