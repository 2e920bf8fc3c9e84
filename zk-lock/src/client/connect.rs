//! Opening a session: the connector's settings, TLS, the namespace node, the ACL check, and
//! reopening a session to retire it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{Acl, Acls, CreateMode, Error as ZkError, Permission};

use super::config::ClientConfig;
#[cfg(feature = "tls")]
use super::config::TlsConfig;
use super::unreachable;
use crate::background;
use crate::error::{Error, Result};
use crate::path::validate_lock_path;
use crate::session::{Reopen, ReopenFuture, Session};

/// Opens a session on the caller's runtime, which then runs its I/O (`session::io_runtime`): on
/// zk-lock's own runtime when there is none, or when the caller's cannot run it (built without
/// `enable_io` or `enable_time`: the attempt panics in its task and is made again there).
pub(super) async fn open_session(config: ClientConfig) -> Result<Arc<Session>> {
    if let Some(namespace) = &config.namespace {
        validate_lock_path(namespace)?;
    }
    check_acl(&config)?;
    let connect_string = config.connect_string.clone();
    let opened = match joined(background::spawn_here(open(config.clone()))).await {
        Err(failed) if failed.is_panic() => joined(background::spawn(open(config))).await,
        opened => opened,
    };
    opened.map_err(|e| connect_error(&connect_string, format!("connect task failed: {e}")))?
}

/// Opens a session within the connect timeout.
async fn open(config: ClientConfig) -> Result<Arc<Session>> {
    let deadline = Instant::now() + config.connect_timeout;
    let zk = connect(&config, deadline).await?;
    Ok(Session::new(zk, Some(reopen(config))))
}

/// The task's output; the task is aborted if this is dropped first (dropping a `JoinHandle` does
/// not stop its task, and aborting a finished task does nothing).
async fn joined<T>(task: tokio::task::JoinHandle<T>) -> std::result::Result<T, tokio::task::JoinError> {
    let _abort_on_cancel = AbortOnDrop(task.abort_handle());
    task.await
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What [`Acls::anyone_all`] stands for, as a list.
pub(super) static ANYONE_ALL: [Acl; 1] = [Acl::new_const(Permission::ALL, "world", "anyone")];

pub(super) fn acls_of(acl: Option<&[Acl]>) -> Acls<'_> {
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

async fn connect(config: &ClientConfig, deadline: Instant) -> Result<zookeeper_client::Client> {
    let zk = first_session(config, deadline).await?;
    let Some(namespace) = &config.namespace else { return Ok(zk) };
    let options = CreateMode::Persistent.with_acls(acls_of(config.acl.as_deref()));
    match zk.mkdir(namespace, &options).await {
        Ok(()) | Err(ZkError::NodeExists) => {}
        Err(ZkError::NoAuth) => return Err(Error::from_zookeeper(ZkError::NoAuth, namespace)),
        Err(e) => {
            return Err(connect_error(&config.connect_string, format!("cannot create namespace `{namespace}`: {e}")))
        }
    }
    zk.chroot(namespace.as_str())
        .map_err(|_| Error::invalid_path(namespace, "not a valid namespace; use an absolute path like `/my-service`"))
}

/// The first pause before every address is tried again.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Dials until a server gives a session or `deadline` passes. zookeeper-client tries every
/// address once and gives up; then each address is probed for the cause (`unreachable`), and,
/// after a pause, tried again, so a server that comes up within the connect timeout is still
/// found. At the deadline the error names the timeout and what the last probe found.
async fn first_session(config: &ClientConfig, deadline: Instant) -> Result<zookeeper_client::Client> {
    let mut finding = None;
    let mut pause = FIRST_RETRY_PAUSE;
    loop {
        let attempt = tokio::time::timeout_at(deadline, dial(config, connector(config)?.with_fail_eagerly())).await;
        match attempt {
            Ok(Ok(zk)) => return Ok(zk),
            Ok(Err(ZkError::NoHosts)) => {
                let connect_string = config.connect_string.clone();
                finding = tokio::task::spawn_blocking(move || unreachable::diagnose(&connect_string)).await.ok();
            }
            Ok(Err(e)) => return Err(connect_error(&config.connect_string, describe_connect_failure(&e))),
            Err(_) => break,
        }
        if Instant::now() + pause >= deadline {
            break;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    let found = finding.map(|finding| format!(": {finding}")).unwrap_or_default();
    let timeout = config.connect_timeout;
    let reason = format!("no session within {timeout:?}, the connect timeout{found}; {}", config.unreachable_hint());
    Err(connect_error(&config.connect_string, reason))
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
        ZkError::Timeout => "the server did not complete the session handshake in time; is it running?".to_owned(),
        ZkError::AuthFailed => "authentication failed; check the credentials".to_owned(),
        other => other.to_string(),
    }
}

fn connect_error(connect_string: &str, reason: String) -> Error {
    Error::Connect { connect_string: connect_string.to_owned(), reason }
}
