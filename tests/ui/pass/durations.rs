//! `timeout` and `max_hold` take humantime's syntax, as `zk-lock --timeout` does: spaces between
//! the parts, fractions, spelled-out units.

use zk_lock::{zk_lock, zk_semaphore, Error};

#[zk_lock(path = "/durations/a", timeout = "1m 30s", max_hold = "1.5s")]
async fn spaced_and_fractional() -> Result<(), Error> {
    Ok(())
}

#[zk_semaphore(path = "/durations/b", timeout = "250 millis", max_hold = "2 hours 37 min")]
async fn spelled_out() -> Result<(), Error> {
    Ok(())
}

fn main() {
    drop((spaced_and_fractional(), spelled_out()));
}
