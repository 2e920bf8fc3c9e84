//! How the examples end: when their work is done, or on Ctrl-C, they close their ZooKeeper
//! clients with `zk_lock::shutdown`, so the locks they hold pass to other processes at once
//! instead of after the session timeout.

use std::future::Future;

/// Runs `work` until it is done or Ctrl-C is pressed, then closes the registry's clients.
/// Ctrl-C ends the program with an error, after the clean shutdown.
pub async fn after<T, E: From<&'static str>>(work: impl Future<Output = Result<T, E>>) -> Result<T, E> {
    let outcome = tokio::select! {
        outcome = work => outcome,
        _ = tokio::signal::ctrl_c() => Err(E::from("interrupted by Ctrl-C; the locks held were handed on")),
    };
    zk_lock::shutdown().await;
    outcome
}
