//! Real ZooKeeper servers for tests, in the spirit of Curator's `curator-test`.
//!
//! Enabled by the `testing` feature. Add it to your dev-dependencies only:
//!
//! ```toml
//! [dev-dependencies]
//! zk-lock = { version = "0.1", features = ["testing"] }
//! ```
//!
//! The kit runs the ZooKeeper 3.8 server that Debian ships (`apt-get install zookeeper
//! default-jre-headless`, or the repository's `scripts/install-deps`). Set
//! `ZOOKEEPER_CLASSPATH` to use other jars, and `JAVA_HOME` when `java` is not on `PATH`.
//!
//! * [`shared_server`] starts one standalone server per test binary, on first use. Tests that
//!   only need *a* server should use it: starting a JVM costs about a second of CPU. Give every
//!   test its own paths so parallel tests do not see each other's nodes.
//! * [`TestingServer::start`] gives a test its own server, which it may [stop](TestingServer::stop),
//!   [kill](TestingServer::kill) and [restart](TestingServer::restart).
//! * [`TestingServer::start_secure`] adds a TLS client port, with the certificates of a
//!   [`SecureClientPort`].
//! * [`TestingServer::builder`] chooses the client port, or keeps the data in a directory of
//!   yours that outlives the server ([`ServerBuilder`]): what `zk-lock dev-server` runs.
//! * [`TestingCluster::start`] runs a real ensemble, for leader failover; its servers can be
//!   paused, and partitioned from each other ([`TestingCluster::isolate`] and friends), with
//!   the timing a test chooses ([`TestingCluster::builder`]).
//! * [`expire_session`] expires a client's session the way Curator's `KillSession` does.
//! * [`audit`] is the orphan oracle: it finds the ephemeral nodes of a client's sessions that
//!   the library no longer accounts for (there must be none).
//! * [`Proxy`] sits between a client and a server to cut (holding the bytes back until the
//!   heal, as a real partition does), delay or reset their traffic.
//! * [`children`] and [`wait_for_children`] read a lock's queue and wait, by watching, until it
//!   is as expected: a waiter queued, no node left.
//! * [`ServerCounters`] ([`TestingServer::counters`]) are the server's own counters, from
//!   `mntr`: the requests a piece of code sends, the watches and ephemeral nodes it leaves.
//! * [`History`] is the safety checker for your own tests: record each grant and fenced write
//!   (from many tasks, or from worker processes that print them as [`Record`] lines), and its
//!   [`check`](History::check) lists every overlap of exclusive holders, semaphore over-lease,
//!   fencing token going backwards and stale write accepted.
//!
//! Every server runs in its own temporary directory and on free loopback ports (unless a
//! [`ServerBuilder`] chose them). Dropping a server kills it and deletes its directory (not a
//! data directory given to [`ServerBuilder::data_dir`]). Servers never outlive the test
//! process, even when they are never dropped (a `static`, a `mem::forget`, a panic with
//! `panic = "abort"`): each JVM is watched by a small shell that kills it when the test process
//! goes away. That shell and the JVM run in a process group of their own, so a Ctrl-C at the
//! terminal, or a kill of the test's whole process group, reaches only the test process, whose
//! going away stops them. Directories that still outlive their process (when the JVM had died
//! first) are deleted by a later test process, once they are an hour old.
//!
//! The methods that start and stop servers block the calling thread, for up to about thirty
//! seconds; calling them from `#[tokio::test]` is fine.
//!
//! # Example
//!
//! ```no_run
//! use zk_lock::testing::{shared_server, TestingServer};
//! use zookeeper_client::{Client, CreateMode, SessionState};
//!
//! #[tokio::test]
//! async fn lock_survives_server_restart() -> Result<(), Box<dyn std::error::Error>> {
//!     // A server of our own, because this test restarts it.
//!     let server = TestingServer::start()?;
//!     let client = Client::connect(&server.connect_string()).await?;
//!     client.create("/jobs", b"", &CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all())).await?;
//!
//!     server.restart()?;
//!     assert!(client.check_stat("/jobs").await?.is_some());
//!     Ok(())
//! }
//!
//! #[tokio::test]
//! async fn expiry_is_reported() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = shared_server();
//!     let client = Client::connect(&server.connect_string()).await?;
//!     server.expire_session(&client).await?;
//!     assert_eq!(client.state(), SessionState::Expired);
//!     Ok(())
//! }
//! # fn main() {}
//! ```

#![warn(missing_docs)]

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

mod audit;
mod children;
mod cluster;
mod config;
mod counters;
mod curator;
mod election_hello;
mod four_letter;
mod history;
mod java;
mod kazoo;
mod ports;
mod probe;
mod process;
mod proxy;
mod server;
mod server_builder;
mod session;
mod tempdir;

pub use audit::{audit, Audit, Orphan};
pub use children::{children, wait_for_children, wait_for_children_within, CHILDREN_TIMEOUT};
pub use cluster::{ClusterBuilder, TestingCluster};
pub use counters::{server_counters, ServerCounters};
pub use curator::{compile_curator_program, curator_classpath, JavaProgram};
pub use four_letter::four_letter_word;
pub use history::{
    now_ns, FencedWrite, Grant, GrantKind, GrantRecording, History, Outcome, ParseRecordError, Record, Report,
    TimedGuard, TimedLock, Violation,
};
pub use java::{find_java, zookeeper_classpath, JavaSetup};
pub use kazoo::python_with_kazoo;
pub use proxy::{Direction, Proxy};
pub use server::TestingServer;
pub use server_builder::ServerBuilder;
pub use session::{expire_session, SessionOf};

/// The certificates of a test server's TLS client port ([`TestingServer::start_secure`]), as
/// PEM files, which ZooKeeper reads directly.
///
/// `openssl` makes them in a few commands; the server certificate needs the subject alternative
/// name `IP:127.0.0.1` for clients that verify the host:
///
/// ```text
/// openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout ca.key -out ca.pem
/// openssl req -newkey rsa:2048 -nodes -subj /CN=zookeeper -keyout server.key -out server.csr
/// openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
///     -extfile <(echo subjectAltName=IP:127.0.0.1) -out server.pem
/// cat server.key server.pem > server-keystore.pem
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureClientPort {
    /// A PEM file holding the server's private key (unencrypted PKCS#8) and its certificate
    /// chain (`ssl.keyStore.location`).
    pub key_store: PathBuf,
    /// A PEM file holding the CA certificates that client certificates must chain to
    /// (`ssl.trustStore.location`).
    pub trust_store: PathBuf,
    /// Whether clients must present a certificate (`ssl.clientAuth=need`); otherwise none is
    /// asked for (`none`).
    pub require_client_certificate: bool,
}

/// Result alias of the testing kit.
pub type Result<T> = std::result::Result<T, TestingError>;

/// Everything that can go wrong while running ZooKeeper for tests.
///
/// Messages are lowercase and say what to do about the problem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestingError {
    /// No `java` executable was found.
    #[error(
        "cannot find `java` on PATH nor in $JAVA_HOME/bin; install a Java runtime \
         (Debian: `apt-get install default-jre-headless`) or set JAVA_HOME"
    )]
    JavaNotFound,

    /// The ZooKeeper server jars were not found.
    #[error(
        "cannot find the zookeeper server jars ({missing}); install them \
         (Debian: `apt-get install zookeeper`, or run the repository's `scripts/install-deps`) \
         or set ZOOKEEPER_CLASSPATH to a classpath holding zookeeper and its dependencies"
    )]
    ZookeeperNotFound {
        /// The classpath entries that do not exist.
        missing: String,
    },

    /// The Apache Curator jars were not found.
    #[error(
        "cannot find the apache curator jars ({missing}); install them \
         (Debian: `apt-get install libcurator-recipes-java zookeeper`, or run the repository's \
         `scripts/install-deps`) or set CURATOR_CLASSPATH"
    )]
    CuratorNotFound {
        /// What is missing.
        missing: String,
    },

    /// No python3 can import kazoo.
    #[error(
        "no python3 can import kazoo; install it (Debian: `apt-get install python3-kazoo`, or run \
         the repository's `scripts/install-deps`) or set KAZOO_PYTHON to a python that has it"
    )]
    KazooNotFound,

    /// `javac` refused a Java program.
    #[error("javac could not compile {}:\n{output}", file.display())]
    JavaCompile {
        /// The source file.
        file: PathBuf,
        /// What javac printed.
        output: String,
    },

    /// A file system or process operation failed.
    #[error("cannot {action}: {source}")]
    Io {
        /// What the kit was doing.
        action: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The client port given to [`ServerBuilder::port`] is taken by another process.
    #[error(
        "port {port} on 127.0.0.1 is in use by another process (another zookeeper server?); \
         choose another port, or port 0 for any free one"
    )]
    PortInUse {
        /// The port.
        port: u16,
    },

    /// The data directory given to [`ServerBuilder::data_dir`] cannot be used.
    #[error("cannot use {} as the zookeeper data directory: {reason}", dir.display())]
    DataDir {
        /// The directory, as given.
        dir: PathBuf,
        /// Why not, and what to do about it.
        reason: String,
    },

    /// A server process exited before it was serving.
    #[error(
        "zookeeper server `{name}` exited before serving ({status}); \
         see its log {}:\n{log_tail}", log.display()
    )]
    Exited {
        /// Which server: `standalone` or `server.N` of a cluster.
        name: String,
        /// How the process ended.
        status: String,
        /// The server's log file.
        log: PathBuf,
        /// The last lines of that log.
        log_tail: String,
    },

    /// A server (or a cluster's quorum) was not serving before the deadline.
    #[error(
        "zookeeper server `{name}` was not serving after {waited:?} ({detail}); \
         the machine may be overloaded, or see its log {}:\n{log_tail}", log.display()
    )]
    NotServing {
        /// Which server: `standalone` or `server.N` of a cluster.
        name: String,
        /// How long the kit waited.
        waited: Duration,
        /// What the last readiness probe saw.
        detail: String,
        /// The server's log file (for a cluster, the log of the first member not serving).
        log: PathBuf,
        /// The last lines of that log.
        log_tail: String,
    },

    /// A cluster operation needs a leader and none of the running members is leading.
    #[error(
        "no running cluster member is leading; restart members to regain a quorum, \
         or call `wait_for_leader` after an election"
    )]
    NoLeader,

    /// A session did not reach the expected terminal state.
    #[error(
        "session {session} did not expire within {waited:?} (last state: {state}); \
         make sure the connect string reaches the client's ensemble"
    )]
    SessionNotExpired {
        /// The session id, as ZooKeeper prints it.
        session: String,
        /// How long the kit waited.
        waited: Duration,
        /// The last state the client reported.
        state: String,
    },

    /// The children of a node did not reach the state a test waited for
    /// ([`wait_for_children`]).
    #[error(
        "the children of `{path}` did not reach the expected state within {waited:?}; \
         last seen: {last:?}"
    )]
    ChildrenNotReached {
        /// The node whose children were watched.
        path: String,
        /// How long the kit waited.
        waited: Duration,
        /// The children last seen (none when the node did not exist).
        last: Vec<String>,
    },

    /// A ZooKeeper request of the kit failed.
    #[error("cannot {action}: {source}")]
    Zookeeper {
        /// What the kit was doing.
        action: String,
        /// The client's error.
        #[source]
        source: zookeeper_client::Error,
    },
}

impl TestingError {
    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        TestingError::Io { action: action.into(), source }
    }
}

static SHARED_SERVER: LazyLock<TestingServer> = LazyLock::new(|| match TestingServer::start() {
    Ok(server) => server,
    Err(err) => panic!("cannot start the shared zookeeper test server: {err}"),
});

/// The standalone server shared by all tests of this process, started on first use.
///
/// It is never dropped; its JVM is killed and its directory deleted when the test process
/// exits. Do not stop, kill or restart it: other tests use it concurrently. Use
/// [`TestingServer::start`] for a server you may disturb.
///
/// # Panics
///
/// Panics, with the reason and what to do, when the server cannot be started. Every later call
/// in the same process panics too.
pub fn shared_server() -> &'static TestingServer {
    &SHARED_SERVER
}
