//! A loopback TCP proxy between a client and a server, to simulate network partitions.
//!
//! Give the client [`Proxy::connect_string`] instead of the server's; for an ensemble, start
//! one proxy per server and join their connect strings with commas. The proxy then forwards,
//! holds back, delays or resets the traffic as the test says.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::election_hello::LegacyHello;

/// Read buffer of each direction of a connection.
const CHUNK: usize = 64 * 1024;

/// A direction of the traffic through a [`Proxy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the server: requests and pings.
    ToServer,
    /// From the server to the client: replies and watch events.
    ToClient,
}

/// A TCP proxy on a free loopback port that forwards every connection to one server, and that a
/// test can [`cut`](Proxy::cut), [`delay`](Proxy::delay) or [`reset`](Proxy::reset) to simulate
/// network trouble between a client and that server.
///
/// Put it in the client's way by connecting to [`Proxy::connect_string`] instead of the server.
/// For an ensemble, start one proxy per server and join their connect strings with commas, so
/// that each server can be partitioned from the client on its own.
///
/// The controls take `&self`, return at once and apply to the current and the new connections
/// alike. They behave as a real network does:
///
/// * A cut is a partition, not a failure. The connections stay open and carry nothing, and no
///   byte is lost: as TCP would, the proxy holds back what is sent meanwhile (it stops reading,
///   so the sender's buffers fill and TCP's flow control slows it) and delivers it all, in
///   order, once [healed](Proxy::heal). Each side sees a silent peer until its own timeouts
///   fire; a side that gave up meanwhile and closed its socket finds its bytes, then its close,
///   delivered after the heal, as a real peer would after a partition.
/// * A connection opened during a cut is accepted, but reaches the server only once the cut is
///   healed (its handshake could not cross a partition either), with what the client sent.
/// * A [reset](Proxy::reset) is a different fault: the current connections fail at once, with
///   a TCP reset on both sides, and what they still held is lost.
///
/// The proxy runs on a thread of its own with its own Tokio runtime, so it works from plain
/// `#[test]` and `#[tokio::test]` alike and keeps running when the caller's runtime is gone.
/// Dropping it stops it and closes all its connections.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
///
/// use zk_lock::testing::{shared_server, Proxy};
/// use zookeeper_client::{Client, SessionState};
///
/// #[tokio::test]
/// async fn a_session_survives_a_short_partition() -> Result<(), Box<dyn std::error::Error>> {
///     let proxy = Proxy::start(shared_server().addr())?;
///     let client =
///         Client::connector().with_session_timeout(Duration::from_secs(4)).connect(&proxy.connect_string()).await?;
///     let mut state = client.state_watcher();
///
///     proxy.cut();
///     assert_eq!(state.changed().await, SessionState::Disconnected);
///     proxy.heal();
///     assert_eq!(state.changed().await, SessionState::SyncConnected);
///     Ok(())
/// }
/// # fn main() {}
/// ```
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    link: watch::Sender<Link>,
    thread: Option<JoinHandle<()>>,
}

/// How a proxy between two servers of a cluster differs from one in front of a server
/// (kit-internal); the default is the latter.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LinkOptions {
    /// How long a connection waits for a target that refuses it, trying again every
    /// [`RETRY`], before it is closed. A proxy cannot pass a refusal on, having accepted the
    /// connection already; a server's peer would retry a refused connect, but takes a connection
    /// that fails once made for a failed peer.
    pub(crate) target_patience: Duration,
    /// Rewrite the first message of each connection, a ZooKeeper election connection's initial
    /// message, to its legacy form (see `election_hello`).
    pub(crate) legacy_election_hello: bool,
}

/// How often a connection tries a target that refused it, within its
/// [`target_patience`](LinkOptions::target_patience).
const RETRY: Duration = Duration::from_millis(50);

/// What the proxy does with traffic now; every connection watches it.
#[derive(Debug, Clone, Copy, Default)]
struct Link {
    to_server_cut: bool,
    to_client_cut: bool,
    delay: Duration,
    /// Bumped by [`Proxy::reset`]: the connections opened before close.
    resets: u64,
    /// Set when the proxy is dropped: its thread ends, closing every connection.
    stopped: bool,
}

impl Link {
    fn is_cut(&self, direction: Direction) -> bool {
        match direction {
            Direction::ToServer => self.to_server_cut,
            Direction::ToClient => self.to_client_cut,
        }
    }

    /// Whether a TCP handshake could cross: it needs both directions.
    fn is_open(&self) -> bool {
        !self.to_server_cut && !self.to_client_cut
    }
}

impl Proxy {
    /// Starts a proxy on a free port of 127.0.0.1 that forwards every connection it accepts to
    /// `target`, e.g. [`TestingServer::addr`](super::TestingServer::addr) or `"127.0.0.1:2181"`.
    ///
    /// # Errors
    ///
    /// The error of resolving `target` ([`io::ErrorKind::InvalidInput`] when it resolves to no
    /// address), of binding the port, or of starting the proxy's thread. A target that refuses
    /// connections is not an error here: the proxy then closes each connection it accepts.
    pub fn start(target: impl ToSocketAddrs) -> io::Result<Proxy> {
        Self::start_with(target, LinkOptions::default())
    }

    /// [`start`](Self::start), with the options of a link between two servers.
    pub(crate) fn start_with(target: impl ToSocketAddrs, options: LinkOptions) -> io::Result<Proxy> {
        // Resolved once, so that a bad address fails here rather than every connection.
        let targets: Vec<SocketAddr> = target.to_socket_addrs()?.collect();
        if targets.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the proxy target resolves to no address"));
        }
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        // Tokio takes over only non-blocking sockets.
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (link, watched) = watch::channel(Link::default());

        // The runtime is built on the proxy's thread, and dropped there too: dropping a runtime
        // in the caller's async context would panic.
        let (started, outcome) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name(format!("zk-lock-proxy-{}", addr.port())).spawn(move || {
            let setup = || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                let listener = {
                    let _entered = runtime.enter();
                    TcpListener::from_std(listener)?
                };
                io::Result::Ok((runtime, listener))
            };
            match setup() {
                Ok((runtime, listener)) => {
                    let _ = started.send(Ok(()));
                    runtime.block_on(serve(listener, targets, options, watched));
                }
                Err(err) => {
                    let _ = started.send(Err(err));
                }
            }
        })?;
        outcome.recv().unwrap_or_else(|_| Err(io::Error::other("the proxy thread panicked while starting")))?;
        Ok(Proxy { addr, link, thread: Some(thread) })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The connect string of the proxy, `127.0.0.1:<port>`, to give a client instead of the
    /// server's.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Holds back every byte both ways, like a network partition: the connections stay open but
    /// deliver nothing, and new connections are accepted but reach the server only after the
    /// heal. Nothing is lost: what is sent meanwhile, and what was already read or still
    /// [delayed](Proxy::delay), is delivered in order after [`heal`](Proxy::heal), and so is a
    /// connection closed by one side meanwhile.
    pub fn cut(&self) {
        self.hold(true, true);
    }

    /// Holds back the bytes going in `direction` only, as [`cut`](Proxy::cut) does both ways;
    /// the other direction forwards, even if it was cut before. A connection opened meanwhile
    /// reaches the server only after the heal, as a TCP handshake needs both directions.
    pub fn cut_one_way(&self, direction: Direction) {
        self.hold(direction == Direction::ToServer, direction == Direction::ToClient);
    }

    /// Holds back the bytes going to the server if `to_server`, and those going to the client if
    /// `to_client`; what is no longer held is delivered.
    pub(crate) fn hold(&self, to_server: bool, to_client: bool) {
        self.link.send_modify(|link| {
            link.to_server_cut = to_server;
            link.to_client_cut = to_client;
        });
    }

    /// Delivers every chunk read from now on no earlier than `delay` after it was read, in
    /// order, both ways. `Duration::ZERO` removes the delay (for the chunks read from then on).
    pub fn delay(&self, delay: Duration) {
        self.link.send_modify(|link| link.delay = delay);
    }

    /// Closes every current connection on both sides, with a TCP reset, as a crashed peer or a
    /// firewall would; the bytes a cut or a delay still held for them are lost. New connections
    /// are still accepted, and forwarded unless the proxy is cut.
    pub fn reset(&self) {
        self.link.send_modify(|link| link.resets += 1);
    }

    /// Forwards everything both ways again, without delay: first what the cut held back (and
    /// the chunks still delayed, once due), in order, then the new traffic; the connections
    /// opened during the cut reach the server now.
    pub fn heal(&self) {
        self.link.send_modify(|link| *link = Link { resets: link.resets, ..Link::default() });
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.link.send_modify(|link| link.stopped = true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections until the proxy is dropped; returning drops the runtime, and with it
/// every connection.
async fn serve(listener: TcpListener, targets: Vec<SocketAddr>, options: LinkOptions, link: watch::Receiver<Link>) {
    let mut stop = link.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    tokio::spawn(relay(client, targets.clone(), options, link.clone()));
                }
                // Out of file descriptors, most likely: wait a little instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            _ = stop.wait_for(|link| link.stopped) => return,
        }
    }
}

/// Connects a client to the target and carries its traffic until both sides have closed, or
/// until a reset.
async fn relay(mut client: TcpStream, targets: Vec<SocketAddr>, options: LinkOptions, mut link: watch::Receiver<Link>) {
    let resets = link.borrow().resets;
    let mut open = link.clone();
    let connect = async move {
        let refused_until = Instant::now() + options.target_patience;
        loop {
            // A handshake does not cross a partition: the server hears of the connection after
            // the heal. Meanwhile the client's bytes wait, unread, in its socket.
            let _ = open.wait_for(Link::is_open).await;
            match TcpStream::connect(&targets[..]).await {
                Err(_) if Instant::now() < refused_until => tokio::time::sleep(RETRY).await,
                connected => return connected,
            }
        }
    };
    let mut server = tokio::select! {
        connected = connect => match connected {
            Ok(server) => server,
            Err(_) => return,
        },
        _ = link.wait_for(|link| link.resets != resets) => {
            reset(&[&client]);
            return;
        }
    };
    // Small requests such as pings must not wait for Nagle's algorithm.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.split();
    let (server_read, server_write) = server.split();
    let hello = options.legacy_election_hello.then(LegacyHello::default);
    let (to_server_link, to_client_link) = (link.clone(), link.clone());
    let both_ways = async {
        tokio::join!(
            forward(client_read, server_write, Direction::ToServer, to_server_link, hello),
            forward(server_read, client_write, Direction::ToClient, to_client_link, None),
        )
    };
    tokio::select! {
        _ = both_ways => {}
        _ = link.wait_for(|link| link.resets != resets) => reset(&[&client, &server]),
    }
}

/// Makes the closing of `streams`, when they are dropped, send a TCP reset.
fn reset(streams: &[&TcpStream]) {
    // A zero linger makes closing send a reset. `set_linger` is deprecated because other lingers
    // block on close; zero does not (Tokio 1.50 names it `set_zero_linger`).
    #[allow(deprecated)]
    for stream in streams {
        let _ = stream.set_linger(Some(Duration::ZERO));
    }
}

/// Carries one direction of a connection, holding back or delaying chunks as `link` says, until
/// the reading side closes or the writing side fails. `hello`, if any, rewrites the start.
async fn forward(
    mut from: ReadHalf<'_>,
    mut to: WriteHalf<'_>,
    direction: Direction,
    mut link: watch::Receiver<Link>,
    mut hello: Option<LegacyHello>,
) {
    // A delayed chunk waits in this queue, so that reading goes on meanwhile: a delay adds
    // latency without cutting throughput.
    let (queue, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let mut read_link = link.clone();
    let read = async move {
        let mut buf = vec![0; CHUNK];
        loop {
            // A cut direction reads nothing: its bytes wait in the sockets' buffers, and once
            // those are full TCP's flow control stops the sender, as in a real partition.
            if read_link.wait_for(|link| !link.is_cut(direction)).await.is_err() {
                break;
            }
            // Ends at end of stream or on error; dropping `queue` then lets the writer finish.
            let Ok(n @ 1..) = from.read(&mut buf).await else { break };
            let due = Instant::now() + read_link.borrow().delay;
            let chunk = match hello.as_mut() {
                None => buf[..n].to_vec(),
                Some(rewriting) => {
                    let (chunk, done) = rewriting.feed(&buf[..n]);
                    if done {
                        hello = None;
                    }
                    chunk
                }
            };
            if !chunk.is_empty() && queue.send((due, chunk)).is_err() {
                break;
            }
        }
        if let Some(rest) = hello.map(LegacyHello::finish).filter(|rest| !rest.is_empty()) {
            let _ = queue.send((Instant::now() + read_link.borrow().delay, rest));
        }
    };
    let write = async move {
        while let Some((due, chunk)) = queued.recv().await {
            // Only when it is not due yet: a timer rounds up to the next millisecond, which would
            // add about one to every chunk of an undelayed link.
            if due > Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            // What was read before a cut, or is due during one, waits for the heal, in order.
            if link.wait_for(|link| !link.is_cut(direction)).await.is_err() {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // A close does not cross a partition either: pass it on once this direction is healed.
        let _ = link.wait_for(|link| !link.is_cut(direction)).await;
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}
