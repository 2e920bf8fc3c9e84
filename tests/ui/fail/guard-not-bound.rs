//! The body uses the lock's guard without binding it: the attribute says how to bind it (rustc
//! alone would only say it cannot find the name).

use zk_lock::{zk_lock, zk_semaphore, Error};

#[zk_lock(path = "/orders/<id>")]
async fn fenced(id: u64) -> Result<i64, Error> {
    let _ = id;
    Ok(g.fencing_token())
}

// Bound under another name.
#[zk_semaphore(path = "/workers", permits = 2, guard = permit)]
async fn named_otherwise() -> Result<bool, Error> {
    let _ = permit.fencing_token();
    Ok(guard.is_held())
}

fn main() {}
