use zk_lock::{zk_semaphore, Error};

#[zk_semaphore(path = "/workers", permits = 0)]
async fn nobody() -> Result<(), Error> {
    Ok(())
}

fn main() {}
