//! Tests of `zk_lock::testing::Proxy`: plain TCP through it, and a ZooKeeper session.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use zk_lock::testing::{shared_server, Direction, Proxy};
use zookeeper_client::{Acls, Client, CreateMode, SessionState};

/// Bounds every wait for something to happen, so that a broken proxy fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(10);
/// How long a test listens before concluding that nothing gets through. Loopback delivers in
/// microseconds, so bytes that passed would arrive well within it.
const SILENCE: Duration = Duration::from_millis(300);

/// Both ends of one connection through a proxy.
struct Connection {
    client: TcpStream,
    server: TcpStream,
}

impl Connection {
    /// A request and a reply both arrive.
    fn assert_open_both_ways(&mut self) {
        assert_passes(&mut self.client, &mut self.server, b"request");
        assert_passes(&mut self.server, &mut self.client, b"reply");
    }

    /// Neither a request nor a reply arrives, and the connection stays open.
    fn assert_cut_both_ways(&mut self) {
        assert_dropped(&mut self.client, &mut self.server, b"lost request");
        assert_dropped(&mut self.server, &mut self.client, b"lost reply");
    }
}

/// A server socket and a proxy in front of it.
fn start() -> (TcpListener, Proxy) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = Proxy::start(listener.local_addr().unwrap()).unwrap();
    (listener, proxy)
}

/// Connects a client through `proxy` and accepts the proxy's connection on `listener`.
fn connect(listener: &TcpListener, proxy: &Proxy) -> Connection {
    let client = TcpStream::connect(proxy.addr()).unwrap();
    let server = accept(listener);
    for stream in [&client, &server] {
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
    }
    Connection { client, server }
}

/// Accepts one connection within the deadline.
fn accept(listener: &TcpListener) -> TcpStream {
    listener.set_nonblocking(true).unwrap();
    let started = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return stream;
            }
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                assert!(started.elapsed() < DEADLINE, "the proxy did not connect to the server within {DEADLINE:?}");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(err) => panic!("cannot accept: {err}"),
        }
    }
}

/// Sends `bytes` on `from` and checks that exactly they arrive on `to`.
fn assert_passes(from: &mut TcpStream, to: &mut TcpStream, bytes: &[u8]) {
    from.write_all(bytes).unwrap();
    let mut received = vec![0; bytes.len()];
    to.read_exact(&mut received).unwrap();
    assert_eq!(String::from_utf8_lossy(&received), String::from_utf8_lossy(bytes));
}

/// Sends `bytes` on `from` and checks that nothing arrives on `to`, which stays open.
fn assert_dropped(from: &mut TcpStream, to: &mut TcpStream, bytes: &[u8]) {
    from.write_all(bytes).unwrap();
    assert_silent(to);
}

/// Checks that nothing arrives on `stream` for a while, and that it is not closed.
fn assert_silent(stream: &mut TcpStream) {
    stream.set_read_timeout(Some(SILENCE)).unwrap();
    let mut buf = [0; 64];
    let read = stream.read(&mut buf);
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    match read {
        Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        Ok(0) => panic!("the connection was closed"),
        Ok(n) => panic!("received {:?}", String::from_utf8_lossy(&buf[..n])),
        Err(err) => panic!("the connection failed: {err}"),
    }
}

/// Reads from `stream` until its peer closes or resets it, and returns the error kind if reset.
fn wait_closed(stream: &mut TcpStream) -> Option<ErrorKind> {
    let mut buf = [0; 64];
    match stream.read(&mut buf) {
        Ok(0) => None,
        Ok(n) => panic!("received {:?} instead of a close", String::from_utf8_lossy(&buf[..n])),
        Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("still open after {DEADLINE:?}")
        }
        Err(err) => Some(err.kind()),
    }
}

#[test]
fn bytes_pass_both_ways() {
    let (listener, proxy) = start();
    assert_eq!(proxy.connect_string(), format!("127.0.0.1:{}", proxy.addr().port()));
    let mut c = connect(&listener, &proxy);

    c.assert_open_both_ways();

    // More than fits in one read, from another thread since the socket buffers cannot hold it.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut received = vec![0; big.len()];
    std::thread::scope(|scope| {
        let client = &mut c.client;
        scope.spawn(|| client.write_all(&big).unwrap());
        c.server.read_exact(&mut received).unwrap();
    });
    assert!(received == big, "a big transfer arrived altered");
}

#[test]
fn a_cut_drops_everything_and_keeps_connections_open() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);

    proxy.cut();

    c.assert_cut_both_ways();
    // A new connection is accepted, but it is as silent as the others.
    let mut new = connect(&listener, &proxy);
    new.assert_cut_both_ways();
}

#[test]
fn heal_restores_the_connections_open_during_a_cut() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);
    proxy.cut();
    c.assert_cut_both_ways();
    let mut new = connect(&listener, &proxy);

    proxy.heal();

    // Only the new bytes arrive: the dropped ones are gone for good.
    for c in [&mut c, &mut new] {
        c.assert_open_both_ways();
    }
}

#[test]
fn cut_one_way_drops_only_that_direction() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);

    proxy.cut_one_way(Direction::ToServer);
    assert_dropped(&mut c.client, &mut c.server, b"lost request");
    assert_passes(&mut c.server, &mut c.client, b"reply");

    proxy.cut_one_way(Direction::ToClient);
    assert_passes(&mut c.client, &mut c.server, b"request");
    assert_dropped(&mut c.server, &mut c.client, b"lost reply");
}

#[test]
fn delay_adds_latency_both_ways_and_keeps_order() {
    let delay = Duration::from_secs(1);
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);

    proxy.delay(delay);
    let sent = Instant::now();
    for chunk in ["one ", "two ", "three"] {
        c.client.write_all(chunk.as_bytes()).unwrap();
        c.server.write_all(chunk.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    for to in [&mut c.server, &mut c.client] {
        let mut first = [0; 1];
        to.read_exact(&mut first).unwrap();
        assert!(sent.elapsed() >= delay, "a byte arrived after {:?}, before the delay", sent.elapsed());
        let mut rest = [0; 12];
        to.read_exact(&mut rest).unwrap();
        assert_eq!(String::from_utf8_lossy(&[&first[..], &rest].concat()), "one two three");
    }

    proxy.delay(Duration::ZERO);
    let sent = Instant::now();
    c.assert_open_both_ways();
    assert!(sent.elapsed() < delay, "still delayed: a round trip took {:?}", sent.elapsed());
}

#[test]
fn reset_closes_the_current_connections_only() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);

    proxy.reset();

    assert_eq!(wait_closed(&mut c.client), Some(ErrorKind::ConnectionReset));
    assert_eq!(wait_closed(&mut c.server), Some(ErrorKind::ConnectionReset));
    let mut new = connect(&listener, &proxy);
    new.assert_open_both_ways();
}

#[test]
fn a_close_passes_through_and_is_held_back_by_a_cut() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);
    c.client.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(wait_closed(&mut c.server), None);
    // Half-closed: the other direction still works.
    assert_passes(&mut c.server, &mut c.client, b"reply");

    let mut c = connect(&listener, &proxy);
    proxy.cut();
    drop(c.client);
    assert_silent(&mut c.server);
    proxy.heal();
    assert_eq!(wait_closed(&mut c.server), None);
}

#[test]
fn dropping_the_proxy_closes_its_connections() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);
    let addr = proxy.addr();

    drop(proxy);

    wait_closed(&mut c.client);
    wait_closed(&mut c.server);
    assert!(TcpStream::connect(addr).is_err(), "a dropped proxy still accepts connections");
}

#[test]
fn the_proxy_outlives_the_runtime_that_started_it() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let proxy = runtime.block_on(async { Proxy::start(listener.local_addr().unwrap()) }).unwrap();

    drop(runtime);

    let mut c = connect(&listener, &proxy);
    c.assert_open_both_ways();
}

#[test]
fn a_target_without_address_is_an_error() {
    let err = Proxy::start(&[][..] as &[std::net::SocketAddr]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// Waits for the next state the client reports, within the deadline.
async fn next_state(state: &mut zookeeper_client::StateWatcher) -> SessionState {
    match tokio::time::timeout(DEADLINE, state.changed()).await {
        Ok(state) => state,
        Err(_) => panic!("the session state did not change within {DEADLINE:?}"),
    }
}

#[tokio::test]
async fn a_zookeeper_session_survives_a_cut_shorter_than_its_timeout() {
    let proxy = Proxy::start(shared_server().addr()).unwrap();
    // A short session timeout, so that the client notices the cut within a second.
    let connect_string = proxy.connect_string();
    let connecting = Client::connector().with_session_timeout(Duration::from_secs(2)).connect(&connect_string);
    let client = tokio::time::timeout(DEADLINE, connecting).await.expect("connecting timed out").unwrap();
    let mut state = client.state_watcher();
    // `client.session_id()` never changes, but its ephemeral node shows that the server still
    // has the same session.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let path = format!("/testing-proxy-{}-{nanos}", std::process::id());
    client.create(&path, b"", &CreateMode::Ephemeral.with_acls(Acls::anyone_all())).await.unwrap();

    proxy.cut();
    assert_eq!(next_state(&mut state).await, SessionState::Disconnected);
    proxy.heal();
    assert_eq!(next_state(&mut state).await, SessionState::SyncConnected);

    let stat = client.check_stat(&path).await.unwrap().expect("the session's ephemeral node is gone");
    assert_eq!(stat.ephemeral_owner, client.session_id().0);
}
