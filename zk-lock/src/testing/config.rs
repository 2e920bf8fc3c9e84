//! The server settings every test server shares, standalone or in an ensemble.

use std::path::Path;

/// `zoo.cfg` lines common to every test server listening on `client_port` with `data_dir`.
pub(super) fn common_config(data_dir: &Path, client_port: u16) -> String {
    format!(
        "# Written by zk_lock::testing.\n\
         tickTime=500\n\
         minSessionTimeout=1000\n\
         maxSessionTimeout=60000\n\
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
    )
}
