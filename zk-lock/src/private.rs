//! Support for the code the attributes generate. Not public API: no semver promises.
//!
//! An annotated function renders its path (`Template`, `paths`), acquires the lock with `Lock`,
//! runs its body with `abort_on_lost` or `ignore_lost`, and drops the guard: the delete request
//! is sent before the function returns and its reply awaited in the background. Dropping the
//! function's future at any point (cancellation, panic) drops the guard the same way. A failure
//! to take or keep the lock becomes the function's error through `LockError::lock_error`. The crate docs
//! show a whole expansion.

use std::fmt::{self, Display, Write as _};
use std::future::Future;
use std::ops::Range;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

pub use inventory;

use crate::client::{CallDeadline, Client};
pub use crate::declared::{Declaration, Declared};
use crate::error::{Error, Result};
use crate::holds::HeldNode;
use crate::path::{validate_lock_path, validate_rendered_value};
use crate::recipes::multi_lock::{MultiGuard, MultiLock, MultiMember};
use crate::recipes::mutex::{Mutex, MutexGuard};
use crate::recipes::patience::Patience;
use crate::recipes::rwlock::{ReadGuard, RwLock, WriteGuard};
use crate::recipes::semaphore::{Semaphore, SemaphorePermit};
use crate::recipes::semaphore_mutex::{SemaphoreMutex, SemaphoreMutexGuard};
use crate::recipes::target::LockTarget;
use crate::registry::{self, named_client};

/// A value rendered into a lock path template: anything with [`Display`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be rendered into a lock path: it does not implement `Display`",
    label = "a placeholder of this path is rendered with `Display`",
    note = "implement `Display` for `{Self}`, or name a field that has it, like `<req.user_id>`"
)]
pub trait PathValue {
    /// Appends the value to `out`.
    ///
    /// # Errors
    ///
    /// When the `Display` implementation fails.
    fn render(&self, out: &mut String) -> fmt::Result;
}

impl<T: Display + ?Sized> PathValue for T {
    fn render(&self, out: &mut String) -> fmt::Result {
        write!(out, "{self}")
    }
}

/// A lock path being rendered from a template such as `/product_<id>`.
#[derive(Debug, Default)]
pub struct Template {
    path: String,
    /// Each placeholder with the bytes of `path` its value took.
    values: Vec<(&'static str, Range<usize>)>,
    /// A `Display` implementation failed: the placeholder.
    failed: Option<&'static str>,
}

impl Template {
    /// An empty path.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends literal text of the template.
    #[must_use]
    pub fn lit(mut self, text: &'static str) -> Self {
        self.path.push_str(text);
        self
    }

    /// Appends the value of the placeholder `<name>`.
    #[must_use]
    pub fn value<T: PathValue + ?Sized>(mut self, name: &'static str, value: &T) -> Self {
        let start = self.path.len();
        if value.render(&mut self.path).is_err() {
            self.failed.get_or_insert(name);
        }
        self.values.push((name, start..self.path.len()));
        self
    }

    /// The rendered path.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] if a value would change the shape of the path (empty, `.`, `..`,
    /// containing `/` or characters ZooKeeper rejects), or its `Display` failed. The whole path is
    /// checked again when the lock is taken.
    pub fn finish(self) -> Result<String> {
        if let Some(name) = self.failed {
            return Err(Error::invalid_path(
                &self.path,
                format!("the `Display` implementation of the value of `<{name}>` returned an error"),
            ));
        }
        for (name, range) in &self.values {
            validate_rendered_value(&self.path, name, &self.path[range.clone()])?;
        }
        Ok(self.path)
    }
}

/// The rendered paths of `#[zk_multi_lock]`, or the first error.
///
/// # Errors
///
/// The first error of the templates.
pub fn paths<const N: usize>(paths: [Result<String>; N]) -> Result<Vec<String>> {
    paths.into_iter().collect()
}

/// How an annotated function takes its lock: where it is declared, which client, how
/// patiently. Every attribute goes the same way: the rendered path, its declaration and the
/// named (or default) client make the recipe's target, and the recipe acquires it with the
/// attribute's patience.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lock {
    /// The function's declarations, one per path: the sites lock-order checking reports.
    sites: &'static [Declaration],
    client: Option<&'static str>,
    patience: Patience,
    max_hold: Option<Duration>,
}

impl Lock {
    /// The lock declared at `sites` (one per path), with the default client and timeout.
    #[must_use]
    pub const fn declared(sites: &'static [Declaration]) -> Self {
        Self { sites, client: None, patience: Patience::Default, max_hold: None }
    }

    /// A lock declared nowhere, as one taken through the API, with the default client and
    /// timeout.
    #[must_use]
    pub const fn new() -> Self {
        Self::declared(&[])
    }

    /// `client = "name"`.
    #[must_use]
    pub const fn client(mut self, name: &'static str) -> Self {
        self.client = Some(name);
        self
    }

    /// `timeout = ".."`, as whole seconds and nanoseconds.
    #[must_use]
    pub const fn timeout(mut self, secs: u64, nanos: u32) -> Self {
        self.patience = Patience::Timeout(Duration::new(secs, nanos));
        self
    }

    /// `max_hold = ".."`.
    #[must_use]
    pub const fn max_hold(mut self, secs: u64, nanos: u32) -> Self {
        self.max_hold = Some(Duration::new(secs, nanos));
        self
    }

    /// The client of a call that takes the locks at `paths` with `patience`: the one the
    /// attribute names, or else the default client, connected on its first use before the
    /// call's timeout passes (`patience` counts from the call's start: the timeout is the call's
    /// whole deadline). The paths are checked first, so a bad one is reported before anything
    /// is connected.
    async fn call_client(self, patience: Patience, paths: &[&str]) -> Result<Client> {
        if let Some(name) = self.client {
            return named_client(name);
        }
        for path in paths {
            validate_lock_path(path)?;
        }
        let call = patience.connect_deadline().map(|at| {
            let timeout = patience.timeout().unwrap_or_default();
            let locks = paths.iter().map(|path| format!("`{path}`")).collect::<Vec<_>>().join(", ");
            let lock = if paths.len() == 1 { "lock" } else { "locks" };
            let what = format!(
                "the call's timeout of {timeout:?} for {lock} {locks} (it counts connecting the default client)"
            );
            CallDeadline { at, what }
        });
        registry::default_client_by(call).await
    }

    /// The lock at the rendered `path` on the call's client, and the patience of its
    /// acquisition, counted from the call's start.
    async fn target(self, path: Result<String>) -> Result<(LockTarget, Patience)> {
        let path = path?;
        let patience = self.patience.counted_from_now();
        let client = self.call_client(patience, &[&path]).await?;
        let mut target = LockTarget::new(Some(&client), path).declared_at(self.sites.first());
        if let Some(limit) = self.max_hold {
            target.set_max_hold(limit);
        }
        Ok((target, patience))
    }

    /// `#[zk_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`Mutex::lock`], the timeout bounding the first connection of
    /// the default client too.
    pub async fn mutex(self, path: Result<String>) -> Result<MutexGuard> {
        let (target, patience) = self.target(path).await?;
        Mutex::on(target).acquire(patience).await
    }

    /// `#[zk_read_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`RwLock::read`], the timeout bounding the first connection
    /// of the default client too.
    pub async fn read(self, path: Result<String>) -> Result<ReadGuard> {
        let (target, patience) = self.target(path).await?;
        RwLock::on(target).acquire_read(patience).await
    }

    /// `#[zk_write_lock]`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`RwLock::write`], the timeout bounding the first connection
    /// of the default client too.
    pub async fn write(self, path: Result<String>) -> Result<WriteGuard> {
        let (target, patience) = self.target(path).await?;
        RwLock::on(target).acquire_write(patience).await
    }

    /// `#[zk_semaphore(permits = N)]` with `N > 1`: one lease of `N`.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`Semaphore::acquire`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn semaphore(self, path: Result<String>, permits: u32) -> Result<SemaphorePermit> {
        let (target, patience) = self.target(path).await?;
        Semaphore::on(target, permits).acquire_one(patience).await
    }

    /// `#[zk_semaphore]` with one permit: the lease of a [`SemaphoreMutex`], so that a call
    /// nested in its body fails at once instead of waiting for itself.
    ///
    /// # Errors
    ///
    /// The rendering error, or as [`SemaphoreMutex::lock`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn semaphore_mutex(self, path: Result<String>) -> Result<SemaphoreMutexGuard> {
        let (target, patience) = self.target(path).await?;
        SemaphoreMutex::on(target).acquire(patience).await
    }

    /// `#[zk_multi_lock]`.
    ///
    /// # Errors
    ///
    /// The first rendering error, or as [`MultiLock::lock`], the timeout bounding the first
    /// connection of the default client too.
    pub async fn multi(self, paths: Result<Vec<String>>) -> Result<MultiGuard> {
        let paths = paths?;
        let (patience, max_hold) = (self.patience.counted_from_now(), self.max_hold);
        let client = self.call_client(patience, &paths.iter().map(String::as_str).collect::<Vec<_>>()).await?;
        let targets = paths
            .into_iter()
            .enumerate()
            .map(|(i, path)| Mutex::on(LockTarget::new(Some(&client), path).declared_at(self.sites.get(i))));
        let lock = MultiLock::from_members(targets.map(MultiMember::from));
        let lock = match max_hold {
            Some(limit) => lock.with_max_hold(limit),
            None => lock,
        };
        lock.acquire(patience).await
    }
}

/// The error type of an annotated function: anything [`Error`] converts into.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold the lock's errors: it does not implement `From<zk_lock::Error>`",
    label = "the error type of this return type needs `From<zk_lock::Error>`",
    note = "the function returns `zk_lock::Error` (`Busy`, `Timeout`, `Lost`, ...) through its own error type: implement `From<zk_lock::Error>` for `{Self}` (with thiserror, a `#[from] zk_lock::Error` variant), or return `zk_lock::Result<T>` or `anyhow::Result<T>`"
)]
pub trait LockError {
    /// `error` as this type.
    fn lock_error(error: Error) -> Self;
}

impl<E: From<Error>> LockError for E {
    fn lock_error(error: Error) -> Self {
        E::from(error)
    }
}

/// A guard an annotated function holds while its body runs.
pub trait AnnotatedGuard {
    /// Resolves with [`Error::Lost`] when the lock is lost; never, if it is released first.
    fn lost_error(&self) -> impl Future<Output = Error> + Send + 'static;

    /// Runs `body` nested inside the holder: the code that may re-enter the lock.
    fn nest<F: Future>(&self, body: F) -> impl Future<Output = F::Output>;

    /// The body finished (returned, or was aborted by a loss): lets the lock go, as a drop
    /// does (the release is sent now, its reply awaited in the background), telling the
    /// testing kit's recordings that this was the function's end, not a cancellation.
    fn finish(self);
}

macro_rules! held_through_lost {
    ($($guard:ty),*) => {$(
        impl AnnotatedGuard for $guard {
            fn lost_error(&self) -> impl Future<Output = Error> + Send + 'static {
                let (path, lost) = (self.path().to_owned(), self.lost());
                async move { Error::Lost { path, reason: lost.await } }
            }

            fn nest<F: Future>(&self, body: F) -> impl Future<Output = F::Output> {
                self.scope(body)
            }

            fn finish(self) {
                HeldNode::finished(&self.hold);
            }
        }
    )*};
}

held_through_lost!(MutexGuard, ReadGuard, WriteGuard, SemaphorePermit, SemaphoreMutexGuard);

impl AnnotatedGuard for MultiGuard {
    fn lost_error(&self) -> impl Future<Output = Error> + Send + 'static {
        let lost = self.lost();
        async move {
            let (path, reason) = lost.await;
            Error::Lost { path, reason }
        }
    }

    fn nest<F: Future>(&self, body: F) -> impl Future<Output = F::Output> {
        self.scope(body)
    }

    fn finish(self) {
        self.holds().for_each(HeldNode::finished);
    }
}

/// `on_lost = "abort"`: runs `body`, nested inside the holder, until it finishes or the lock is
/// lost, whichever is first.
/// On a loss the body is dropped, mid-flight, and the result is [`Error::Lost`]. A body that
/// finishes after its lock was lost (it blocked its thread past a `max_hold`, or the loss came
/// during its last poll) also gives [`Error::Lost`], and its output is dropped: the caller is never
/// told `Ok` for work that ran without the lock.
///
/// # Errors
///
/// [`Error::Lost`] if the lock was lost before the body finished.
pub fn abort_on_lost<G: AnnotatedGuard, F: Future>(
    guard: &G,
    body: F,
) -> impl Future<Output = Result<F::Output>> + use<'_, G, F> {
    let lost = guard.lost_error();
    let body = guard.nest(body);
    async move {
        let mut body = pin!(body);
        let mut lost = pin!(lost);
        std::future::poll_fn(move |cx| {
            let finished = body.as_mut().poll(cx);
            // Asked after the body, so that a loss it never awaited (its thread blocked, or the
            // loss landed during this poll) is seen too.
            match (finished, lost.as_mut().poll(cx)) {
                (_, Poll::Ready(lost)) => Poll::Ready(Err(lost)),
                (Poll::Ready(output), Poll::Pending) => Poll::Ready(Ok(output)),
                (Poll::Pending, Poll::Pending) => Poll::Pending,
            }
        })
        .await
    }
}

/// `on_lost = "ignore"`: runs `body`, nested inside the holder, to the end.
///
/// # Errors
///
/// Never; the `Result` matches [`abort_on_lost`].
pub async fn ignore_lost<G: AnnotatedGuard, F: Future>(guard: &G, body: F) -> Result<F::Output> {
    Ok(guard.nest(body).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_values_with_display() {
        let path = Template::new().lit("/product_").value("id", &42).lit("/").value("name", "äpfel").finish();
        assert_eq!(path.unwrap(), "/product_42/äpfel");
    }

    #[test]
    fn values_cannot_change_the_shape_of_the_path() {
        for bad in ["", ".", "..", "a/b", "x\ny"] {
            match Template::new().lit("/p/").value("id", bad).finish() {
                Err(Error::InvalidPath { path, reason }) => {
                    assert_eq!(path, format!("/p/{bad}"));
                    assert!(reason.contains("`<id>`"), "{reason}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_failing_display_is_an_invalid_path() {
        struct Broken;
        impl Display for Broken {
            fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
                Err(fmt::Error)
            }
        }
        let error = Template::new().lit("/p/").value("b", &Broken).finish().unwrap_err();
        assert!(matches!(&error, Error::InvalidPath { reason, .. } if reason.contains("`<b>`")), "{error}");
    }

    #[test]
    fn several_paths_keep_their_order_or_fail_with_the_first_error() {
        let ok = paths([Template::new().lit("/b").finish(), Template::new().lit("/a").finish()]);
        assert_eq!(ok.unwrap(), ["/b", "/a"]);
        let bad = paths([Template::new().lit("/a/").value("x", "").finish(), Template::new().lit("/b").finish()]);
        assert!(matches!(bad, Err(Error::InvalidPath { .. })));
    }

    #[tokio::test]
    async fn a_loss_wins_over_a_finished_body_and_drops_an_unfinished_one() {
        struct NeverLost;
        impl AnnotatedGuard for NeverLost {
            fn lost_error(&self) -> impl Future<Output = Error> + Send + 'static {
                std::future::pending()
            }
            fn nest<F: Future>(&self, body: F) -> impl Future<Output = F::Output> {
                body
            }
            fn finish(self) {}
        }
        struct AlreadyLost;
        impl AnnotatedGuard for AlreadyLost {
            fn lost_error(&self) -> impl Future<Output = Error> + Send + 'static {
                std::future::ready(Error::Lost { path: "/x".into(), reason: crate::LostReason::NodeDeleted })
            }
            fn nest<F: Future>(&self, body: F) -> impl Future<Output = F::Output> {
                body
            }
            fn finish(self) {}
        }
        assert_eq!(abort_on_lost(&NeverLost, async { 7 }).await, Ok(7));
        // Finished, but without the lock: the caller is told the loss (issue 34).
        let finished = abort_on_lost(&AlreadyLost, async { 7 }).await;
        assert!(matches!(finished, Err(Error::Lost { .. })), "{finished:?}");
        let dropped = std::sync::Arc::new(());
        let witness = dropped.clone();
        let outcome = abort_on_lost(&AlreadyLost, async move {
            let _witness = witness;
            std::future::pending::<()>().await;
        })
        .await;
        assert!(matches!(outcome, Err(Error::Lost { .. })));
        assert_eq!(std::sync::Arc::strong_count(&dropped), 1, "the body was dropped");
        assert_eq!(ignore_lost(&NeverLost, async { 3 }).await, Ok(3));
    }
}
