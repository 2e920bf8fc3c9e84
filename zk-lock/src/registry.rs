//! The process-wide registry of clients: a default one, created lazily, and named ones.

use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

use crate::client::{CallDeadline, Client, ClientBuilder};
use crate::error::{Error, Result};

/// Environment variable read for the default client's connect string when none was installed.
pub const CONNECT_ENV: &str = "ZK_LOCK_CONNECT";
/// The connect string of the default client when neither [`connect`] nor [`CONNECT_ENV`] set one.
pub const DEFAULT_CONNECT_STRING: &str = "127.0.0.1:2181";

#[derive(Default)]
struct Registry {
    default: Option<Client>,
    named: HashMap<String, Client>,
    /// The connect strings of clients made by [`ClientBuilder::connect`] (never installed), the
    /// first few: named when the default client is made in their stead.
    not_installed: Vec<String>,
}

/// How many connect strings of clients that were not installed are remembered.
const NOT_INSTALLED_NAMED: usize = 4;

fn note_not_installed(connect_string: &str) {
    let mut registry = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    let known = registry.not_installed.iter().any(|known| known == connect_string);
    if !known && registry.not_installed.len() < NOT_INSTALLED_NAMED {
        registry.not_installed.push(connect_string.to_owned());
    }
}

/// What to say when the default client is made while clients were connected without being
/// installed: `None` if there were none.
fn not_installed_hint() -> Option<String> {
    let registry = read();
    (!registry.not_installed.is_empty()).then(|| {
        format!(
            "clients were connected to {} with `Client::builder(..).connect()`, which does not install them; \
             `.install()` makes one the default",
            registry.not_installed.join(" and ")
        )
    })
}

static REGISTRY: LazyLock<RwLock<Registry>> = LazyLock::new(RwLock::default);
/// Makes concurrent first uses of the default client open one session, not many.
static DEFAULT_CONNECTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn read() -> std::sync::RwLockReadGuard<'static, Registry> {
    REGISTRY.read().unwrap_or_else(|e| e.into_inner())
}

/// Connects to `connect_string` and installs the result as the default client.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// zk_lock::connect("127.0.0.1:2181").await?;
/// let guard = zk_lock::Mutex::new("/locks/orders").lock().await?;
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`Error::Connect`] if no session is established within the connect timeout.
///
/// # Cancel safety
///
/// Cancel safe: nothing is installed unless the connection succeeded.
pub async fn connect(connect_string: &str) -> Result<Client> {
    ClientBuilder::new(connect_string).install().await
}

/// The default client: the one installed by [`connect`] or [`ClientBuilder::install`], or else
/// a new one for `$ZK_LOCK_CONNECT` (default `127.0.0.1:2181`), connected on first use.
///
/// # Errors
///
/// [`Error::Connect`] if the default has to be connected and that fails (within
/// [`DEFAULT_CONNECT_TIMEOUT`](crate::config::DEFAULT_CONNECT_TIMEOUT)); its reason names
/// [`CONNECT_ENV`](crate::config::CONNECT_ENV) and how to configure the client.
///
/// # Cancel safety
///
/// Cancel safe.
pub async fn default_client() -> Result<Client> {
    default_client_by(None).await
}

/// The default client if it is installed (or connected) already: no wait.
pub(crate) fn installed_default() -> Option<Client> {
    read().default.clone()
}

/// [`default_client`], connected (if it has to be) by `call`'s deadline at the latest: an
/// annotated call's timeout counts connecting the default client too. At that deadline the
/// [`Error::Connect`] says the client was still being connected when it passed.
pub(crate) async fn default_client_by(call: Option<CallDeadline>) -> Result<Client> {
    if let Some(client) = installed_default() {
        return Ok(client);
    }
    // Boxed: connecting happens once, and inline it would swell every acquisition's future.
    Box::pin(connect_default(call)).await
}

/// Connects and installs the default client, unless another caller did meanwhile.
async fn connect_default(call: Option<CallDeadline>) -> Result<Client> {
    let from_env = std::env::var(CONNECT_ENV).ok();
    let connect_string = from_env.clone().unwrap_or_else(|| DEFAULT_CONNECT_STRING.to_owned());
    let connecting = DEFAULT_CONNECTING.lock();
    let _connecting = match &call {
        Some(deadline) => match tokio::time::timeout_at(deadline.at, connecting).await {
            Ok(connecting) => connecting,
            Err(_) => {
                let reason = format!(
                    "still connecting when {} ran out: another call was connecting the default client",
                    deadline.what
                );
                let error = Error::Connect { connect_string, reason };
                return Err(explain_default(error, from_env.is_some(), not_installed_hint()));
            }
        },
        None => connecting.await,
    };
    if let Some(client) = installed_default() {
        return Ok(client);
    }
    let hint = not_installed_hint();
    if let Some(hint) = &hint {
        tracing::warn!(target: "zk_lock", connect_string, "no default client was installed, so one is made; {hint}");
    }
    let client = ClientBuilder::new(connect_string).open_by(call).await;
    let client = client.map_err(|error| explain_default(error, from_env.is_some(), hint))?;
    install(None, client.clone());
    Ok(client)
}

/// A connect error of the default client, saying where its connect string came from (`from_env`)
/// and how to configure it, with the `hint` about clients connected but not installed.
fn explain_default(error: Error, from_env: bool, hint: Option<String>) -> Error {
    match error {
        Error::Connect { connect_string, reason } => {
            let source = match from_env {
                true => format!("${CONNECT_ENV}"),
                false => format!("the fallback for an unset ${CONNECT_ENV}"),
            };
            let mut reason = format!(
                "{reason} (the default client, used because none was installed, connects to {source}: set \
                 {CONNECT_ENV} to `host:port[,host:port...]`, or install a client first with \
                 `zk_lock::connect(..)` or `zk_lock::Client::builder(..).install()`)"
            );
            if let Some(hint) = hint {
                reason = format!("{reason}; {hint}");
            }
            Error::Connect { connect_string, reason }
        }
        other => other,
    }
}

/// The client installed under `name` by [`ClientBuilder::install_as`].
///
/// # Errors
///
/// [`Error::UnknownClient`] if no client of that name was installed.
pub fn named_client(name: &str) -> Result<Client> {
    let registry = read();
    if let Some(client) = registry.named.get(name) {
        return Ok(client.clone());
    }
    let mut installed: Vec<&str> = registry.named.keys().map(String::as_str).collect();
    installed.sort_unstable();
    let installed = if installed.is_empty() { "none".to_owned() } else { installed.join(", ") };
    Err(Error::UnknownClient { name: name.to_owned(), installed })
}

/// Closes every client of the registry, the default one and the named ones, at once (see
/// [`Client::close`]): their locks are reported lost, their sessions end on the server so that
/// other processes are granted those locks without waiting out a session timeout, and every
/// acquisition through them from now on fails with [`Error::ClientClosed`]. Call it last, when
/// the process shuts down:
///
/// ```no_run
/// # async fn serve() {}
/// # async fn demo() {
/// tokio::select! {
///     () = serve() => {}
///     _ = tokio::signal::ctrl_c() => {}
/// }
/// zk_lock::shutdown().await;
/// # }
/// ```
///
/// Clients made with [`ClientBuilder::connect`] and never installed, and defaults replaced by a
/// later install, are not in the registry: close them yourself.
///
/// # Cancel safety
///
/// Cancel safe: as [`Client::close`], the clients are closed once it is first polled.
pub async fn shutdown() {
    let clients: Vec<Client> = {
        // A default being connected now is installed first, and closed with the others.
        let _connecting = DEFAULT_CONNECTING.lock().await;
        let registry = read();
        registry.default.iter().chain(registry.named.values()).cloned().collect()
    };
    futures::future::join_all(clients.iter().map(Client::close)).await;
}

/// Installs `client`; a replaced client stays alive for the guards that use it.
pub(crate) fn install(name: Option<String>, client: Client) {
    let mut registry = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    match name {
        Some(name) => {
            registry.named.insert(name, client);
        }
        None => registry.default = Some(client),
    }
}

/// The builder's last step, kept with the registry it writes to (or, for `connect`, does not).
impl ClientBuilder {
    /// Connects, **without installing** the client: the attributes, [`Mutex::new`](crate::Mutex::new)
    /// and the other recipes made without a client do not use it (they use the default client:
    /// [`install`](Self::install) it for that). Pass it to `with_client` constructors, or to
    /// [`testing`](crate::testing) helpers.
    ///
    /// So that a client meant as the default is not missed, the first use of a default that
    /// was never installed logs a warning (target `zk_lock`) naming the clients connected this
    /// way, and its connect error names them too.
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
        let client = self.open().await?;
        note_not_installed(client.connect_string());
        Ok(client)
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
        let client = self.open().await?;
        install(None, client.clone());
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
        let client = self.open().await?;
        install(Some(name.into()), client.clone());
        Ok(client)
    }
}
