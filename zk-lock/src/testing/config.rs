//! The server settings every test server shares, standalone or in an ensemble.

use std::path::Path;
use std::time::Duration;

use super::SecureClientPort;

/// The servers' tick unless a test chooses another ([`ClusterBuilder::tick_time`]).
///
/// [`ClusterBuilder::tick_time`]: super::ClusterBuilder::tick_time
pub(super) const DEFAULT_TICK_TIME: Duration = Duration::from_millis(500);

/// `zoo.cfg` lines common to every test server listening on `client_port` with `data_dir`, on a
/// tick of `tick_time` (whole milliseconds).
pub(super) fn common_config(data_dir: &Path, client_port: u16, tick_time: Duration) -> String {
    let tick = tick_time.as_millis();
    format!(
        "# Written by zk_lock::testing.\n\
         tickTime={tick}\n\
         # ZooKeeper's own minimum, two ticks, so tests may use short sessions.\n\
         minSessionTimeout={min_session}\n\
         maxSessionTimeout={max_session}\n\
         dataDir={data_dir}\n\
         clientPort={client_port}\n\
         clientPortAddress=127.0.0.1\n\
         # Jetty would bind 8080, which parallel servers cannot share.\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=*\n\
         # All test clients come from 127.0.0.1; the default limit is 60 per address.\n\
         maxClientCnxns=0\n\
         # A killed JVM loses nothing without fsync (the kernel keeps the writes); only a\n\
         # machine crash would, and tests do not survive that anyway.\n\
         forceSync=no\n",
        data_dir = data_dir.display(),
        min_session = 2 * tick,
        // A minute, or ZooKeeper's own maximum (twenty ticks) if longer.
        max_session = (20 * tick).max(60_000),
    )
}

/// `zoo.cfg` lines for a TLS client port. ZooKeeper reads the PEM files directly (key store type
/// `PEM`, since 3.6), so tests need no `keytool`; unknown keys such as `ssl.*` and
/// `serverCnxnFactory` become the `zookeeper.*` system properties they stand for.
pub(super) fn secure_config(secure_port: u16, tls: &SecureClientPort) -> String {
    format!(
        "secureClientPort={secure_port}\n\
         secureClientPortAddress=127.0.0.1\n\
         # TLS needs the Netty connection factory; it serves the plain port too.\n\
         serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         ssl.keyStore.location={key_store}\n\
         ssl.keyStore.type=PEM\n\
         ssl.trustStore.location={trust_store}\n\
         ssl.trustStore.type=PEM\n\
         ssl.clientAuth={client_auth}\n",
        key_store = tls.key_store.display(),
        trust_store = tls.trust_store.display(),
        client_auth = if tls.require_client_certificate { "need" } else { "none" },
    )
}
