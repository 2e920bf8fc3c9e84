use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/product_<id")]
async fn unclosed(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_lock(path = "/product_<>")]
async fn empty(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_lock(path = "/users/<req.id()>")]
async fn method_call(req: &str) -> Result<(), Error> {
    let _ = req;
    Ok(())
}

#[zk_lock(path = "/product_id>")]
async fn unmatched(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

fn main() {}
