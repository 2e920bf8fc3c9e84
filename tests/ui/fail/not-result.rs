use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/a")]
async fn unit() {}

#[zk_lock(path = "/b")]
async fn option() -> Option<u64> {
    None
}

#[zk_lock(path = "/c")]
async fn tuple() -> (u64, Error) {
    todo!()
}

fn main() {}
