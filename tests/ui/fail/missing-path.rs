use zk_lock::{zk_lock, zk_multi_lock, Error};

#[zk_lock]
async fn no_arguments() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(timeout = "5s")]
async fn no_path() -> Result<(), Error> {
    Ok(())
}

#[zk_multi_lock(timeout = "5s")]
async fn no_paths() -> Result<(), Error> {
    Ok(())
}

fn main() {}
