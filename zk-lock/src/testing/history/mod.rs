//! The safety checker for your own tests: record every grant and every fenced write, in one
//! process or several, then check that the locks behaved.

use std::sync::{Mutex, PoisonError};

mod check;
mod record;
mod recording;
mod timing;

pub use check::{Report, Violation};
pub use record::{FencedWrite, Grant, GrantKind, Outcome, ParseRecordError, Record};
pub use recording::GrantRecording;
pub use timing::{now_ns, TimedGuard, TimedLock};

/// The grants of locks and the fenced writes made under them, and the checker that judges them.
///
/// Record each grant (lock path, [`GrantKind`], fencing token, start and end on the shared
/// clock [`now_ns`], [`Outcome`]) and each write to a fenced store (token, accepted or
/// refused), then [`check`](Self::check). The report lists every broken rule, per lock path:
///
/// - **Exclusion**: a mutex or write grant overlaps no other grant of its path (readers may
///   overlap readers), and a semaphore never has more permits out than its lease count. A
///   count that changes (a [`SharedCount`](crate::SharedCount)) is checked as the recipe obeys
///   it: each permit records the count it was granted under, and of the permits out at once, at
///   most `L` were granted under a count of `L` or less, for every `L` (the last of them to be
///   granted counted the others against its count; a lowered count takes no lease back).
/// - **Token order**: fencing tokens are unique per path and grow in grant order where the lock
///   orders its grants: between exclusive grants, and between a write grant and the other
///   grants of its read/write lock (readers sharing the lock have no order among themselves, nor
///   have semaphore permits).
/// - **One recipe per path**: a path is granted by one recipe (both sides of one read/write
///   lock, a semaphore's permits whatever their counts). When it is not, each recipe's grants
///   are still checked as if alone on the path.
/// - **Fencing**: a mutex or write holder that held the lock throughout its write, and did not
///   see it lost, has the write accepted; and no write with an old token is accepted after a
///   write with a newer token of the same path was.
///
/// A grant whose holder saw the lock lost ([`Outcome::Lost`]) is exempt from the exclusion and
/// order rules: the lock was taken from it, and it was told. Its later writes still count.
///
/// Recording is `Send + Sync`: share one history (`Arc<History>`) between tasks, and use
/// [`time_grant`](Self::time_grant) and [`time_write`](Self::time_write) to take the times. A
/// worker process records into a [`printing`](Self::printing) history, which prints each
/// [`Record`] as a line on stdout; the test reads the worker's stdout and hands each line to
/// [`record_output_line`](Self::record_output_line).
///
/// # Example
///
/// Several sessions take a real lock; each holder writes to a fenced store with its token:
///
/// ```no_run
/// use std::sync::Arc;
/// use zk_lock::testing::{shared_server, GrantKind, History};
///
/// # async fn fenced_store_write(key: &str, token: i64) -> Result<bool, std::io::Error> { Ok(true) }
/// #[tokio::test]
/// async fn only_one_holder_at_a_time() -> Result<(), Box<dyn std::error::Error>> {
///     let history = Arc::new(History::new());
///     let mut tasks = Vec::new();
///     for worker in 0..4 {
///         let history = history.clone();
///         tasks.push(tokio::spawn(async move {
///             let client = zk_lock::Client::builder(shared_server().connect_string()).connect().await?;
///             let mutex = zk_lock::Mutex::with_client(&client, "/test/only-one");
///             for _ in 0..10 {
///                 let guard = history.time_grant(format!("worker-{worker}"), GrantKind::Mutex, mutex.lock().await?);
///                 guard.fenced_write(fenced_store_write("stock", guard.fencing_token())).await?;
///                 guard.release().await?;
///             }
///             Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
///         }));
///     }
///     for task in tasks {
///         task.await?.map_err(|e| e.to_string())?;
///     }
///     let report = history.check();
///     assert!(report.is_clean(), "{report}");
///     Ok(())
/// }
/// # fn main() {}
/// ```
///
/// The checker on a crafted history, and the line form a worker process prints:
///
/// ```
/// use zk_lock::testing::{Grant, GrantKind, History, Outcome, Record, Violation};
///
/// let grant = |holder: &str, token, start, end| Grant {
///     holder: holder.to_owned(),
///     kind: GrantKind::Mutex,
///     path: "/jobs/a".to_owned(),
///     token,
///     start,
///     end,
///     outcome: Outcome::Released,
/// };
/// let history: History = [grant("w1", 10, 100, 200), grant("w2", 12, 150, 300)].into_iter().collect();
/// let report = history.check();
/// assert!(matches!(report.violations(), [Violation::Overlap { .. }]));
/// assert!(report.to_string().contains("`/jobs/a`: two holders at once for 50 ns: w1"), "{report}");
///
/// let line = Record::from(grant("w1", 10, 100, 200)).to_string();
/// assert_eq!(line, "@zk-lock-history grant holder=w1 kind=mutex path=/jobs/a token=10 start=100 end=200 outcome=released");
/// assert_eq!(line.parse::<Record>()?, Record::Grant(grant("w1", 10, 100, 200)));
/// # Ok::<(), zk_lock::testing::ParseRecordError>(())
/// ```
#[derive(Debug, Default)]
pub struct History {
    records: Mutex<Records>,
    /// Whether each record is also printed on stdout.
    print: bool,
}

#[derive(Debug, Default)]
struct Records {
    grants: Vec<Grant>,
    writes: Vec<FencedWrite>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// An empty history that also prints each record on stdout as one line (see [`Record`]),
    /// for a worker process whose test collects its lines with
    /// [`record_output_line`](Self::record_output_line). Run the worker's test with
    /// `--nocapture`: libtest otherwise keeps what it prints.
    pub fn printing() -> History {
        History { print: true, ..History::default() }
    }

    fn records(&self) -> std::sync::MutexGuard<'_, Records> {
        // Recording never panics while it holds the lock; a poisoned lock is still whole.
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a [`Grant`] or a [`FencedWrite`].
    pub fn record(&self, record: impl Into<Record>) {
        let record = record.into();
        if self.print {
            println!("{record}");
        }
        let mut records = self.records();
        match record {
            Record::Grant(grant) => records.grants.push(grant),
            Record::Write(write) => records.writes.push(write),
        }
    }

    /// Records the [`Record`] a line of a worker's output holds, if it holds one (see
    /// [`Record::find_in`]); returns whether it did.
    ///
    /// # Errors
    ///
    /// [`ParseRecordError`] when the line holds a malformed record.
    pub fn record_output_line(&self, line: &str) -> Result<bool, ParseRecordError> {
        match Record::find_in(line).transpose()? {
            Some(record) => {
                self.record(record);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The grants recorded so far, in the order they were recorded.
    pub fn grants(&self) -> Vec<Grant> {
        self.records().grants.clone()
    }

    /// How many grants were recorded so far.
    pub fn grant_count(&self) -> usize {
        self.records().grants.len()
    }

    /// The fenced writes recorded so far, in the order they were recorded.
    pub fn fenced_writes(&self) -> Vec<FencedWrite> {
        self.records().writes.clone()
    }

    /// Checks every rule (see [`History`]) on what was recorded so far.
    pub fn check(&self) -> Report {
        let records = self.records();
        check::check(&records.grants, &records.writes)
    }
}

impl<R: Into<Record>> FromIterator<R> for History {
    fn from_iter<I: IntoIterator<Item = R>>(records: I) -> History {
        let history = History::new();
        records.into_iter().for_each(|record| history.record(record));
        history
    }
}
