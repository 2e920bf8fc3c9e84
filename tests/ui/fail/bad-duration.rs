use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/a", timeout = "5")]
async fn no_unit() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/b", timeout = "5 parsecs")]
async fn unknown_unit() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/e", timeout = "5 secs")]
async fn spelled_out_unit() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/c", timeout = "1.5s")]
async fn fraction() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/d", timeout = "30s1m")]
async fn smallest_first() -> Result<(), Error> {
    Ok(())
}

fn main() {}
