//! Expiring a client's session on demand.
//!
//! Curator's old `KillSession` joins the session from a second client and closes it. With
//! `zookeeper-client` that races: joining disconnects the original client, which reconnects at
//! once (it has no back-off) and disconnects the intruder before the intruder's handshake,
//! including its ping, completes; the two can bounce for the whole session timeout. So the kit
//! speaks the protocol itself and sends the connect request and the close request in one
//! write, leaving no round trip for the original client to interfere in.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use zookeeper_client::{Client, SessionState};

use super::{Result, TestingError};

/// How long the kit waits for the client to notice; the server closes its connection at once,
/// so this only bounds a broken setup.
const EXPIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// Loopback connections are refused or accepted at once.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Bounds one exchange; a cluster member forwards the session check to its leader.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a closed session's client may stay connected before a request tells it.
const NUDGE_AFTER: Duration = Duration::from_secs(1);

/// Pause between rounds over the servers, e.g. while an ensemble elects a leader.
const RETRY_INTERVAL: Duration = Duration::from_millis(50);

/// `OpCode.closeSession` of the ZooKeeper protocol.
const CLOSE_SESSION: i32 = -11;

/// The xid of our close request; any positive value will do on a fresh connection.
const CLOSE_XID: i32 = 1;

/// What has a session [`expire_session`] can expire: a `zookeeper_client::Client`, or a
/// [`zk_lock::Client`](crate::Client), whose session of the calling runtime (the one its next
/// acquisition there would use, [`Client::zookeeper`](crate::Client::zookeeper)) is expired.
pub trait SessionOf {
    /// The session, as zookeeper-client's handle to it.
    fn session(&self) -> Client;
}

impl SessionOf for Client {
    fn session(&self) -> Client {
        self.clone()
    }
}

impl SessionOf for crate::Client {
    fn session(&self) -> Client {
        self.zookeeper()
    }
}

/// Expires the session of `client` and waits until the client reports
/// [`SessionState::Expired`].
///
/// The kit joins the session on a connection of its own and closes it, which makes the server
/// drop the session and the client's connection; when `client` reconnects it is told that its
/// session expired. Ephemeral nodes of the session are gone and every later request of `client`
/// fails with [`zookeeper_client::Error::SessionExpired`].
///
/// `connect_string` (`host:port,...`, an optional chroot is ignored) must reach the ensemble
/// `client` is connected to; the servers are tried in order. The exchange with the server is a
/// few milliseconds of blocking I/O on the calling thread. Returns at once if the session
/// already expired.
///
/// # Errors
///
/// [`TestingError::Io`] when no server of `connect_string` closes the session within thirty
/// seconds; [`TestingError::SessionNotExpired`] when `client` does not report the expiry within
/// thirty seconds, or reaches another terminal state (closed, authentication failed) instead.
pub async fn expire_session(client: &impl SessionOf, connect_string: &str) -> Result<()> {
    let client = &client.session();
    // Taken before closing the session, so the transition cannot be missed.
    let mut watcher = client.state_watcher();
    let not_expired = |state: SessionState| TestingError::SessionNotExpired {
        session: client.session_id().to_string(),
        waited: EXPIRE_TIMEOUT,
        state: state.to_string(),
    };
    match watcher.peek_state() {
        SessionState::Expired => return Ok(()),
        state if state.is_terminated() => return Err(not_expired(state)),
        _ => {}
    }
    close_session(client.session_id().0, connect_string)?;
    let terminal = tokio::time::timeout(EXPIRE_TIMEOUT, async {
        loop {
            // A change seen while the nudge below ran is not seen again by `changed`.
            let state = client.state();
            if state.is_terminated() {
                return state;
            }
            tokio::select! {
                state = watcher.changed() => if state.is_terminated() {
                    return state;
                },
                // On an ensemble, the client may still have a connection to a server that
                // has not dropped it for the closed session (seen once, just after the whole
                // ensemble restarted: still connected 30 s later). A request through it is
                // refused, which makes the client find out.
                () = tokio::time::sleep(NUDGE_AFTER) => {
                    let _ = tokio::time::timeout(NUDGE_AFTER, client.check_stat("/")).await;
                }
            }
        }
    })
    .await;
    match terminal {
        Ok(SessionState::Expired) => Ok(()),
        Ok(state) => Err(not_expired(state)),
        Err(_elapsed) => Err(not_expired(client.state())),
    }
}

/// Closes session `session_id` through the first server of `connect_string` that accepts it.
fn close_session(session_id: i64, connect_string: &str) -> Result<()> {
    let action = || format!("close session {session_id:#x} through `{connect_string}`");
    let addrs = resolve(connect_string).map_err(|err| TestingError::io(action(), err))?;
    let started = Instant::now();
    loop {
        let mut last_error = io::Error::new(io::ErrorKind::InvalidInput, "the connect string names no server");
        for addr in &addrs {
            match close_session_at(*addr, session_id) {
                Ok(()) => return Ok(()),
                Err(err) => last_error = err,
            }
        }
        // The client's reconnection may have won over ours, or the ensemble has no leader yet.
        if started.elapsed() >= EXPIRE_TIMEOUT {
            return Err(TestingError::io(action(), last_error));
        }
        std::thread::sleep(RETRY_INTERVAL);
    }
}

/// The socket addresses of a connect string `host:port,host:port/chroot`.
fn resolve(connect_string: &str) -> io::Result<Vec<SocketAddr>> {
    let mut addrs = Vec::new();
    for host in crate::client::connect_hosts(connect_string) {
        addrs.extend(host.to_socket_addrs()?);
    }
    Ok(addrs)
}

/// Joins the session on a new connection to `addr` and closes it. A session the server no
/// longer knows counts as closed: the client will be told it expired all the same.
fn close_session_at(addr: SocketAddr, session_id: i64) -> io::Result<()> {
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;

    let mut connect = Vec::new();
    connect.extend_from_slice(&0i32.to_be_bytes()); // protocol version
    connect.extend_from_slice(&0i64.to_be_bytes()); // last zxid seen: none, accepted everywhere
    connect.extend_from_slice(&10_000i32.to_be_bytes()); // session timeout, ms
    connect.extend_from_slice(&session_id.to_be_bytes());
    let password = session_password(session_id);
    connect.extend_from_slice(&16i32.to_be_bytes());
    connect.extend_from_slice(&password);
    connect.push(0); // not read-only
    let mut close = Vec::new();
    close.extend_from_slice(&CLOSE_XID.to_be_bytes());
    close.extend_from_slice(&CLOSE_SESSION.to_be_bytes());
    let mut packets = Vec::new();
    for body in [&connect, &close] {
        // Both bodies are a few dozen bytes.
        let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
        packets.extend_from_slice(&len.to_be_bytes());
        packets.extend_from_slice(body);
    }
    stream.write_all(&packets)?;

    let response = read_frame(&mut stream)?;
    // protocol version (4 bytes), then the negotiated timeout: zero for an unknown session.
    let timeout = response.get(4..8).map(|bytes| i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
    match timeout {
        Some(timeout) if timeout > 0 => {}
        Some(_) => return Ok(()),
        None => return Err(io::Error::new(io::ErrorKind::InvalidData, "short connect response")),
    }
    loop {
        let reply = read_frame(&mut stream)?;
        let (Some(xid), Some(err)) = (reply.get(0..4), reply.get(12..16)) else {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "short reply header"));
        };
        if xid != CLOSE_XID.to_be_bytes() {
            continue; // a notification or ping answer, not ours
        }
        let err = i32::from_be_bytes([err[0], err[1], err[2], err[3]]);
        return match err {
            0 => Ok(()),
            err => Err(io::Error::other(format!("the server answered the close request with error {err}"))),
        };
    }
}

/// Reads one length-prefixed packet.
fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0; 4];
    stream.read_exact(&mut len)?;
    let len = usize::try_from(i32::from_be_bytes(len))
        .ok()
        .filter(|&len| len <= 1 << 20)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad packet length"))?;
    let mut packet = vec![0; len];
    stream.read_exact(&mut packet)?;
    Ok(packet)
}

/// The password ZooKeeper gives a session: 16 bytes of `java.util.Random` seeded with the
/// session id xor a constant (`ZooKeeperServer.generatePasswd`, unchanged since ZooKeeper 3.0).
/// The client library keeps the real one private, so the kit derives it.
fn session_password(session_id: i64) -> [u8; 16] {
    const SUPER_SECRET: i64 = 0xB341_5C00;
    const MULTIPLIER: u64 = 0x5_DEEC_E66D;
    const ADDEND: u64 = 0xB;
    const MASK: u64 = (1 << 48) - 1;
    // `new Random(seed)` scrambles the seed; `nextInt()` is `next(32)`.
    let mut seed = ((session_id ^ SUPER_SECRET) as u64 ^ MULTIPLIER) & MASK;
    let mut next_int = || {
        seed = seed.wrapping_mul(MULTIPLIER).wrapping_add(ADDEND) & MASK;
        (seed >> 16) as u32
    };
    // `nextBytes` fills each group of four bytes from one int, low byte first.
    let mut password = [0; 16];
    for chunk in password.chunks_mut(4) {
        let int = next_int().to_le_bytes();
        chunk.copy_from_slice(&int[..chunk.len()]);
    }
    password
}
