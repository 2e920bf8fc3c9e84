use zk_lock::{zk_lock, Error};

#[zk_lock(path = "locks/orders")]
async fn relative() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "")]
async fn empty() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/")]
async fn root() -> Result<(), Error> {
    Ok(())
}

fn main() {}
