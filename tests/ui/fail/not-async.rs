use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/orders")]
fn blocking() -> Result<(), Error> {
    Ok(())
}

fn main() {}
