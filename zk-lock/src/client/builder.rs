//! [`ClientBuilder`]: the settings of a [`Client`], and connecting with them.

use std::fmt;
use std::time::Duration;

use zookeeper_client::Acl;

use super::config::ClientConfig;
#[cfg(feature = "tls")]
use super::config::TlsConfig;
use super::connect::{open_session, CallDeadline};
use super::Client;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;

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
    pub(super) config: ClientConfig,
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
        let config = ClientConfig::new(connect_string.into());
        Self { config }
    }

    /// The session timeout to negotiate (default 10 s). The server clamps it to its own
    /// `minSessionTimeout`..`maxSessionTimeout`. A lock is reported lost when the ensemble's leader
    /// was not proven to have renewed the session for 4/5 of it (about 0.36 of it after the last
    /// answered heartbeat), at least 1/5 of it before the leader could expire the session; the
    /// session is then closed once the server is reachable and replaced.
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
    /// With [`Acls::creator_all()`](crate::zookeeper::Acls::creator_all) and [`auth`](Self::auth), only
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
    ///     .acl(&zk_lock::zookeeper::Acls::creator_all())
    ///     .install()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// A connect fails with [`Error::Connect`], before anything is created, when the list is
    /// empty, when it names the `auth` scheme (as `creator_all` does) but no credentials were
    /// added, or when it would not grant this client `READ`, `CREATE` and `DELETE` (as
    /// [`Acls::anyone_read()`](crate::zookeeper::Acls::anyone_read) alone does not): the client could not
    /// use the parents it creates, and a parent that never had a child is never removed by
    /// ZooKeeper. Entries only the server can match (`ip`, `x509`, a `digest` entry for this
    /// client's user, whose password hash is the server's to check) are taken to apply; when the
    /// server then refuses, the parents the client just made for that lock are deleted again
    /// (those still without children).
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
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_ca_pem(mut self, ca_pem: impl Into<String>) -> Self {
        self.config.tls.get_or_insert_with(TlsConfig::default).ca_pem = Some(ca_pem.into());
        self
    }

    /// The client certificate (chain) and private key, in PEM format, presented to servers that
    /// authenticate clients (feature `tls`; `ssl.clientAuth=need`). Needs [`tls_ca_pem`](Self::tls_ca_pem).
    ///
    /// A connect fails with [`Error::Connect`] when the PEM holds no certificate or key.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_identity_pem(mut self, cert_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        self.config.tls.get_or_insert_with(TlsConfig::default).identity_pem = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Connects over TLS with zookeeper-client's own options (feature `tls`), for what the PEM methods do not
    /// cover (certificates that are renewed while running, no hostname verification). Replaces
    /// [`tls_ca_pem`](Self::tls_ca_pem) and [`tls_identity_pem`](Self::tls_identity_pem).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_options(mut self, options: zookeeper_client::TlsOptions) -> Self {
        self.config.tls = Some(TlsConfig { options: Some(options), ..TlsConfig::default() });
        self
    }

    /// Connects (what [`connect`](Self::connect), [`install`](Self::install) and
    /// [`install_as`](Self::install_as) share; `connect`'s errors).
    pub(crate) async fn open(self) -> Result<Client> {
        self.open_by(None).await
    }

    /// [`open`](Self::open), giving up at `call`'s deadline if it comes before the connect
    /// timeout's: [`Error::Connect`] then says the client was still connecting when it passed.
    pub(crate) async fn open_by(self, call: Option<CallDeadline>) -> Result<Client> {
        let session = open_session(self.config.clone(), call).await?;
        Ok(Client::with_session(self.config, session))
    }
}
