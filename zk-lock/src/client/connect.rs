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
/// `call`: the deadline of the call that needs the session, if it is to end sooner than the
/// connect timeout allows.
pub(super) async fn open_session(config: ClientConfig, call: Option<CallDeadline>) -> Result<Arc<Session>> {
    if let Some(namespace) = &config.namespace {
        validate_lock_path(namespace)?;
    }
    check_acl(&config)?;
    let connect_string = config.connect_string.clone();
    let opened = match joined(background::spawn_here(open(config.clone(), call.clone()))).await {
        Err(failed) if failed.is_panic() => joined(background::spawn(open(config, call))).await,
        opened => opened,
    };
    opened.map_err(|e| connect_error(&connect_string, format!("connect task failed: {e}")))?
}

/// The deadline of a call that connects a client for its own use (an annotated call's timeout,
/// which counts connecting the default client too), when it ends before the connect timeout.
#[derive(Debug, Clone)]
pub(crate) struct CallDeadline {
    /// When the call's time runs out.
    pub(crate) at: Instant,
    /// The deadline as the error names it, like "the call's timeout of 1s for lock `/a`".
    pub(crate) what: String,
}

/// Opens a session within the connect timeout, or the call's deadline if that comes first.
async fn open(config: ClientConfig, call: Option<CallDeadline>) -> Result<Arc<Session>> {
    let requested = Instant::now();
    let connect_deadline = requested + config.connect_timeout;
    // The call's deadline, if it is the one that ends the attempt.
    let call = call.filter(|call| call.at < connect_deadline);
    let zk = connect(&config, connect_deadline, call.as_ref()).await?;
    Ok(Session::new(zk, Some(reopen(config)), requested))
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

/// Refuses, before any request, an ACL that the server would reject on every create, or one
/// that would not let this client use the nodes it creates with it (see [`grantable`]): its
/// first lock would leave behind a parent nobody could use.
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
    let granted = grantable(acl, &config.auth);
    if !granted.has(needed()) {
        let entries: Vec<String> = acl.iter().map(describe_acl).collect();
        return Err(connect_error(
            &config.connect_string,
            format!(
                "the ACL [{}] grants this client {granted} on the nodes it creates, but a lock needs \
                 READ|CREATE|DELETE there: every node the client creates gets this ACL, the parents of \
                 lock paths too, and the client creates and deletes its lock nodes in them (CREATE, \
                 DELETE) and lists and reads them (READ); give an ACL that grants this client those, \
                 like `Acls::creator_all()` with `.auth(\"digest\", \"user:password\")` or the default \
                 `Acls::anyone_all()`, and add entries for others (such as READ for anyone) beside it",
                entries.join(", ")
            ),
        ));
    }
    Ok(())
}

/// What a client needs on every node it creates: CREATE and DELETE on the parents of lock paths
/// (which it creates with its ACL), to make and remove its lock and lease nodes there; READ to
/// list them and to read the nodes ahead of its own. (WRITE is for shared counts and revocation,
/// ADMIN for nothing.)
fn needed() -> Permission {
    Permission::READ | Permission::CREATE | Permission::DELETE
}

/// The permissions `acl` may grant a client with the credentials `auth`: `world:anyone`'s, the
/// creator's own (`auth`, expanded by the server to the client's credentials), and a `digest`
/// entry's when the client authenticates as its user (the password's hash is the server's to
/// check). Entries of other digest users grant nothing; entries whose match only the server can
/// tell (`ip`, `x509`, `sasl`, other schemes) are taken to grant what they say, so an ACL is
/// refused only when it certainly cannot work.
fn grantable(acl: &[Acl], auth: &[(String, Vec<u8>)]) -> Permission {
    let digest_users: Vec<&[u8]> = auth
        .iter()
        .filter(|(scheme, _)| scheme == "digest")
        .map(|(_, credentials)| credentials.split(|&b| b == b':').next().unwrap_or_default())
        .collect();
    let applies = |acl: &Acl| match acl.scheme() {
        "world" => acl.id() == "anyone",
        "auth" => !auth.is_empty(),
        "digest" => {
            let user = acl.id().split(':').next().unwrap_or_default();
            digest_users.contains(&user.as_bytes())
        }
        _ => true,
    };
    acl.iter().filter(|acl| applies(acl)).fold(Permission::NONE, |granted, acl| granted | acl.permission())
}

/// An ACL entry as `scheme:id:PERMISSIONS`; a digest entry shows its user, not the password's hash.
fn describe_acl(acl: &Acl) -> String {
    let id = match acl.scheme() {
        "digest" => acl.id().split(':').next().unwrap_or_default(),
        _ => acl.id(),
    };
    format!("{}:{id}:{}", acl.scheme(), acl.permission())
}

/// Connects before `connect_deadline`, or before `call`'s deadline, which comes first.
async fn connect(
    config: &ClientConfig,
    connect_deadline: Instant,
    call: Option<&CallDeadline>,
) -> Result<zookeeper_client::Client> {
    let zk = first_session(config, connect_deadline, call).await?;
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

/// Dials until a server gives a session or the deadline passes (`call`'s, if it has one, else
/// `connect_deadline`). zookeeper-client tries every
/// address once and gives up; then each address is probed for the cause (`unreachable`), and,
/// after a pause, tried again, so a server that comes up within the connect timeout is still
/// found. At the deadline the error names the timeout (the call's, if it ended first) and what
/// the last probe found.
async fn first_session(
    config: &ClientConfig,
    connect_deadline: Instant,
    call: Option<&CallDeadline>,
) -> Result<zookeeper_client::Client> {
    let started = Instant::now();
    let deadline = call.map_or(connect_deadline, |call| call.at);
    let mut finding: Option<unreachable::Finding> = None;
    let mut pause = FIRST_RETRY_PAUSE;
    loop {
        let attempt = tokio::time::timeout_at(deadline, dial(config, connector(config)?.with_fail_eagerly())).await;
        match attempt {
            Ok(Ok(zk)) => return Ok(zk),
            // Every address failed: found out why once; later rounds retry without probing. A
            // probe slower than the deadline leaves the error without its finding.
            Ok(Err(ZkError::NoHosts)) if finding.is_none() => {
                let connect_string = config.connect_string.clone();
                let probe = tokio::task::spawn_blocking(move || unreachable::diagnose(&connect_string));
                match tokio::time::timeout_at(deadline, probe).await {
                    Ok(found) => finding = found.ok(),
                    Err(_) => break,
                }
            }
            Ok(Err(ZkError::NoHosts)) => {}
            Ok(Err(e)) => return Err(connect_error(&config.connect_string, describe_connect_failure(&e))),
            Err(_) => break,
        }
        // Tried again until the deadline, the last time at the deadline at the latest.
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep_until(deadline.min(Instant::now() + pause)).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    let hint = config.unreachable_hint(finding.as_ref().is_some_and(|finding| finding.none_resolved));
    let found = finding.map(|finding| format!(": {finding}")).unwrap_or_default();
    let timeout = config.connect_timeout;
    let reason = match call {
        Some(call) => {
            let what = &call.what;
            format!("still connecting when {what} ran out, after {:.2?}{found}; {hint}", started.elapsed())
        }
        None => format!("no session within {timeout:?}, the connect timeout{found}; {hint}"),
    };
    Err(connect_error(&config.connect_string, reason))
}

/// zookeeper-client's connector with the client's session timeout, credentials and TLS.
fn connector(config: &ClientConfig) -> Result<zookeeper_client::Connector> {
    // zookeeper-client gives up on a silent server after this long (0.4 T by default): sooner
    // leaves a reconnect, which the leader renews, time to answer a heartbeat before the locks
    // are declared lost (at least 0.36 T after the last answer: session/liveness.rs). It pings on
    // its own after 3/8 of it (0.1125 T) without sending, longer than the heartbeat's T/9.
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

#[cfg(test)]
mod tests {
    use zookeeper_client::AuthId;

    use super::*;

    fn config(acl: &[Acl], auth: &[&str]) -> ClientConfig {
        let mut config = ClientConfig::new("127.0.0.1:2181".to_owned());
        config.acl = Some(acl.to_vec());
        config.auth = auth.iter().map(|credentials| ("digest".to_owned(), credentials.as_bytes().to_vec())).collect();
        config
    }

    fn refusal(acl: &[Acl], auth: &[&str]) -> Option<String> {
        match check_acl(&config(acl, auth)) {
            Ok(()) => None,
            Err(Error::Connect { reason, .. }) => Some(reason),
            Err(other) => panic!("expected Error::Connect, got {other:?}"),
        }
    }

    #[test]
    fn an_acl_that_does_not_let_the_client_use_its_own_nodes_is_refused() {
        let reason = refusal(&Acls::anyone_read(), &[]).expect("anyone READ only");
        assert!(reason.contains("the ACL [world:anyone:READ] grants this client READ"), "{reason}");
        assert!(reason.contains("needs READ|CREATE|DELETE"), "{reason}");
        assert!(reason.contains("`Acls::creator_all()` with `.auth("), "{reason}");

        let no_delete = [Acl::new(Permission::READ | Permission::CREATE, AuthId::anyone())];
        assert!(refusal(&no_delete, &[]).is_some_and(|r| r.contains("grants this client READ|CREATE on")));
        // Another digest user's entry: the hash is never shown.
        let theirs = [Acl::new(Permission::ALL, AuthId::new("digest", "billing:c2VjcmV0aGFzaA=="))];
        let reason = refusal(&theirs, &["orders:secret"]).expect("another user's entry grants nothing");
        assert!(reason.contains("[digest:billing:ALL] grants this client NONE"), "{reason}");
        assert!(!reason.contains("c2VjcmV0aGFzaA"), "{reason}");
        // Entries that add up to enough, or grant the creator everything.
        let split = [
            Acl::new(Permission::READ, AuthId::anyone()),
            Acl::new(Permission::CREATE | Permission::DELETE, AuthId::new("digest", "orders:aGFzaA==")),
        ];
        assert_eq!(refusal(&split, &["orders:secret"]), None);
        let without_the_user = refusal(&split, &[]);
        assert!(without_the_user.is_some_and(|r| r.contains("grants this client READ on")), "READ only");
        assert_eq!(refusal(&Acls::creator_all(), &["orders:secret"]), None);
        assert_eq!(refusal(&Acls::anyone_all(), &[]), None);
    }

    #[test]
    fn entries_only_the_server_can_match_are_given_the_benefit_of_the_doubt() {
        // The server decides whether the client's address or certificate matches: accepted here,
        // and parents that then refuse the client are removed again (`CreatedParents`).
        for scheme in [("ip", "10.0.0.0/8"), ("x509", "CN=orders"), ("sasl", "orders")] {
            let acl = [Acl::new(Permission::ALL, AuthId::new(scheme.0, scheme.1))];
            assert_eq!(refusal(&acl, &[]), None, "{scheme:?}");
        }
    }
}
