//! Nodes a lease attempt creates in a batch (its request node, its lease nodes), the listings of
//! their parents pipelined behind the creates: everything is sent before any reply is awaited, and
//! the server answers in order, so one round trip makes the nodes and lists them. Each node is
//! removed on every way out until it is granted, and is a [`GrantedLease`] then.

use std::sync::Arc;

use zookeeper_client::{Acls, Client as ZkClient, CreateMode, Error as ZkError, MultiReadResult};

use super::claim::Claim;
use super::lock_attempt::remove_refused_parents;
use super::not_granted::NotGranted;
use super::ungranted::{Created, UngrantedNode};
use crate::layout::ParticipantKind;
use crate::session::Session;
use crate::zk::{create_containers, CreatedParents, Reconnects};

/// One granted lease node.
pub(crate) struct GrantedLease {
    pub node_path: Arc<str>,
    pub token: i64,
    /// Our responsibility for the node until ZooKeeper confirms it is gone.
    pub claim: Option<Claim>,
}

/// A node this attempt creates, in a batch with others and listings pipelined behind them (the
/// request node or a lease node), removed on every way out until it is granted.
pub(super) struct PipelinedNode {
    pub(super) node: UngrantedNode,
    parent: String,
    lock_name: &'static str,
    /// Name and creation zxid, once the create is known to have been applied.
    made: Option<(String, i64)>,
}

impl PipelinedNode {
    // Not followed by the waiters behind it (`UngrantedNode::in_queue`): nothing watches the
    // internal mutex's node while its owner waits for leases, so a deletion by someone else
    // would go unnoticed by them.
    pub(super) fn new(session: &Arc<Session>, parent: &str, kind: ParticipantKind, prefix: String) -> Self {
        let node = UngrantedNode::new(session.clone(), parent, prefix);
        Self { node, parent: parent.to_owned(), lock_name: kind.lock_name(), made: None }
    }

    pub(super) fn name(&self) -> Option<&str> {
        self.made.as_ref().map(|(name, _)| name.as_str())
    }

    /// Its full path, token and claim: it is no longer ours to remove.
    pub(super) fn grant(&mut self) -> Option<GrantedLease> {
        let (name, token) = self.made.take()?;
        let node_path = self.node.node_path(&name);
        let (claim, _) = self.node.grant();
        Some(GrantedLease { node_path, token, claim })
    }
}

/// Creates every node of `nodes` not made yet, then lists `parents` in one multi-read, all sent
/// before any reply is awaited: the server answers in order, so the listings include the nodes.
/// Missing parents are created (as containers) and the whole batch is sent again.
pub(super) async fn create_then_list(
    zk: &ZkClient,
    data: &[u8],
    acls: Acls<'_>,
    nodes: &mut [&mut PipelinedNode],
    parents: &[&str],
) -> Result<Vec<Vec<String>>, NotGranted> {
    let options = CreateMode::EphemeralSequential.with_acls(acls);
    let mut reconnects = Reconnects::new(zk);
    let mut made_parents = CreatedParents::default();
    loop {
        let paths: Vec<Option<String>> =
            nodes.iter().map(|node| node.made.is_none().then(|| node.node.create_path(node.lock_name))).collect();
        let mut creates = Vec::with_capacity(nodes.len());
        for (node, path) in nodes.iter_mut().zip(&paths) {
            if path.is_some() {
                node.node.sent();
            }
            creates.push(path.as_deref().map(|path| zk.create(path, data, &options)));
        }
        let mut reader = zk.new_multi_reader();
        for parent in parents {
            reader.add_get_children(parent)?;
        }
        let listing = reader.commit();

        let mut missing_parents: Vec<String> = Vec::new();
        let mut again = false;
        for (node, create) in nodes.iter_mut().zip(creates) {
            let Some(create) = create else { continue };
            let reply = create.await;
            let settled = node.node.settle_create(zk, &mut reconnects, node.lock_name, reply).await;
            match remove_refused_parents(zk, &mut made_parents, settled).await? {
                Created::Made(name, token) => node.made = Some((name, token)),
                Created::ParentMissing => {
                    if !missing_parents.contains(&node.parent) {
                        missing_parents.push(node.parent.clone());
                    }
                    again = true;
                }
                Created::NotMade => again = true,
            }
        }
        let listed = listing.await;
        for parent in &missing_parents {
            let made = create_containers(zk, parent, acls).await;
            let made = remove_refused_parents(zk, &mut made_parents, made.map_err(NotGranted::from)).await?;
            made_parents.append(made);
        }
        if again {
            continue;
        }
        match listed {
            Ok(results) => {
                return results
                    .into_iter()
                    .map(|result| match result {
                        MultiReadResult::Children { children } => Ok(children),
                        MultiReadResult::Error { err: ZkError::NoNode } => Ok(Vec::new()),
                        MultiReadResult::Error { err } => Err(err.into()),
                        _ => Ok(Vec::new()),
                    })
                    .collect();
            }
            // Every node is made: only the listing is sent again.
            Err(error) => reconnects.wait(error).await?,
        }
    }
}
