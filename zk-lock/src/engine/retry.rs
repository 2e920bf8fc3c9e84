//! Riding out connection losses: wait for the session to reconnect, then try again.

use zookeeper_client::{Client as ZkClient, Error as ZkError, SessionState};

/// Waits until the session is connected again. Returns the terminal error if it never will be.
pub(crate) async fn until_connected(zk: &ZkClient) -> Result<(), ZkError> {
    let mut states = zk.state_watcher();
    let mut state = states.state();
    loop {
        match state {
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => return Ok(()),
            SessionState::Expired => return Err(ZkError::SessionExpired),
            SessionState::AuthFailed => return Err(ZkError::AuthFailed),
            SessionState::Closed => return Err(ZkError::ClientClosed),
            SessionState::Disconnected => state = states.changed().await,
        }
    }
}

/// Deletes `path`, retrying on connection loss like Curator's guaranteed delete. `NoNode` is
/// an error only on the first attempt: after a lost reply it means our delete went through.
///
/// The first attempt's request is sent before this function returns its future, so a caller
/// that spawns the future still has the delete ordered before its later requests.
pub(crate) fn delete_with_retry(
    zk: &ZkClient,
    path: String,
) -> impl std::future::Future<Output = Result<(), ZkError>> + Send + 'static {
    let first = zk.delete(&path, None);
    let zk = zk.clone();
    async move {
        let mut result = first.await;
        while result == Err(ZkError::ConnectionLoss) {
            until_connected(&zk).await?;
            result = match zk.delete(&path, None).await {
                // The lost reply may have been for a delete that succeeded.
                Err(ZkError::NoNode) => Ok(()),
                other => other,
            };
        }
        result
    }
}
