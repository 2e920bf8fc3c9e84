//! The examples' embedded default: the ZooKeeper named by `ZK_LOCK_CONNECT`, or a throwaway local
//! one from the testing kit when nothing is configured.

use zk_lock::testing::TestingServer;

/// Where the example's ZooKeeper is; keeps a throwaway server alive while it is held.
pub struct ZooKeeper {
    /// The connect string to hand to `zk_lock::connect` and to worker processes.
    pub connect_string: String,
    /// The throwaway server, stopped when this is dropped; `None` when the user gave one.
    _server: Option<TestingServer>,
}

impl ZooKeeper {
    /// The configured ZooKeeper, or a throwaway local one (announced on stdout).
    ///
    /// # Errors
    ///
    /// The testing kit's error when a local server cannot be started (Java or the Debian
    /// `zookeeper` package missing: run `scripts/install-deps`).
    pub fn configured_or_throwaway() -> Result<Self, Box<dyn std::error::Error>> {
        if let Ok(connect_string) = std::env::var(zk_lock::config::CONNECT_ENV) {
            return Ok(Self { connect_string, _server: None });
        }
        println!("{} is not set: starting a throwaway local ZooKeeper...", zk_lock::config::CONNECT_ENV);
        let server = TestingServer::start()?;
        Ok(Self { connect_string: server.connect_string(), _server: Some(server) })
    }
}
