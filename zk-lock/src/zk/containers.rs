//! Creating a lock path's missing ancestors, like Curator's `creatingParentContainersIfNeeded`,
//! and removing them again when the client turns out not to be allowed to use them.

use zookeeper_client::{Acls, Client as ZkClient, CreateMode, Error as ZkError};

use crate::error::{Error, Result};

/// The container nodes one call of [`create_containers`] made, from the top down.
///
/// A container that never had a child is never removed by ZooKeeper (3.8 reaps only those that
/// had one), so one whose ACL refuses this client would stay, and with it the refusal, for
/// every later client of the path: see [`remove`](Self::remove).
#[derive(Debug, Default)]
#[must_use = "remove the parents if the create they were made for is refused"]
pub(crate) struct CreatedParents(Vec<String>);

impl CreatedParents {
    /// Removes the parents this call made, deepest first, after the create they were made for
    /// was refused (NoAuth): the ACL they got (the client's) does not let the client use them.
    /// Best effort: a parent that has a child meanwhile stays (ZooKeeper refuses to delete it),
    /// and so does its parent; so does one the client may not delete.
    pub(crate) async fn remove(self, zk: &ZkClient) {
        for parent in self.0.iter().rev() {
            if zk.delete(parent, None).await.is_err() {
                return;
            }
        }
    }

    /// `path` too, made after the others (by a create of the caller's).
    pub(crate) fn push(&mut self, path: &str) {
        self.0.push(path.to_owned());
    }

    /// All of them in `others` too, in the order made.
    pub(crate) fn append(&mut self, mut others: CreatedParents) {
        self.0.append(&mut others.0);
    }
}

/// Creates `path` and its missing ancestors as container nodes with the client's `acls`, which
/// the server removes once they are empty again, so lock paths do not pile up. Returns the nodes
/// it made: the caller removes them ([`CreatedParents::remove`]) if its own node's create in
/// `path` is refused; a refusal here removes those made so far before it returns.
///
/// Like zookeeper-client's `mkdir`: `path` is tried first, then its ancestors upwards until one
/// exists, then the missing ones downwards; one request when only `path` is missing.
///
/// # Errors
///
/// [`Error::InvalidPath`] naming `path` when even the client's namespace (chroot) node is
/// missing, and the request's error otherwise (`NoAuth` when an ancestor's ACL refuses).
pub(crate) async fn create_containers(zk: &ZkClient, path: &str, acls: Acls<'_>) -> Result<CreatedParents> {
    let missing_chroot = || {
        Error::invalid_path(
            path,
            "the client's namespace (chroot) node does not exist; create it or use `ClientBuilder::namespace`, which does",
        )
    };
    if path.is_empty() {
        return Err(missing_chroot());
    }
    let options = CreateMode::Container.with_acls(acls);
    let mut made = CreatedParents::default();
    let mut end = path.len();
    loop {
        let node = &path[..end];
        match zk.create(node, &[], &options).await {
            Ok(_) => made.0.push(node.to_owned()),
            Err(ZkError::NodeExists) => {}
            // The parent is missing: create it first.
            Err(ZkError::NoNode) => match node.rfind('/') {
                Some(parent_end) if parent_end > 0 => {
                    end = parent_end;
                    continue;
                }
                _ => return Err(missing_chroot()),
            },
            Err(error) => {
                if error == ZkError::NoAuth {
                    made.remove(zk).await;
                }
                // Named by the recipe, after the path it was given (`Error::at_path`).
                return Err(Error::from_zk(error));
            }
        }
        if end == path.len() {
            return Ok(made);
        }
        end = path[end + 1..].find('/').map_or(path.len(), |next| end + 1 + next);
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use zookeeper_client::{Acl, AuthId, Permission};

    use super::*;
    use crate::testing::shared_server;

    /// An ACL that the server applies to nobody here: clients connect from 127.0.0.1.
    fn elsewhere() -> [Acl; 1] {
        [Acl::new(Permission::ALL, AuthId::new("ip", "10.255.255.1"))]
    }

    #[tokio::test]
    async fn reports_what_it_made_and_removes_what_the_client_cannot_use() {
        let zk = ZkClient::connect(&shared_server().connect_string()).await.unwrap();
        let root = "/unit-containers";
        let made = create_containers(&zk, &format!("{root}/a/b"), Acls::anyone_all()).await.unwrap();
        assert!(made.0.ends_with(&[format!("{root}/a"), format!("{root}/a/b")]), "{made:?}");
        let again = create_containers(&zk, &format!("{root}/a/b"), Acls::anyone_all()).await.unwrap();
        assert!(again.0.is_empty(), "nothing is made twice: {again:?}");

        // The first node made refuses the client: it is removed before the error is returned.
        let acl = elsewhere();
        let refused = create_containers(&zk, &format!("{root}/a/c/d"), Acls::new(&acl)).await;
        assert_eq!(refused.map(drop).map_err(|e| e.zk().cloned()), Err(Some(ZkError::NoAuth)));
        assert_eq!(zk.check_stat(&format!("{root}/a/c")).await.unwrap(), None, "`c` was removed");

        // Made for a create that is refused afterwards: removed by the caller, deepest first;
        // a parent with another child stays.
        let made = create_containers(&zk, &format!("{root}/e"), Acls::new(&acl)).await.unwrap();
        assert_eq!(made.0, [format!("{root}/e")]);
        made.remove(&zk).await;
        assert_eq!(zk.check_stat(&format!("{root}/e")).await.unwrap(), None);
        let made = create_containers(&zk, &format!("{root}/f/g"), Acls::anyone_all()).await.unwrap();
        zk.create(&format!("{root}/f/other"), b"", &CreateMode::Persistent.with_acls(Acls::anyone_all()))
            .await
            .unwrap();
        made.remove(&zk).await;
        assert_eq!(zk.check_stat(&format!("{root}/f/g")).await.unwrap(), None, "`g` had no child");
        assert!(zk.check_stat(&format!("{root}/f")).await.unwrap().is_some(), "`f` has one");
    }
}
