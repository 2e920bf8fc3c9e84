use zk_lock::{zk_lock, zk_multi_lock, Error};

#[zk_lock(path = "/orders", timout = "5s")]
async fn misspelt() -> Result<(), Error> {
    Ok(())
}

#[zk_multi_lock(path = "/accounts/<from>")]
async fn multi_takes_paths() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/orders", permits = 2)]
async fn permits_are_for_semaphores() -> Result<(), Error> {
    Ok(())
}

fn main() {}
