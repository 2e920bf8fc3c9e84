use zk_lock::{zk_lock, Error};

#[zk_lock("/orders")]
async fn positional() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path "/orders")]
async fn missing_equals() -> Result<(), Error> {
    Ok(())
}

fn main() {}
