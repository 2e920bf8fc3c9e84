//! The latest moment after which the ensemble's leader provably renewed the session: the leader
//! expires sessions, so only its renewals count, and a follower may answer reads and pings from
//! its own state for a long time after it lost the leader.
//!
//! How a renewal reaches the leader (ZooKeeper 3.6-3.9): a follower renews ("touches") a session
//! when it receives one of its packets, and reports the touches to the leader only in its reply
//! to the leader's next ping; the leader pings each follower every `tickTime / 2`. A `sync` is
//! forwarded to the leader and answered only after the leader's reply comes back: an answered
//! `sync` proves the follower and the leader were in touch, not that a touch was reported.
//!
//! The chain that proves it (`G` bounds the leader's ping interval, see [`ping_bound`]):
//!
//! 1. Request `k`, sent at `s_k` and answered at `a_k`: the follower touched the session at some
//!    `f_k` with `s_k <= f_k < a_k`.
//! 2. `sync` `j'`, sent at least `G` after `a_k`, answered: the leader received it after that,
//!    so it pinged the follower in between, and that ping went down the leader's stream ahead of
//!    its reply to `j'`. The follower answered the ping, with a touch of the session at or after
//!    `f_k`, before it handled the reply to `j'` (one thread reads the leader's stream in order).
//! 3. `sync` `j`, sent after `j'` was answered, answered: the follower forwarded it after that ping
//!    reply, on the same stream, and the leader read it (it answered): so it had read the ping
//!    reply first and renewed the session then, after `f_k >= s_k`.
//!
//! The leader then expires the session no earlier than `s_k + T` (it rounds expiry times up to
//! its tick).
//!
//! A reconnection renews the session too: a follower asks the leader to revalidate a session that
//! connects to it, and answers the connect only once the leader has (the leader renews it then).
//! A new connection made after a moment when the old one was still up proves a renewal after that
//! moment ([`reconnected`](Renewals::reconnected)); a chain split by a reconnection still proves
//! its `s_k`, by the reconnection. A new session was created by the leader after its connect
//! request was sent, so that send is proven from the start.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// `G`: an upper bound of the leader's ping interval, `tickTime / 2`. ZooKeeper negotiates session
/// timeouts of at least `minSessionTimeout`, two ticks unless configured lower, so
/// `tickTime / 2 <= T / 4`; 0.3 T leaves room for the leader's own scheduling.
pub(super) fn ping_bound(timeout: Duration) -> Duration {
    timeout * 3 / 10
}

/// A request answered by the server.
#[derive(Debug, Clone, Copy)]
struct Answered {
    sent: Instant,
    answered: Instant,
}

/// The proof so far, fed with the `sync`s the session sends one at a time.
#[derive(Debug)]
pub(super) struct Renewals {
    ping_bound: Duration,
    /// Answered `sync`s that may still serve as `k` or `j'` of a chain, oldest first.
    answered: VecDeque<Answered>,
    proven: Option<Instant>,
    /// Set by [`forget`](Self::forget): nothing before it proves anything any more.
    floor: Option<Instant>,
}

impl Renewals {
    /// Starts with `proven`: the send of the session's connect request for a new session.
    pub(super) fn new(ping_bound: Duration, proven: Option<Instant>) -> Self {
        Self { ping_bound, answered: VecDeque::new(), proven, floor: None }
    }

    /// The leader renewed the session after this moment, and so cannot expire it before a
    /// session timeout after it; `None` when nothing is proven (after [`forget`](Self::forget)).
    pub(super) fn proven(&self) -> Option<Instant> {
        self.proven
    }

    /// Records a `sync` sent at `sent` (a time taken before it was made: earlier than the real
    /// send) and answered at `answered` (taken once the answer was seen: later than it arrived),
    /// both on the safe side. The `sync`s must be recorded in the order they were sent, each sent
    /// after the one before was answered or failed.
    pub(super) fn record(&mut self, sent: Instant, answered: Instant) {
        if let Some(&j_prime) = self.answered.back() {
            // `j'` must have been answered before `j` was sent, or the ping reply could trail `j`.
            if j_prime.answered <= sent {
                // The latest `k` answered at least `G` before `j'` was sent.
                let chained = self.answered.iter().rposition(|k| k.answered + self.ping_bound <= j_prime.sent);
                if let Some(index) = chained {
                    let k = self.answered[index];
                    self.proven = self.proven.max(Some(k.sent));
                    // A later chain never proves less: older requests can go.
                    self.answered.drain(..=index);
                }
            }
        }
        self.answered.push_back(Answered { sent, answered });
    }

    /// The session connected again (not read-only) after `after`, a moment when its previous
    /// connection was still up: the leader revalidated it, and so renewed it, after that.
    pub(super) fn reconnected(&mut self, after: Instant) {
        if self.floor.is_none_or(|floor| after >= floor) {
            self.proven = self.proven.max(Some(after));
        }
    }

    /// Forgets everything: a new proof needs requests sent, or a reconnection, from `now` on.
    pub(super) fn forget(&mut self, now: Instant) {
        self.answered.clear();
        self.proven = None;
        self.floor = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Duration = Duration::from_millis(300);

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    fn record(renewals: &mut Renewals, sent: Instant, answered: Instant) {
        renewals.record(sent, answered);
    }

    #[test]
    fn a_chain_proves_the_send_of_its_first_request() {
        let t0 = Instant::now();
        let mut renewals = Renewals::new(G, Some(t0));
        // k: sent 0, answered 10; j': sent 310 (>= 10 + G), answered 320; j: sent 330.
        record(&mut renewals, at(t0, 0), at(t0, 10));
        assert_eq!(renewals.proven(), Some(t0));
        record(&mut renewals, at(t0, 310), at(t0, 320));
        assert_eq!(renewals.proven(), Some(t0), "j' alone proves nothing new");
        record(&mut renewals, at(t0, 330), at(t0, 340));
        assert_eq!(renewals.proven(), Some(at(t0, 0)));
    }

    #[test]
    fn answers_closer_than_the_ping_bound_prove_nothing() {
        let t0 = Instant::now();
        let mut renewals = Renewals::new(G, None);
        // Every 100 ms, but only for 300 ms: no j' was sent G after a k was answered.
        for ms in [0, 100, 200, 300] {
            record(&mut renewals, at(t0, ms), at(t0, ms + 5));
        }
        assert_eq!(renewals.proven(), None);
        // 400: its j' (300) was sent 295 ms after k (0) was answered: still short of G.
        record(&mut renewals, at(t0, 400), at(t0, 405));
        assert_eq!(renewals.proven(), None);
        // 500: j' (400) was sent 395 ms after 0 was answered, and 295 ms after 100 was.
        record(&mut renewals, at(t0, 500), at(t0, 505));
        assert_eq!(renewals.proven(), Some(at(t0, 0)));
        record(&mut renewals, at(t0, 600), at(t0, 605));
        assert_eq!(renewals.proven(), Some(at(t0, 100)));
    }

    #[test]
    fn the_last_request_must_be_sent_after_the_one_before_was_answered() {
        let t0 = Instant::now();
        let mut renewals = Renewals::new(G, None);
        record(&mut renewals, at(t0, 0), at(t0, 10));
        record(&mut renewals, at(t0, 400), at(t0, 500));
        // Sent before 400 was answered: the ping reply may trail it.
        record(&mut renewals, at(t0, 450), at(t0, 510));
        assert_eq!(renewals.proven(), None);
        // Sent after 450 was answered: proves 0 (450 was sent 440 ms after it was answered).
        record(&mut renewals, at(t0, 520), at(t0, 530));
        assert_eq!(renewals.proven(), Some(at(t0, 0)));
    }

    #[test]
    fn a_proof_never_goes_back_and_forget_clears_it() {
        let t0 = Instant::now();
        let mut renewals = Renewals::new(G, Some(at(t0, 1000)));
        record(&mut renewals, at(t0, 0), at(t0, 10));
        record(&mut renewals, at(t0, 400), at(t0, 410));
        record(&mut renewals, at(t0, 420), at(t0, 430));
        assert_eq!(renewals.proven(), Some(at(t0, 1000)));
        renewals.forget(at(t0, 1500));
        assert_eq!(renewals.proven(), None);
        record(&mut renewals, at(t0, 2000), at(t0, 2010));
        record(&mut renewals, at(t0, 2400), at(t0, 2410));
        record(&mut renewals, at(t0, 2420), at(t0, 2430));
        assert_eq!(renewals.proven(), Some(at(t0, 2000)));
    }

    #[test]
    fn a_reconnection_proves_the_moment_the_old_connection_was_seen_up() {
        let t0 = Instant::now();
        let mut renewals = Renewals::new(G, Some(t0));
        record(&mut renewals, at(t0, 0), at(t0, 10));
        renewals.reconnected(at(t0, 100));
        assert_eq!(renewals.proven(), Some(at(t0, 100)));
        // Never back.
        renewals.reconnected(at(t0, 50));
        assert_eq!(renewals.proven(), Some(at(t0, 100)));
        // After a loss, only what comes after it counts.
        renewals.forget(at(t0, 200));
        renewals.reconnected(at(t0, 150));
        assert_eq!(renewals.proven(), None);
        renewals.reconnected(at(t0, 250));
        assert_eq!(renewals.proven(), Some(at(t0, 250)));
    }

    #[test]
    fn steady_heartbeats_keep_the_proof_within_five_periods() {
        // One sync every T/9 with T = 9 s, answered in 5 ms: the proof trails by 4-5 periods.
        let t0 = Instant::now();
        let timeout = Duration::from_secs(9);
        let period = Duration::from_secs(1);
        let mut renewals = Renewals::new(ping_bound(timeout), Some(t0));
        for beat in 0..20u32 {
            let sent = t0 + period * beat;
            let answered = sent + Duration::from_millis(5);
            record(&mut renewals, sent, answered);
            let age = answered - renewals.proven().unwrap();
            assert!(age <= period * 4 + Duration::from_millis(5), "beat {beat}: proof {age:?} old");
        }
    }
}
