use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/locks/tab\there")]
async fn control() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/locks/\u{e000}")]
async fn private_use() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/locks/lock_😀")]
async fn outside_the_bmp() -> Result<(), Error> {
    Ok(())
}

fn main() {}
