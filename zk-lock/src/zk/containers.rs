//! Creating a lock path's missing ancestors, like Curator's `creatingParentContainersIfNeeded`.

use zookeeper_client::{Acls, Client as ZkClient, CreateMode, Error as ZkError};

use crate::error::{Error, Result};

/// Creates `path` and its missing ancestors as container nodes with the client's `acls`, which
/// the server removes once they are empty again, so lock paths do not pile up.
///
/// # Errors
///
/// [`Error::InvalidPath`] naming `path` when even the client's namespace (chroot) node is
/// missing, [`Error::NoAuth`] naming it when an ancestor's ACL refuses, and the request's error
/// otherwise.
pub(crate) async fn create_containers(zk: &ZkClient, path: &str, acls: Acls<'_>) -> Result<()> {
    let missing_chroot = || {
        Error::invalid_path(
            path,
            "the client's namespace (chroot) node does not exist; create it or use `ClientBuilder::namespace`, which does",
        )
    };
    if path.is_empty() {
        return Err(missing_chroot());
    }
    match zk.mkdir(path, &CreateMode::Container.with_acls(acls)).await {
        Ok(()) | Err(ZkError::NodeExists) => Ok(()),
        Err(ZkError::NoNode) => Err(missing_chroot()),
        Err(error) => Err(Error::from_zookeeper(error, path)),
    }
}
