//! How long an acquisition may wait: the one way every recipe, and the attributes, say it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::CallDeadline;

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
    /// At most this long, counted from this instant: an annotated call's `timeout`, which counts
    /// from the call's start, connecting the default client included.
    TimeoutSince(Duration, Instant),
}

impl Patience {
    /// Whether an acquisition with this patience may wait for another holder: not a single
    /// attempt (`try_`, a zero timeout).
    pub(crate) fn may_wait(self) -> bool {
        !matches!(self, Self::Once | Self::Timeout(Duration::ZERO) | Self::TimeoutSince(Duration::ZERO, _))
    }

    /// This patience counted from now: an explicit timeout then also bounds what comes before
    /// the acquisition (connecting the default client), and the wait is reported from now.
    pub(crate) fn counted_from_now(self) -> Self {
        match self {
            Self::Timeout(timeout) => Self::TimeoutSince(timeout, Instant::now()),
            other => other,
        }
    }

    /// When the caller's timeout passes, if it gave one that is not a single attempt: the latest
    /// moment connecting the default client for it may end.
    pub(crate) fn connect_deadline(self) -> Option<Instant> {
        match self {
            Self::TimeoutSince(timeout, start) if !timeout.is_zero() => Some(start + timeout),
            Self::Timeout(timeout) if !timeout.is_zero() => Some(Instant::now() + timeout),
            _ => None,
        }
    }

    /// The deadline connecting the default client must meet for an acquisition of the locks at
    /// `paths` with this patience, named as its error says it.
    pub(crate) fn call_deadline(self, paths: &[&str]) -> Option<CallDeadline> {
        let at = self.connect_deadline()?;
        let timeout = self.timeout().unwrap_or_default();
        let locks = paths.iter().map(|path| format!("`{path}`")).collect::<Vec<_>>().join(", ");
        let lock = if paths.len() == 1 { "lock" } else { "locks" };
        let what =
            format!("the call's timeout of {timeout:?} for {lock} {locks} (it counts connecting the default client)");
        Some(CallDeadline { at, what })
    }

    /// The timeout the caller gave, if any.
    pub(crate) fn timeout(self) -> Option<Duration> {
        match self {
            Self::Timeout(timeout) | Self::TimeoutSince(timeout, _) => Some(timeout),
            Self::Default | Self::Once | Self::DefaultSince(_) => None,
        }
    }

    /// When the acquisition's wait counts from, for the errors that say how long it waited:
    /// the instant its patience counts from, or now.
    pub(super) fn counted_from(self) -> Instant {
        match self {
            Self::DefaultSince(start) | Self::TimeoutSince(_, start) => start,
            Self::Default | Self::Timeout(_) | Self::Once => Instant::now(),
        }
    }

    /// The patience for each step of an acquisition made of several, starting now: a timeout
    /// counts for all the steps together, each step getting what is left of it.
    pub(crate) fn shared_by_steps(self) -> impl Fn() -> Self {
        let now = Instant::now();
        let deadline = match self {
            Self::Timeout(timeout) => Some(now + timeout),
            Self::TimeoutSince(timeout, start) => Some(start + timeout),
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
            Self::TimeoutSince(timeout, start) => (Some(timeout), start),
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
