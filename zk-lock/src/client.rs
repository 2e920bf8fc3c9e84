//! [`Client`]: a ZooKeeper connection that renews its session and carries lock defaults.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex as StdMutex, RwLock, Weak};
use std::time::Duration;

use zookeeper_client::{Acl, Acls, CreateMode, Error as ZkError, Permission};

use crate::background;
use crate::error::{Error, Result};
use crate::hold::Hold;
use crate::path::validate_lock_path;
use crate::session::{Reopen, ReopenFuture, Session};

/// Session timeout asked of the server unless the builder says otherwise.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting may take before it fails with [`Error::Connect`].
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
    session: RwLock<Arc<Session>>,
    renewing: tokio::sync::Mutex<()>,
    /// Every session opened that ZooKeeper has not confirmed ended: the current one, and those
    /// being retired (see `session::retire`).
    sessions: StdMutex<Vec<Arc<Session>>>,
    /// Locks held through this client, by lock path and recipe, for re-entrancy.
    holds: StdMutex<HashMap<String, Weak<Hold>>>,
}

#[derive(Clone)]
struct ClientConfig {
    connect_string: String,
    session_timeout: Duration,
    connect_timeout: Duration,
    namespace: Option<String>,
    default_timeout: Option<Duration>,
    auth: Vec<(String, Vec<u8>)>,
    /// The ACL of every node created; `None` means `world:anyone` with all permissions.
    acl: Option<Vec<Acl>>,
    #[cfg(feature = "tls")]
    tls: Option<TlsConfig>,
    /// False for a wrapped foreign client, which we cannot reconnect.
    renewable: bool,
}

impl ClientConfig {
    /// What to check when no session comes up: a TLS handshake that fails looks the same.
    fn unreachable_hint(&self) -> &'static str {
        #[cfg(feature = "tls")]
        if self.tls.is_some() {
            return "is the server running and serving tls on that port, with a certificate signed by the \
                    given ca, and does it accept this client's certificate?";
        }
        "is the server running?"
    }
}

/// TLS settings, kept as given until connecting so that the builder stays infallible.
#[cfg(feature = "tls")]
#[derive(Clone, Default)]
struct TlsConfig {
    ca_pem: Option<String>,
    identity_pem: Option<(String, String)>,
    options: Option<zookeeper_client::TlsOptions>,
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
            connect_string: String::new(),
            session_timeout: zk.session_timeout(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            namespace: None,
            default_timeout: None,
            auth: Vec::new(),
            acl: None,
            #[cfg(feature = "tls")]
            tls: None,
            renewable: false,
        };
        // No connect string to reach the session again: it is reported lost, never retired.
        Self::with_session(config, Session::new(zk, None))
    }

    fn with_session(config: ClientConfig, session: Arc<Session>) -> Self {
        let inner = ClientInner {
            config,
            session: RwLock::new(session.clone()),
            sessions: StdMutex::new(vec![session]),
            renewing: tokio::sync::Mutex::new(()),
            holds: StdMutex::new(HashMap::new()),
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

    fn current_session(&self) -> Arc<Session> {
        self.inner.session.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The session new acquisitions should use: the current one, or a new one if it died.
    pub(crate) async fn session(&self) -> Result<Arc<Session>> {
        let current = self.current_session();
        if current.is_usable() || !self.inner.config.renewable {
            return Ok(current);
        }
        let _renewing = self.inner.renewing.lock().await;
        let current = self.current_session();
        if current.is_usable() {
            return Ok(current);
        }
        let fresh = open_session(self.inner.config.clone()).await?;
        *self.inner.session.write().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        let mut sessions = self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|session| !session.ledger().has_ended());
        sessions.push(fresh.clone());
        Ok(fresh)
    }

    /// Every session of this client that ZooKeeper has not confirmed ended, the current one last.
    #[cfg(feature = "testing")]
    pub(crate) fn open_sessions(&self) -> Vec<Arc<Session>> {
        let mut sessions = self.inner.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current_session();
        sessions.retain(|session| Arc::ptr_eq(session, &current) || !session.ledger().has_ended());
        sessions.clone()
    }

    /// Whether a new session can replace an expired one.
    pub(crate) fn is_renewable(&self) -> bool {
        self.inner.config.renewable
    }

    pub(crate) fn holds(&self) -> std::sync::MutexGuard<'_, HashMap<String, Weak<Hold>>> {
        self.inner.holds.lock().unwrap_or_else(|e| e.into_inner())
    }
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

/// Builds a [`Client`]: session timeout, namespace, default acquire timeout, authentication,
/// the ACL of the nodes it creates, and (feature `tls`) TLS.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// use std::time::Duration;
/// let client = zk_lock::Client::builder("10.0.0.1:2181,10.0.0.2:2181")
///     .session_timeout(Duration::from_secs(15))
///     .namespace("/my-service")
///     .default_timeout(Duration::from_secs(30))
///     .install()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until `connect`, `install` or `install_as` is awaited"]
pub struct ClientBuilder {
    config: ClientConfig,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("connect_string", &self.config.connect_string)
            .field("session_timeout", &self.config.session_timeout)
            .field("namespace", &self.config.namespace)
            .field("default_timeout", &self.config.default_timeout)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// A builder for `connect_string` with default settings.
    pub fn new(connect_string: impl Into<String>) -> Self {
        let config = ClientConfig {
            connect_string: connect_string.into(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            namespace: None,
            default_timeout: None,
            auth: Vec::new(),
            acl: None,
            #[cfg(feature = "tls")]
            tls: None,
            renewable: true,
        };
        Self { config }
    }

    /// The session timeout to negotiate (default 10 s). The server clamps it to its own
    /// `minSessionTimeout`..`maxSessionTimeout`. A lock is reported lost when the server has not
    /// answered for 3/5 of it (before the server could expire the session); the session is then
    /// closed once the server is reachable and replaced.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.config.session_timeout = timeout;
        self
    }

    /// How long connecting may take before [`Error::Connect`] (default 15 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Puts every lock path under `namespace` (a chroot, like Curator's `namespace`); the
    /// namespace node is created if missing.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.config.namespace = Some(namespace.into());
        self
    }

    /// The acquire timeout for calls that give none (default: wait forever, like Curator).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.config.default_timeout = Some(timeout);
        self
    }

    /// Adds authentication, e.g. `auth("digest", b"user:password")`; sent again on every
    /// reconnection and for every renewed session.
    ///
    /// Credentials only identify the client. To keep other clients from deleting or changing
    /// this client's lock nodes, also set an [`acl`](Self::acl).
    pub fn auth(mut self, scheme: impl Into<String>, credentials: impl Into<Vec<u8>>) -> Self {
        self.config.auth.push((scheme.into(), credentials.into()));
        self
    }

    /// The ACL of every node this client creates: lock, lease and shared count nodes, the
    /// container parents of lock paths, and the namespace node (default: `world:anyone` with
    /// all permissions, as Curator's default `ACLProvider`).
    ///
    /// With [`Acls::creator_all()`](crate::Acls::creator_all) and [`auth`](Self::auth), only
    /// clients with the same credentials can take, delete or overwrite the locks: others get
    /// [`Error::NoAuth`]. ZooKeeper checks a delete against the ACL of the *parent*, so this
    /// protects lock paths whose parents this ACL created; parents that already exist keep
    /// their own ACL. Every client taking the same locks needs the `READ` permission on the
    /// nodes (waiters read the node ahead of them), `CREATE` and `DELETE` on the parents.
    ///
    /// ```no_run
    /// # async fn demo() -> zk_lock::Result<()> {
    /// let client = zk_lock::Client::builder("10.0.0.1:2181")
    ///     .auth("digest", "orders:secret")
    ///     .acl(&zk_lock::Acls::creator_all())
    ///     .install()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// A connect fails with [`Error::Connect`] when the list is empty, or when it names the
    /// `auth` scheme (as `creator_all` does) but no credentials were added.
    pub fn acl(mut self, acl: &[Acl]) -> Self {
        self.config.acl = Some(acl.to_vec());
        self
    }

    /// Connects over TLS (feature `tls`), trusting the CA certificates (and revocation lists)
    /// in `ca_pem`, in PEM format. Every server of the connect string is then reached over TLS, except those
    /// written `tcp://host:port`. The server certificate must name the host as written in the
    /// connect string (an IP address needs an IP subject alternative name).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = zk_lock::Client::builder("zk1.internal:2281,zk2.internal:2281")
    ///     .tls_ca_pem(std::fs::read_to_string("/etc/zookeeper/ca.pem")?)
    ///     .tls_identity_pem(
    ///         std::fs::read_to_string("/etc/orders/client.pem")?,
    ///         std::fs::read_to_string("/etc/orders/client.key")?,
    ///     )
    ///     .install()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// Needs a crypto provider for rustls: if the process has not installed one, connecting
    /// installs aws-lc-rs (rustls' default) as the process default.
    ///
    /// A connect fails with [`Error::Connect`] when the PEM holds no certificate.
    #[cfg(feature = "tls")]
    pub fn tls_ca_pem(mut self, ca_pem: impl Into<String>) -> Self {
        self.config.tls.get_or_insert_with(TlsConfig::default).ca_pem = Some(ca_pem.into());
        self
    }

    /// The client certificate (chain) and private key, in PEM format, presented to servers that
    /// authenticate clients (feature `tls`; `ssl.clientAuth=need`). Needs [`tls_ca_pem`](Self::tls_ca_pem).
    ///
    /// A connect fails with [`Error::Connect`] when the PEM holds no certificate or key.
    #[cfg(feature = "tls")]
    pub fn tls_identity_pem(mut self, cert_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        self.config.tls.get_or_insert_with(TlsConfig::default).identity_pem = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Connects over TLS with zookeeper-client's own options (feature `tls`), for what the PEM methods do not
    /// cover (certificates that are renewed while running, no hostname verification). Replaces
    /// [`tls_ca_pem`](Self::tls_ca_pem) and [`tls_identity_pem`](Self::tls_identity_pem).
    #[cfg(feature = "tls")]
    pub fn tls_options(mut self, options: zookeeper_client::TlsOptions) -> Self {
        self.config.tls = Some(TlsConfig { options: Some(options), ..TlsConfig::default() });
        self
    }

    /// Connects, without registering the client anywhere.
    ///
    /// # Errors
    ///
    /// - [`Error::Connect`], naming the connect string, if it is malformed, if no session is
    ///   established within the connect timeout, or if the ACL or TLS settings cannot work.
    /// - [`Error::InvalidPath`] for a bad namespace.
    /// - [`Error::NoAuth`] if the namespace node cannot be created for lack of permission.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a session opened before cancellation is closed.
    pub async fn connect(self) -> Result<Client> {
        let session = open_session(self.config.clone()).await?;
        Ok(Client::with_session(self.config, session))
    }

    /// Connects and installs the client as the process-wide default, used by
    /// [`Mutex::new`](crate::Mutex::new) and the attributes. Replacing a default does not
    /// disturb locks held through the old one.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is installed unless the connection succeeded.
    pub async fn install(self) -> Result<Client> {
        let client = self.connect().await?;
        crate::registry::install(None, client.clone());
        Ok(client)
    }

    /// Connects and installs the client under `name`, for `client = "name"` in the attributes
    /// and [`named_client`](crate::named_client).
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is installed unless the connection succeeded.
    pub async fn install_as(self, name: impl Into<String>) -> Result<Client> {
        let client = self.connect().await?;
        crate::registry::install(Some(name.into()), client.clone());
        Ok(client)
    }
}

/// Opens a session on the background runtime so it outlives the caller's runtime.
async fn open_session(config: ClientConfig) -> Result<Arc<Session>> {
    if let Some(namespace) = &config.namespace {
        validate_lock_path(namespace)?;
    }
    check_acl(&config)?;
    let connect_string = config.connect_string.clone();
    let connect_timeout = config.connect_timeout;
    let connecting = background::spawn(async move {
        let zk = tokio::time::timeout(connect_timeout, connect(&config)).await.map_err(|_| {
            connect_error(
                &config.connect_string,
                format!("no session within {connect_timeout:?}; {}", config.unreachable_hint()),
            )
        })??;
        Ok::<_, Error>(Session::new(zk, Some(reopen(config))))
    });
    // Dropping a JoinHandle does not stop its task: abort it if we are cancelled (aborting a
    // finished task does nothing).
    let _abort_on_cancel = AbortOnDrop(connecting.abort_handle());
    connecting.await.map_err(|e| connect_error(&connect_string, format!("connect task failed: {e}")))?
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What [`Acls::anyone_all`] stands for, as a list.
static ANYONE_ALL: [Acl; 1] = [Acl::new_const(Permission::ALL, "world", "anyone")];

fn acls_of(acl: Option<&[Acl]>) -> Acls<'_> {
    match acl {
        Some(acl) => Acls::new(acl),
        None => Acls::anyone_all(),
    }
}

/// Refuses, before any request, an ACL that the server would reject on every create.
fn check_acl(config: &ClientConfig) -> Result<()> {
    let Some(acl) = &config.acl else { return Ok(()) };
    if acl.is_empty() {
        return Err(connect_error(
            &config.connect_string,
            "the ACL is empty, which zookeeper refuses for every node; give at least one entry, \
             like `Acls::creator_all()`"
                .to_owned(),
        ));
    }
    let needs_auth = acl.iter().any(|acl| acl.scheme() == "auth");
    if needs_auth && config.auth.is_empty() {
        return Err(connect_error(
            &config.connect_string,
            "the ACL grants permissions to the creator's credentials (scheme `auth`, as in \
             `Acls::creator_all()`), but the client has none; add them with \
             `.auth(\"digest\", \"user:password\")`"
                .to_owned(),
        ));
    }
    Ok(())
}

async fn connect(config: &ClientConfig) -> Result<zookeeper_client::Client> {
    let connecting = dial(config, connector(config)?).await;
    let zk = connecting.map_err(|e| connect_error(&config.connect_string, describe_connect_failure(&e)))?;
    let Some(namespace) = &config.namespace else { return Ok(zk) };
    let options = CreateMode::Persistent.with_acls(acls_of(config.acl.as_deref()));
    match zk.mkdir(namespace, &options).await {
        Ok(()) | Err(ZkError::NodeExists) => {}
        Err(ZkError::NoAuth) => return Err(Error::NoAuth { path: namespace.clone() }),
        Err(e) => {
            return Err(connect_error(&config.connect_string, format!("cannot create namespace `{namespace}`: {e}")))
        }
    }
    zk.chroot(namespace.as_str())
        .map_err(|_| Error::invalid_path(namespace, "not a valid namespace; use an absolute path like `/my-service`"))
}

/// zookeeper-client's connector with the client's session timeout, credentials and TLS.
fn connector(config: &ClientConfig) -> Result<zookeeper_client::Connector> {
    // zookeeper-client gives up on a silent server after this long (0.4 T by default): sooner
    // leaves a reconnect time to answer a heartbeat before the locks are declared lost (3/5 T).
    let connection_timeout = config.session_timeout * 3 / 10;
    let mut connector = zookeeper_client::Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_connection_timeout(connection_timeout);
    for (scheme, credentials) in &config.auth {
        connector = connector.with_auth(scheme, credentials);
    }
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let options = tls_options(tls).map_err(|reason| connect_error(&config.connect_string, reason))?;
        connector = connector.with_tls(options);
    }
    Ok(connector)
}

async fn dial(
    config: &ClientConfig,
    connector: zookeeper_client::Connector,
) -> std::result::Result<zookeeper_client::Client, ZkError> {
    match () {
        #[cfg(feature = "tls")]
        () if config.tls.is_some() => connector.secure_connect(&config.connect_string).await,
        () => connector.connect(&config.connect_string).await,
    }
}

/// How a retired session of this client is reached again to close it (see `session::retire`).
fn reopen(config: ClientConfig) -> Reopen {
    let config = Arc::new(config);
    Arc::new(move |session| {
        let config = config.clone();
        Box::pin(async move {
            let connector = connector(&config).map_err(|_| ZkError::BadArguments(&"unusable client settings"))?;
            dial(&config, connector.with_session(session)).await
        }) as ReopenFuture
    })
}

/// zookeeper-client's options for `tls`; rustls' process-wide crypto provider is installed
/// first if there is none, since zookeeper-client asks rustls for the default one, which panics
/// when several providers are compiled in (another crate enabling `ring`, say).
#[cfg(feature = "tls")]
fn tls_options(tls: &TlsConfig) -> std::result::Result<zookeeper_client::TlsOptions, String> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: there is a default either way.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
    if let Some(options) = &tls.options {
        return Ok(options.clone());
    }
    let Some(ca_pem) = &tls.ca_pem else {
        return Err("a tls client identity was given without a ca certificate; add `tls_ca_pem`".to_owned());
    };
    let mut options = zookeeper_client::TlsOptions::new()
        .with_pem_ca(ca_pem)
        .map_err(|e| format!("the tls ca certificate is unusable ({e}); give PEM text holding `BEGIN CERTIFICATE`"))?;
    if let Some((cert, key)) = &tls.identity_pem {
        options = options.with_pem_identity(cert, key).map_err(|e| {
            format!("the tls client identity is unusable ({e}); give the certificate and its private key as PEM text")
        })?;
    }
    Ok(options)
}

fn describe_connect_failure(error: &ZkError) -> String {
    match error {
        ZkError::BadArguments(what) => {
            format!("malformed connect string ({what}); expected `host:port[,host:port...][/chroot]`")
        }
        ZkError::NoHosts => "no server answered; is the server running?".to_owned(),
        ZkError::Timeout => "no session before the session timeout; is the server running?".to_owned(),
        ZkError::AuthFailed => "authentication failed; check the credentials".to_owned(),
        other => other.to_string(),
    }
}

fn connect_error(connect_string: &str, reason: String) -> Error {
    Error::Connect { connect_string: connect_string.to_owned(), reason }
}
