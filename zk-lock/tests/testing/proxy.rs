//! Tests of `zk_lock::testing::Proxy`: plain TCP through it, and a ZooKeeper session.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
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
        assert_held(&mut self.client, &mut self.server, b"held request ");
        assert_held(&mut self.server, &mut self.client, b"held reply ");
    }

    /// What [`assert_cut_both_ways`](Self::assert_cut_both_ways) sent arrives, then new traffic.
    fn assert_delivered_both_ways(&mut self) {
        assert_receives(&mut self.server, b"held request ");
        assert_receives(&mut self.client, b"held reply ");
        self.assert_open_both_ways();
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
    assert_receives(to, bytes);
}

/// Checks that exactly `bytes` arrive next on `to`.
fn assert_receives(to: &mut TcpStream, bytes: &[u8]) {
    let mut received = vec![0; bytes.len()];
    to.read_exact(&mut received).unwrap();
    assert_eq!(String::from_utf8_lossy(&received), String::from_utf8_lossy(bytes));
}

/// Sends `bytes` on `from` and checks that nothing arrives on `to`, which stays open.
fn assert_held(from: &mut TcpStream, to: &mut TcpStream, bytes: &[u8]) {
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
fn a_cut_holds_every_byte_until_the_heal_and_keeps_connections_open() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);

    proxy.cut();
    c.assert_cut_both_ways();
    // More bytes during the cut queue up behind the first ones.
    assert_held(&mut c.client, &mut c.server, b"and more");
    proxy.heal();

    assert_receives(&mut c.server, b"held request and more");
    assert_receives(&mut c.client, b"held reply ");
    c.assert_open_both_ways();
}

#[test]
fn a_connection_opened_during_a_cut_reaches_the_server_after_the_heal() {
    let (listener, proxy) = start();
    proxy.cut();
    let mut client = TcpStream::connect(proxy.addr()).unwrap();
    client.write_all(b"sent while cut ").unwrap();

    listener.set_nonblocking(true).unwrap();
    let until = Instant::now() + SILENCE;
    while Instant::now() < until {
        match listener.accept() {
            Ok(_) => panic!("the server was reached during the cut"),
            Err(err) if err.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
            Err(err) => panic!("cannot accept: {err}"),
        }
    }
    proxy.heal();

    let server = accept(&listener);
    server.set_read_timeout(Some(DEADLINE)).unwrap();
    client.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut c = Connection { client, server };
    assert_receives(&mut c.server, b"sent while cut ");
    c.assert_open_both_ways();
}

/// The proxy stops reading a cut direction, so TCP's flow control holds the sender back once the
/// buffers are full, as a real partition does, instead of the proxy buffering without bound.
#[test]
fn a_cut_holds_a_big_transfer_back_at_its_sender_and_delivers_it_whole_after_the_heal() {
    // Far more than the sockets' buffers can hold (a few MB on Linux loopback).
    const LEN: u32 = 64_000_000;
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);
    proxy.cut();

    let big: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    let written = AtomicBool::new(false);
    let mut received = vec![0; big.len()];
    std::thread::scope(|scope| {
        let client = &mut c.client;
        let (big, written) = (&big, &written);
        scope.spawn(move || {
            client.write_all(big).unwrap();
            written.store(true, Ordering::SeqCst);
        });
        assert_silent(&mut c.server);
        assert!(!written.load(Ordering::SeqCst), "the sender wrote everything during the cut: nothing held it back");
        proxy.heal();
        c.server.read_exact(&mut received).unwrap();
    });
    assert!(written.load(Ordering::SeqCst));
    assert!(received == big, "the transfer held by the cut arrived altered");
}

#[test]
fn heal_restores_the_connections_open_during_a_cut() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);
    proxy.cut();
    c.assert_cut_both_ways();

    proxy.heal();

    c.assert_delivered_both_ways();
    // And the proxy can be cut and healed again.
    proxy.cut();
    c.assert_cut_both_ways();
    proxy.heal();
    c.assert_delivered_both_ways();
}

#[test]
fn cut_one_way_holds_only_that_direction() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);

    proxy.cut_one_way(Direction::ToServer);
    assert_held(&mut c.client, &mut c.server, b"held request ");
    assert_passes(&mut c.server, &mut c.client, b"reply");

    // Turning the cut around delivers what was held, and holds the other way.
    proxy.cut_one_way(Direction::ToClient);
    assert_receives(&mut c.server, b"held request ");
    assert_passes(&mut c.client, &mut c.server, b"request");
    assert_held(&mut c.server, &mut c.client, b"held reply ");

    proxy.heal();
    assert_receives(&mut c.client, b"held reply ");
    c.assert_open_both_ways();
}

#[test]
fn a_cut_holds_the_chunks_still_delayed() {
    let delay = Duration::from_millis(200);
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);
    proxy.delay(delay);
    c.client.write_all(b"delayed ").unwrap();
    proxy.cut();

    // SILENCE is past the chunk's due time: the cut held it.
    assert!(SILENCE > delay);
    assert_silent(&mut c.server);
    proxy.heal();

    assert_receives(&mut c.server, b"delayed ");
    c.assert_open_both_ways();
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
fn reset_during_a_cut_closes_the_connections_and_loses_what_was_held() {
    let (listener, proxy) = start();
    let mut c = connect(&listener, &proxy);
    proxy.cut();
    c.assert_cut_both_ways();

    proxy.reset();

    assert_eq!(wait_closed(&mut c.client), Some(ErrorKind::ConnectionReset));
    assert_eq!(wait_closed(&mut c.server), Some(ErrorKind::ConnectionReset));
    proxy.heal();
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

/// A client connected through `proxy` with this session timeout, and a node path of its own.
async fn zookeeper_client(proxy: &Proxy, session_timeout: Duration) -> (Client, String) {
    let connect_string = proxy.connect_string();
    let connecting = Client::connector().with_session_timeout(session_timeout).connect(&connect_string);
    let client = tokio::time::timeout(DEADLINE, connecting).await.expect("connecting timed out").unwrap();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    (client, format!("/testing-proxy-{}-{nanos}", std::process::id()))
}

#[tokio::test]
async fn a_zookeeper_session_survives_a_cut_that_outlasts_its_connection() {
    let proxy = Proxy::start(shared_server().addr()).unwrap();
    // A short session timeout, so that the client gives its connection up within a second.
    let (client, path) = zookeeper_client(&proxy, Duration::from_secs(2)).await;
    let mut state = client.state_watcher();
    // `client.session_id()` never changes, but its ephemeral node shows that the server still
    // has the same session.
    client.create(&path, b"", &CreateMode::Ephemeral.with_acls(Acls::anyone_all())).await.unwrap();

    proxy.cut();
    assert_eq!(next_state(&mut state).await, SessionState::Disconnected);
    proxy.heal();
    assert_eq!(next_state(&mut state).await, SessionState::SyncConnected);

    let stat = client.check_stat(&path).await.unwrap().expect("the session's ephemeral node is gone");
    assert_eq!(stat.ephemeral_owner, client.session_id().0);
}

/// A cut shorter than the client's patience is only a pause: the request sent during it waits
/// at the proxy, reaches the server after the heal and is answered on the same connection.
#[tokio::test]
async fn a_request_sent_during_a_short_cut_is_answered_after_the_heal() {
    const CUT: Duration = Duration::from_secs(1);
    let proxy = Proxy::start(shared_server().addr()).unwrap();
    // The client gives a silent connection up after 2/5 of this: 4 s, well past the cut.
    let (client, path) = zookeeper_client(&proxy, Duration::from_secs(10)).await;
    let observer = Client::connect(&shared_server().connect_string()).await.unwrap();
    let mut state = client.state_watcher();

    proxy.cut();
    let cut_at = Instant::now();
    let create = tokio::spawn({
        let (client, path) = (client.clone(), path.clone());
        async move {
            let outcome = client.create(&path, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await;
            (outcome.map(drop), Instant::now())
        }
    });
    // The scenario: a cut of this long.
    tokio::time::sleep(CUT).await;
    assert!(!create.is_finished(), "answered during the cut");
    assert_eq!(observer.check_stat(&path).await.unwrap(), None, "the request reached the server during the cut");
    proxy.heal();
    let healed_at = Instant::now();

    let (outcome, answered_at) =
        tokio::time::timeout(DEADLINE, create).await.expect("no answer after the heal").unwrap();
    outcome.expect("the request sent during the cut succeeds");
    assert!(answered_at >= healed_at, "answered before the heal");
    eprintln!(
        "a request sent during a {CUT:?} cut was answered {:?} after the heal",
        answered_at.duration_since(healed_at)
    );
    assert!(cut_at.elapsed() < Duration::from_secs(4), "the scenario outlasted the client's connection timeout");
    let changed = tokio::time::timeout(Duration::ZERO, state.changed()).await;
    assert!(changed.is_err(), "the client's connection state changed meanwhile: {changed:?}");
    assert!(observer.check_stat(&path).await.unwrap().is_some());
}
