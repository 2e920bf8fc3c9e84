//! An annotated function's body while its guard holds the lock: run nested in the holder, raced
//! against a loss (`on_lost`), the guard let go when it finishes; and the outcome as the
//! function's own error type (`LockError`).

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use crate::error::{Error, Result};
use crate::holds::HeldNode;
use crate::recipes::leader::Leadership;
use crate::recipes::multi_lock::MultiGuard;
use crate::recipes::mutex::MutexGuard;
use crate::recipes::rwlock::{ReadGuard, WriteGuard};
use crate::recipes::semaphore::SemaphorePermit;
use crate::recipes::semaphore_mutex::SemaphoreMutexGuard;

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

held_through_lost!(MutexGuard, ReadGuard, WriteGuard, SemaphorePermit, SemaphoreMutexGuard, Leadership);

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
