//! A real ZooKeeper ensemble of several servers.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

mod builder;
mod faults;
mod links;
mod quorum;

pub use builder::ClusterBuilder;
use builder::Timing;
use links::Links;

use super::config::common_config;
use super::four_letter::{four_letter_word, four_letter_word_within};
use super::java::JavaSetup;
use super::ports::free_ports;
use super::probe::PROBE_TIMEOUT;
use super::process::{JvmCommand, JvmProcess};
use super::{tempdir, Result, TestingError};

const MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// Whole-cluster attempts with fresh ports when another process takes one of them.
const PORT_ATTEMPTS: usize = 3;

/// One server of the ensemble; `myid` is its index plus one.
#[derive(Debug)]
struct Member {
    id: usize,
    dir: PathBuf,
    data_dir: PathBuf,
    config: PathBuf,
    log: PathBuf,
    client_port: u16,
    quorum_port: u16,
    election_port: u16,
}

impl Member {
    fn name(&self) -> String {
        format!("server.{}", self.id)
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }
}

/// A ZooKeeper ensemble of `n` servers (`QuorumPeerMain`) on free loopback ports, each in its
/// own directory under one temporary directory.
///
/// Servers are addressed by index, `0..len()`; server `i` has `myid` `i + 1`. Methods taking an
/// index panic if it is out of range, like slice indexing. All methods take `&self` and block
/// until done.
///
/// Faults, in any combination:
///
/// * the servers' processes: [`kill`](Self::kill), [`stop`](Self::stop),
///   [`restart`](Self::restart), [`pause`](Self::pause) and [`resume`](Self::resume);
/// * the network between servers: each server reaches each other one through [`Proxy`]s of the
///   kit (one for the quorum port, one for the election port, per ordered pair), which tests
///   [`cut`](Self::cut), [`cut_one_way`](Self::cut_one_way), [`delay`](Self::delay),
///   [`heal`](Self::heal) or use to [`isolate`](Self::isolate) a server. Clients connect to the
///   servers directly, so an isolated server still hears its clients. The proxies keep their
///   faults across restarts of the servers.
///
/// [`TestingCluster::builder`] chooses the servers' `tickTime` and `syncLimit`, which say when a
/// partitioned server gives up its leader or followers.
///
/// Dropping the cluster kills every server (paused ones too) and deletes the directories.
///
/// [`Proxy`]: super::Proxy
#[derive(Debug)]
pub struct TestingCluster {
    dir: PathBuf,
    setup: JavaSetup,
    timing: Timing,
    members: Vec<Member>,
    links: Links,
    /// One slot per member; `None` while it is stopped. A single lock keeps whole-cluster
    /// operations from interleaving with single-member ones.
    processes: Mutex<Vec<Option<JvmProcess>>>,
}

impl TestingCluster {
    /// Starts an ensemble of `n` servers and waits until every server serves as leader or
    /// follower, with exactly one leader.
    ///
    /// Three servers tolerate one failure; five tolerate two. A JVM takes about a second of CPU,
    /// so prefer three.
    ///
    /// # Errors
    ///
    /// As [`TestingServer::start`](super::TestingServer::start); the log quoted is that of the
    /// first server that did not come up.
    ///
    /// The servers tick every 500 ms with a `syncLimit` of 5 ticks; [`builder`](Self::builder)
    /// chooses others.
    ///
    /// # Panics
    ///
    /// Panics if `n` is zero.
    pub fn start(n: usize) -> Result<TestingCluster> {
        Self::builder().servers(n).start()
    }

    /// Chooses the size and the timing of a cluster before starting it.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    fn start_with(n: usize, timing: Timing) -> Result<TestingCluster> {
        let setup = JavaSetup::detect()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let cluster = TestingCluster::prepare(setup.clone(), n, timing)?;
            let launched = {
                let mut processes = cluster.lock();
                cluster.launch_all(&mut processes, false)
            };
            match launched {
                Ok(_) => return Ok(cluster),
                // Dropping `cluster` kills its servers and deletes its directory.
                Err(failure) if failure.port_taken && attempt < PORT_ATTEMPTS => continue,
                Err(failure) => return Err(failure.error),
            }
        }
    }

    /// Creates the directories and configurations of `n` servers on free ports, and the proxies
    /// between them.
    fn prepare(setup: JavaSetup, n: usize, timing: Timing) -> Result<TestingCluster> {
        let ports = free_ports(3 * n)?;
        let links = Links::start(&ports.chunks_exact(3).map(|ports| (ports[1], ports[2])).collect::<Vec<_>>())?;
        let dir = tempdir::create("cluster")?;
        let members: Vec<Member> = ports
            .chunks_exact(3)
            .enumerate()
            .map(|(index, ports)| {
                let member_dir = dir.join(format!("server{}", index + 1));
                Member {
                    id: index + 1,
                    data_dir: member_dir.join("data"),
                    config: member_dir.join("zoo.cfg"),
                    log: member_dir.join("zookeeper.log"),
                    dir: member_dir,
                    client_port: ports[0],
                    quorum_port: ports[1],
                    election_port: ports[2],
                }
            })
            .collect();
        // From here on, dropping `cluster` deletes the directory.
        let cluster = TestingCluster {
            dir,
            setup,
            timing,
            members,
            links,
            processes: Mutex::new((0..n).map(|_| None).collect()),
        };
        for (index, member) in cluster.members.iter().enumerate() {
            let write = |path: &Path, text: &str| {
                std::fs::write(path, text).map_err(|err| TestingError::io(format!("write {}", path.display()), err))
            };
            std::fs::create_dir_all(&member.data_dir)
                .map_err(|err| TestingError::io(format!("create {}", member.data_dir.display()), err))?;
            write(&member.data_dir.join("myid"), &format!("{}\n", member.id))?;
            write(&member.config, &cluster.member_config(index))?;
        }
        Ok(cluster)
    }

    /// The `zoo.cfg` of member `index`: its own ports, and the proxies it reaches the others
    /// through.
    fn member_config(&self, index: usize) -> String {
        let member = &self.members[index];
        let mut text = common_config(&member.data_dir, member.client_port, self.timing.tick_time);
        let _ = writeln!(text, "initLimit={}", self.timing.init_limit());
        let _ = writeln!(text, "syncLimit={}", self.timing.sync_limit);
        text.push_str("reconfigEnabled=false\nstandaloneEnabled=false\n");
        for (other_index, other) in self.members.iter().enumerate() {
            let (quorum, election) = if other_index == index {
                (other.quorum_port, other.election_port)
            } else {
                self.links.ports(index, other_index)
            };
            let _ = writeln!(text, "server.{}=127.0.0.1:{quorum}:{election}", other.id);
        }
        text
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Option<JvmProcess>>> {
        // A panic elsewhere cannot leave the slots half-updated.
        self.processes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn spawn(&self, index: usize) -> Result<JvmProcess> {
        let member = &self.members[index];
        let args: [&OsStr; 1] = [member.config.as_os_str()];
        JvmProcess::spawn(&JvmCommand {
            java: &self.setup.java,
            classpath: &self.setup.classpath,
            main_class: MAIN_CLASS,
            args: &args,
            dir: &member.dir,
            parent_dir: Some(&self.dir),
            log: &member.log,
        })
    }

    /// The connect string of the whole ensemble: `127.0.0.1:P1,127.0.0.1:P2,...`.
    pub fn connect_string(&self) -> String {
        let addrs: Vec<String> = self.members.iter().map(|member| member.addr().to_string()).collect();
        addrs.join(",")
    }

    /// The connect string of server `i` alone.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn server_connect_string(&self, i: usize) -> String {
        self.members[i].addr().to_string()
    }

    /// The number of servers, running or not.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The servers' `tickTime`: 500 ms unless chosen with [`ClusterBuilder::tick_time`].
    pub fn tick_time(&self) -> Duration {
        self.timing.tick_time
    }

    /// The servers' `syncLimit`, in ticks: 5 unless chosen with
    /// [`ClusterBuilder::sync_limit`]. A follower or leader cut off from the others stops
    /// serving after about `tick_time() * sync_limit()`.
    pub fn sync_limit(&self) -> u32 {
        self.timing.sync_limit
    }

    /// Always `false`: a cluster has at least one server.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The index of the running server that the client of session `session_id` is connected to,
    /// asked with `cons`; `None` while it is connected to none (e.g. reconnecting). Paused
    /// servers are not asked.
    ///
    /// Use it to kill the very server a client talks to, so that its requests in flight lose
    /// their replies.
    pub fn server_of_session(&self, session_id: i64) -> Option<usize> {
        // `cons` prints `sid=0x<hex>` followed by `,` or `)`; the delimiter keeps one id from
        // matching the start of a longer one.
        let sid = format!("sid={session_id:#x}");
        let processes = self.lock();
        (0..self.members.len()).find(|&index| {
            answers(&processes[index])
                && four_letter_word_within(self.members[index].addr(), "cons", PROBE_TIMEOUT).is_ok_and(|cons| {
                    cons.match_indices(&sid)
                        .any(|(at, _)| matches!(cons[at + sid.len()..].chars().next(), Some(',' | ')')))
                })
        })
    }

    /// Sends a four-letter word to server `i`; see [`four_letter_word`](super::four_letter_word).
    ///
    /// # Errors
    ///
    /// The connection's error, e.g. [`io::ErrorKind::ConnectionRefused`] while it is stopped.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn four_letter(&self, i: usize, cmd: &str) -> io::Result<String> {
        four_letter_word(self.members[i].addr(), cmd)
    }

    /// Reads server `i`'s counters with `mntr`; see [`ServerCounters`](super::ServerCounters).
    ///
    /// # Errors
    ///
    /// As [`server_counters`](super::server_counters): the connection's error, e.g.
    /// [`io::ErrorKind::ConnectionRefused`] while it is stopped.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn counters(&self, i: usize) -> io::Result<super::ServerCounters> {
        super::server_counters(self.members[i].addr())
    }

    /// The pid of server `i`'s JVM while it runs, [paused](Self::pause) or not.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.lock()[i].as_mut().and_then(JvmProcess::pid)
    }

    /// The data directory of server `i`.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn data_dir(&self, i: usize) -> &Path {
        &self.members[i].data_dir
    }

    /// The log file of server `i`: stdout and stderr of every run, appended.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn log_file(&self, i: usize) -> &Path {
        &self.members[i].log
    }

    /// Expires the session of `client`, which must be connected to this ensemble; see
    /// [`expire_session`](super::expire_session).
    ///
    /// # Errors
    ///
    /// As [`expire_session`](super::expire_session).
    pub async fn expire_session(&self, client: &zookeeper_client::Client) -> Result<()> {
        super::expire_session(client, &self.connect_string()).await
    }
}

/// Whether the server in `slot` runs and is not paused: it can answer.
fn answers(slot: &Option<JvmProcess>) -> bool {
    slot.as_ref().is_some_and(|process| !process.is_paused())
}

impl Drop for TestingCluster {
    fn drop(&mut self) {
        let processes = self.processes.get_mut().unwrap_or_else(PoisonError::into_inner);
        // Dropping a process kills it; all are signalled before any is waited for. `SIGKILL`
        // ends paused processes too.
        for process in processes.iter_mut().flatten() {
            let _ = process.request_kill();
        }
        processes.clear();
        tempdir::remove(&self.dir);
    }
}
