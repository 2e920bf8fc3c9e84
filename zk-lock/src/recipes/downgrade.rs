//! A downgrade: the read lock taken inside the holder of the write lock of the same
//! [`RwLock`](crate::RwLock) (`reentry` decides when). The read node is created at the writer's
//! own place in the queue, so no writer slips in between when the write lock is released.

use std::sync::Arc;

use zookeeper_client::{Acls, CheckWriteError, CreateMode, Error as ZkError, MultiWriteResult};

use super::patience::Patience;
use super::target::LockTarget;
use crate::client::Client;
use crate::engine::{Claim, Grant};
use crate::error::{Error, LostReason, Result};
use crate::holds::grant_log::Granted;
use crate::holds::scope::Enclosing;
use crate::holds::{HeldNode, Share};
use crate::layout::{downgraded_read_name, new_protected_prefix, Recipe};
use crate::path::ChildPath;
use crate::trace;
use crate::zk::Reconnects;

impl LockTarget {
    /// The read lock nested in `writer`, the holder of the write lock: borrows the writer's
    /// hold (its loan, within `patience`, as any nested acquisition), then makes the read node.
    pub(super) async fn downgrade(&self, client: &Client, writer: Enclosing, patience: Patience) -> Result<Share> {
        let writer_share = self.borrow(client, writer, patience).await?;
        let read_node = self.read_node_at(client, writer_share.hold);
        let hold = trace::acquisition(Recipe::Read, &self.path, self.template(), read_node).await?;
        Ok(Share::new(hold, writer_share.loan))
    }

    /// Takes the read lock inside the holder of the write lock: the read node is created at the
    /// writer's own sequence (EPHEMERAL, not sequential, as Curator does since CURATOR-621), so
    /// writers queued behind us keep waiting after our write lock is released. Created in one
    /// multi with a check that the writer's node still exists: a writer whose node was deleted
    /// unnoticed (the lock granted to someone else since) cannot put a reader ahead of the queue.
    async fn read_node_at(&self, client: &Client, writer: Arc<HeldNode>) -> Result<Arc<HeldNode>> {
        let writer_name = writer.node_path().rsplit('/').next().unwrap_or_default();
        let prefix = new_protected_prefix();
        let name = downgraded_read_name(&prefix, writer_name).ok_or_else(|| {
            Error::invalid_path(writer.node_path(), "the write lock node has no sequence; it was not made by a lock")
        })?;
        let node_path = format!("{}/{name}", self.path);
        let session = writer.session().clone();
        let losses_seen = session.health().losses;
        // Until the node is a held lock, a cancelled or failed downgrade deletes it.
        let claim = Claim::new(&session, &ChildPath::new(&self.path, &prefix));
        claim.named(&name);
        let node = DowngradeNode { writer: writer.node_path(), node: &node_path, data: &self.node_data() };
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
            Err(DowngradeError::Zookeeper(error)) => return Err(Error::from_zookeeper(error, &self.path)),
        };
        let granted =
            Grant { session, node_path: node_path.into(), token, losses_seen, local: None, claim: Some(claim) };
        Ok(self.hold(client, Recipe::Read, granted, Granted::Downgrade { writer: writer.node_path() }))
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
