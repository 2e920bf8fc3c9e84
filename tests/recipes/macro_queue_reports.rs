//! `queue_reports = f` on the attributes (issue 36): an annotated call that waits is told its
//! place in line and who holds the lock, as `with_queue_reports` tells a caller of the API
//! (`queue_position`). The reports come from the
//! waiting itself, so every wait below is on ZooKeeper's state (`queue_of`) or on a report.
//!
//! The key takes a `fn(&QueuePosition)`: one function for all the annotated functions here,
//! which keeps every report in `REPORTS`; each test reads those of its own (unique) paths.

use std::sync::{LazyLock, Mutex as StdMutex};

use tokio::sync::Notify;
use zk_lock::{zk_lock, zk_multi_lock, zk_read_lock, zk_write_lock, Error, Mutex, QueuePosition, RwLock};

use crate::support::{install, new_client, node_name, unique_name, PATIENCE};

/// Every report of the annotated functions below, in the order they came.
static REPORTS: StdMutex<Vec<QueuePosition>> = StdMutex::new(Vec::new());
/// Told of each new report.
static ARRIVED: LazyLock<Notify> = LazyLock::new(Notify::new);

/// The value of the functions' `queue_reports` key.
fn report_place(position: &QueuePosition) {
    REPORTS.lock().unwrap().push(position.clone());
    ARRIVED.notify_waiters();
}

/// The reports about the lock at `path`.
fn reports_for(path: &str) -> Vec<QueuePosition> {
    REPORTS.lock().unwrap().iter().filter(|position| position.path == path).cloned().collect()
}

/// Waits for the first report about the lock at `path`.
async fn first_report_for(path: &str) -> QueuePosition {
    let first = async {
        loop {
            // Registered before the reports are read, so a report that comes between the two
            // still wakes this wait.
            let mut notified = std::pin::pin!(ARRIVED.notified());
            notified.as_mut().enable();
            if let Some(position) = reports_for(path).into_iter().next() {
                return position;
            }
            notified.await;
        }
    };
    tokio::time::timeout(PATIENCE, first).await.unwrap_or_else(|_| panic!("no report about `{path}` in {PATIENCE:?}"))
}

/// Bounds a call that should finish once the holder let go.
async fn bounded<T>(what: &str, call: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(PATIENCE, call)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in {PATIENCE:?}"))
        .unwrap_or_else(|e| panic!("{what} panicked: {e}"))
}

/// Checks that `told` is the report of the waiter next in line behind the holder whose node is
/// `holder_node`, a node of this process.
fn assert_next_behind(told: &QueuePosition, path: &str, holder_node: &str) {
    assert_eq!((told.place, told.ahead, told.path.as_str()), (2, 1, path), "{told:?}");
    let holder = told.holder.as_ref().unwrap_or_else(|| panic!("next in line, the holder's node was read: {told:?}"));
    assert_eq!(holder.node_name, node_name(holder_node), "{told:?}");
    let description = holder.description.as_ref().expect("zk-lock's holder description");
    assert_eq!(description.pid, std::process::id(), "{told:?}");
    assert!(told.to_string().starts_with("2nd in line behind host="), "{told}");
}

// --- #[zk_lock] --------------------------------------------------------------------------------

#[zk_lock(path = "/it-macro-queue-reports/<run>", client = "macro-queue-reports-mutex", queue_reports = report_place, guard = g)]
async fn reported(run: String) -> Result<String, Error> {
    let _ = run;
    Ok(g.node_path().to_owned())
}

#[tokio::test]
async fn an_annotated_call_behind_a_holder_is_told_its_place_and_the_holder() {
    install("macro-queue-reports-mutex").await;
    let run = unique_name("mutex");
    let path = format!("/it-macro-queue-reports/{run}");
    let other = new_client().await;
    let holder = Mutex::with_client(&other, &path).lock().await.unwrap();

    let call = tokio::spawn(reported(run));
    let told = first_report_for(&path).await;
    assert_next_behind(&told, &path, holder.node_path());
    eprintln!("#[zk_lock(queue_reports)]: {told}");

    holder.release().await.unwrap();
    let node = bounded("the reported call", call).await.unwrap();
    assert!(node.starts_with(&format!("{path}/_c_")), "{node}");
    // Granted by the holder's release, without another report.
    assert_eq!(reports_for(&path), [told]);
}

// --- #[zk_read_lock], #[zk_write_lock] ---------------------------------------------------------

#[zk_read_lock(path = "/it-macro-queue-reports/<run>", client = "macro-queue-reports-rw", queue_reports = report_place)]
async fn read_reported(run: String) -> Result<(), Error> {
    let _ = run;
    Ok(())
}

#[zk_write_lock(path = "/it-macro-queue-reports/<run>", client = "macro-queue-reports-rw", queue_reports = report_place)]
async fn write_reported(run: String) -> Result<(), Error> {
    let _ = run;
    Ok(())
}

#[tokio::test]
async fn read_and_write_calls_are_told_their_place_behind_the_other_side() {
    install("macro-queue-reports-rw").await;
    let other = new_client().await;

    // A reader behind a writer that holds.
    let run = unique_name("read");
    let path = format!("/it-macro-queue-reports/{run}");
    let writer = RwLock::with_client(&other, &path).write().await.unwrap();
    let call = tokio::spawn(read_reported(run));
    let told = first_report_for(&path).await;
    assert_next_behind(&told, &path, writer.node_path());
    writer.release().await.unwrap();
    bounded("the reported read", call).await.unwrap();

    // A writer behind a reader that holds.
    let run = unique_name("write");
    let path = format!("/it-macro-queue-reports/{run}");
    let reader = RwLock::with_client(&other, &path).read().await.unwrap();
    let call = tokio::spawn(write_reported(run));
    let told = first_report_for(&path).await;
    assert_next_behind(&told, &path, reader.node_path());
    reader.release().await.unwrap();
    bounded("the reported write", call).await.unwrap();
}

// --- #[zk_multi_lock] --------------------------------------------------------------------------

#[zk_multi_lock(
    paths = ["/it-macro-queue-reports/<run>/a", "/it-macro-queue-reports/<run>/b"],
    client = "macro-queue-reports-multi",
    queue_reports = report_place
)]
async fn multi_reported(run: String) -> Result<(), Error> {
    let _ = run;
    Ok(())
}

#[tokio::test]
async fn a_multi_lock_call_is_told_about_the_member_it_waits_for() {
    install("macro-queue-reports-multi").await;
    let run = unique_name("multi");
    let (free, held) = (format!("/it-macro-queue-reports/{run}/a"), format!("/it-macro-queue-reports/{run}/b"));
    let other = new_client().await;
    let holder = Mutex::with_client(&other, &held).lock().await.unwrap();

    let call = tokio::spawn(multi_reported(run));
    let told = first_report_for(&held).await;
    assert_next_behind(&told, &held, holder.node_path());
    holder.release().await.unwrap();
    bounded("the reported multi-lock call", call).await.unwrap();
    // The free member was granted at once: no place in line to tell.
    assert_eq!(reports_for(&free), []);
    assert_eq!(reports_for(&held), [told]);
}
