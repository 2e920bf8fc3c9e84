use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/locks/../orders")]
async fn parent() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/locks/./orders")]
async fn current() -> Result<(), Error> {
    Ok(())
}

fn main() {}
