//! A standalone ZooKeeper server.

use std::ffi::OsStr;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::config::{common_config, secure_config, DEFAULT_TICK_TIME};
use super::java::JavaSetup;
use super::ports::{free_port, free_ports};
use super::probe::{
    self, StartFailure, LOG_LINES, PROBE_INTERVAL, PROBE_TIMEOUT, REBIND_ATTEMPTS, REBIND_PAUSE, START_TIMEOUT,
    STOP_GRACE,
};
use super::process::{JvmCommand, JvmProcess};
use super::server_builder::{port_error, prepare_data_dir, ServerBuilder, KEPT_LOG};
use super::{tempdir, Result, SecureClientPort, TestingError};

const MAIN_CLASS: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// Fresh ports tried when another process takes the one picked.
const PORT_ATTEMPTS: usize = 5;

/// A standalone ZooKeeper server in its own temporary directory, on a free loopback port.
///
/// Start one with [`TestingServer::start`], or use the per-process [`shared_server`];
/// [`TestingServer::builder`] chooses the port and keeps the data in a directory of yours. All
/// methods take `&self`, so a server can be shared between tasks and stopped or restarted by
/// any of them; they block the calling thread until done.
///
/// Dropping it kills the server and deletes its directory.
///
/// [`shared_server`]: super::shared_server
#[derive(Debug)]
pub struct TestingServer {
    dir: PathBuf,
    data_dir: PathBuf,
    config: PathBuf,
    log: PathBuf,
    port: u16,
    /// The TLS port and its settings, for a server started with [`TestingServer::start_secure`].
    secure: Option<(u16, SecureClientPort)>,
    setup: JavaSetup,
    process: Mutex<Option<JvmProcess>>,
}

impl TestingServer {
    /// Starts a server and waits until it serves requests.
    ///
    /// Takes about a second; at most about thirty seconds before giving up.
    ///
    /// # Errors
    ///
    /// [`TestingError::JavaNotFound`] or [`TestingError::ZookeeperNotFound`] when the software
    /// is missing; [`TestingError::Exited`] or [`TestingError::NotServing`], quoting the server
    /// log, when it does not come up; [`TestingError::Io`] when its directory cannot be made.
    pub fn start() -> Result<TestingServer> {
        Self::start_with(None, &ServerBuilder::default())
    }

    /// Chooses the client port, or a data directory that outlives the server, before starting
    /// it.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Starts a server that also serves TLS clients on a second port, its
    /// [`secure_port`](Self::secure_port), with the certificates of `tls`; the plain
    /// [`port`](Self::port) keeps serving too. ZooKeeper then uses its Netty connection factory,
    /// as it must for TLS.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); a server that cannot read the certificates exits, and the
    /// error quotes its log.
    pub fn start_secure(tls: SecureClientPort) -> Result<TestingServer> {
        Self::start_with(Some(tls), &ServerBuilder::default())
    }

    pub(super) fn start_with(tls: Option<SecureClientPort>, options: &ServerBuilder) -> Result<TestingServer> {
        // The caller's mistakes first, as they need no Java to be found.
        let kept_data = options.data_dir.as_deref().map(prepare_data_dir).transpose()?;
        let setup = JavaSetup::detect()?;
        if options.port != 0 {
            // Said at once, instead of after a JVM's start-up, when it is plainly taken.
            TcpListener::bind((Ipv4Addr::LOCALHOST, options.port)).map_err(|err| port_error(options.port, err))?;
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let server = TestingServer::prepare(setup.clone(), tls.clone(), options.port, kept_data.as_deref())?;
            match server.launch() {
                Ok(process) => {
                    *server.lock() = Some(process);
                    return Ok(server);
                }
                // Another process took the chosen port meanwhile.
                Err(failure) if failure.port_taken && options.port != 0 && tls.is_none() => {
                    return Err(TestingError::PortInUse { port: options.port })
                }
                // Dropping `server` deletes its directory; the next attempt gets fresh ones.
                Err(failure) if failure.port_taken && attempt < PORT_ATTEMPTS => continue,
                Err(failure) => return Err(failure.error),
            }
        }
    }

    /// Creates the directory and configuration of a server on `port`, or on free ports if it is
    /// 0, with its data in `kept_data` if given (checked by [`prepare_data_dir`]), else in its
    /// directory.
    fn prepare(
        setup: JavaSetup,
        tls: Option<SecureClientPort>,
        port: u16,
        kept_data: Option<&Path>,
    ) -> Result<TestingServer> {
        let (port, secure) = match (port, tls) {
            (0, None) => (free_port()?, None),
            (0, Some(tls)) => {
                let ports = free_ports(2)?;
                (ports[0], Some((ports[1], tls)))
            }
            (port, tls) => (port, tls.map(|tls| free_port().map(|secure| (secure, tls))).transpose()?),
        };
        let dir = tempdir::create("server")?;
        // From here on, dropping `server` deletes the directory (and only it: not `kept_data`).
        let server = TestingServer {
            data_dir: kept_data.map_or_else(|| dir.join("data"), Path::to_owned),
            config: dir.join("zoo.cfg"),
            log: kept_data.map_or_else(|| dir.join("zookeeper.log"), |data| data.join(KEPT_LOG)),
            dir,
            port,
            secure,
            setup,
            process: Mutex::new(None),
        };
        if kept_data.is_none() {
            std::fs::create_dir(&server.data_dir)
                .map_err(|err| TestingError::io(format!("create {}", server.data_dir.display()), err))?;
        }
        std::fs::write(&server.config, server.config_text())
            .map_err(|err| TestingError::io(format!("write {}", server.config.display()), err))?;
        Ok(server)
    }

    fn config_text(&self) -> String {
        let mut text = common_config(&self.data_dir, self.port, DEFAULT_TICK_TIME);
        if let Some((port, tls)) = &self.secure {
            text.push_str(&secure_config(*port, tls));
        }
        text
    }

    /// Starts the JVM on the prepared configuration and waits until it serves.
    fn launch(&self) -> std::result::Result<JvmProcess, StartFailure> {
        let args: [&OsStr; 1] = [self.config.as_os_str()];
        let mut process = JvmProcess::spawn(&JvmCommand {
            java: &self.setup.java,
            classpath: &self.setup.classpath,
            main_class: MAIN_CLASS,
            args: &args,
            dir: &self.dir,
            parent_dir: None,
            log: &self.log,
        })?;
        // On failure `process` is dropped, which kills it.
        probe::wait_serving("standalone", &mut process, self.addr(), &self.data_dir, |mode| mode == "standalone")?;
        if let Some(addr) = self.secure_addr() {
            wait_listening(&mut process, addr)?;
        }
        Ok(process)
    }

    fn lock(&self) -> MutexGuard<'_, Option<JvmProcess>> {
        // A panic elsewhere cannot leave the `Option` half-updated.
        self.process.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connect string of this server: `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        self.addr().to_string()
    }

    /// The client port, which stays the same across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The client address: `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The TLS client port of a server started with [`start_secure`](Self::start_secure).
    pub fn secure_port(&self) -> Option<u16> {
        self.secure.as_ref().map(|(port, _)| *port)
    }

    /// The TLS client address, `127.0.0.1:SECURE_PORT`, of a server started with
    /// [`start_secure`](Self::start_secure). Its certificate must name `127.0.0.1` (an IP
    /// subject alternative name) for clients that verify the host.
    pub fn secure_addr(&self) -> Option<SocketAddr> {
        self.secure_port().map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    }

    /// The connect string of the TLS port: `127.0.0.1:SECURE_PORT`.
    pub fn secure_connect_string(&self) -> Option<String> {
        self.secure_addr().map(|addr| addr.to_string())
    }

    /// The server's data directory (snapshots and transaction logs): in its temporary
    /// directory, or the one given to [`ServerBuilder::data_dir`] (as an absolute path).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The server's log file: stdout and stderr of every run, appended.
    pub fn log_file(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of the server's log, from its last start on (what a start error
    /// quotes), or of the whole log if it never ran.
    pub fn log_tail(&self, lines: usize) -> String {
        match self.lock().as_ref() {
            Some(process) => process.log_tail(lines),
            None => super::process::log_tail(&self.log, 0, lines),
        }
    }

    /// The pid of the server's JVM while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.lock().as_mut().and_then(JvmProcess::pid)
    }

    /// Stops the server gracefully (`SIGTERM`) and waits until it has exited. Clients see the
    /// connection drop; their sessions survive a [restart](Self::restart) within their timeout.
    ///
    /// Does nothing if the server is not running. Kills it if it ignores `SIGTERM` for ten
    /// seconds.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when the process cannot be signalled or waited for.
    pub fn stop(&self) -> Result<()> {
        let mut process = self.lock();
        if let Some(running) = process.as_mut() {
            running.terminate(STOP_GRACE)?;
        }
        *process = None;
        Ok(())
    }

    /// Kills the server (`SIGKILL`), as a crash would, and waits until it has exited.
    ///
    /// Does nothing if the server is not running.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when the process cannot be signalled or waited for.
    pub fn kill(&self) -> Result<()> {
        let mut process = self.lock();
        if let Some(running) = process.as_mut() {
            running.kill()?;
        }
        *process = None;
        Ok(())
    }

    /// Freezes the server (`SIGSTOP`), as a long GC pause or a frozen VM would: connections
    /// stay open and new ones are accepted by the kernel, but nothing is answered until
    /// [`resume`](Self::resume). [`stop`](Self::stop), [`restart`](Self::restart) and dropping
    /// the server end it as they would a running one.
    ///
    /// Does nothing if the server is not running.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when the process cannot be signalled.
    pub fn pause(&self) -> Result<()> {
        match self.lock().as_mut() {
            Some(running) => running.pause(),
            None => Ok(()),
        }
    }

    /// Lets a [paused](Self::pause) server run again (`SIGCONT`). Sessions whose timeout passed
    /// meanwhile expire; the others live on.
    ///
    /// Does nothing if the server is not running.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when the process cannot be signalled.
    pub fn resume(&self) -> Result<()> {
        match self.lock().as_mut() {
            Some(running) => running.resume(),
            None => Ok(()),
        }
    }

    /// Starts the server again on the same port and data, and waits until it serves.
    ///
    /// A running server is [stopped](Self::stop) first. Nodes, and sessions that have not timed
    /// out meanwhile, survive.
    ///
    /// # Errors
    ///
    /// [`TestingError::Exited`] or [`TestingError::NotServing`], quoting the server log, when it
    /// does not come back, e.g. because another process took its port.
    pub fn restart(&self) -> Result<()> {
        let mut process = self.lock();
        if let Some(running) = process.as_mut() {
            running.terminate(STOP_GRACE)?;
        }
        *process = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.launch() {
                Ok(running) => {
                    *process = Some(running);
                    return Ok(());
                }
                Err(failure) if failure.port_taken && attempt < REBIND_ATTEMPTS => {
                    std::thread::sleep(REBIND_PAUSE);
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }

    /// Sends a four-letter word to this server; see [`four_letter_word`](super::four_letter_word).
    ///
    /// # Errors
    ///
    /// The connection's error, e.g. [`io::ErrorKind::ConnectionRefused`] while it is stopped.
    pub fn four_letter(&self, cmd: &str) -> io::Result<String> {
        super::four_letter_word(self.addr(), cmd)
    }

    /// Reads this server's counters with `mntr`; see [`ServerCounters`](super::ServerCounters).
    ///
    /// # Errors
    ///
    /// As [`server_counters`](super::server_counters): the connection's error, e.g.
    /// [`io::ErrorKind::ConnectionRefused`] while it is stopped.
    pub fn counters(&self) -> io::Result<super::ServerCounters> {
        super::server_counters(self.addr())
    }

    /// Expires the session of `client`, which must be connected to this server; see
    /// [`expire_session`](super::expire_session).
    ///
    /// # Errors
    ///
    /// As [`expire_session`](super::expire_session).
    pub async fn expire_session(&self, client: &impl super::SessionOf) -> Result<()> {
        super::expire_session(client, &self.connect_string()).await
    }
}

impl ServerBuilder {
    /// Starts the server and waits until it serves requests, as [`TestingServer::start`] does.
    ///
    /// # Errors
    ///
    /// As [`TestingServer::start`]; [`TestingError::PortInUse`] when the port given to
    /// [`port`](Self::port) is taken; [`TestingError::DataDir`] when the directory given to
    /// [`data_dir`](Self::data_dir) is not a directory, cannot be created or written, or has a
    /// path that `zoo.cfg` cannot hold.
    pub fn start(self) -> Result<TestingServer> {
        TestingServer::start_with(None, &self)
    }
}

/// Waits until the TLS port accepts connections: ZooKeeper opens it after the plain port, which
/// the readiness probe uses.
fn wait_listening(process: &mut JvmProcess, addr: SocketAddr) -> std::result::Result<(), StartFailure> {
    let started = Instant::now();
    loop {
        let refused = match TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(err) => err,
        };
        let log_tail = process.log_tail(LOG_LINES);
        if process.try_wait()?.is_some() || started.elapsed() >= START_TIMEOUT {
            return Err(StartFailure {
                port_taken: probe::is_bind_failure(&log_tail),
                error: TestingError::NotServing {
                    name: "standalone".to_owned(),
                    waited: started.elapsed(),
                    detail: format!("the secure client port {addr} does not accept connections: {refused}"),
                    log: process.log().to_owned(),
                    log_tail,
                },
            });
        }
        std::thread::sleep(PROBE_INTERVAL);
    }
}

impl Drop for TestingServer {
    fn drop(&mut self) {
        let process = self.process.get_mut().unwrap_or_else(PoisonError::into_inner);
        // Dropping the process kills it; only then is the directory free to delete.
        drop(process.take());
        tempdir::remove(&self.dir);
    }
}
