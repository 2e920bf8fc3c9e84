//! The one error type of the crate.

use std::time::Duration;

/// Result alias used throughout `zk_lock`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while taking, holding or releasing a lock.
///
/// Messages are lowercase, name the lock path and say what to do about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock was not granted within the timeout; the queue node was removed.
    ///
    /// The connection to ZooKeeper was up when the timeout passed: someone else held the lock
    /// (or was ahead in line) all along, unless the connection was down for part of the wait.
    /// A wait that ends with the connection down is [`Error::ConnectionDown`] instead.
    #[error("timed out after {waited:?} waiting for lock `{path}`; {}", timeout_advice(.path, *.held_by_this_task))]
    Timeout {
        /// The lock path.
        path: String,
        /// How long the acquisition waited.
        waited: Duration,
        /// The task that waited holds this lock itself, outside the waiting code (a guard it
        /// keeps, a sibling future's): it waited for itself. Known while lock-order checking is
        /// on (debug builds, or `ZK_LOCK_ORDER=1`); `false` otherwise.
        held_by_this_task: bool,
    },

    /// The lock was not granted within the timeout, and the connection to ZooKeeper was down
    /// when the timeout passed: the outage, not a holder, is why the wait ended, and whether
    /// anyone holds the lock is unknown. The queue node is removed (at the latest with the
    /// session, once the servers are reachable again).
    ///
    /// The connection counts as down while the session's connection is lost (zookeeper-client
    /// reconnecting), and while the client has no session and is opening one. A first
    /// connection of a client that never had a session fails with [`Error::Connect`] instead.
    #[error("timed out after {waited:.2?} waiting for lock `{path}` because the connection to zookeeper {} was down: down for {down:.2?} of the wait and still down when it ended, so whether anyone holds the lock is unknown; check that those servers are running and reachable from this host", servers(.connect_string))]
    ConnectionDown {
        /// The lock path.
        path: String,
        /// How long the acquisition waited.
        waited: Duration,
        /// How long, within the wait, the connection was down: its current disconnection, and
        /// any time the client had no session (an earlier disconnection that ended is not
        /// counted).
        down: Duration,
        /// The servers the client connects to, as its connect string (empty for a client made
        /// with [`Client::from_zookeeper`](crate::Client::from_zookeeper)).
        connect_string: String,
    },

    /// A single attempt (`try_lock`, `timeout = "0s"`) found the lock held by someone else.
    #[error("lock `{path}` is held by another holder; try again later")]
    Busy {
        /// The lock path.
        path: String,
    },

    /// The lock was held and then lost; the work done under it is no longer protected.
    #[error("lock `{path}` was lost: {reason}")]
    Lost {
        /// The lock path.
        path: String,
        /// Why the lock was lost.
        reason: LostReason,
    },

    /// A lock path (or a value rendered into a path template) is not a valid ZooKeeper path.
    #[error("invalid lock path `{path}`: {reason}")]
    InvalidPath {
        /// The offending path, as given.
        path: String,
        /// The rule it breaks.
        reason: String,
    },

    /// An argument can never work for this lock: a semaphore with no leases, more leases than
    /// it allows, a shared count node holding something else.
    #[error("invalid argument for `{path}`: {reason}")]
    InvalidArgument {
        /// The lock (or count) path.
        path: String,
        /// What is wrong and what is allowed.
        reason: String,
    },

    /// The acquisition could never succeed because the code asking is nested in the holder of a
    /// conflicting lock (a read lock's, for the write lock; a semaphore mutex's, for itself).
    #[error("acquiring `{path}` would deadlock: {reason}")]
    WouldDeadlock {
        /// The lock path.
        path: String,
        /// What the task already holds.
        reason: String,
    },

    /// The client was closed ([`Client::close`](crate::Client::close) or
    /// [`shutdown`](crate::shutdown)): an acquisition waiting on it, or asked of it afterwards,
    /// ends with this error.
    #[error("cannot take or use `{path}`: its zookeeper client was closed (by `Client::close` or `zk_lock::shutdown`) and takes no more requests; connect a new client to go on")]
    ClientClosed {
        /// The lock (or count) path.
        path: String,
    },

    /// No ZooKeeper session could be established: within the connect timeout, or, for the
    /// default client's first connection by an annotated call with a `timeout`, before that
    /// timeout ran out (the reason says which, and what dialling the servers found).
    #[error("cannot connect to ZooKeeper at `{connect_string}`: {reason}")]
    Connect {
        /// The connect string that was tried.
        connect_string: String,
        /// What went wrong.
        reason: String,
    },

    /// `client = "name"` (or [`named_client`](crate::named_client)) names a client that was
    /// never installed.
    #[error("no zookeeper client named `{name}` is installed (installed: {installed}); install it first with `zk_lock::Client::builder(..).install_as(\"{name}\")`")]
    UnknownClient {
        /// The name asked for.
        name: String,
        /// The names that are installed, comma separated, or `none`.
        installed: String,
    },

    /// ZooKeeper refused a request under `path` for lack of permission (its `NoAuth`): the nodes
    /// there were created with an ACL that this client's credentials do not satisfy. Every
    /// request of the crate reports a refusal this way: acquisitions, shared counts,
    /// [`participants`](crate::participants), [`revoke`](crate::revoke), the namespace node.
    #[error("not authorized for `{path}`: zookeeper refused the request (NoAuth) because of the ACL of the nodes there; connect with the credentials that ACL names (`ClientBuilder::auth`), or use another path; nodes this client creates get its own ACL (`ClientBuilder::acl`), which must grant it READ, CREATE and DELETE")]
    NoAuth {
        /// The path the request was for: the lock or count path ([`revoke_node`](crate::revoke_node):
        /// the node's path; at connect: the namespace).
        path: String,
    },

    /// A ZooKeeper request failed in a way the recipe does not handle itself (a refusal for
    /// lack of permission is [`Error::NoAuth`] instead).
    #[error("zookeeper request failed: {0}")]
    Zookeeper(ZookeeperError),
}

/// A ZooKeeper request that failed: what happened ([`kind`](Self::kind)) and the client's
/// message. zk-lock's own type, so that a release of the ZooKeeper client it runs on is not a
/// breaking release of zk-lock; that client's error is its [`source`](std::error::Error::source).
#[derive(Debug, Clone, PartialEq)]
pub struct ZookeeperError {
    kind: ZookeeperErrorKind,
    source: zookeeper_client::Error,
}

/// What went wrong with a ZooKeeper request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ZookeeperErrorKind {
    /// The node does not exist (for a lock node: its holder released it, or it was deleted).
    NoNode,
    /// The node exists already.
    NodeExists,
    /// The node has children, so it cannot be deleted.
    NotEmpty,
    /// The node's version is not the one given (someone else wrote it meanwhile).
    BadVersion,
    /// The connection to the server was lost before the answer came; the request may or may not
    /// have been carried out.
    ConnectionLoss,
    /// The session expired: its ephemeral nodes, locks included, are gone.
    SessionExpired,
    /// The client was closed.
    ClientClosed,
    /// The server refused the credentials.
    AuthFailed,
    /// The request was too large, or malformed, for the server.
    BadArguments,
    /// Anything else: the message says what.
    Other,
}

impl ZookeeperError {
    /// What happened.
    pub fn kind(&self) -> ZookeeperErrorKind {
        self.kind
    }

    /// Whether the node did not exist.
    pub fn is_no_node(&self) -> bool {
        self.kind == ZookeeperErrorKind::NoNode
    }

    pub(crate) fn new(source: zookeeper_client::Error) -> Self {
        use zookeeper_client::Error as Zk;
        let kind = match &source {
            Zk::NoNode => ZookeeperErrorKind::NoNode,
            Zk::NodeExists => ZookeeperErrorKind::NodeExists,
            Zk::NotEmpty => ZookeeperErrorKind::NotEmpty,
            Zk::BadVersion => ZookeeperErrorKind::BadVersion,
            Zk::ConnectionLoss => ZookeeperErrorKind::ConnectionLoss,
            Zk::SessionExpired => ZookeeperErrorKind::SessionExpired,
            Zk::ClientClosed => ZookeeperErrorKind::ClientClosed,
            Zk::AuthFailed => ZookeeperErrorKind::AuthFailed,
            Zk::BadArguments(_) => ZookeeperErrorKind::BadArguments,
            _ => ZookeeperErrorKind::Other,
        };
        Self { kind, source }
    }

    /// zookeeper-client's error, for the crate's own decisions.
    pub(crate) fn zk(&self) -> &zookeeper_client::Error {
        &self.source
    }

    /// zookeeper-client's error, to be converted again (with a path, or into an attempt's end).
    pub(crate) fn into_zk(self) -> zookeeper_client::Error {
        self.source
    }
}

impl std::fmt::Display for ZookeeperError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for ZookeeperError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Why a held lock stopped being held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The ZooKeeper session expired; every ephemeral node of it is gone.
    SessionExpired,
    /// The client was closed ([`Client::close`](crate::Client::close),
    /// [`shutdown`](crate::shutdown)), or its credentials were refused on a reconnect.
    SessionClosed,
    /// The ensemble's leader was not proven to have renewed the session for 4/5 of the session
    /// timeout (no heartbeat `sync` answered: a partition between the client and its server or
    /// between the servers, a dead server): it could expire the session soon after, and grant the
    /// lock to someone else. The lock is given up at least 1/5 of a timeout before that can
    /// happen, and the session is closed (and replaced) once the server is reachable.
    ConnectionLost,
    /// Somebody else deleted the lock node.
    NodeDeleted,
    /// The hold reached its `max_hold` (`with_max_hold`, or the attribute's `max_hold = ".."`),
    /// or a call nested in its holder reached its own: the library declared it lost and deletes
    /// its node itself, from its own thread and through outages, so that the next waiter is
    /// granted even if this holder's runtime is stuck; a late write of this holder carries a
    /// fencing token older than the next holder's.
    MaxHoldReached {
        /// The limit the hold reached.
        limit: std::time::Duration,
    },
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::SessionExpired => "the zookeeper session expired",
            Self::SessionClosed => {
                "the zookeeper session was closed (by `Client::close` or `zk_lock::shutdown`), or zookeeper-client gave it up"
            }
            Self::ConnectionLost => {
                "no renewal of the session by the zookeeper leader proven for 4/5 of the session timeout; the session is given up before the leader could expire it"
            }
            Self::NodeDeleted => "the lock node was deleted by someone else",
            Self::MaxHoldReached { limit } => {
                return write!(
                    f,
                    "it was held for its max_hold of {:?}, so the library ended the hold and deletes the lock node",
                    limit
                );
            }
        })
    }
}

/// The servers of a connect string, as [`Error::ConnectionDown`] names them.
fn servers(connect_string: &str) -> String {
    match connect_string {
        "" => "(a session opened with zookeeper-client, its servers unknown to zk-lock)".to_owned(),
        servers => format!("at `{servers}`"),
    }
}

impl Error {
    pub(crate) fn invalid_path(path: &str, reason: impl Into<String>) -> Self {
        Self::InvalidPath { path: path.to_owned(), reason: reason.into() }
    }

    pub(crate) fn invalid_argument(path: &str, reason: impl Into<String>) -> Self {
        Self::InvalidArgument { path: path.to_owned(), reason: reason.into() }
    }

    pub(crate) fn lost(path: &str, reason: LostReason) -> Self {
        Self::Lost { path: path.to_owned(), reason }
    }

    /// The one conversion of an error of a ZooKeeper request made for `path` (a lock, count or
    /// node path, or a namespace): a refusal for lack of permission, which ZooKeeper reports
    /// without the path, becomes [`Error::NoAuth`] naming it; every other error is kept as it is.
    pub(crate) fn from_zookeeper(error: zookeeper_client::Error, path: &str) -> Self {
        match error {
            zookeeper_client::Error::NoAuth => Self::NoAuth { path: path.to_owned() },
            other => Self::Zookeeper(ZookeeperError::new(other)),
        }
    }

    /// The crate's own requests' errors, converted where a path is not at hand (a refusal for
    /// lack of permission then names none until [`at_path`](Self::at_path) gives it one). A
    /// function, not a `From` implementation: a public conversion from zookeeper-client's error
    /// would tie zk-lock's API to that crate's version.
    pub(crate) fn from_zk(error: zookeeper_client::Error) -> Self {
        Self::Zookeeper(ZookeeperError::new(error))
    }

    /// [`from_zookeeper`](Self::from_zookeeper) for an error already converted without the path.
    pub(crate) fn at_path(self, path: &str) -> Self {
        match self {
            Self::Zookeeper(error) => Self::from_zookeeper(error.into_zk(), path),
            other => other,
        }
    }

    /// zookeeper-client's error, if this is one.
    pub(crate) fn zk(&self) -> Option<&zookeeper_client::Error> {
        match self {
            Self::Zookeeper(error) => Some(error.zk()),
            _ => None,
        }
    }
}

/// What a [`Error::Timeout`] advises: re-entering the lock, if the task that waited holds it
/// itself; else finding its holder.
fn timeout_advice(path: &str, held_by_this_task: bool) -> String {
    match held_by_this_task {
        true => "this task holds it itself, outside the waiting code, so it waited for itself: release it \
                 first, or take the lock inside the holder's guard `scope(..)` (or an annotated function's \
                 body), through the same client, to re-enter it"
            .to_owned(),
        false => format!("raise the timeout or find the holder with `zk-lock inspect {path}`"),
    }
}
