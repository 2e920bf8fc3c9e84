//! Finding a node again whose `create` reply was lost, by its `_c_<uuid>-` prefix (Curator's
//! protected mode).

use zookeeper_client::{Client as ZkClient, Error as ZkError};

use super::list::list_children;
use super::retry::Reconnects;
use crate::trace;

/// Looks for the node whose name starts with `prefix` under `parent`: the node a `create`
/// made before its reply was lost. Returns its name and creation zxid.
///
/// Only a node owned by this very session counts (CURATOR-604): a node with our prefix owned by
/// another session was made by an earlier session of ours, whose end deletes it, and taking it
/// for ours would grant a lock that a dying session holds.
pub(crate) async fn find_protected(
    zk: &ZkClient,
    parent: &str,
    prefix: &str,
) -> Result<Option<(String, i64)>, ZkError> {
    let mut reconnects = Reconnects::new(zk);
    'search: loop {
        // After a reconnect we may talk to another server than the one that took the create,
        // and a follower can lag the leader: `sync` makes it catch up before it lists.
        match zk.sync(parent).await {
            Ok(()) | Err(ZkError::NoNode) => {}
            Err(error) => {
                reconnects.wait(error).await?;
                continue;
            }
        }
        let children = match list_children(zk, parent).await {
            Ok(children) => children,
            Err(ZkError::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        for name in children.into_iter().filter(|child| child.starts_with(prefix)) {
            match zk.get_data(&format!("{parent}/{name}")).await {
                Ok((_, stat)) if stat.ephemeral_owner == zk.session_id().0 => {
                    trace::found_again(parent, &name);
                    return Ok(Some((name, stat.czxid)));
                }
                Ok(_) | Err(ZkError::NoNode) => {}
                Err(error) => {
                    reconnects.wait(error).await?;
                    continue 'search;
                }
            }
        }
        return Ok(None);
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use zookeeper_client::{Acls, CreateMode};

    use super::*;
    use crate::layout::new_protected_prefix;
    use crate::testing::shared_server;

    /// CURATOR-604: after a reconnect, a node found by our prefix is ours only if our current
    /// session owns it. A node with the same prefix made by another session (an earlier session
    /// of ours that has not ended yet) must not be taken for ours.
    #[tokio::test]
    async fn a_node_with_our_prefix_owned_by_another_session_is_not_ours() {
        let connect = shared_server().connect_string();
        let ours = ZkClient::connect(&connect).await.unwrap();
        let earlier = ZkClient::connect(&connect).await.unwrap();
        let parent = "/unit-pending-curator-604";
        let container = CreateMode::Container.with_acls(Acls::anyone_all());
        ours.mkdir(parent, &container).await.unwrap();
        let prefix = new_protected_prefix();
        let sequential = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        earlier.create(&format!("{parent}/{prefix}lock-"), b"", &sequential).await.unwrap();

        assert_eq!(find_protected(&ours, parent, &prefix).await.unwrap(), None, "another session's node");
        let (stat, _) = ours.create(&format!("{parent}/{prefix}lock-"), b"", &sequential).await.unwrap();
        let (name, token) = find_protected(&ours, parent, &prefix).await.unwrap().expect("our own node");
        assert_eq!(token, stat.czxid, "{name}: ours, not the earlier session's");
    }
}
