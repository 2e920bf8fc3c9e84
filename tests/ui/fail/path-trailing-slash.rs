use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/locks/orders/")]
async fn trailing() -> Result<(), Error> {
    Ok(())
}

fn main() {}
