use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/orders")]
const fn constant() -> Result<(), Error> {
    Ok(())
}

fn main() {}
