//! The futures of annotated functions are `Send` when their bodies are, so they can be spawned
//! on a multi-threaded runtime; `guard = g` keeps them `Send`.

use std::sync::Arc;

use zk_lock::{zk_lock, zk_multi_lock, zk_read_lock, zk_semaphore, zk_write_lock, Error};

fn assert_send<T: Send>(_: T) {}

struct Service {
    shard: u32,
    hits: Arc<std::sync::atomic::AtomicU64>,
}

impl Service {
    #[zk_lock(path = "/send/<self.shard>", guard = g)]
    async fn method(&self, id: u64) -> Result<u64, Error> {
        tokio::task::yield_now().await;
        self.hits.fetch_add(id, std::sync::atomic::Ordering::Relaxed);
        Ok(u64::try_from(g.fencing_token()).unwrap_or_default())
    }
}

#[zk_read_lock(path = "/send/<key>", guard = g)]
async fn read(key: String) -> Result<(), Error> {
    tokio::task::yield_now().await;
    let _ = (key, g.fencing_token());
    Ok(())
}

#[zk_write_lock(path = "/send/<key>", on_lost = "ignore")]
async fn write(key: &str) -> Result<(), Error> {
    tokio::task::yield_now().await;
    let _ = key;
    Ok(())
}

#[zk_semaphore(path = "/send/sem", permits = 2, guard = g)]
async fn semaphore() -> Result<(), Error> {
    tokio::task::yield_now().await;
    let _ = g.fencing_token();
    Ok(())
}

#[zk_semaphore(path = "/send/mutex", guard = g)]
async fn semaphore_mutex() -> Result<(), Error> {
    tokio::task::yield_now().await;
    let _ = g.fencing_token();
    Ok(())
}

#[zk_multi_lock(paths = ["/send/<a>", "/send/<b>"], guard = g)]
async fn multi(a: u8, b: u8) -> Result<(), Error> {
    tokio::task::yield_now().await;
    let _ = g.fencing_token();
    Ok(())
}

fn main() {
    let service = Service { shard: 1, hits: Arc::default() };
    assert_send(service.method(1));
    assert_send(read("a".into()));
    assert_send(write("a"));
    assert_send(semaphore());
    assert_send(semaphore_mutex());
    assert_send(multi(1, 2));
    // And spawnable: `Send + 'static` for owned arguments.
    let _ = || tokio::spawn(read("a".into()));
}
