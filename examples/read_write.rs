//! Seed 003's read/write lock (Curator's `InterProcessReadWriteLock`) on a catalog price:
//! readers share `#[zk_read_lock]`, a writer under `#[zk_write_lock]` is alone, the queue is fair,
//! code nested in the holder of the write lock may also take the read lock (write-then-read
//! re-entry, a downgrade), and a reader asking for the write lock is refused with
//! `Error::WouldDeadlock` instead of waiting for itself forever.
//!
//! ```text
//! cargo run --example read_write                      # a throwaway local ZooKeeper
//! ZK_LOCK_CONNECT=host:2181 cargo run --example read_write -- --readers 4 --work-ms 1000
//! ```
//!
//! Readers and writers are tokio tasks of this one process: each task is its own holder with its
//! own lock node, exactly as separate processes would be (only code nested in a holder's scope
//! re-enters), and one
//! process lets the price and the count of who is inside live in plain atomics that every task
//! checks on entry. The queue printed after each step is read from ZooKeeper with
//! `zk_lock::participants`. The program exits non-zero if a writer ever shared the lock, if the
//! readers could not all hold it at once, if the downgrade let a writer in, or if the upgrade was
//! not refused at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex as StdMutex};
use std::time::{Duration, Instant};

use tokio::sync::Barrier;
use tokio::task::JoinHandle;
use zk_lock::{zk_read_lock, zk_write_lock, Error, RwLock};

#[path = "common/embedded.rs"]
mod embedded;
#[path = "common/flags.rs"]
mod flags;
#[path = "common/shutdown.rs"]
mod shutdown;

const PRICE_LOCK: &str = "/demo/read-write/price";
/// How long anything here waits for something that should happen soon.
const PATIENCE: Duration = Duration::from_secs(10);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The catalog price, in cents, and who is inside the lock now.
static PRICE: AtomicU64 = AtomicU64::new(1000);
static READERS: AtomicUsize = AtomicUsize::new(0);
static WRITERS: AtomicUsize = AtomicUsize::new(0);
static STARTED: LazyLock<Instant> = LazyLock::new(Instant::now);
/// Broken rules seen by the tasks; any makes the program fail.
static VIOLATIONS: StdMutex<Vec<String>> = StdMutex::new(Vec::new());
/// Task names by tokio task id, to name the lock nodes' owners.
static NAMES: LazyLock<StdMutex<HashMap<u64, String>>> = LazyLock::new(Default::default);

macro_rules! say {
    ($($arg:tt)*) => {
        println!("  [{:>6.3}s] {}", STARTED.elapsed().as_secs_f64(), format_args!($($arg)*))
    };
}

fn violation(what: String) {
    println!("  VIOLATION: {what}");
    VIOLATIONS.lock().unwrap_or_else(|e| e.into_inner()).push(what);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |flag: &str, default: usize| flags::positive(&args, flag, default);
    let (readers, work) = (number("--readers", 3)?, Duration::from_millis(number("--work-ms", 500)? as u64));
    let zookeeper = embedded::ZooKeeper::configured_or_throwaway()?;
    run(&zookeeper.connect_string, readers, work).map_err(|e| e.to_string())?;
    let violations = VIOLATIONS.lock().unwrap_or_else(|e| e.into_inner());
    if !violations.is_empty() {
        return Err(format!("{} rule(s) broken: {}", violations.len(), violations.join("; ")).into());
    }
    println!("\nReaders shared the lock, writers held it alone, the downgrade kept the queued writer out,");
    println!("and the upgrade was refused at once.");
    Ok(())
}

#[tokio::main]
async fn run(connect_string: &str, readers: usize, work: Duration) -> Result<(), BoxError> {
    shutdown::after(run_scenes(connect_string, readers, work)).await
}

async fn run_scenes(connect_string: &str, readers: usize, work: Duration) -> Result<(), BoxError> {
    zk_lock::connect(connect_string).await?;
    println!("Readers and writers of the price at `{PRICE_LOCK}` on ZooKeeper at {connect_string}\n");
    LazyLock::force(&STARTED);
    readers_share_and_a_writer_is_alone(readers, work).await?;
    write_then_read(work).await?;
    read_then_write_is_refused().await
}

// --- scene 1 --------------------------------------------------------------------------------

#[zk_read_lock(path = "/demo/read-write/price")]
async fn read_price(reader: usize, hold: Option<Arc<Barrier>>, work: Duration) -> Result<u64, BoxError> {
    let reading = READERS.fetch_add(1, Ordering::SeqCst) + 1;
    let writing = WRITERS.load(Ordering::SeqCst);
    let price = PRICE.load(Ordering::SeqCst);
    say!("reader {reader} reads price {price} ({reading} reading, {writing} writing)");
    if writing != 0 {
        violation(format!("reader {reader} read while {writing} writer(s) wrote"));
    }
    // The first readers hold the lock until all of them do (only a shared lock lets them), then
    // until the writer and the later readers have queued, so that the story is the same every run.
    if let Some(hold) = hold {
        for _ in 0..2 {
            if tokio::time::timeout(PATIENCE, hold.wait()).await.is_err() {
                violation(format!("reader {reader} waited {PATIENCE:?} for the other readers to share the lock"));
                break;
            }
        }
    }
    tokio::time::sleep(work).await; // reading takes a while
    READERS.fetch_sub(1, Ordering::SeqCst);
    say!("reader {reader} is done");
    Ok(price)
}

#[zk_write_lock(path = "/demo/read-write/price")]
async fn set_price(writer: &str, price: u64, work: Duration) -> Result<(), BoxError> {
    let writing = WRITERS.fetch_add(1, Ordering::SeqCst) + 1;
    let reading = READERS.load(Ordering::SeqCst);
    say!("{writer} writes price {price} ({reading} reading, {writing} writing)");
    if reading != 0 || writing != 1 {
        violation(format!("{writer} wrote with {reading} reader(s) and {writing} writer(s) inside"));
    }
    PRICE.store(price, Ordering::SeqCst);
    tokio::time::sleep(work).await; // writing takes a while
    WRITERS.fetch_sub(1, Ordering::SeqCst);
    say!("{writer} is done");
    Ok(())
}

async fn readers_share_and_a_writer_is_alone(readers: usize, work: Duration) -> Result<(), BoxError> {
    println!("1. {readers} readers share the lock; a writer waits for them, and later readers wait for the writer");
    let hold = Arc::new(Barrier::new(readers + 1));
    let mut tasks = Vec::new();
    for reader in 1..=readers {
        tasks.push(spawn_named(format!("reader {reader}"), read_price(reader, Some(hold.clone()), work)));
    }
    tokio::time::timeout(PATIENCE, hold.wait()).await.map_err(|_| "the readers never held the lock together")?;

    tasks.push(spawn_named("writer A".into(), async move { set_price("writer A", 1200, work).await.map(|()| 0) }));
    wait_for_queue("writer A queues", |queue| queue.iter().filter(|n| n.contains("__WRIT__")).count() == 1).await?;
    for reader in readers + 1..=readers + 2 {
        tasks.push(spawn_named(format!("reader {reader}"), read_price(reader, None, work)));
    }
    wait_for_queue("readers queue behind writer A", |queue| queue.len() == readers + 3).await?;
    show_queue().await?;
    // Let the first readers finish.
    hold.wait().await;
    for task in tasks {
        task.await??;
    }
    println!();
    Ok(())
}

// --- scene 2 --------------------------------------------------------------------------------

async fn write_then_read(work: Duration) -> Result<(), BoxError> {
    println!("2. Write-then-read re-entry: the editor takes the write lock, then the read lock inside its scope,");
    println!("   and lets the write lock go while it keeps reading: a queued writer cannot slip in between");
    spawn_named("editor".into(), async move {
        let lock = RwLock::new(PRICE_LOCK);
        let write = lock.write().await?;
        WRITERS.fetch_add(1, Ordering::SeqCst);
        PRICE.store(1250, Ordering::SeqCst);
        say!("editor holds the write lock and sets price 1250");
        let asked = Instant::now();
        // Nested in the writer's scope, the read is a downgrade; outside it, it would queue.
        let read = write.scope(lock.read()).await?;
        READERS.fetch_add(1, Ordering::SeqCst);
        say!(
            "editor takes the read lock too: granted in {:.1?}, its read node shares the write node's sequence",
            asked.elapsed()
        );

        let writer_b =
            spawn_named("writer B".into(), async move { set_price("writer B", 1300, work).await.map(|()| 0) });
        wait_for_queue("writer B queues", |queue| queue.iter().filter(|n| n.contains("__WRIT__")).count() == 2).await?;
        show_queue().await?;

        WRITERS.fetch_sub(1, Ordering::SeqCst);
        write.release().await?;
        say!("editor releases the write lock and keeps the read lock");
        let queue = show_queue().await?;
        if !queue.iter().any(|p| p.kind == zk_lock::ParticipantKind::Write && p.role == zk_lock::Role::Waiter) {
            violation("writer B is not waiting while the editor still reads".to_owned());
        }
        tokio::time::sleep(work).await; // reading takes a while
        let price = PRICE.load(Ordering::SeqCst);
        say!("editor still reads price {price}: nobody wrote in between");
        if price != 1250 {
            violation(format!("the price changed to {price} while the editor held the read lock"));
        }
        READERS.fetch_sub(1, Ordering::SeqCst);
        read.release().await?;
        say!("editor releases the read lock");
        writer_b.await??;
        Ok(0)
    })
    .await??;
    println!();
    Ok(())
}

// --- scene 3 --------------------------------------------------------------------------------

async fn read_then_write_is_refused() -> Result<(), BoxError> {
    println!("3. Read-then-write: a reader asking for the write lock would wait for itself, so it is refused");
    spawn_named("reader-upgrader".into(), async {
        let lock = RwLock::new(PRICE_LOCK);
        let read = lock.read().await?;
        say!("reader-upgrader holds the read lock and asks for the write lock");
        let asked = Instant::now();
        match tokio::time::timeout(PATIENCE, read.scope(lock.write())).await {
            Ok(Err(error @ Error::WouldDeadlock { .. })) => {
                say!("refused in {:.1?} with Error::WouldDeadlock: {error}", asked.elapsed());
            }
            Ok(Err(other)) => return Err(other.into()),
            Ok(Ok(_write)) => violation("a reader was given the write lock while reading".to_owned()),
            Err(_) => violation(format!("the upgrade hung for {PATIENCE:?} instead of being refused")),
        }
        read.release().await?;
        Ok(0)
    })
    .await??;
    Ok(())
}

// --- helpers --------------------------------------------------------------------------------

/// Spawns `task` under `name`, the name `show_queue` gives the lock nodes it creates.
fn spawn_named(
    name: String,
    task: impl std::future::Future<Output = Result<u64, BoxError>> + Send + 'static,
) -> JoinHandle<Result<u64, BoxError>> {
    tokio::spawn(async move {
        if let Some(id) = tokio::task::try_id().and_then(|id| id.to_string().parse().ok()) {
            NAMES.lock().unwrap_or_else(|e| e.into_inner()).insert(id, name);
        }
        task.await
    })
}

/// Prints the lock's queue as ZooKeeper has it: who holds, who waits.
async fn show_queue() -> Result<Vec<zk_lock::Participant>, BoxError> {
    let queue = zk_lock::participants(PRICE_LOCK).await?;
    let names = NAMES.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let described: Vec<String> = queue
        .iter()
        .map(|p| {
            let owner = p.holder.as_ref().and_then(|h| names.get(&h.task?)).map_or("?", String::as_str);
            format!("{owner} ({} {} #{})", p.kind, p.role, p.sequence)
        })
        .collect();
    say!("queue: {}", described.join(", "));
    Ok(queue)
}

/// Waits, by watching the lock's children, until `done` holds for their names.
async fn wait_for_queue(what: &str, done: impl Fn(&[String]) -> bool) -> Result<(), BoxError> {
    let zk = zk_lock::default_client().await?.zookeeper();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (children, _, changed) = zk.get_and_watch_children(PRICE_LOCK).await?;
        if done(&children) {
            return Ok(());
        }
        tokio::time::timeout_at(deadline, changed.changed()).await.map_err(|_| format!("{what}: never happened"))?;
    }
}
