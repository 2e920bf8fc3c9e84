use zk_lock::{zk_lock, zk_multi_lock, Error, QueuePosition};

fn by_place(place: usize) {
    eprintln!("{place}");
}

async fn asynchronous(position: &QueuePosition) {
    eprintln!("{position}");
}

#[zk_lock(path = "/jobs/<id>", queue_reports = by_place)]
async fn wrong_parameter(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_lock(path = "/jobs/<id>", queue_reports = asynchronous)]
async fn an_async_fn(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_multi_lock(paths = ["/accounts/<from>", "/accounts/<to>"], queue_reports = |position| eprintln!("{from}: {position}"))]
async fn a_closure_that_captures(from: u64, to: u64) -> Result<(), Error> {
    let _ = (from, to);
    Ok(())
}

fn main() {}
