//! The expansion stays quiet under strict lints and with decoy `core` and `std` modules in
//! scope: it names only `::zk_lock::__private` and `::core`. trybuild builds this file with
//! rustc; `tests/macros.rs` includes it as a module, so `cargo clippy --all-targets` checks it
//! under `clippy::pedantic` too.

#![deny(warnings, unused_qualifications, unused_results, clippy::pedantic)]

use zk_lock::{zk_lock, zk_multi_lock, zk_read_lock, zk_semaphore, zk_write_lock, Error};

mod core {}
mod std {}

struct Path<T>(T);

struct Shard {
    shard: u32,
}

impl Shard {
    #[zk_lock(path = "/lints/<self.shard>/<id>", timeout = "1s", guard = g)]
    async fn method(&self, id: u64) -> Result<i64, Error> {
        Ok(g.fencing_token() + i64::from(self.shard) + i64::try_from(id).unwrap_or_default())
    }
}

#[zk_read_lock(path = "/lints/<id>", client = "lints", on_lost = "ignore")]
async fn read(Path(id): Path<u64>) -> Result<u64, Error> {
    Ok(id)
}

#[zk_write_lock(path = "/lints/<id>")]
async fn write(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_semaphore(path = "/lints/sem", permits = 3)]
async fn semaphore() -> Result<(), Error> {
    Ok(())
}

#[zk_multi_lock(paths = ["/lints/<a>", "/lints/<b>"])]
async fn multi(a: u8, b: u8) -> Result<u8, Error> {
    Ok(a.max(b))
}

#[zk_lock(path = "/lints/impl")]
async fn returns_impl_trait() -> Result<impl ::std::fmt::Display, Error> {
    Ok(1)
}

pub fn main() {
    let shard = Shard { shard: 1 };
    drop((shard.method(1), read(Path(1)), write(1), semaphore(), multi(1, 2), returns_impl_trait()));
}
