//! Creating a lock path's missing ancestors, like Curator's `creatingParentContainersIfNeeded`.

use zookeeper_client::{Acls, Client as ZkClient, CreateMode, CreateOptions, Error as ZkError};

use crate::error::{Error, Result};

const CONTAINER: CreateOptions<'static> = CreateMode::Container.with_acls(Acls::anyone_all());

/// Creates `path` and its missing ancestors as container nodes, which the server removes once
/// they are empty again, so lock paths do not pile up.
///
/// # Errors
///
/// [`Error::InvalidPath`] naming `path` when even the client's namespace (chroot) node is
/// missing, and the request's error otherwise.
pub(crate) async fn create_containers(zk: &ZkClient, path: &str) -> Result<()> {
    let missing_chroot = || {
        Error::invalid_path(
            path,
            "the client's namespace (chroot) node does not exist; create it or use `ClientBuilder::namespace`, which does",
        )
    };
    if path.is_empty() {
        return Err(missing_chroot());
    }
    match zk.mkdir(path, &CONTAINER).await {
        Ok(()) | Err(ZkError::NodeExists) => Ok(()),
        Err(ZkError::NoNode) => Err(missing_chroot()),
        Err(error) => Err(error.into()),
    }
}
