//! The fenced store the critical sections write to: a small TCP service run by the test process.
//!
//! It remembers the largest fencing token written per key and refuses writes carrying a smaller
//! one (Kleppmann's fencing). The same token may write again: that is the same holder. Workers
//! speak one line per request, `write <key> <token>`, answered by `accepted` or `rejected <max>`.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The store, served on a loopback port until dropped.
pub struct Store {
    pub addr: SocketAddr,
    state: Arc<State>,
    server: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct State {
    max: Mutex<HashMap<String, i64>>,
    accepted: AtomicU64,
    rejected: AtomicU64,
}

impl Store {
    pub async fn start() -> Store {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fenced store");
        let addr = listener.local_addr().expect("the store's address");
        let state = Arc::new(State::default());
        let shared = state.clone();
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        Store { addr, state, server }
    }

    /// Writes accepted and rejected so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.state.accepted.load(Ordering::SeqCst), self.state.rejected.load(Ordering::SeqCst))
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve(stream: TcpStream, state: Arc<State>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = match line.split(' ').collect::<Vec<_>>()[..] {
            ["write", key, token] => match token.parse::<i64>() {
                Ok(token) => {
                    let mut max = state.max.lock().unwrap();
                    let seen = max.entry(key.to_owned()).or_insert(i64::MIN);
                    if token >= *seen {
                        *seen = token;
                        state.accepted.fetch_add(1, Ordering::SeqCst);
                        "accepted\n".to_owned()
                    } else {
                        state.rejected.fetch_add(1, Ordering::SeqCst);
                        format!("rejected {seen}\n")
                    }
                }
                Err(_) => "error bad token\n".to_owned(),
            },
            _ => "error unknown request\n".to_owned(),
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// A worker's connection to the store; one per task, so writes need no lock.
pub struct StoreClient {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
}

impl StoreClient {
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr, conn: None }
    }

    /// Writes `token` under `key`; `Ok(true)` if the store accepted it.
    pub async fn write(&mut self, key: &str, token: i64) -> io::Result<bool> {
        // One reconnect: the connection may have been idle through a long pause.
        for attempt in 0..2 {
            match self.try_write(key, token).await {
                Ok(accepted) => return Ok(accepted),
                Err(e) if attempt == 0 => {
                    eprintln!("store connection failed ({e}); reconnecting");
                    self.conn = None;
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!()
    }

    async fn try_write(&mut self, key: &str, token: i64) -> io::Result<bool> {
        if self.conn.is_none() {
            self.conn = Some(BufReader::new(TcpStream::connect(self.addr).await?));
        }
        let conn = self.conn.as_mut().expect("connected above");
        conn.get_mut().write_all(format!("write {key} {token}\n").as_bytes()).await?;
        let mut reply = String::new();
        if conn.read_line(&mut reply).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        match reply.split(' ').next().map(str::trim) {
            Some("accepted") => Ok(true),
            Some("rejected") => Ok(false),
            _ => Err(io::Error::other(format!("store said {reply:?}"))),
        }
    }
}
