use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/orders")]
struct Orders;

trait Job {
    #[zk_lock(path = "/jobs")]
    async fn run(&self) -> Result<(), Error>;
}

fn main() {}
