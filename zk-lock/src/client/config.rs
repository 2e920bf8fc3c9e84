//! A client's settings, as the builder collected them.

use std::time::Duration;

use zookeeper_client::Acl;

use super::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_SESSION_TIMEOUT};

#[derive(Clone)]
pub(super) struct ClientConfig {
    pub(super) connect_string: String,
    pub(super) session_timeout: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) namespace: Option<String>,
    pub(super) default_timeout: Option<Duration>,
    pub(super) auth: Vec<(String, Vec<u8>)>,
    /// The ACL of every node created; `None` means `world:anyone` with all permissions.
    pub(super) acl: Option<Vec<Acl>>,
    #[cfg(feature = "tls")]
    pub(super) tls: Option<TlsConfig>,
    /// False for a wrapped foreign client, which we cannot reconnect.
    pub(super) renewable: bool,
}

impl ClientConfig {
    /// The defaults for `connect_string`.
    pub(super) fn new(connect_string: String) -> Self {
        ClientConfig {
            connect_string,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            namespace: None,
            default_timeout: None,
            auth: Vec::new(),
            acl: None,
            #[cfg(feature = "tls")]
            tls: None,
            renewable: true,
        }
    }

    /// What to check when no session comes up: a TLS handshake that fails looks the same. When
    /// no host name of the connect string resolved (`none_resolved`), the names or DNS.
    pub(super) fn unreachable_hint(&self, none_resolved: bool) -> &'static str {
        if none_resolved {
            return "check the host names of the connect string, and this host's DNS";
        }
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
pub(super) struct TlsConfig {
    pub(super) ca_pem: Option<String>,
    pub(super) identity_pem: Option<(String, String)>,
    pub(super) options: Option<zookeeper_client::TlsOptions>,
}

/// The `host:port` parts of a connect string `host:port[,host:port...][/chroot]`, in order.
pub(crate) fn connect_hosts(connect_string: &str) -> impl Iterator<Item = &str> {
    let hosts = connect_string.split('/').next().unwrap_or_default();
    hosts.split(',').map(str::trim).filter(|host| !host.is_empty())
}
