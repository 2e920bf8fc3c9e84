//! `zk_lock::testing::History` recording real locks of a real server: tasks with sessions of
//! their own contend and the history checks clean; deliberate violations are caught; a timed
//! guard records how its grant ended.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::Barrier;
use zk_lock::testing::{now_ns, shared_server, Grant, GrantKind, History, Outcome, Report, Violation};
use zk_lock::{Client, Error, Mutex, RwLock, Semaphore};

/// Bounds every acquisition and wait, so that a broken lock fails the test instead of hanging it.
const TIMEOUT: Duration = Duration::from_secs(30);

fn unique_path(name: &str) -> String {
    crate::unique_path("history", name)
}

/// A client with a session of its own.
async fn connect() -> Client {
    let connecting = Client::builder(shared_server().connect_string()).connect();
    tokio::time::timeout(TIMEOUT, connecting).await.expect("connect in time").expect("connect to the shared server")
}

/// A store that remembers the largest token written per key; fenced, it refuses a smaller one.
struct Store {
    fenced: bool,
    largest: StdMutex<HashMap<String, i64>>,
}

impl Store {
    fn new(fenced: bool) -> Arc<Store> {
        Arc::new(Store { fenced, largest: StdMutex::default() })
    }

    async fn write(&self, key: &str, token: i64) -> Result<bool, Infallible> {
        let mut largest = self.largest.lock().unwrap();
        let seen = largest.entry(key.to_owned()).or_insert(i64::MIN);
        let accepted = !self.fenced || token >= *seen;
        if accepted {
            *seen = token.max(*seen);
        }
        Ok(accepted)
    }
}

const WORKERS: usize = 4;
const ROUNDS: usize = 6;

/// One worker: every round it takes the mutex, the read and the write side of the read/write
/// lock and a permit, writing to the store under the exclusive ones.
async fn contend(worker: usize, base: &str, history: &History, store: &Store) -> zk_lock::Result<()> {
    let client = connect().await;
    let holder = format!("worker-{worker}");
    let mutex = Mutex::with_client(&client, format!("{base}/mutex"));
    let rw = RwLock::with_client(&client, format!("{base}/rw"));
    let semaphore = Semaphore::with_client(&client, format!("{base}/sem"), 2);
    for _ in 0..ROUNDS {
        let guard = history.time_grant(&holder, GrantKind::Mutex, mutex.lock_timeout(TIMEOUT).await?);
        let Ok(_) = guard.fenced_write(store.write(guard.path(), guard.fencing_token())).await;
        tokio::task::yield_now().await;
        guard.release().await?;

        let guard = history.time_grant(&holder, GrantKind::Read, rw.read_timeout(TIMEOUT).await?);
        tokio::task::yield_now().await;
        guard.release().await?;

        let guard = history.time_grant(&holder, GrantKind::Write, rw.write_timeout(TIMEOUT).await?);
        let Ok(_) = guard.fenced_write(store.write(guard.path(), guard.fencing_token())).await;
        guard.release().await?;

        let permit = semaphore.acquire_timeout(TIMEOUT).await?;
        let guard = history.time_grant(&holder, GrantKind::Semaphore { leases: 2 }, permit);
        tokio::task::yield_now().await;
        guard.release().await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_contending_on_real_locks_leave_a_clean_history() {
    let base = unique_path("contend");
    let (history, store) = (Arc::new(History::new()), Store::new(true));
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let (base, history, store) = (base.clone(), history.clone(), store.clone());
            tokio::spawn(async move { contend(worker, &base, &history, &store).await })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker panicked").expect("a worker's lock failed");
    }

    let report = history.check();
    assert!(report.is_clean(), "{report}");
    assert_eq!((report.grants(), report.fenced_writes()), (WORKERS * ROUNDS * 4, WORKERS * ROUNDS * 2));
    let grants = history.grants();
    assert!(grants.iter().all(|g| g.outcome == Outcome::Released && g.start <= g.end), "{grants:#?}");
    assert!(history.fenced_writes().iter().all(|w| w.accepted), "a live holder's write was refused");
}

/// Two sessions hold two different locks at once; returns each holder's grant as it really was.
async fn hold_two_locks_at_once(base: &str) -> Vec<Grant> {
    let barrier = Arc::new(Barrier::new(2));
    let holders: Vec<_> = ["first", "second"]
        .into_iter()
        .map(|holder| {
            let (path, barrier) = (format!("{base}/{holder}"), barrier.clone());
            tokio::spawn(async move {
                let client = connect().await;
                let guard = Mutex::with_client(&client, &path).lock_timeout(TIMEOUT).await.expect("lock");
                let start = now_ns();
                // Both hold their lock here, at once.
                barrier.wait().await;
                let end = now_ns();
                let (token, outcome) = (guard.fencing_token(), Outcome::Released);
                guard.release().await.expect("release");
                Grant { holder: holder.to_owned(), kind: GrantKind::Mutex, path, token, start, end, outcome }
            })
        })
        .collect();
    let mut grants = Vec::new();
    for holder in holders {
        grants.push(holder.await.expect("a holder panicked"));
    }
    grants
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_locks_recorded_under_one_path_are_caught() {
    let base = unique_path("two-paths");
    let grants = hold_two_locks_at_once(&base).await;
    let truthful: History = grants.iter().cloned().collect();
    assert!(truthful.check().is_clean(), "{}", truthful.check());

    // The deliberate mistake: the second lock recorded under the first one's path.
    let first_path = grants[0].path.clone();
    let mislabelled: History = grants.into_iter().map(|g| Grant { path: first_path.clone(), ..g }).collect();
    let report = mislabelled.check();
    let overlap = report.violations().iter().find_map(|v| match v {
        Violation::Overlap { path, earlier, later } => Some((path, [earlier.holder.as_str(), later.holder.as_str()])),
        _ => None,
    });
    let (path, mut holders) = overlap.unwrap_or_else(|| panic!("the two holders at once were not caught: {report}"));
    holders.sort_unstable();
    assert_eq!((path, holders), (&first_path, ["first", "second"]));
}

/// `first` takes the lock and writes, `second` does after it, then `first` writes again with
/// its old token.
async fn write_with_an_old_token(store: &Store) -> Report {
    let path = unique_path("late");
    let history = History::new();
    let mut tokens = Vec::new();
    for holder in ["first", "second"] {
        let client = connect().await;
        let guard = Mutex::with_client(&client, &path).lock_timeout(TIMEOUT).await.expect("lock");
        let guard = history.time_grant(holder, GrantKind::Mutex, guard);
        let Ok(accepted) = guard.fenced_write(store.write(&path, guard.fencing_token())).await;
        assert!(accepted, "the write of {holder}, which holds the lock");
        tokens.push(guard.fencing_token());
        guard.release().await.expect("release");
    }
    let Ok(_) = history.time_write("first", &path, tokens[0], store.write(&path, tokens[0])).await;
    history.check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_with_an_old_token_accepted_is_caught() {
    let fenced = write_with_an_old_token(&Store::new(true)).await;
    assert!(fenced.is_clean(), "the fenced store refused the old token: {fenced}");

    let unfenced = write_with_an_old_token(&Store::new(false)).await;
    let late = unfenced.violations().iter().find_map(|v| match v {
        Violation::LateWriteAccepted { late, newer } => Some((late.writer.as_str(), newer.writer.as_str())),
        _ => None,
    });
    assert_eq!(late, Some(("first", "second")), "{unfenced}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_guard_records_how_its_grant_ended() {
    let client = connect().await;
    let mutex = Mutex::with_client(&client, unique_path("endings"));
    let history = History::new();

    let dropped = history.time_grant("dropped", GrantKind::Mutex, mutex.lock_timeout(TIMEOUT).await.unwrap());
    drop(dropped);
    let released = history.time_grant("released", GrantKind::Mutex, mutex.lock_timeout(TIMEOUT).await.unwrap());
    released.release().await.unwrap();

    let expired = history.time_grant("expired", GrantKind::Mutex, mutex.lock_timeout(TIMEOUT).await.unwrap());
    shared_server().expire_session(&client.zookeeper()).await.expect("expire the session");
    let reason = tokio::time::timeout(TIMEOUT, expired.lost()).await.expect("the loss is seen");
    let released = expired.release().await;
    assert!(matches!(released, Err(Error::Lost { .. })), "{released:?}");

    let grants = history.grants();
    let outcomes: Vec<(&str, &Outcome)> = grants.iter().map(|g| (g.holder.as_str(), &g.outcome)).collect();
    let lost = Outcome::Lost { reason: reason.to_string() };
    assert_eq!(outcomes, [("dropped", &Outcome::Dropped), ("released", &Outcome::Released), ("expired", &lost)]);
    // Each interval lies inside its hold: it starts after the acquire, ends before the release.
    for pair in grants.windows(2) {
        assert!(pair[0].start <= pair[0].end && pair[0].end < pair[1].start, "{pair:#?}");
    }
    history.check().assert_clean();
}
