use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/orders/<id>")]
async fn peeks(id: u64) -> Result<(), Error> {
    let _ = (&__zk_lock_guard, &__zk_lock_path, &__zk_lock_sites, &SITES);
    Ok(())
}

fn main() {}
