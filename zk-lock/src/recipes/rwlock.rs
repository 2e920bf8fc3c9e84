//! [`RwLock`]: Curator's `InterProcessReadWriteLock`, fair, re-entrant, with downgrade.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::{Acls, CheckWriteError, CreateMode, Error as ZkError, MultiWriteResult};

use super::patience::Patience;
use super::target::LockTarget;
use crate::client::Client;
use crate::engine::{Claim, Grant};
use crate::error::{Error, LostReason, Result};
use crate::holds::grant_log::Granted;
use crate::holds::{HeldNode, Share};
use crate::layout::{downgraded_read_name, new_protected_prefix, Recipe};
use crate::path::ChildPath;
use crate::trace;
use crate::zk::Reconnects;

/// A distributed read/write lock at a ZooKeeper path, compatible with Curator's
/// `InterProcessReadWriteLock` (`_c_<uuid>-__READ__<seq>` and `_c_<uuid>-__WRIT__<seq>` nodes).
///
/// Readers share the lock; a writer excludes everyone. It is fair: everyone is served in queue
/// order, so a queued writer keeps later readers waiting and is never starved.
///
/// Both sides are re-entrant for code nested in their holder, as [`Mutex`](crate::Mutex) is.
/// Code nested in the write lock's holder may also take the read lock (a downgrade: release the
/// write lock afterwards and keep reading, with no writer slipping in between); a sibling reader
/// waits for the writer. Code nested in a read lock's holder (and in no write lock's) that asks
/// for the write lock gets [`Error::WouldDeadlock`] at once: it would wait for itself.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// let lock = zk_lock::RwLock::new("/catalog/sku-42");
/// let price = {
///     let _read = lock.read().await?;
///     // ... read the price; other readers may do the same meanwhile ...
/// };
/// let write = lock.write().await?;
/// // ... change the price; nobody reads or writes meanwhile ...
/// write.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    target: LockTarget,
}

impl RwLock {
    lock_path_api!(constructors: "read/write lock");
    lock_path_api!(settings: "read/write lock", target);
    lock_path_api!(queue_reports: "read/write lock");

    pub(crate) fn on(target: LockTarget) -> Self {
        Self { target }
    }

    /// Waits for the read lock, for at most the client's default timeout (none unless
    /// configured).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidPath`] if the path is not a valid lock path.
    /// - [`Error::Timeout`] if the client's default timeout passed first.
    /// - [`Error::ConnectionDown`] if it passed while the connection to ZooKeeper was down: the
    ///   outage, not a holder, ended the wait.
    /// - [`Error::Lost`] if this code is nested in the lock's holder and the lock was lost.
    /// - [`Error::NoAuth`] if the ACL of the nodes at the path refuses this client's credentials
    ///   ([`ClientBuilder::acl`](crate::ClientBuilder::acl)).
    /// - [`Error::Connect`] or [`Error::Zookeeper`] if ZooKeeper cannot be reached or refuses a
    ///   request.
    /// - [`Error::ClientClosed`] once the client is closed
    ///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future at any point removes its queue node (in the background).
    pub async fn read(&self) -> Result<ReadGuard> {
        self.acquire_read(Patience::Default).await
    }

    /// Waits for the read lock for at most `timeout`; zero makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read), with [`Error::Timeout`] after `timeout` ([`Error::Busy`] for
    /// zero). The queue node is deleted before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn read_timeout(&self, timeout: Duration) -> Result<ReadGuard> {
        self.acquire_read(Patience::Timeout(timeout)).await
    }

    /// Takes the read lock if no writer holds it or waits for it, in one round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if a writer is ahead, otherwise as [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn try_read(&self) -> Result<ReadGuard> {
        self.acquire_read(Patience::Once).await
    }

    /// Waits for the write lock, for at most the client's default timeout (none unless
    /// configured).
    ///
    /// # Errors
    ///
    /// - [`Error::WouldDeadlock`] if this code is nested in a holder of the read lock and in no
    ///   holder of the write lock.
    /// - Otherwise as [`read`](Self::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn write(&self) -> Result<WriteGuard> {
        self.acquire_write(Patience::Default).await
    }

    /// Waits for the write lock for at most `timeout`; zero makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write), with [`Error::Timeout`] after `timeout` ([`Error::Busy`] for
    /// zero). The queue node is deleted before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn write_timeout(&self, timeout: Duration) -> Result<WriteGuard> {
        self.acquire_write(Patience::Timeout(timeout)).await
    }

    /// Takes the write lock if nobody holds it or waits for it, in one round trip.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] if anyone is ahead, otherwise as [`write`](Self::write).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](Self::read).
    pub async fn try_write(&self) -> Result<WriteGuard> {
        self.acquire_write(Patience::Once).await
    }

    pub(crate) async fn acquire_read(&self, patience: Patience) -> Result<ReadGuard> {
        let client = self.target.client().await?;
        if let Some(writer) = self.target.enclosing(&client, Recipe::Write) {
            if self.target.enclosing(&client, Recipe::Read).is_none() {
                // Nested in the writer (and not in a reader of its own): a downgrade.
                let writer_share = self.target.borrow(&client, writer, patience).await?;
                // Boxed: rare, and inline it would swell every read acquisition's future.
                let downgrade = Box::pin(self.downgrade(&client, writer_share.hold));
                let hold = trace::acquisition(Recipe::Read, &self.target.path, self.target.template(), downgrade);
                return Ok(ReadGuard::new(Share::new(hold.await?, writer_share.loan)));
            }
        }
        let share = self.target.acquire(&client, Recipe::Read, patience).await?;
        Ok(ReadGuard::new(share))
    }

    pub(crate) async fn acquire_write(&self, patience: Patience) -> Result<WriteGuard> {
        let client = self.target.client().await?;
        let nested_in_writer = self.target.enclosing(&client, Recipe::Write).is_some();
        if !nested_in_writer && self.target.enclosing(&client, Recipe::Read).is_some() {
            return Err(Error::WouldDeadlock {
                path: self.target.path.clone(),
                reason: "this code runs inside a holder of the read lock, and the write lock waits for \
                         every reader; release the read lock first (take the write lock first to \
                         downgrade instead)"
                    .to_owned(),
            });
        }
        let share = self.target.acquire(&client, Recipe::Write, patience).await?;
        Ok(WriteGuard::new(share))
    }

    /// Takes the read lock inside the holder of the write lock: the read node is created at the
    /// writer's own sequence (EPHEMERAL, not sequential, as Curator does since CURATOR-621), so
    /// writers queued behind us keep waiting after our write lock is released. Created in one
    /// multi with a check that the writer's node still exists: a writer whose node was deleted
    /// unnoticed (the lock granted to someone else since) cannot put a reader ahead of the queue.
    async fn downgrade(&self, client: &Client, writer: Arc<HeldNode>) -> Result<Arc<HeldNode>> {
        let writer_name = writer.node_path().rsplit('/').next().unwrap_or_default();
        let prefix = new_protected_prefix();
        let name = downgraded_read_name(&prefix, writer_name).ok_or_else(|| {
            Error::invalid_path(writer.node_path(), "the write lock node has no sequence; it was not made by a lock")
        })?;
        let node_path = format!("{}/{name}", self.target.path);
        let session = writer.session().clone();
        let losses_seen = session.health().losses;
        // Until the node is a held lock, a cancelled or failed downgrade deletes it.
        let claim = Claim::new(&session, &ChildPath::new(&self.target.path, &prefix));
        claim.named(&name);
        let node = DowngradeNode { writer: writer.node_path(), node: &node_path, data: &self.target.node_data() };
        let token = match node.create(&session.zk, client.node_acls()).await {
            Ok(token) => token,
            Err(DowngradeError::WriterGone) => return Err(writer.lost_error(LostReason::NodeDeleted)),
            // The writer's session ended meanwhile: so did its write lock.
            Err(DowngradeError::Zookeeper(ZkError::SessionExpired)) => {
                return Err(writer.lost_error(LostReason::SessionExpired));
            }
            Err(DowngradeError::Zookeeper(ZkError::ClientClosed | ZkError::AuthFailed)) => {
                return Err(writer.lost_error(LostReason::SessionClosed));
            }
            Err(DowngradeError::Zookeeper(error)) => return Err(Error::from_zookeeper(error, &self.target.path)),
        };
        let granted =
            Grant { session, node_path: node_path.into(), token, losses_seen, local: None, claim: Some(claim) };
        Ok(self.target.hold(client, Recipe::Read, granted, Granted::Downgrade { writer: writer.node_path() }))
    }
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock").field("path", &self.target.path).finish_non_exhaustive()
    }
}

/// A downgrade's read node, created only while the writer's node exists.
struct DowngradeNode<'a> {
    writer: &'a str,
    node: &'a str,
    data: &'a [u8],
}

enum DowngradeError {
    /// The writer's node is gone: the write lock was lost.
    WriterGone,
    Zookeeper(ZkError),
}

impl DowngradeNode<'_> {
    /// Creates the node and returns its creation zxid. After a connection loss it may exist
    /// already: its name is unique, so finding it means our create went through.
    async fn create(&self, zk: &zookeeper_client::Client, acls: Acls<'_>) -> std::result::Result<i64, DowngradeError> {
        let options = CreateMode::Ephemeral.with_acls(acls);
        let mut reconnects = Reconnects::new(zk);
        loop {
            let mut multi = zk.new_check_writer(self.writer, None).map_err(DowngradeError::Zookeeper)?;
            multi.add_create(self.node, self.data, &options).map_err(DowngradeError::Zookeeper)?;
            let error = match multi.commit().await {
                Ok(results) => match results.first() {
                    Some(MultiWriteResult::Create { stat, .. }) if !stat.is_invalid() => return Ok(stat.czxid),
                    // A server with ZOOKEEPER-4026 answers a create in a multi without its stat.
                    _ => return self.created_zxid(zk).await,
                },
                Err(CheckWriteError::CheckFailed { source: ZkError::NoNode }) => {
                    return Err(DowngradeError::WriterGone)
                }
                Err(CheckWriteError::OperationFailed { source: ZkError::NodeExists, .. }) => {
                    return self.created_zxid(zk).await;
                }
                Err(CheckWriteError::CheckFailed { source } | CheckWriteError::OperationFailed { source, .. }) => {
                    source
                }
                Err(CheckWriteError::RequestFailed { source }) => source,
            };
            reconnects.wait(error).await.map_err(DowngradeError::Zookeeper)?;
        }
    }

    /// The creation zxid of the node, which our create made.
    async fn created_zxid(&self, zk: &zookeeper_client::Client) -> std::result::Result<i64, DowngradeError> {
        zk.get_data(self.node).await.map(|(_, stat)| stat.czxid).map_err(DowngradeError::Zookeeper)
    }
}

crate::holds::guard::lock_guard! {
    /// Proof that its owner holds the read side of an [`RwLock`]. Dropping it releases the lock
    /// in the background; [`release`](Self::release) reports whether it was still held.
    ReadGuard
}

crate::holds::guard::lock_guard! {
    /// Proof that its owner holds the write side of an [`RwLock`]. Dropping it releases the
    /// lock in the background; [`release`](Self::release) reports whether it was still held.
    WriteGuard
}
