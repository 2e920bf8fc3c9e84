//! Why one attempt on one session ended without the lock (or the leases).

use zookeeper_client::Error as ZkError;

use crate::error::Error;

pub(crate) enum NotGranted {
    /// Someone is ahead (for a semaphore: its leases are taken) and the caller allowed one
    /// attempt only.
    Busy,
    /// The session died while we waited; a new session may succeed.
    SessionGone,
    /// Our node disappeared before it was granted; queue again.
    NodeVanished,
    Error(Error),
}

impl NotGranted {
    /// Whether ZooKeeper refused a request for lack of permission.
    pub(crate) fn is_no_auth(&self) -> bool {
        match self {
            Self::Error(Error::NoAuth { .. }) => true,
            Self::Error(error) => error.zk() == Some(&ZkError::NoAuth),
            _ => false,
        }
    }
}

impl From<ZkError> for NotGranted {
    fn from(error: ZkError) -> Self {
        match error {
            ZkError::SessionExpired | ZkError::ClientClosed => Self::SessionGone,
            other => Self::Error(Error::from_zk(other)),
        }
    }
}

impl From<Error> for NotGranted {
    fn from(error: Error) -> Self {
        match error {
            // One rule for a request's failure, converted or not.
            Error::Zookeeper(error) => error.into_zk().into(),
            other => Self::Error(other),
        }
    }
}
