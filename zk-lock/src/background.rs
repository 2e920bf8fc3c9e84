//! A small runtime of our own for ZooKeeper sessions and background clean-up.
//!
//! Sessions opened by clients live here rather than on the caller's runtime, so a client
//! outlives the runtime that first used it (one `#[tokio::test]` runtime per test, a short-lived
//! `block_on`), and a guard dropped anywhere, even outside any runtime, can still have its node
//! deleted without blocking or panicking.

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

/// Runs `future` on the background runtime.
pub(crate) fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    HANDLE.spawn(future)
}
