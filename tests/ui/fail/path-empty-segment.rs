use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/locks//<id>")]
async fn double_slash(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

fn main() {}
