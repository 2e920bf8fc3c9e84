//! [`Client`]: a ZooKeeper connection that renews its session and carries lock defaults.
//!
//! May use: `session`, `zk` and the foundations. The
//! builder's `install` lives with the registry, one layer up.

mod builder;
mod config;
mod connect;
mod connection_state;
mod unreachable;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::Duration;

use zookeeper_client::{Acl, Acls};

pub use self::builder::ClientBuilder;
#[cfg(feature = "testing")]
pub(crate) use self::config::connect_hosts;
use self::config::ClientConfig;
pub(crate) use self::connect::CallDeadline;
use self::connect::{acls_of, open_session, ANYONE_ALL};
use self::connection_state::StateTracker;
pub use self::connection_state::{ConnectionState, ConnectionStates};
use crate::background;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::state_cell::StateCell;

/// Session timeout asked of the server unless the builder says otherwise: 10 s.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting may take before it fails with [`Error::Connect`]: 15 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A handle to a ZooKeeper ensemble, shared by every lock made from it.
///
/// Cheap to clone. It owns one session at a time: when that session expires, the next
/// acquisition opens a new one, while guards of the old session report the loss through
/// [`MutexGuard::lost`](crate::MutexGuard::lost). A session is kept open as long as a guard
/// acquired on it exists, even if the `Client` itself is dropped.
///
/// Get one from [`connect`](crate::connect) or [`ClientBuilder`], or wrap a
/// [`zookeeper_client::Client`] you made yourself with [`Client::from_zookeeper`].
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    config: ClientConfig,
    /// The session new acquisitions use, one per runtime that acquired through this client: a
    /// session's I/O runs on the runtime that opened it and ends with it (`session::io_runtime`),
    /// so each runtime has its own. The most recent last.
    current: RwLock<Vec<(RuntimeKey, Arc<Session>)>>,
    renewing: tokio::sync::Mutex<()>,
    /// Every session opened that ZooKeeper has not confirmed ended: the current one, and those
    /// being retired (see `session::retire`).
    sessions: StdMutex<Vec<Arc<Session>>>,
    /// Tells this client's holds from other clients': only its acquisitions re-enter them.
    id: u64,
    /// [`Client::close`] was called (1): no session is used or opened any more.
    closed: StateCell,
    /// Its [`ConnectionState`], following its most recent session.
    state: Arc<StateTracker>,
}

impl Client {
    /// Starts building a client for `connect_string` (`host:port[,host:port...]`).
    pub fn builder(connect_string: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(connect_string)
    }

    /// Wraps a session you opened yourself with `zookeeper-client`.
    ///
    /// The session lives on the runtime that created it, and it is not renewed after it
    /// expires: acquisitions then fail with [`Error::Zookeeper`].
    pub fn from_zookeeper(zk: zookeeper_client::Client) -> Self {
        let config = ClientConfig {
            session_timeout: zk.session_timeout(),
            renewable: false,
            ..ClientConfig::new(String::new())
        };
        // No connect string to reach the session again: it is reported lost, never retired.
        Self::with_session(config, Session::new(zk, None, tokio::time::Instant::now()))
    }

    fn with_session(config: ClientConfig, session: Arc<Session>) -> Self {
        let state = StateTracker::new();
        state.follow(&session);
        let inner = ClientInner {
            config,
            current: RwLock::new(vec![(runtime_key(), session.clone())]),
            sessions: StdMutex::new(vec![session]),
            renewing: tokio::sync::Mutex::new(()),
            id: NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed),
            closed: StateCell::new(0),
            state,
        };
        Self { inner: Arc::new(inner) }
    }

    /// The current ZooKeeper session, for requests of your own.
    pub fn zookeeper(&self) -> zookeeper_client::Client {
        self.current_session().zk.clone()
    }

    /// The acquire timeout used by `lock()`-style calls that do not give one.
    pub fn default_timeout(&self) -> Option<Duration> {
        self.inner.config.default_timeout
    }

    /// The connect string this client was built with (empty for a wrapped foreign client).
    pub fn connect_string(&self) -> &str {
        &self.inner.config.connect_string
    }

    /// The ACL of the nodes this client creates (set by [`ClientBuilder::acl`]; `world:anyone`
    /// with all permissions by default).
    pub fn acl(&self) -> &[Acl] {
        match &self.inner.config.acl {
            Some(acl) => acl,
            None => &ANYONE_ALL,
        }
    }

    /// The ACL for create requests: a borrowed value, so a request costs nothing extra.
    pub(crate) fn node_acls(&self) -> Acls<'_> {
        acls_of(self.inner.config.acl.as_deref())
    }

    /// The session of the calling runtime, or else the most recent one.
    pub(crate) fn current_session(&self) -> Arc<Session> {
        self.session_of_this_runtime().unwrap_or_else(|| {
            let current = self.inner.current.read().unwrap_or_else(|e| e.into_inner());
            current.last().expect("a client always has a session").1.clone()
        })
    }

    /// The calling runtime's session, if it has one.
    fn session_of_this_runtime(&self) -> Option<Arc<Session>> {
        let key = runtime_key();
        let current = self.inner.current.read().unwrap_or_else(|e| e.into_inner());
        current.iter().rev().find(|(runtime, _)| *runtime == key).map(|(_, session)| session.clone())
    }

    /// The session new acquisitions should use: the calling runtime's, or a new one if it has
    /// none or it died. `path`: what it is for, named by the error if the client is closed.
    pub(crate) async fn session(&self, path: &str) -> Result<Arc<Session>> {
        match self.ready_session(path) {
            Some(ready) => ready,
            // Boxed: opening a session is rare, and inline it would swell every waiting acquisition.
            None => Box::pin(self.renew_session(path)).await,
        }
    }

    /// [`session`](Self::session) without a wait: `None` if a new session must be opened.
    pub(crate) fn ready_session(&self, path: &str) -> Option<Result<Arc<Session>>> {
        if let Err(closed) = self.refuse_if_closed(path) {
            return Some(Err(closed));
        }
        // A session the user opened is the only one, whatever runtime calls.
        if !self.inner.config.renewable {
            return Some(Ok(self.current_session()));
        }
        self.session_of_this_runtime().filter(|session| session.is_usable()).map(Ok)
    }

    /// [`Error::ClientClosed`] once [`close`](Self::close) was called.
    pub(crate) fn refuse_if_closed(&self, path: &str) -> Result<()> {
        match self.is_closed() {
            true => Err(closed_error(path)),
            false => Ok(()),
        }
    }

    /// Opens a session for the calling runtime, unless another caller did meanwhile.
    async fn renew_session(&self, path: &str) -> Result<Arc<Session>> {
        let _renewing = self.inner.renewing.lock().await;
        self.refuse_if_closed(path)?;
        if let Some(session) = self.session_of_this_runtime().filter(|session| session.is_usable()) {
            return Ok(session);
        }
        // A close does not wait for a connection that may take the whole connect timeout.
        let fresh = tokio::select! {
            opened = open_session(self.inner.config.clone(), None) => opened?,
            () = self.closed() => return Err(closed_error(path)),
        };
        {
            let mut current = self.inner.current.write().unwrap_or_else(|e| e.into_inner());
            current.retain(|(_, session)| session.is_usable());
            current.push((runtime_key(), fresh.clone()));
        }
        self.inner.state.follow(&fresh);
        {
            let mut sessions = self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
            sessions.retain(|session| !session.nodes().has_ended());
            sessions.push(fresh.clone());
        }
        // Closed while it was being opened: `close` may have missed it, so it ends here, in the
        // background rather than in the acquisition that opened it.
        if let Err(closed) = self.refuse_if_closed(path) {
            background::spawn(async move { fresh.close().await });
            return Err(closed);
        }
        Ok(fresh)
    }

    /// Resolves once [`close`](Self::close) was called. Cancel safe: it only observes.
    pub(crate) async fn closed(&self) {
        self.inner.closed.wait_for(|closed| (closed != 0).then_some(())).await;
    }

    /// Ends this client (every clone of it) at once: every lock held through it is reported
    /// lost ([`LostReason::SessionClosed`](crate::LostReason::SessionClosed)), every acquisition
    /// waiting on it ends with [`Error::ClientClosed`], and so does every later one. Its session
    /// is then closed on the server, which deletes its nodes, so waiters in other processes are
    /// granted at once rather than after the session timeout.
    ///
    /// Call it when the process shuts down (see [`shutdown`](crate::shutdown) for the
    /// registry's clients). Resolves once ZooKeeper confirmed the end, or after the session
    /// timeout if the server cannot be reached (by then it has expired the session). Closing
    /// again does nothing more. A client made by [`from_zookeeper`](Self::from_zookeeper) is
    /// closed for the library, but its session ends only when you drop your own
    /// `zookeeper_client::Client`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the client is closed once the call is first polled, and the sessions end in
    /// the background whether or not it is awaited to the end.
    pub async fn close(&self) {
        self.inner.closed.update(|closed| (closed == 0).then_some(1), |_| {});
        self.inner.state.close();
        let sessions = self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner()).clone();
        futures::future::join_all(sessions.iter().map(|session| session.close())).await;
    }

    /// What the client can do with ZooKeeper now (see [`ConnectionState`]).
    pub fn connection_state(&self) -> ConnectionState {
        self.inner.state.get()
    }

    /// The changes of [`connection_state`](Self::connection_state) from now on, in order:
    /// Curator's `ConnectionStateListener`.
    ///
    /// ```no_run
    /// # async fn demo(client: zk_lock::Client) {
    /// let mut states = client.connection_states();
    /// tokio::spawn(async move {
    ///     while let Some(state) = states.next().await {
    ///         eprintln!("zookeeper: {state:?}");
    ///     }
    /// });
    /// # }
    /// ```
    pub fn connection_states(&self) -> ConnectionStates {
        self.inner.state.changes()
    }

    /// Whether locks can be taken now without opening a session: the client's most recent
    /// session is connected ([`ConnectionState::is_connected`]). For a readiness probe that also
    /// reconnects a client whose session was lost, see [`ready`](Self::ready).
    pub fn is_ready(&self) -> bool {
        self.connection_state().is_connected()
    }

    /// Resolves once the client can take locks: its state is [`Connected`] or [`Reconnected`].
    /// A client whose session was lost opens a new one (each time one is lost while it waits,
    /// each within the connect timeout); a suspended connection is waited for. Bound it with a
    /// timeout in a health check:
    ///
    /// ```no_run
    /// # async fn demo(client: zk_lock::Client) -> bool {
    /// let ready = tokio::time::timeout(std::time::Duration::from_secs(1), client.ready()).await;
    /// matches!(ready, Ok(Ok(())))
    /// # }
    /// ```
    ///
    /// [`Connected`]: ConnectionState::Connected
    /// [`Reconnected`]: ConnectionState::Reconnected
    ///
    /// # Errors
    ///
    /// [`Error::ClientClosed`] once the client was closed (naming the path `/`);
    /// [`Error::Connect`] if a new session could not be opened; [`Error::Zookeeper`]
    /// (`SessionExpired`) for a client of [`from_zookeeper`](Self::from_zookeeper) whose session
    /// ended, which is never renewed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits, and a session it was opening is opened no further.
    pub async fn ready(&self) -> Result<()> {
        const ROOT: &str = "/";
        loop {
            let session = self.session(ROOT).await?;
            let mut link = session.link();
            loop {
                // Told now, not only when the state's follower gets to it.
                self.inner.state.refresh();
                if self.connection_state().is_connected() {
                    return Ok(());
                }
                if link.borrow_and_update().terminated {
                    break;
                }
                tokio::select! {
                    changed = link.changed() => {
                        // The monitor reports a terminal state before it goes.
                        if changed.is_err() {
                            break;
                        }
                    }
                    () = self.closed() => return Err(closed_error(ROOT)),
                }
            }
            // Ended while we waited: a renewable client opens a new one.
            if !self.is_renewable() {
                return Err(Error::from_zk(zookeeper_client::Error::SessionExpired));
            }
        }
    }

    /// Whether [`close`](Self::close) was called on this client or a clone of it.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.get() != 0
    }

    /// Every session of this client that ZooKeeper has not confirmed ended, the current one last.
    #[cfg(feature = "testing")]
    pub(crate) fn open_sessions(&self) -> Vec<Arc<Session>> {
        let mut sessions = self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current_session();
        sessions.retain(|session| Arc::ptr_eq(session, &current) || !session.nodes().has_ended());
        sessions.clone()
    }

    /// Whether a new session can replace an expired one.
    pub(crate) fn is_renewable(&self) -> bool {
        self.inner.config.renewable
    }

    /// This client among the process's: a lock re-enters only holds of the client it is taken
    /// through.
    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }
}

/// Which runtime a session serves: the one that opened it, `None` outside any.
type RuntimeKey = Option<tokio::runtime::Id>;

fn runtime_key() -> RuntimeKey {
    tokio::runtime::Handle::try_current().ok().map(|runtime| runtime.id())
}

/// The number the next client is told from the others by.
static NEXT_CLIENT_ID: AtomicU64 = AtomicU64::new(0);

fn closed_error(path: &str) -> Error {
    Error::ClientClosed { path: path.to_owned() }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let session = self.current_session();
        f.debug_struct("Client")
            .field("connect_string", &self.inner.config.connect_string)
            .field("namespace", &self.inner.config.namespace)
            .field("session_id", &session.zk.session_id())
            .field("state", &session.zk.state())
            .finish()
    }
}
