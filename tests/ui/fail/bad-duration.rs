use zk_lock::{zk_lock, Error};

#[zk_lock(path = "/a", timeout = "5")]
async fn no_unit() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/b", timeout = "5 parsecs")]
async fn unknown_unit() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/e", timeout = "5 Secs")]
async fn unit_in_another_case() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/f", timeout = "250milliseconds")]
async fn spelled_out_unit() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/c", timeout = "1,5s")]
async fn decimal_comma() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/d", timeout = "-1s")]
async fn negative() -> Result<(), Error> {
    Ok(())
}

fn main() {}
