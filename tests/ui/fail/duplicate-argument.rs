use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/orders", timeout = "5s", timeout = "10s")]
async fn twice() -> Result<(), Error> {
    Ok(())
}

fn main() {}
