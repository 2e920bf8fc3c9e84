//! Riding out connection losses: wait for the session to reconnect, then try again.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::{Client as ZkClient, Error as ZkError, SessionState};

/// Whether `error` means the connection broke before the reply arrived, so the request may or
/// may not have been applied. zookeeper-client reports a clean close as `ConnectionLoss`, but a
/// reset or a silent server as the I/O error itself (`Custom`) or `Timeout`, and fails every
/// request in flight with it.
pub(crate) fn broke_connection(error: &ZkError) -> bool {
    matches!(error, ZkError::ConnectionLoss | ZkError::Custom(_) | ZkError::Timeout)
}

/// Rides out broken connections for one operation: [`wait`](Self::wait) after each failure.
pub(crate) struct Reconnects<'a> {
    zk: &'a ZkClient,
    /// Failures other than `ConnectionLoss` in a row: an I/O error that keeps coming back on a
    /// healthy connection is not a broken connection, and must not be retried forever.
    strikes: u32,
}

impl<'a> Reconnects<'a> {
    const MAX_STRIKES: u32 = 8;

    pub(crate) fn new(zk: &'a ZkClient) -> Self {
        Self { zk, strikes: 0 }
    }

    /// Returns `error` unless it means the connection broke; then waits until the session is
    /// connected again (or returns its terminal error), so the caller can try again.
    pub(crate) async fn wait(&mut self, error: ZkError) -> Result<(), ZkError> {
        if !broke_connection(&error) {
            return Err(error);
        }
        // Boxed: a rare path, which inline would swell every future that may take it (each
        // waiting acquisition holds several).
        Box::pin(self.reconnect(error)).await
    }

    async fn reconnect(&mut self, error: ZkError) -> Result<(), ZkError> {
        until_connected(self.zk).await?;
        if error != ZkError::ConnectionLoss {
            self.strikes += 1;
            if self.strikes > Self::MAX_STRIKES {
                return Err(error);
            }
            // The state may not show the break yet: back off a little before trying again.
            tokio::time::sleep(Duration::from_millis(10 << self.strikes.min(5))).await;
        }
        Ok(())
    }
}

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

/// Deletes `path`, retrying after a broken connection like Curator's guaranteed delete. `NoNode`
/// is an error only on the first attempt: after a lost reply it means our delete went through.
///
/// The first attempt's request is sent before this function returns its future, so a caller
/// that spawns the future still has the delete ordered before its later requests.
pub(crate) fn delete_with_retry(
    zk: &ZkClient,
    path: Arc<str>,
) -> impl std::future::Future<Output = Result<(), ZkError>> + Send + 'static {
    let first = zk.delete(&path, None);
    let zk = zk.clone();
    async move {
        let mut reconnects = Reconnects::new(&zk);
        let mut result = first.await;
        while let Err(error) = result {
            reconnects.wait(error).await?;
            result = match zk.delete(&path, None).await {
                // The lost reply may have been for a delete that succeeded.
                Err(ZkError::NoNode) => Ok(()),
                other => other,
            };
        }
        Ok(())
    }
}
