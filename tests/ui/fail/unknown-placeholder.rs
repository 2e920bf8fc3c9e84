use zk_lock::{zk_lock, Error};

struct Request {
    user_id: u64,
}

#[zk_lock(path = "/product_<idd>")]
async fn misspelt(db: &str, id: u64) -> Result<(), Error> {
    let _ = (db, id);
    Ok(())
}

#[zk_lock(path = "/users/<request.user_id>")]
async fn misspelt_root(req: &Request) -> Result<(), Error> {
    let _ = req;
    Ok(())
}

#[zk_lock(path = "/shards/<self.shard>")]
async fn no_self(shard: u32) -> Result<(), Error> {
    let _ = shard;
    Ok(())
}

#[zk_lock(path = "/jobs/<id>")]
async fn no_parameters() -> Result<(), Error> {
    Ok(())
}

fn main() {}
