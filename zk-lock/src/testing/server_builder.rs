//! [`ServerBuilder`]: a [`TestingServer`](super::TestingServer)'s port and a data directory of
//! yours, chosen before it starts (what `zk-lock dev-server` runs).

use std::io;
use std::path::{Path, PathBuf};

use super::{Result, TestingError};

/// The log's name in a data directory given to [`ServerBuilder::data_dir`].
pub(super) const KEPT_LOG: &str = "zookeeper.log";

/// Chooses the client port of a [`TestingServer`](super::TestingServer), or a data directory of
/// yours, before starting it; from [`TestingServer::builder`](super::TestingServer::builder).
/// Unset, each is what [`TestingServer::start`](super::TestingServer::start) does: a free
/// port, and the data in the server's temporary directory, deleted with it. Started by
/// [`start`](Self::start).
///
/// A local server for development, on ZooKeeper's usual port, whose nodes outlive it:
///
/// ```no_run
/// use zk_lock::testing::TestingServer;
///
/// # fn main() -> zk_lock::testing::Result<()> {
/// let server = TestingServer::builder().port(2181).data_dir("zk-data").start()?;
/// assert_eq!(server.connect_string(), "127.0.0.1:2181");
/// server.stop()?; // zk-data/ and zk-data/zookeeper.log stay, as they do when it is dropped
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct ServerBuilder {
    pub(super) port: u16,
    pub(super) data_dir: Option<PathBuf>,
}

impl ServerBuilder {
    /// The client port on 127.0.0.1; 0 (the default) picks a free one. A port given here is
    /// used as it is: when another process has it, [`start`](Self::start) fails with
    /// [`TestingError::PortInUse`] instead of trying another.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Keeps the server's data (snapshots and transaction logs) in `dir`, and its log in
    /// `dir/zookeeper.log` (appended to), instead of in its temporary directory: neither is
    /// deleted when the server is dropped, and a server started later on `dir` serves the same
    /// nodes. `dir` is created if missing. Only one server at a time may use a directory.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }
}

/// Checks a data directory given to [`ServerBuilder::data_dir`], creating it if missing;
/// returns its absolute path (the JVM runs in the server's temporary directory).
pub(super) fn prepare_data_dir(dir: &Path) -> Result<PathBuf> {
    let refuse = |reason: String| TestingError::DataDir { dir: dir.to_owned(), reason };
    let unfit = |path: &Path| {
        refuse(format!(
            "its path {} has characters zoo.cfg cannot hold as they are (ZooKeeper reads it as \
             ISO-8859-1 with backslash escapes): non-ASCII or control characters, a backslash, or \
             trailing spaces; choose a plain ASCII path",
            path.display()
        ))
    };
    // Checked before anything is created, and again once symbolic links are resolved.
    let absolute = std::path::absolute(dir).map_err(|err| refuse(format!("cannot resolve its path: {err}")))?;
    if !fits_zoo_cfg(&absolute) {
        return Err(unfit(&absolute));
    }
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => return Err(refuse("it exists and is not a directory".to_owned())),
        Ok(_) => {}
        // Not a directory: a parent is a file, which creating it reports.
        Err(err) if matches!(err.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
            std::fs::create_dir_all(dir).map_err(|err| refuse(format!("cannot create it: {err}")))?;
        }
        Err(err) => return Err(refuse(format!("cannot read it: {err}"))),
    }
    let canonical = std::fs::canonicalize(dir).map_err(|err| refuse(format!("cannot resolve its path: {err}")))?;
    if !fits_zoo_cfg(&canonical) {
        return Err(unfit(&canonical));
    }
    // Root may write anywhere; anyone else needs the permission, which this checks.
    tempfile::NamedTempFile::new_in(&canonical).map_err(|err| refuse(format!("cannot write in it: {err}")))?;
    Ok(canonical)
}

/// Whether `zoo.cfg` can name `path` as it is, which `common_config` writes unescaped.
fn fits_zoo_cfg(path: &Path) -> bool {
    path.to_str().is_some_and(|text| {
        text.chars().all(|c| c == ' ' || (c.is_ascii_graphic() && c != '\\')) && !text.ends_with(' ')
    })
}

/// The error of binding a port given to [`ServerBuilder::port`].
pub(super) fn port_error(port: u16, err: io::Error) -> TestingError {
    match err.kind() {
        io::ErrorKind::AddrInUse => TestingError::PortInUse { port },
        _ => TestingError::io(format!("bind port {port} on 127.0.0.1"), err),
    }
}
