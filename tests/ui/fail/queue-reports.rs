use zk_lock::{zk_lock, zk_semaphore, zk_write_lock, Error, QueuePosition};

fn report_place(position: &QueuePosition) {
    eprintln!("{position}");
}

#[zk_semaphore(path = "/workers/transcode", permits = 4, queue_reports = report_place)]
async fn semaphores_have_no_place_in_line() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/jobs/<id>", queue_report = report_place)]
async fn misspelt(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_lock(path = "/jobs/<id>", queue_reports = "report_place")]
async fn quoted(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_write_lock(path = "/catalog", queue_reports = true)]
async fn a_literal() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = report_place;
}
