//! Each attribute with each of its arguments; `guard = g` gives the body the guard.

use zk_lock::{zk_lock, zk_multi_lock, zk_read_lock, zk_semaphore, zk_write_lock, Error};

#[zk_lock(path = "/locks/<id>", timeout = "5s", client = "orders", guard = g, on_lost = "abort")]
async fn mutex(id: u64) -> Result<i64, Error> {
    let token: i64 = g.fencing_token();
    let _: &str = g.node_path();
    let _: bool = g.is_held();
    Ok(token + i64::try_from(id).unwrap_or_default())
}

#[zk_read_lock(path = "/catalog/<sku>", timeout = "250ms", guard = read)]
async fn read_price(sku: &str) -> Result<i64, Error> {
    let _ = sku;
    Ok(read.fencing_token())
}

#[zk_write_lock(path = "/catalog/<sku>", timeout = "1m30s", on_lost = "ignore")]
async fn set_price(sku: &str, price: u64) -> Result<(), Error> {
    let _ = (sku, price);
    Ok(())
}

#[zk_semaphore(path = "/workers/transcode", permits = 4, timeout = "0s", guard = permit)]
async fn transcode(job: u64) -> Result<u64, Error> {
    let _ = permit.fencing_token();
    Ok(job)
}

#[zk_semaphore(path = "/workers/<queue>")]
async fn one_at_a_time(queue: &str) -> Result<(), Error> {
    let _ = queue;
    Ok(())
}

#[zk_multi_lock(paths = ["/accounts/<from>", "/accounts/<to>"], timeout = "2s", guard = both)]
async fn transfer(from: u64, to: u64, amount: u64) -> Result<u64, Error> {
    let tokens: Vec<(&str, i64)> = both.fencing_tokens();
    let _ = (tokens, both.fencing_token());
    Ok(from + to + amount)
}

#[zk_multi_lock(paths = ["/single"],)]
async fn trailing_comma() -> Result<(), Error> {
    Ok(())
}

fn main() {
    drop((mutex(1), read_price("a"), set_price("a", 1), transcode(1), one_at_a_time("q")));
    drop((transfer(1, 2, 3), trailing_comma()));
}
