use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/orders", on_lost = "abrt")]
async fn misspelt() -> Result<(), Error> {
    Ok(())
}

fn main() {}
