//! Who is a holder: only code nested inside the holding code re-enters a lock. Sibling futures
//! of one task (`join!`, `join_all`, `buffer_unordered`, `select!`), spawned tasks and later
//! code of the task exclude like any other contender; two nested calls joined inside a body take
//! turns. Each pattern runs its bodies through [`Bodies`], which counts how many are inside at
//! once and records each grant in a `testing::History` (distinct fencing tokens per overlapping
//! body are the history's rule).
//!
//! A staggered start is made deterministic by starting the second call once the first body is
//! inside (not after a sleep): each body then yields so that every sibling runs up to where it
//! waits, and holds the lock for a while, so a sibling let in by mistake is inside at the same
//! time.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use tokio::sync::{watch, OnceCell};
use zk_lock::testing::{now_ns, Grant, GrantKind, History, Outcome};
use zk_lock::{
    zk_lock, zk_multi_lock, zk_read_lock, zk_semaphore, zk_write_lock, Client, Error, MultiLock, Mutex, RwLock,
    Semaphore, SemaphoreMutex,
};

use crate::support::{server, PATIENCE};

/// How long a body holds its lock after it let its siblings run.
const HOLD: Duration = Duration::from_millis(60);

/// The client every annotated function of this module names (`client = "holders"`).
async fn client() -> Client {
    static CLIENT: OnceCell<Client> = OnceCell::const_new();
    let install = || Client::builder(server().connect_string()).install_as("holders");
    CLIENT.get_or_init(|| async { install().await.expect("install the holders client") }).await.clone()
}

/// The bodies of one pattern: how many ran at once, and their grants.
struct Bodies {
    history: History,
    inside: AtomicUsize,
    most: AtomicUsize,
    entered: watch::Sender<usize>,
}

impl Bodies {
    fn new() -> Arc<Self> {
        let history = History::new();
        Arc::new(Self { history, inside: AtomicUsize::new(0), most: AtomicUsize::new(0), entered: watch::channel(0).0 })
    }

    /// A body under the lock of `kind` at `path` with `token`: in, let every sibling run up to
    /// where it waits, hold, out; its grant is recorded as `holder`'s.
    async fn body(&self, holder: &str, kind: GrantKind, path: &str, token: i64) {
        let start = now_ns();
        let now_inside = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now_inside, Ordering::SeqCst);
        self.entered.send_modify(|entered| *entered += 1);
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(HOLD).await;
        self.inside.fetch_sub(1, Ordering::SeqCst);
        let (holder, path, end) = (holder.to_owned(), path.to_owned(), now_ns());
        self.history.record(Grant { holder, kind, path, token, start, end, outcome: Outcome::Released });
    }

    /// Resolves once `n` bodies have entered.
    async fn entered(&self, n: usize) {
        let mut entered = self.entered.subscribe();
        bounded("the bodies entering", entered.wait_for(|entered| *entered >= n)).await.expect("sender kept");
    }

    /// Joins `first` with `second`, started once a body has entered (so once `first` holds the
    /// lock, when the lock excludes them): the staggered start, without a sleep.
    async fn staggered<A: Future, B: Future>(&self, first: A, second: B) -> (A::Output, B::Output) {
        let second = async {
            self.entered(1).await;
            second.await
        };
        tokio::join!(first, second)
    }

    /// The largest number of bodies inside at once, printed for the record.
    fn most(&self, pattern: &str) -> usize {
        let most = self.most.load(Ordering::SeqCst);
        eprintln!("pattern `{pattern}`: at most {most} bodies at once");
        most
    }

    /// Asserts that at most `limit` bodies ran at once and that the history is clean.
    fn assert_at_most(&self, pattern: &str, limit: usize) {
        assert!(self.most(pattern) <= limit, "`{pattern}`: more than {limit} bodies at once");
        let report = self.history.check();
        assert!(report.is_clean(), "`{pattern}`: {report}");
    }
}

/// Bounds a future that should finish, so that a broken lock fails the test instead of hanging.
async fn bounded<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future).await.unwrap_or_else(|_| panic!("{what} did not finish in {PATIENCE:?}"))
}

// --- the annotated functions ----------------------------------------------------------------

#[zk_lock(path = "/it-holders/<case>/<id>", client = "holders", timeout = "30s", guard = lock)]
async fn reserve(case: &str, id: u64, bodies: &Bodies) -> Result<i64, Error> {
    bodies.body(&format!("{case}-{id}"), GrantKind::Mutex, lock.path(), lock.fencing_token()).await;
    Ok(lock.fencing_token())
}

#[zk_write_lock(path = "/it-holders/<case>", client = "holders", timeout = "30s", guard = lock)]
async fn write_stock(case: &str, bodies: &Bodies) -> Result<(), Error> {
    bodies.body("writer", GrantKind::Write, lock.path(), lock.fencing_token()).await;
    Ok(())
}

#[zk_read_lock(path = "/it-holders/<case>", client = "holders", timeout = "30s", guard = lock)]
async fn read_stock(case: &str, bodies: &Bodies) -> Result<(), Error> {
    bodies.body("reader", GrantKind::Read, lock.path(), lock.fencing_token()).await;
    Ok(())
}

#[zk_semaphore(path = "/it-holders/<case>", permits = 1, client = "holders", timeout = "30s", guard = lock)]
async fn run_once(case: &str, bodies: &Bodies) -> Result<(), Error> {
    bodies.body("job", GrantKind::Semaphore { leases: 1 }, lock.path(), lock.fencing_token()).await;
    Ok(())
}

#[zk_semaphore(path = "/it-holders/<case>", permits = 2, client = "holders", timeout = "30s", guard = lock)]
async fn run_two(case: &str, bodies: &Bodies) -> Result<(), Error> {
    bodies.body("worker", GrantKind::Semaphore { leases: 2 }, lock.path(), lock.fencing_token()).await;
    Ok(())
}

#[zk_multi_lock(paths = ["/it-holders/<case>/a", "/it-holders/<case>/b"], client = "holders", timeout = "30s", guard = locks)]
async fn transfer(case: &str, bodies: &Bodies) -> Result<(), Error> {
    let path = format!("/it-holders/{case}/a");
    bodies.body("transfer", GrantKind::Mutex, &path, locks.fencing_tokens()[0].1).await;
    Ok(())
}

// --- sibling futures of one task exclude ----------------------------------------------------

#[tokio::test]
async fn joined_calls_started_at_once_exclude() {
    client().await;
    let bodies = Bodies::new();
    let (a, b) = tokio::join!(reserve("join-at-once", 42, &bodies), reserve("join-at-once", 42, &bodies));
    assert_ne!(a.unwrap(), b.unwrap(), "two grants, two tokens");
    bodies.assert_at_most("join!, same instant", 1);
}

#[tokio::test]
async fn joined_calls_staggered_exclude() {
    client().await;
    let bodies = Bodies::new();
    let (a, b) = bodies.staggered(reserve("join-staggered", 42, &bodies), reserve("join-staggered", 42, &bodies)).await;
    assert_ne!(a.unwrap(), b.unwrap(), "two grants, two tokens");
    bodies.assert_at_most("join!, second started inside the first", 1);
}

#[tokio::test]
async fn buffer_unordered_over_a_repeated_id_excludes() {
    client().await;
    let bodies = Bodies::new();
    let items = [1, 2, 1, 3, 1, 2];
    let results: Vec<_> =
        stream::iter(items).map(|id| reserve("buffered", id, &bodies)).buffer_unordered(4).collect().await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    bodies.assert_at_most("buffer_unordered(4), ids 1,2,1,3,1,2", 3);
    let report = bodies.history.check();
    assert_eq!(report.grants(), items.len(), "every call was a grant of its own");
}

#[tokio::test]
async fn join_all_and_a_select_loop_exclude() {
    client().await;
    let bodies = Bodies::new();
    let calls = (0..3).map(|_| reserve("join-all", 7, &bodies));
    assert!(futures::future::join_all(calls).await.iter().all(Result::is_ok));
    bodies.assert_at_most("join_all of 3 calls on one id", 1);

    let bodies = Bodies::new();
    let mut first = std::pin::pin!(reserve("select", 7, &bodies));
    let mut second = std::pin::pin!(async {
        bodies.entered(1).await;
        reserve("select", 7, &bodies).await
    });
    let (mut first_done, mut second_done) = (false, false);
    while !(first_done && second_done) {
        tokio::select! {
            done = &mut first, if !first_done => { done.unwrap(); first_done = true; }
            done = &mut second, if !second_done => { done.unwrap(); second_done = true; }
        }
    }
    bodies.assert_at_most("select! loop over two calls", 1);
}

#[tokio::test]
async fn a_write_body_and_a_joined_read_call_exclude_and_readers_still_share() {
    client().await;
    let bodies = Bodies::new();
    let (write, read) =
        bodies.staggered(write_stock("write-then-read", &bodies), read_stock("write-then-read", &bodies)).await;
    write.unwrap();
    read.unwrap();
    bodies.assert_at_most("write body joined with a read call", 1);

    let bodies = Bodies::new();
    let (a, b) = bodies.staggered(write_stock("write-write", &bodies), write_stock("write-write", &bodies)).await;
    a.unwrap();
    b.unwrap();
    bodies.assert_at_most("two write calls joined", 1);

    let bodies = Bodies::new();
    let (a, b) = bodies.staggered(read_stock("read-read", &bodies), read_stock("read-read", &bodies)).await;
    a.unwrap();
    b.unwrap();
    assert_eq!(bodies.most("two read calls joined"), 2, "readers share the lock");
}

#[tokio::test]
async fn semaphore_siblings_wait_for_a_permit() {
    client().await;
    let bodies = Bodies::new();
    let (a, b) = bodies.staggered(run_once("one-permit", &bodies), run_once("one-permit", &bodies)).await;
    a.unwrap();
    b.expect("a sibling waits for the permit: it is no nested acquisition");
    bodies.assert_at_most("#[zk_semaphore(permits = 1)] siblings", 1);

    let bodies = Bodies::new();
    let calls = (0..5).map(|_| run_two("two-permits", &bodies));
    assert!(futures::future::join_all(calls).await.iter().all(Result::is_ok));
    bodies.assert_at_most("5 joined calls of a 2-permit semaphore", 2);
    assert_eq!(bodies.most("5 joined calls of a 2-permit semaphore"), 2, "two permits are used");
}

#[tokio::test]
async fn multi_lock_siblings_exclude() {
    client().await;
    let bodies = Bodies::new();
    let (a, b) = bodies.staggered(transfer("multi", &bodies), transfer("multi", &bodies)).await;
    a.unwrap();
    b.unwrap();
    bodies.assert_at_most("two #[zk_multi_lock] calls joined", 1);
}

// --- the API: guards, siblings, moved guards --------------------------------------------------

/// An API section: lock, the body, release.
async fn api_section(mutex: &Mutex, bodies: &Bodies, holder: &str) -> Result<(), Error> {
    let guard = mutex.lock_timeout(PATIENCE).await?;
    bodies.body(holder, GrantKind::Mutex, guard.path(), guard.fencing_token()).await;
    guard.release().await
}

#[tokio::test]
async fn api_sections_joined_exclude() {
    let client = client().await;
    let mutex = Mutex::with_client(&client, "/it-holders/api-sections");
    let bodies = Bodies::new();
    let (a, b) = bodies.staggered(api_section(&mutex, &bodies, "first"), api_section(&mutex, &bodies, "second")).await;
    a.unwrap();
    b.unwrap();
    bodies.assert_at_most("two API sections joined", 1);

    for (recipe, pattern) in [("rw", "two RwLock write sections joined"), ("sm", "two SemaphoreMutex sections joined")]
    {
        let bodies = Bodies::new();
        let path = format!("/it-holders/api-{recipe}");
        let section = |holder: &'static str| {
            let (client, path, bodies) = (client.clone(), path.clone(), bodies.clone());
            async move {
                if holder == "second" {
                    bodies.entered(1).await;
                }
                if recipe == "rw" {
                    let guard = RwLock::with_client(&client, &path).write_timeout(PATIENCE).await?;
                    bodies.body(holder, GrantKind::Write, guard.path(), guard.fencing_token()).await;
                    guard.release().await
                } else {
                    let guard = SemaphoreMutex::with_client(&client, &path).lock_timeout(PATIENCE).await?;
                    bodies.body(holder, GrantKind::Semaphore { leases: 1 }, guard.path(), guard.fencing_token()).await;
                    guard.release().await
                }
            }
        };
        let (a, b) = tokio::join!(section("first"), section("second"));
        a.unwrap();
        b.unwrap();
        bodies.assert_at_most(pattern, 1);
    }
}

#[tokio::test]
async fn a_task_that_moved_its_guard_to_a_worker_waits_for_it() {
    let client = client().await;
    let mutex = Mutex::with_client(&client, "/it-holders/moved");
    let bodies = Bodies::new();
    let guard = mutex.lock().await.unwrap();
    let worker = {
        let bodies = bodies.clone();
        tokio::spawn(async move {
            bodies.body("worker", GrantKind::Mutex, guard.path(), guard.fencing_token()).await;
            guard.release().await
        })
    };
    bodies.entered(1).await;
    api_section(&mutex, &bodies, "the task that moved it").await.unwrap();
    worker.await.unwrap().unwrap();
    bodies.assert_at_most("a guard moved to a spawned worker, the task locks again", 1);

    // A semaphore mutex given away holds nothing of the task's: it waits, not WouldDeadlock.
    let lock = SemaphoreMutex::with_client(&client, "/it-holders/moved-sm");
    let given = lock.lock().await.unwrap();
    let worker = tokio::spawn(async move {
        tokio::task::yield_now().await;
        given.release().await
    });
    let again = lock.lock_timeout(PATIENCE).await.expect("the task holds nothing: it waits its turn");
    worker.await.unwrap().unwrap();
    again.release().await.unwrap();
}

#[tokio::test]
async fn a_spawned_task_inside_a_scope_is_no_nested_code() {
    let client = client().await;
    let mutex = Mutex::with_client(&client, "/it-holders/spawned-in-scope");
    let guard = mutex.lock().await.unwrap();
    let inner = guard.scope(async {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.try_lock().await.map(drop) }).await.unwrap()
    });
    assert!(matches!(inner.await, Err(Error::Busy { .. })), "a spawned task is another holder");
    guard.release().await.unwrap();
}

// --- nested code re-enters, and nested siblings take turns -----------------------------------

#[zk_lock(path = "/it-holders/<case>/<id>", client = "holders", timeout = "30s", guard = lock)]
async fn place(case: &str, id: u64, nested: &Bodies) -> Result<(i64, Vec<i64>), Error> {
    let outer = lock.fencing_token();
    // Two nested calls joined inside the body: siblings of each other, nested in this holder.
    let (a, b) = tokio::join!(reserve(case, id, nested), reserve(case, id, nested));
    Ok((outer, vec![a?, b?, reserve(case, id, nested).await?]))
}

#[tokio::test]
async fn nested_calls_re_enter_and_nested_siblings_take_turns() {
    client().await;
    let nested = Bodies::new();
    let (outer, inner) = bounded("place", place("nested", 1, &nested)).await.unwrap();
    assert_eq!(inner, [outer; 3], "nested calls share the holder's node and token");
    assert_eq!(nested.most("two nested calls joined inside a body"), 1, "they took turns");
}

#[tokio::test]
async fn code_in_a_guards_scope_re_enters_and_nested_siblings_take_turns() {
    let client = client().await;
    let mutex = Mutex::with_client(&client, "/it-holders/api-scope");
    let guard = mutex.lock().await.unwrap();
    let nested = Bodies::new();
    let nested_section = || async {
        let inner = mutex.try_lock().await?; // re-entry: no wait, so try_lock succeeds
        assert_eq!(inner.fencing_token(), guard.fencing_token());
        nested.body("nested", GrantKind::Mutex, inner.path(), inner.fencing_token()).await;
        inner.release().await
    };
    let (a, b) = bounded("the scope", guard.scope(async { tokio::join!(nested_section(), nested_section()) })).await;
    // The second nested section tries while the first has the loan: `Busy`, as a try should be.
    assert!(a.is_ok() != b.is_ok(), "{a:?} {b:?}");
    let (mutex, nested) = (&mutex, &nested);
    let timed = |holder| async move {
        let inner = mutex.lock_timeout(PATIENCE).await?;
        nested.body(holder, GrantKind::Mutex, inner.path(), inner.fencing_token()).await;
        inner.release().await
    };
    let (a, b) = bounded("the scope", guard.scope(async { tokio::join!(timed("x"), timed("y")) })).await;
    a.unwrap();
    b.unwrap();
    assert_eq!(nested.most("two nested sections joined in a guard's scope"), 1, "they took turns");
    assert!(guard.is_held());
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_downgrade_is_a_writers_nested_read() {
    let client = client().await;
    let lock = RwLock::with_client(&client, "/it-holders/downgrade");
    let write = lock.write().await.unwrap();
    let read = write.scope(lock.read()).await.expect("a read nested in the writer downgrades");
    write.release().await.unwrap();
    assert!(read.is_held());
    // Nested in the reader, a write would wait for itself: refused at once.
    assert!(matches!(read.scope(lock.write()).await, Err(Error::WouldDeadlock { .. })));
    read.release().await.unwrap();

    // A semaphore mutex nested in its own holder would wait for itself: refused at once.
    let lock = SemaphoreMutex::with_client(&client, "/it-holders/nested-sm");
    let guard = lock.lock().await.unwrap();
    assert!(matches!(guard.scope(lock.lock()).await, Err(Error::WouldDeadlock { .. })));
    guard.release().await.unwrap();

    // A semaphore's nested acquisition takes a lease of its own.
    let semaphore = Semaphore::with_client(&client, "/it-holders/nested-semaphore", 2);
    let permit = semaphore.acquire().await.unwrap();
    let nested = permit.scope(semaphore.try_acquire()).await.expect("a second lease");
    assert_ne!(nested.fencing_token(), permit.fencing_token());
    assert!(matches!(permit.scope(semaphore.try_acquire()).await, Err(Error::Busy { .. })), "two leases out");
    nested.release().await.unwrap();
    permit.release().await.unwrap();

    // A multi-lock nested in the holder of one of its members borrows that member.
    let one = Mutex::with_client(&client, "/it-holders/multi-nested/a");
    let held = one.lock().await.unwrap();
    let both = MultiLock::with_client(&client, ["/it-holders/multi-nested/a", "/it-holders/multi-nested/b"]);
    let nested = held.scope(both.try_lock()).await.expect("member a re-enters, b is free");
    assert_eq!(nested.fencing_tokens()[0].1, held.fencing_token());
    nested.release().await.unwrap();
    held.release().await.unwrap();
}

// --- red-team cases ---------------------------------------------------------------------------

#[tokio::test]
async fn a_downgrade_after_an_unnoticed_loss_puts_no_reader_beside_the_new_writer() {
    let path = "/it-holders/downgrade-after-loss";
    // A long session timeout: the heartbeat (every 1/9 of it) does not notice the deletion first.
    let a = crate::support::client_with_session_timeout(Duration::from_secs(30)).await;
    let b = crate::support::new_client().await;
    let write = RwLock::with_client(&a, path).write().await.unwrap();
    let queued = tokio::spawn({
        let b = b.clone();
        async move { RwLock::with_client(&b, path).write_timeout(PATIENCE).await }
    });
    crate::support::queue_of(&b, path, 2).await;
    // An operator clears the "stuck" lock: B is granted.
    b.zookeeper().delete(write.node_path(), None).await.unwrap();
    let b_write = queued.await.unwrap().expect("B is granted once A's node is gone");
    let downgrade = write.scope(RwLock::with_client(&a, path).read()).await;
    assert!(
        matches!(downgrade, Err(Error::Lost { reason: zk_lock::LostReason::NodeDeleted, .. })),
        "the writer's node is gone: {downgrade:?}"
    );
    let queue = crate::support::queue_of(&b, path, 1).await;
    assert!(b_write.node_path().ends_with(&queue[0]), "only B's writer is left: {queue:?}");
    assert!(b_write.is_held());
    b_write.release().await.unwrap();
    drop(write);
}

#[tokio::test]
async fn a_multi_lock_waits_the_default_timeout_once_for_all_members() {
    const DEFAULT: Duration = Duration::from_secs(1);
    let paths = ["/it-holders/multi-deadline/a", "/it-holders/multi-deadline/b"];
    let holder = crate::support::new_client().await;
    let holder = &holder;
    let held =
        futures::future::join_all(paths.map(|path| async move { Mutex::with_client(holder, path).lock().await }));
    let held: Vec<_> = held.await.into_iter().map(Result::unwrap).collect();
    let waiter = Client::builder(server().connect_string()).default_timeout(DEFAULT).connect().await.unwrap();
    // The members are freed one after the other, each before one default timeout since the last.
    let freeing = tokio::spawn(async move {
        for guard in held {
            tokio::time::sleep(DEFAULT * 7 / 10).await;
            guard.release().await.unwrap();
        }
    });
    let started = tokio::time::Instant::now();
    let outcome = MultiLock::with_client(&waiter, paths).lock().await;
    let waited = started.elapsed();
    assert!(matches!(outcome, Err(Error::Timeout { .. })), "the default timeout counts for all members: {outcome:?}");
    assert!(waited < DEFAULT * 13 / 10, "gave up after {waited:?}, not one default timeout");
    freeing.await.unwrap();
}

#[tokio::test]
async fn a_guard_that_left_its_scope_keeps_the_loan_and_a_scope_is_read_where_it_is_polled() {
    let client = client().await;
    let mutex = Mutex::with_client(&client, "/it-holders/loan-outlives-scope");
    let guard = mutex.lock().await.unwrap();
    let escaped = guard.scope(mutex.lock()).await.unwrap();
    let meanwhile = guard.scope(mutex.try_lock()).await;
    assert!(matches!(meanwhile, Err(Error::Busy { .. })), "the guard that left its scope has the loan: {meanwhile:?}");
    drop(escaped);
    drop(guard.scope(mutex.try_lock()).await.expect("the loan is back"));

    // A scope's future made outside `guard`'s scope, and awaited inside it, is nested in `guard`.
    let other = Mutex::with_client(&client, "/it-holders/loan-outlives-scope-other").lock().await.unwrap();
    let made_outside = other.scope(mutex.try_lock());
    let inner = guard.scope(made_outside).await.expect("nested in `guard` where it is polled");
    assert_eq!(inner.fencing_token(), guard.fencing_token());
    drop((inner, other));
    guard.release().await.unwrap();
}
