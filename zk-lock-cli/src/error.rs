//! Failures and the exit codes scripts rely on (documented in `--help` and the README).

use zookeeper_client::Error as ZkError;

/// Success.
pub const SUCCESS: u8 = 0;
/// The path does not exist, or there is no holder to revoke: an answer, not a failure.
pub const NOT_FOUND: u8 = 1;
/// Bad command line: unknown command or option, invalid path, connect string or duration.
pub const USAGE: u8 = 2;
/// No session within the timeout, or the connection was lost and did not come back.
pub const CONNECT: u8 = 3;
/// Any other error: ZooKeeper refused a request, stdout cannot be written.
pub const ZOOKEEPER: u8 = 4;

/// A message for stderr and the exit code that goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// One of the exit code constants of this module.
    pub code: u8,
    /// What went wrong and what to do, without the `zk-lock: ` prefix.
    pub message: String,
}

impl CliError {
    /// A usage error (exit code 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self { code: USAGE, message: message.into() }
    }

    /// A connection failure (exit code 3).
    pub fn connect(message: impl Into<String>) -> Self {
        Self { code: CONNECT, message: message.into() }
    }

    /// A ZooKeeper error of a request about `path`, classified by what the user can do about it.
    pub fn zookeeper(path: &str, error: &ZkError) -> Self {
        match error {
            ZkError::ConnectionLoss | ZkError::SessionExpired | ZkError::ClientClosed | ZkError::Timeout => {
                Self::connect(format!("lost the zookeeper session while reading `{path}`: {error}"))
            }
            ZkError::NoAuth => Self {
                code: ZOOKEEPER,
                message: format!("no permission for `{path}` ({error}); the node's ACL does not allow this client"),
            },
            _ => Self { code: ZOOKEEPER, message: format!("zookeeper request for `{path}` failed: {error}") },
        }
    }

    /// Classifies an error of the runtime crate about `path`.
    pub fn from_lock(path: &str, error: zk_lock::Error) -> Self {
        match error {
            zk_lock::Error::InvalidPath { .. } => Self::usage(format!("<PATH> argument: {error}")),
            zk_lock::Error::Connect { .. } => Self::connect(error.to_string()),
            zk_lock::Error::Zookeeper(ref zk) => Self::zookeeper(path, zk),
            other => Self { code: ZOOKEEPER, message: other.to_string() },
        }
    }
}
