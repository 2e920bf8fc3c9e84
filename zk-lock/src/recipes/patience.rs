//! How long an acquisition may wait: the one way every recipe, and the attributes, say it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How long an acquisition may wait, as the caller asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Patience {
    /// The client's default timeout (none unless configured: wait as long as it takes).
    #[default]
    Default,
    /// At most this long; zero means one attempt.
    Timeout(Duration),
    /// One attempt: `Busy` if anyone is ahead (for a semaphore: if its leases are taken).
    Once,
    /// The client's default timeout, counted from this instant: a step of an acquisition made
    /// of several (a multi-lock's members) gets what is left of it.
    DefaultSince(Instant),
}

impl Patience {
    /// Whether an acquisition with this patience may wait for another holder: not a single
    /// attempt (`try_`, a zero timeout).
    pub(crate) fn may_wait(self) -> bool {
        !matches!(self, Self::Once | Self::Timeout(Duration::ZERO))
    }

    /// The patience for each step of an acquisition made of several, starting now: a timeout
    /// counts for all the steps together, each step getting what is left of it.
    pub(crate) fn shared_by_steps(self) -> impl Fn() -> Self {
        let now = Instant::now();
        let deadline = match self {
            Self::Timeout(timeout) => Some(now + timeout),
            Self::Default | Self::Once | Self::DefaultSince(_) => None,
        };
        let shared = match self {
            Self::Default => Self::DefaultSince(now),
            other => other,
        };
        move || match deadline {
            Some(deadline) => Self::Timeout(deadline.saturating_duration_since(Instant::now())),
            None => shared,
        }
    }

    /// When an acquisition starting now on a client with `default_timeout` must give up.
    pub(super) fn deadline(self, default_timeout: Option<Duration>) -> Deadline {
        let (timeout, counted_from) = match self {
            Self::Default => (default_timeout, Instant::now()),
            Self::Timeout(timeout) => (Some(timeout), Instant::now()),
            Self::Once => return Deadline::FirstAttempt,
            Self::DefaultSince(start) => (default_timeout, start),
        };
        match timeout {
            None => Deadline::Never,
            Some(timeout) if timeout.is_zero() => Deadline::FirstAttempt,
            Some(timeout) => Deadline::At(counted_from + timeout),
        }
    }
}

/// [`Patience`] fixed when an acquisition starts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Deadline {
    /// One attempt, which fails with `Busy` rather than wait.
    FirstAttempt,
    At(Instant),
    Never,
}

impl Deadline {
    /// Whether an attempt may wait behind others.
    pub(super) fn may_wait(self) -> bool {
        !matches!(self, Self::FirstAttempt)
    }

    /// Resolves when the deadline passes; never without one.
    pub(super) async fn passed(self) {
        match self {
            Self::At(deadline) => tokio::time::sleep_until(deadline).await,
            Self::FirstAttempt | Self::Never => std::future::pending().await,
        }
    }

    /// The outcome of `work`, or `None` if the deadline passed first.
    pub(super) async fn limit<T>(self, work: impl Future<Output = T>) -> Option<T> {
        match self {
            Self::At(deadline) => tokio::time::timeout_at(deadline, work).await.ok(),
            Self::FirstAttempt | Self::Never => Some(work.await),
        }
    }

    /// `Some(instant)` to try again at, no later than the deadline; `None` if it passed (or
    /// only one attempt was allowed).
    pub(super) fn retry_at(self, pause: Duration) -> Option<Instant> {
        let now = Instant::now();
        match self {
            Self::FirstAttempt => None,
            Self::At(deadline) if now >= deadline => None,
            Self::At(deadline) => Some(deadline.min(now + pause)),
            Self::Never => Some(now + pause),
        }
    }
}
