//! A small runtime of our own for what must not depend on the caller's runtime: each session's
//! monitor (a stuck caller's runtime still has its locks declared lost in time), the retirement
//! of sessions (also of one whose runtime shut down), background deletes (a guard dropped
//! anywhere, even outside any runtime, still has its node deleted without blocking or
//! panicking), and the I/O of sessions opened outside a runtime that can run it. A session's own
//! I/O runs on the runtime that opened it (`session::io_runtime`).

use std::future::Future;
use std::sync::LazyLock;

use tokio::runtime::{Builder, Handle};
use tokio::task::JoinHandle;

static HANDLE: LazyLock<Handle> = LazyLock::new(|| {
    let runtime = Builder::new_current_thread()
        .enable_all()
        .thread_name("zk-lock-io")
        .build()
        .expect("zk-lock: cannot build its background tokio runtime");
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("zk-lock-io".into())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .expect("zk-lock: cannot start its background thread");
    handle
});

/// Runs `future` on the caller's tokio runtime, or on the background runtime outside any.
pub(crate) fn spawn_here<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match Handle::try_current() {
        Ok(runtime) => runtime.spawn(future),
        Err(_) => HANDLE.spawn(future),
    }
}

/// Lets a zookeeper-client watch (a future awaiting a `OneshotWatcher`) fire in the background,
/// rather than drop it, which would cost a request to remove it from the server: on the caller's
/// runtime, which runs the watch's session I/O (a session is the runtime's that uses it), so that
/// it is never polled after that I/O ended, when zookeeper-client panics in it (its `recv`
/// unwraps the cancelled channel). Outside any runtime it is dropped. Never on the background
/// runtime, which outlives every other.
pub(crate) fn let_watch_fire<F>(watch: F)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if let Ok(runtime) = Handle::try_current() {
        // A runtime that is shutting down drops the task without polling it.
        drop(runtime.spawn(watch));
    }
}

/// Runs `future` on the background runtime.
pub(crate) fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    HANDLE.spawn(future)
}
