//! The node behind a [`SharedCount`](crate::SharedCount): creating it, reading its 4 bytes, and
//! following its changes across sessions for as long as the count exists.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zookeeper_client::{Acls, Client as ZkClient, CreateMode, Error as ZkError, EventType, Stat};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::zk::{create_containers, Reconnects};

/// A count and the version of the node it was read from (Curator's `VersionedValue<Integer>`).
///
/// Pass [`version`](Self::version) to [`SharedCount::try_set`](crate::SharedCount::try_set) to change the count only if
/// nobody changed it since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionedCount {
    /// The count.
    pub value: i32,
    /// The ZooKeeper data version of the node; `-1` until the node was read.
    pub version: i32,
    /// The zxid of the change that wrote it: an older read never replaces a newer one.
    pub(super) zxid: i64,
}

/// How long the watch waits before trying again after an error it cannot ride out.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// Keeps `newer` unless the cache already has a later change.
pub(super) fn publish(value: &watch::Sender<VersionedCount>, newer: VersionedCount) {
    value.send_if_modified(|current| {
        let newer_change = newer.zxid > current.zxid;
        if newer_change {
            *current = newer;
        }
        newer_change
    });
}

/// Reads a count node's data: exactly 4 big-endian bytes, as Curator writes them.
pub(super) fn decode(path: &str, data: &[u8], stat: &Stat) -> Result<VersionedCount> {
    let bytes: [u8; 4] = data.try_into().map_err(|_| {
        Error::invalid_argument(
            path,
            format!(
                "the node holds {} bytes of data, not the 4-byte big-endian integer of a shared count \
                 (Curator's SharedCount); it is used by something else, so choose another path",
                data.len()
            ),
        )
    })?;
    Ok(VersionedCount { value: i32::from_be_bytes(bytes), version: stat.version, zxid: stat.mzxid })
}

pub(super) type DataWatch = zookeeper_client::OneshotWatcher;

/// Creates the node if missing and reads it with a watch; both requests are sent back to back.
/// Like Curator's `SharedValue.start`, the node is PERSISTENT and its parents containers, all
/// with the client's `acls`.
pub(super) async fn create_and_watch(
    zk: &ZkClient,
    path: &str,
    initial: i32,
    acls: Acls<'_>,
) -> Result<(VersionedCount, DataWatch)> {
    let options = CreateMode::Persistent.with_acls(acls);
    let mut reconnects = Reconnects::new(zk);
    let mut made_parents = None;
    loop {
        let create = zk.create(path, &initial.to_be_bytes(), &options);
        let read = zk.get_and_watch_data(path);
        let (created, read) = tokio::join!(create, read);
        match created {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(ZkError::NoNode) => {
                made_parents = Some(create_containers(zk, &path[..path.rfind('/').unwrap_or(0)], acls).await?);
                continue;
            }
            // The parents just made refuse this client: remove them (see `CreatedParents`).
            Err(ZkError::NoAuth) => {
                if let Some(made) = made_parents.take() {
                    made.remove(zk).await;
                }
                return Err(Error::from_zookeeper(ZkError::NoAuth, path));
            }
            // A create applied before the reply was lost shows as NodeExists next time.
            Err(error) => {
                reconnects.wait(error).await.map_err(Error::from_zk)?;
                continue;
            }
        }
        match read {
            Ok((data, stat, watcher)) => return Ok((decode(path, &data, &stat)?, watcher)),
            // Deleted between our create and our read: create it again.
            Err(ZkError::NoNode) => continue,
            Err(error) => reconnects.wait(error).await.map_err(Error::from_zk)?,
        }
    }
}

/// Follows the node's changes for as long as the shared count exists: every watch event reads
/// it again (with a new watch) and publishes the count. A deleted node is waited for with an
/// `exists` watch; an expired session is replaced by the client's next one. Data that is not a
/// count is skipped ([`SharedCount::read`](crate::SharedCount::read) reports it).
pub(super) async fn follow(
    client: Client,
    mut session: Arc<Session>,
    path: String,
    first: DataWatch,
    value: Arc<watch::Sender<VersionedCount>>,
) {
    let mut watcher = Some(first);
    loop {
        if let Some(watcher) = watcher.take() {
            let event = watcher.changed().await;
            if event.event_type == EventType::Session && event.session_state.is_terminated() {
                match renew(&client, &path).await {
                    Some(fresh) => session = fresh,
                    None => return,
                }
            }
        }
        let zk = &session.zk;
        match zk.get_and_watch_data(&path).await {
            Ok((data, stat, next)) => {
                if let Ok(count) = decode(&path, &data, &stat) {
                    publish(&value, count);
                }
                watcher = Some(next);
            }
            Err(ZkError::NoNode) => match zk.check_and_watch_stat(&path).await {
                Ok((None, next)) => watcher = Some(next),
                // Created meanwhile: read it.
                Ok((Some(_), _)) => {}
                Err(error) => {
                    if !ride_out(&client, &mut session, &path, error).await {
                        return;
                    }
                }
            },
            Err(error) => {
                if !ride_out(&client, &mut session, &path, error).await {
                    return;
                }
            }
        }
    }
}

/// After a failed request: waits for the connection, or moves to the client's next session.
/// `false` if there will be no next session.
async fn ride_out(client: &Client, session: &mut Arc<Session>, path: &str, error: ZkError) -> bool {
    let terminal = matches!(error, ZkError::SessionExpired | ZkError::ClientClosed | ZkError::AuthFailed);
    if !terminal && Reconnects::new(&session.zk).wait(error).await.is_ok() {
        return true;
    }
    if session.is_usable() {
        // An error the connection does not explain: try again a little later.
        tokio::time::sleep(RETRY_DELAY).await;
        return true;
    }
    match renew(client, path).await {
        Some(fresh) => {
            *session = fresh;
            true
        }
        None => false,
    }
}

/// The client's next session, once it can open one; `None` for a client that cannot renew, or
/// that was closed.
async fn renew(client: &Client, path: &str) -> Option<Arc<Session>> {
    if !client.is_renewable() {
        return None;
    }
    loop {
        match client.session(path).await {
            Ok(session) if session.is_usable() => return Some(session),
            Err(Error::ClientClosed { .. }) => return None,
            _ => tokio::time::sleep(RETRY_DELAY).await,
        }
    }
}
