//! A loopback TCP proxy between a client and a server, to simulate network partitions.
//!
//! Give the client [`Proxy::connect_string`] instead of the server's; for an ensemble, start
//! one proxy per server and join their connect strings with commas. The proxy then forwards,
//! drops, delays or resets the traffic as the test says.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

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
/// alike. A cut is a partition, not a failure: the connections stay open and the client sees a
/// silent peer until its own timeouts fire, as on a real network.
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
                    runtime.block_on(serve(listener, targets, watched));
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

    /// Drops every byte both ways, like a network partition: the connections stay open but
    /// carry nothing, and new connections are accepted but carry nothing either. Bytes read
    /// meanwhile, and bytes still [delayed](Proxy::delay), are lost, not kept for later; a
    /// connection closed by one side is reported to the other only after [`heal`](Proxy::heal).
    pub fn cut(&self) {
        self.link.send_modify(|link| {
            link.to_server_cut = true;
            link.to_client_cut = true;
        });
    }

    /// Drops the bytes going in `direction` only, like [`cut`](Proxy::cut) does both ways; the
    /// other direction forwards, even if it was cut before.
    pub fn cut_one_way(&self, direction: Direction) {
        self.link.send_modify(|link| {
            link.to_server_cut = direction == Direction::ToServer;
            link.to_client_cut = direction == Direction::ToClient;
        });
    }

    /// Delivers every chunk read from now on no earlier than `delay` after it was read, in
    /// order, both ways. `Duration::ZERO` removes the delay (for the chunks read from then on).
    pub fn delay(&self, delay: Duration) {
        self.link.send_modify(|link| link.delay = delay);
    }

    /// Closes every current connection on both sides, with a TCP reset, as a crashed peer or a
    /// firewall would. New connections are still accepted and forwarded.
    pub fn reset(&self) {
        self.link.send_modify(|link| link.resets += 1);
    }

    /// Forwards everything both ways again, without delay. Bytes dropped by a cut stay lost; the
    /// connections that were open during the cut carry traffic again.
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
async fn serve(listener: TcpListener, targets: Vec<SocketAddr>, link: watch::Receiver<Link>) {
    let mut stop = link.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    tokio::spawn(relay(client, targets.clone(), link.clone()));
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
async fn relay(mut client: TcpStream, targets: Vec<SocketAddr>, mut link: watch::Receiver<Link>) {
    let resets = link.borrow().resets;
    // Connected even during a cut, so that the connection works once healed.
    let Ok(mut server) = TcpStream::connect(&targets[..]).await else { return };
    // Small requests such as pings must not wait for Nagle's algorithm.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.split();
    let (server_read, server_write) = server.split();
    let (to_server_link, to_client_link) = (link.clone(), link.clone());
    let both_ways = async {
        tokio::join!(
            forward(client_read, server_write, Direction::ToServer, to_server_link),
            forward(server_read, client_write, Direction::ToClient, to_client_link),
        )
    };
    tokio::select! {
        _ = both_ways => {}
        _ = link.wait_for(|link| link.resets != resets) => {
            // A zero linger makes closing send a reset. `set_linger` is deprecated because other
            // lingers block on close; zero does not (Tokio 1.50 names it `set_zero_linger`).
            #[allow(deprecated)]
            for stream in [&client, &server] {
                let _ = stream.set_linger(Some(Duration::ZERO));
            }
        }
    }
}

/// Carries one direction of a connection, dropping or delaying chunks as `link` says, until the
/// reading side closes or the writing side fails.
async fn forward(mut from: ReadHalf<'_>, mut to: WriteHalf<'_>, direction: Direction, mut link: watch::Receiver<Link>) {
    // A delayed chunk waits in this queue, so that reading goes on meanwhile: a delay adds
    // latency without cutting throughput.
    let (queue, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read_link = link.clone();
    let read = async move {
        let mut buf = vec![0; CHUNK];
        // Ends at end of stream or on error; dropping `queue` then lets the writer finish.
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            let current = *read_link.borrow();
            // Dropped when read, never buffered, like packets lost in a partition.
            if !current.is_cut(direction) && queue.send((Instant::now() + current.delay, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = queued.recv().await {
            tokio::time::sleep_until(due).await;
            // A cut also loses the chunks still in flight.
            if link.borrow().is_cut(direction) {
                continue;
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
