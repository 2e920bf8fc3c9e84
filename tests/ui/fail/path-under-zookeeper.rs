use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/zookeeper/locks/<id>")]
async fn reserved(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

fn main() {}
