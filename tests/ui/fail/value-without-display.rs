use zk_lock::{zk_lock, Error};

struct OrderId(u64);

#[zk_lock(path = "/orders/<id>")]
async fn not_display(id: OrderId) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

fn main() {}
