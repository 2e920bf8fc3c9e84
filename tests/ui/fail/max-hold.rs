use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/a", max_hold = "0s")]
async fn zero() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/b", max_hold = 30)]
async fn not_a_string() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/c", max_hold = "30")]
async fn no_unit() -> Result<(), Error> {
    Ok(())
}

fn main() {}
