use zk_lock::{zk_lock, Error};

struct Request {
    user_id: u64,
}

#[zk_lock(path = "/users/<req.user>")]
async fn no_such_field(req: &Request) -> Result<(), Error> {
    let _ = req;
    Ok(())
}

fn main() {}
