//! TLS to ZooKeeper (feature `tls`): a server with a secure client port that requires client
//! certificates, all made here with `openssl` for this test run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use zk_lock::testing::{children, SecureClientPort, TestingServer};
use zk_lock::{Client, Error, Mutex};

use crate::support::node_name;

/// How long a refused TLS connection may try before `Error::Connect`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A CA, a server certificate for `127.0.0.1` and a client certificate, signed by the CA.
struct Certificates {
    dir: PathBuf,
}

impl Certificates {
    fn generate() -> Self {
        let dir = std::env::temp_dir().join(format!("zk-lock-it-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the certificate directory");
        for ca in ["ca", "rogue-ca"] {
            openssl(
                &dir,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-days",
                    "2",
                    "-subj",
                    &format!("/CN=zk-lock test {ca}"),
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                    "-keyout",
                    &format!("{ca}.key"),
                    "-out",
                    &format!("{ca}.pem"),
                ],
            );
        }
        std::fs::write(
            dir.join("leaf.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n",
        )
        .expect("write the extensions");
        for leaf in ["server", "client"] {
            let (key, csr, pem) = (format!("{leaf}.key"), format!("{leaf}.csr"), format!("{leaf}.pem"));
            let subject = format!("/CN=zk-lock test {leaf}");
            openssl(
                &dir,
                &["req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", &subject, "-keyout", &key, "-out", &csr],
            );
            openssl(
                &dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-extfile",
                    "leaf.ext",
                    "-out",
                    &pem,
                ],
            );
        }
        // ZooKeeper's PEM key store: the private key, then the certificate.
        let key_store = format!("{}{}", read(&dir.join("server.key")), read(&dir.join("server.pem")));
        std::fs::write(dir.join("server-keystore.pem"), key_store).expect("write the key store");
        Self { dir }
    }

    fn pem(&self, name: &str) -> String {
        read(&self.dir.join(name))
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
    assert!(output.status.success(), "openssl {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

struct SecureServer {
    certificates: Certificates,
    server: TestingServer,
}

/// One server for the tests of this binary; it requires client certificates.
static SECURE: LazyLock<SecureServer> = LazyLock::new(|| {
    let certificates = Certificates::generate();
    let server = TestingServer::start_secure(SecureClientPort {
        key_store: certificates.dir.join("server-keystore.pem"),
        trust_store: certificates.dir.join("ca.pem"),
        require_client_certificate: true,
    })
    .expect("start a zookeeper server with a secure client port");
    SecureServer { certificates, server }
});

fn secure_builder() -> zk_lock::ClientBuilder {
    let tls = &*SECURE;
    Client::builder(tls.server.secure_connect_string().expect("a secure port"))
        .tls_ca_pem(tls.certificates.pem("ca.pem"))
        .tls_identity_pem(tls.certificates.pem("client.pem"), tls.certificates.pem("client.key"))
        .connect_timeout(CONNECT_TIMEOUT)
}

#[tokio::test]
async fn locks_work_over_tls_with_a_client_certificate() {
    let path = "/it-tls/orders";
    let client = secure_builder().connect().await.expect("connect over tls");
    let guard = Mutex::with_client(&client, path).lock().await.expect("lock over tls");
    // The same server, seen through its plain port, has the lock node.
    let plain = Client::builder(SECURE.server.connect_string()).connect().await.expect("connect in plain text");
    assert_eq!(children(&plain, path).await.unwrap(), [node_name(guard.node_path())]);
    let waiter = Mutex::with_client(&plain, path);
    assert!(matches!(waiter.try_lock().await, Err(Error::Busy { .. })), "tls and plain clients share the lock");
    guard.release().await.expect("release over tls");
    waiter.try_lock().await.expect("free again").release().await.unwrap();
}

/// A TLS connection that cannot be established fails like any other, within the connect timeout.
async fn refused(builder: zk_lock::ClientBuilder, what: &str) -> String {
    let started = Instant::now();
    let result = builder.connect().await;
    let waited = started.elapsed();
    assert!(waited < CONNECT_TIMEOUT + Duration::from_secs(3), "{what}: took {waited:?}");
    match result {
        Err(Error::Connect { connect_string, reason }) => {
            assert_eq!(Some(connect_string), SECURE.server.secure_connect_string(), "{what}");
            reason
        }
        other => panic!("{what}: expected Error::Connect, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_is_not_trusted_or_a_missing_client_certificate_is_refused_in_bounded_time() {
    let tls = &*SECURE;
    let address = tls.server.secure_connect_string().unwrap();
    let rogue = Client::builder(&address)
        .tls_ca_pem(tls.certificates.pem("rogue-ca.pem"))
        .tls_identity_pem(tls.certificates.pem("client.pem"), tls.certificates.pem("client.key"))
        .connect_timeout(CONNECT_TIMEOUT);
    let reason = refused(rogue, "a server certificate from another ca").await;
    assert!(reason.contains("certificate signed by the given ca"), "{reason}");

    let anonymous =
        Client::builder(&address).tls_ca_pem(tls.certificates.pem("ca.pem")).connect_timeout(CONNECT_TIMEOUT);
    refused(anonymous, "no client certificate").await;

    let plain_text = Client::builder(&address).connect_timeout(CONNECT_TIMEOUT);
    refused(plain_text, "plain text to the tls port").await;
}

#[tokio::test]
async fn unusable_certificates_are_refused_before_connecting() {
    let tls = &*SECURE;
    let address = tls.server.secure_connect_string().unwrap();
    let started = Instant::now();
    let cases = [
        (Client::builder(&address).tls_ca_pem("not a certificate"), "ca certificate"),
        (
            Client::builder(&address)
                .tls_ca_pem(tls.certificates.pem("ca.pem"))
                .tls_identity_pem(tls.certificates.pem("client.pem"), "no key here"),
            "client identity",
        ),
        (
            Client::builder(&address)
                .tls_identity_pem(tls.certificates.pem("client.pem"), tls.certificates.pem("client.key")),
            "without a ca",
        ),
    ];
    for (builder, expected) in cases {
        match builder.connect().await {
            Err(Error::Connect { connect_string, reason }) => {
                assert_eq!(connect_string, address);
                assert!(reason.contains(expected), "{expected}: {reason}");
            }
            other => panic!("{expected}: expected Error::Connect, got {other:?}"),
        }
    }
    assert!(started.elapsed() < CONNECT_TIMEOUT, "refused before connecting");
}
