//! [`RwLock`]: Curator's `InterProcessReadWriteLock`, fair, re-entrant, with downgrade.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::{Acls, CreateMode, Error as ZkError};

use super::patience::Patience;
use super::target::LockTarget;
use crate::client::Client;
use crate::engine::{Claim, Grant};
use crate::error::{Error, Result};
use crate::holds::HeldNode;
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
/// Both sides are re-entrant per tokio task, as [`Mutex`](crate::Mutex) is. A task that holds
/// the write lock may also take the read lock (a downgrade: release the write lock afterwards
/// and keep reading, with no writer slipping in between). A task that holds only the read lock
/// and asks for the write lock gets [`Error::WouldDeadlock`] at once: it would wait for itself.
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
    /// A read/write lock at `path`, on the registry's default client. The path is checked
    /// when locking.
    #[track_caller]
    pub fn new(path: impl Into<String>) -> Self {
        Self::on(LockTarget::new(None, path.into()))
    }

    /// A read/write lock at `path` on `client`.
    #[track_caller]
    pub fn with_client(client: &Client, path: impl Into<String>) -> Self {
        Self::on(LockTarget::new(Some(client), path.into()))
    }

    pub(crate) fn on(target: LockTarget) -> Self {
        Self { target }
    }

    /// Names the template this lock's path was made from (`"/orders/<id>"`): the `template`
    /// label of its metrics (feature `metrics`; otherwise `(api)`) and its class for lock-order
    /// checking (otherwise its path). A `&'static str`, so the number of labels stays bounded by
    /// the program's text, whatever the rendered paths.
    #[must_use]
    pub fn with_template(mut self, template: &'static str) -> Self {
        self.target.set_template(template);
        self
    }

    /// Sets the data of this lock's nodes (default: `host=.. pid=.. task=..`).
    #[must_use]
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.target.set_data(data.into());
        self
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.target.path
    }

    /// Waits for the read lock, for at most the client's default timeout (none unless
    /// configured).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidPath`] if the path is not a valid lock path.
    /// - [`Error::Timeout`] if the client's default timeout passed first.
    /// - [`Error::Lost`] if this task already holds the lock and it was lost.
    /// - [`Error::NoAuth`] if the ACL of the nodes at the path refuses this client's credentials
    ///   ([`ClientBuilder::acl`](crate::ClientBuilder::acl)).
    /// - [`Error::Connect`] or [`Error::Zookeeper`] if ZooKeeper cannot be reached or refuses a
    ///   request.
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
    /// - [`Error::WouldDeadlock`] if this task holds the read lock but not the write lock.
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
        if let Some(hold) = HeldNode::held_by_current_task(client.holds(), &self.target.key(Recipe::Read)) {
            return Ok(ReadGuard { hold: hold.reenter()? });
        }
        if let Some(writer) = HeldNode::held_by_current_task(client.holds(), &self.target.key(Recipe::Write)) {
            let downgrade = self.downgrade(&client, writer.reenter()?);
            let hold = trace::acquisition(Recipe::Read, &self.target.path, self.target.template(), downgrade).await?;
            return Ok(ReadGuard { hold });
        }
        let hold = self.target.acquire(&client, Recipe::Read, patience).await?;
        Ok(ReadGuard { hold })
    }

    pub(crate) async fn acquire_write(&self, patience: Patience) -> Result<WriteGuard> {
        let client = self.target.client().await?;
        let holds_write = HeldNode::held_by_current_task(client.holds(), &self.target.key(Recipe::Write)).is_some();
        if !holds_write && HeldNode::held_by_current_task(client.holds(), &self.target.key(Recipe::Read)).is_some() {
            return Err(Error::WouldDeadlock {
                path: self.target.path.clone(),
                reason: "this task holds the read lock, and the write lock waits for every reader; \
                         release the read lock first (take the write lock first to downgrade instead)"
                    .to_owned(),
            });
        }
        let hold = self.target.acquire(&client, Recipe::Write, patience).await?;
        Ok(WriteGuard { hold })
    }

    /// Takes the read lock while this task holds the write lock: the read node is created at
    /// the writer's own sequence (EPHEMERAL, not sequential, as Curator does since CURATOR-621),
    /// so writers queued behind us keep waiting after our write lock is released.
    async fn downgrade(&self, client: &Client, writer: Arc<HeldNode>) -> Result<Arc<HeldNode>> {
        let writer_name = writer.node_path.rsplit('/').next().unwrap_or_default();
        let prefix = new_protected_prefix();
        let name = downgraded_read_name(&prefix, writer_name).ok_or_else(|| {
            Error::invalid_path(&writer.node_path, "the write lock node has no sequence; it was not made by a lock")
        })?;
        let node_path = format!("{}/{name}", self.target.path);
        let session = writer.session().clone();
        let losses_seen = session.health().losses;
        // Until the node is a held lock, a cancelled or failed downgrade deletes it.
        let claim = Claim::new(&session, &ChildPath::new(&self.target.path, &prefix));
        claim.named(&name);
        let token =
            create_downgrade_node(&session.zk, &node_path, &self.target.node_data(), client.node_acls()).await?;
        let granted =
            Grant { session, node_path: node_path.into(), token, losses_seen, local: None, claim: Some(claim) };
        Ok(self.target.hold(client, Recipe::Read, self.target.key(Recipe::Read), granted))
    }
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock").field("path", &self.target.path).finish_non_exhaustive()
    }
}

/// Creates the downgrade's read node and returns its creation zxid. After a connection loss the
/// node may exist already: its name is unique, so finding it means our create went through.
async fn create_downgrade_node(
    zk: &zookeeper_client::Client,
    node_path: &str,
    data: &[u8],
    acls: Acls<'_>,
) -> Result<i64> {
    let options = CreateMode::Ephemeral.with_acls(acls);
    let mut reconnects = Reconnects::new(zk);
    loop {
        match zk.create(node_path, data, &options).await {
            Ok((stat, _)) => return Ok(stat.czxid),
            Err(ZkError::NodeExists) => return Ok(zk.get_data(node_path).await?.1.czxid),
            Err(error) => reconnects.wait(error).await?,
        }
    }
}

crate::holds::guard::lock_guard! {
    /// Proof that this task holds the read side of an [`RwLock`]. Dropping it releases the lock
    /// in the background; [`release`](Self::release) reports whether it was still held.
    ReadGuard
}

crate::holds::guard::lock_guard! {
    /// Proof that this task holds the write side of an [`RwLock`]. Dropping it releases the
    /// lock in the background; [`release`](Self::release) reports whether it was still held.
    WriteGuard
}
