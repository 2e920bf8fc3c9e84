//! `queue_reports = f` on every attribute that takes it: a function's path, a closure that
//! captures nothing, an associated function (`Self::..`), a field path, beside the other keys.

use zk_lock::{zk_lock, zk_multi_lock, zk_read_lock, zk_write_lock, Error, QueuePosition};

fn report_place(position: &QueuePosition) {
    eprintln!("{position}");
}

mod reports {
    pub fn to_stderr(position: &zk_lock::QueuePosition) {
        eprintln!("{} is {} in line", position.path, position.place);
    }
}

#[zk_lock(path = "/jobs/<id>", queue_reports = report_place)]
async fn mutex(id: u64) -> Result<u64, Error> {
    Ok(id)
}

#[zk_lock(path = "/jobs/<id>", timeout = "5s", queue_reports = |position| eprintln!("{position}"), guard = g)]
async fn with_a_closure(id: u64) -> Result<i64, Error> {
    Ok(g.fencing_token() + i64::try_from(id).unwrap_or_default())
}

#[zk_read_lock(path = "/catalog/<sku>", queue_reports = reports::to_stderr)]
async fn read_price(sku: &str) -> Result<(), Error> {
    let _ = sku;
    Ok(())
}

#[zk_write_lock(path = "/catalog/<sku>", queue_reports = crate::report_place, on_lost = "ignore")]
async fn set_price(sku: &str) -> Result<(), Error> {
    let _ = sku;
    Ok(())
}

#[zk_multi_lock(paths = ["/accounts/<from>", "/accounts/<to>"], queue_reports = report_place)]
async fn transfer(from: u64, to: u64) -> Result<u64, Error> {
    Ok(from + to)
}

struct Shard {
    id: u32,
}

impl Shard {
    fn report(position: &QueuePosition) {
        eprintln!("shard: {position}");
    }

    #[zk_lock(path = "/shards/<self.id>", queue_reports = Self::report)]
    async fn rebalance(&self) -> Result<u32, Error> {
        Ok(self.id)
    }
}

/// A `fn` pointer held in a `const` works as well as a function's name.
const REPORT: fn(&QueuePosition) = report_place;

#[zk_lock(path = "/const", queue_reports = REPORT)]
async fn through_a_const() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let shard = Shard { id: 1 };
    drop((mutex(1), with_a_closure(1), read_price("a"), set_price("a"), transfer(1, 2)));
    drop((shard.rebalance(), through_a_const()));
}
