//! Failures and the exit codes scripts rely on (documented in `--help` and the README).

use zk_lock::ZookeeperErrorKind;
use zookeeper_client::Error as ZkError;

use crate::credentials::{Digest, DIGEST_ENV};

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
    /// Whether ZooKeeper refused for lack of permission: [`CliError::with_credentials`] then says
    /// which credentials were used, or how to give some.
    no_auth: bool,
}

impl CliError {
    /// A usage error (exit code 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self { code: USAGE, message: message.into(), no_auth: false }
    }

    /// A connection failure (exit code 3).
    pub fn connect(message: impl Into<String>) -> Self {
        Self { code: CONNECT, message: message.into(), no_auth: false }
    }

    /// Any other failure (exit code 4).
    pub fn other(message: impl Into<String>) -> Self {
        Self { code: ZOOKEEPER, message: message.into(), no_auth: false }
    }

    /// ZooKeeper refused a request about `path` for lack of permission (exit code 4).
    pub fn no_permission(path: &str) -> Self {
        let message = format!("no permission for `{path}` (ZooKeeper NoAuth): its ACL does not allow this client");
        Self { code: ZOOKEEPER, message, no_auth: true }
    }

    /// Whether ZooKeeper refused a request for lack of permission.
    pub fn is_no_auth(&self) -> bool {
        self.no_auth
    }

    /// A ZooKeeper error of a request about `path`, classified by what the user can do about it.
    pub fn zookeeper(path: &str, error: &ZkError) -> Self {
        match error {
            ZkError::ConnectionLoss | ZkError::SessionExpired | ZkError::ClientClosed | ZkError::Timeout => {
                Self::connect(format!("lost the zookeeper session while reading `{path}`: {error}"))
            }
            ZkError::NoAuth => Self::no_permission(path),
            _ => Self::other(format!("zookeeper request for `{path}` failed: {error}")),
        }
    }

    /// Classifies an error of the runtime crate about `path`.
    pub fn from_lock(path: &str, error: zk_lock::Error) -> Self {
        match error {
            zk_lock::Error::InvalidPath { .. } => Self::usage(format!("<PATH> argument: {error}")),
            zk_lock::Error::Connect { .. } => Self::connect(error.to_string()),
            zk_lock::Error::Zookeeper(ref zk) => match zk.kind() {
                ZookeeperErrorKind::ConnectionLoss
                | ZookeeperErrorKind::SessionExpired
                | ZookeeperErrorKind::ClientClosed => {
                    Self::connect(format!("lost the zookeeper session while reading `{path}`: {zk}"))
                }
                _ => Self::other(format!("zookeeper request for `{path}` failed: {zk}")),
            },
            // The path the library names: the lock, or the node refused.
            zk_lock::Error::NoAuth { path } => Self::no_permission(&path),
            other => Self::other(other.to_string()),
        }
    }

    /// Completes a refusal for lack of permission with the credentials the command used (who,
    /// and from where; never the password), or how to give some.
    pub fn with_credentials(mut self, credentials: Option<&Digest>) -> Self {
        if self.no_auth {
            match credentials {
                Some(digest) => self.message.push_str(&format!(
                    " with {}; check the user and password, and the ACL (`getAcl` in zkCli.sh)",
                    digest.describe()
                )),
                None => self.message.push_str(&format!(" without credentials; {}", credentials_hint())),
            }
        }
        self
    }
}

/// How to give credentials, for messages.
pub fn credentials_hint() -> String {
    format!("give digest credentials `user:password` in ${DIGEST_ENV} or in a file named by --auth-file")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_path_and_the_credentials_or_how_to_give_some() {
        let refused = CliError::zookeeper("/locks/orders", &ZkError::NoAuth);
        assert!(refused.is_no_auth() && refused.code == ZOOKEEPER);
        let without = refused.clone().with_credentials(None).message;
        assert_eq!(
            without,
            "no permission for `/locks/orders` (ZooKeeper NoAuth): its ACL does not allow this client without \
             credentials; give digest credentials `user:password` in $ZK_LOCK_DIGEST or in a file named by --auth-file"
        );
        let digest = crate::credentials::load(None, Some("ops:s3cret".into())).unwrap();
        let with = refused.with_credentials(digest.as_ref()).message;
        assert!(with.contains("does not allow this client with digest user `ops` (from $ZK_LOCK_DIGEST)"), "{with}");
        assert!(!with.contains("s3cret"), "{with}");
        let library = CliError::from_lock("/a", zk_lock::Error::NoAuth { path: "/a/b".into() });
        assert!(library.is_no_auth() && library.message.starts_with("no permission for `/a/b`"), "{library:?}");
        let other = CliError::zookeeper("/a", &ZkError::NoNode).with_credentials(None);
        assert!(!other.is_no_auth() && !other.message.contains("credentials"), "{other:?}");
    }
}
