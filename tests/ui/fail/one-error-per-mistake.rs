//! Several mistakes in one attribute are reported together, each once, and nothing else: the
//! function is still emitted as written, so its callers do not add errors of their own.

use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/orders/<idd>", timout = "5s", on_lost = "never")]
async fn several(id: u64) -> Result<u64, Error> {
    Ok(id)
}

async fn caller() -> Result<u64, Error> {
    several(1).await
}

fn main() {
    drop(caller());
}
