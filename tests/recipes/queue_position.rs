//! A waiter's place in line and the holder ahead (`with_queue_reports`), learnt from the reads
//! waiting makes anyway.

use std::sync::{Arc, Mutex as StdMutex};

use zk_lock::{Client, Mutex, QueuePosition, Role, RwLock};

use crate::support::{new_client, node_name, queue_of, unique_name, PATIENCE};

/// Collects the reports of one waiter, and says when a new one arrives.
#[derive(Clone, Default)]
struct Reports {
    seen: Arc<StdMutex<Vec<QueuePosition>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Reports {
    fn reporter(&self) -> impl Fn(&QueuePosition) + Send + Sync + 'static {
        let this = self.clone();
        move |position| {
            this.seen.lock().unwrap().push(position.clone());
            this.arrived.notify_one();
        }
    }

    /// Waits for the `n`th report.
    async fn nth(&self, n: usize) -> QueuePosition {
        tokio::time::timeout(PATIENCE, async {
            loop {
                let notified = self.arrived.notified();
                if let Some(position) = self.seen.lock().unwrap().get(n - 1) {
                    return position.clone();
                }
                notified.await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no report #{n}: {:?}", self.seen.lock().unwrap()))
    }
}

#[tokio::test]
async fn a_waiter_learns_its_place_and_who_holds_the_lock() {
    let path = format!("/it-queue-position/{}", unique_name("mutex"));
    let (holder_client, first_client, second_client, observer) =
        (new_client().await, new_client().await, new_client().await, new_client().await);
    let holder = Mutex::with_client(&holder_client, &path).lock().await.unwrap();

    // Next in line: the read that watches the holder's node tells who it is.
    let first_reports = Reports::default();
    let first = {
        let mutex = Mutex::with_client(&first_client, &path).with_queue_reports(first_reports.reporter());
        tokio::spawn(async move { mutex.lock().await })
    };
    let next = first_reports.nth(1).await;
    assert_eq!((next.place, next.ahead, next.path.as_str()), (2, 1, path.as_str()));
    let about = next.holder.as_ref().expect("the holder's node was read");
    assert_eq!(about.node_name, holder.node_path().rsplit('/').next().unwrap());
    let description = about.description.as_ref().expect("zk-lock's holder description");
    assert_eq!(description.pid, std::process::id());
    assert!(next.to_string().starts_with("2nd in line behind host="), "{next}");

    // Further back: the place at once, the holder once a wake-up's listing read it.
    let second_reports = Reports::default();
    let second = {
        let mutex = Mutex::with_client(&second_client, &path).with_queue_reports(second_reports.reporter());
        tokio::spawn(async move { mutex.lock().await })
    };
    let back = second_reports.nth(1).await;
    assert_eq!((back.place, back.holder.as_ref()), (3, None), "{back:?}");
    assert_eq!(back.to_string(), format!("3rd in line for `{path}`"));
    queue_of(&observer, &path, 3).await;

    // The waiter ahead gives up: the second moves up, and its listing reads the holder too.
    first.abort();
    let moved = second_reports.nth(2).await;
    assert_eq!(moved.place, 2, "{moved:?}");
    let about = moved.holder.as_ref().expect("read with the listing");
    assert_eq!(about.node_name, holder.node_path().rsplit('/').next().unwrap());
    eprintln!("queue reports: {next}; {back}; then {moved}");

    holder.release().await.unwrap();
    let guard = tokio::time::timeout(PATIENCE, second).await.unwrap().unwrap().unwrap();
    guard.release().await.unwrap();
    assert_eq!(second_reports.seen.lock().unwrap().len(), 2, "granted without another report");
}

/// Issue 34 (6): a reader queued behind a waiting writer is behind the readers holding the
/// lock, which the writer waits for: the report names a holder (never the waiting writer) and
/// counts the place as `participants` orders the queue.
#[tokio::test]
async fn a_reader_behind_a_waiting_writer_is_told_the_reader_that_holds() {
    let path = format!("/it-queue-position/{}", unique_name("rwlock"));
    let clients = [new_client().await, new_client().await, new_client().await, new_client().await];
    let observer = new_client().await;
    let holder = RwLock::with_client(&clients[0], &path).read().await.unwrap();
    let holder_name = node_name(holder.node_path()).to_owned();
    let writer = |client: &Client| {
        let lock = RwLock::with_client(client, &path);
        tokio::spawn(async move { lock.write().await })
    };
    let reader = |client: &Client, reports: &Reports| {
        let lock = RwLock::with_client(client, &path).with_queue_reports(reports.reporter());
        tokio::spawn(async move { lock.read().await })
    };

    // R1 holds, W2 waits for it, R3 waits for W2: R3 is 3rd, and R1 holds.
    let first_writer = writer(&clients[1]);
    queue_of(&observer, &path, 2).await;
    let reports = Reports::default();
    let first_reader = reader(&clients[2], &reports);
    let told = reports.nth(1).await;
    let seen = zk_lock::participants_with(&observer, &path).await.unwrap();
    let holders: Vec<&str> = seen.iter().filter(|p| p.role == Role::Holder).map(|p| p.node_name.as_str()).collect();
    assert_eq!(holders, [holder_name.as_str()], "{seen:#?}");
    assert_eq!((told.place, told.ahead), (3, 2), "participants: {seen:#?}; told {told}");
    // Further back than next in line, a first report names no holder (it was not read yet);
    // it named the waiting writer W2 until issue 34.
    assert!(told.holder.is_none(), "{told}");

    // A second writer and a reader behind it: the reader waits for W4, which waits for R1, W2
    // and R3.
    let second_writer = writer(&clients[3]);
    queue_of(&observer, &path, 4).await;
    let back_reports = Reports::default();
    let back_reader = reader(&observer, &back_reports);
    let back = back_reports.nth(1).await;
    assert_eq!((back.place, back.ahead), (5, 4), "{back:?}");
    assert!(back.holder.is_none(), "{back}");

    // W4 gives up: R5 moves up beside R3 (both wait for W2 only), and the listing that follows
    // reads the holder, R1, not W2.
    second_writer.abort();
    let moved = back_reports.nth(2).await;
    assert_eq!((moved.place, moved.ahead), (3, 2), "{moved:?}");
    let named = moved.holder.as_ref().expect("read with the listing");
    assert_eq!(named.node_name, holder_name, "{moved}");
    eprintln!("queue reports: {told}; {back}; then {moved}");

    holder.release().await.unwrap();
    let write = tokio::time::timeout(PATIENCE, first_writer).await.unwrap().unwrap().unwrap();
    write.release().await.unwrap();
    for waiting in [first_reader, back_reader] {
        tokio::time::timeout(PATIENCE, waiting).await.unwrap().unwrap().unwrap().release().await.unwrap();
    }
}
