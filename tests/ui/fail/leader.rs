//! `#[zk_leader]` checks its arguments as `#[zk_lock]` does: a placeholder that names no
//! parameter, and a key it does not take.
use zk_lock::zk_leader;

#[zk_leader(path = "/jobs/<jobb>")]
async fn run_job(job: u64) -> Result<(), zk_lock::Error> {
    let _ = job;
    Ok(())
}

#[zk_leader(path = "/jobs/billing", permits = 2)]
async fn run_billing() -> Result<(), zk_lock::Error> {
    Ok(())
}

fn main() {}
