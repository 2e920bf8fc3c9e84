//! How long an acquisition may wait: the one way every recipe, and the attributes, say it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::CallDeadline;

/// How long the caller said an acquisition may wait.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Limit {
    /// The client's default timeout (none unless configured: wait as long as it takes).
    #[default]
    ClientDefault,
    /// At most this long; zero means one attempt.
    Timeout(Duration),
    /// One attempt: `Busy` if anyone is ahead (for a semaphore: if its leases are taken).
    OneAttempt,
}

/// How long an acquisition may wait, counted from the public call that asked: made once there,
/// and passed unchanged to everything the call runs (connecting the default client, each
/// member of a multi-lock), so that a timeout bounds all of it and every error reports the wait
/// from the call's start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Patience {
    limit: Limit,
    since: Instant,
}

impl Patience {
    /// `limit`, counted from now.
    pub(crate) fn from_now(limit: Limit) -> Self {
        Self { limit, since: Instant::now() }
    }

    /// The client's default timeout, counted from now.
    pub(crate) fn client_default() -> Self {
        Self::from_now(Limit::ClientDefault)
    }

    /// At most `timeout`, counted from now.
    pub(crate) fn timeout(timeout: Duration) -> Self {
        Self::from_now(Limit::Timeout(timeout))
    }

    /// One attempt.
    pub(crate) fn one_attempt() -> Self {
        Self::from_now(Limit::OneAttempt)
    }

    /// Whether an acquisition with this patience may wait for another holder: not a single
    /// attempt (`try_`, a zero timeout).
    pub(crate) fn may_wait(self) -> bool {
        !matches!(self.limit, Limit::OneAttempt | Limit::Timeout(Duration::ZERO))
    }

    /// The deadline connecting the default client must meet for an acquisition of the lock at
    /// `path` with this patience, named as its error says it: the caller's timeout, if it gave
    /// one that is not a single attempt.
    pub(crate) fn call_deadline(self, path: &str) -> Option<CallDeadline> {
        let Limit::Timeout(timeout) = self.limit else { return None };
        if timeout.is_zero() {
            return None;
        }
        let what =
            format!("the call's timeout of {timeout:?} for lock `{path}` (it counts connecting the default client)");
        Some(CallDeadline { at: self.since + timeout, what })
    }

    /// When the acquisition's wait counts from, for the errors that say how long it waited.
    pub(super) fn since(self) -> Instant {
        self.since
    }

    /// When an acquisition on a client with `default_timeout` must give up.
    pub(super) fn deadline(self, default_timeout: Option<Duration>) -> Deadline {
        let timeout = match self.limit {
            Limit::ClientDefault => default_timeout,
            Limit::Timeout(timeout) => Some(timeout),
            Limit::OneAttempt => return Deadline::FirstAttempt,
        };
        match timeout {
            None => Deadline::Never,
            Some(timeout) if timeout.is_zero() => Deadline::FirstAttempt,
            Some(timeout) => Deadline::At(self.since + timeout),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A step of an acquisition made of several (a multi-lock's member) asked after the call's
    /// timeout passed still waits until that deadline, which has passed: it times out. It is not
    /// a single attempt, which would say `Busy` instead.
    #[test]
    fn a_late_step_keeps_the_calls_deadline() {
        let start = Instant::now() - Duration::from_secs(2);
        let patience = Patience { limit: Limit::Timeout(Duration::from_secs(1)), since: start };
        assert!(patience.may_wait());
        assert!(matches!(patience.deadline(None), Deadline::At(at) if at == start + Duration::from_secs(1)));
        assert!(patience.deadline(None).retry_at(Duration::ZERO).is_none(), "the deadline has passed");
    }

    #[test]
    fn the_clients_default_counts_from_the_call_too() {
        let start = Instant::now() - Duration::from_secs(2);
        let patience = Patience { limit: Limit::ClientDefault, since: start };
        assert!(
            matches!(patience.deadline(Some(Duration::from_secs(5))), Deadline::At(at) if at == start + Duration::from_secs(5))
        );
        assert!(matches!(patience.deadline(None), Deadline::Never));
    }

    #[test]
    fn a_zero_timeout_and_one_attempt_do_not_wait() {
        for limit in [Limit::Timeout(Duration::ZERO), Limit::OneAttempt] {
            let patience = Patience::from_now(limit);
            assert!(!patience.may_wait());
            assert!(matches!(patience.deadline(Some(Duration::from_secs(5))), Deadline::FirstAttempt));
            assert!(patience.call_deadline("/a").is_none(), "nothing to connect within");
        }
    }
}
