//! What the library reports through the `metrics` facade (feature `metrics`), so any exporter
//! works: acquisitions by outcome, how long they waited, how long locks were held and why they
//! ended, and how many are waiting and held now. Labels are the recipe and the lock's path
//! *template* (never the rendered path), so their number stays bounded by the program's text.
//! Names and labels are part of the public contract (docs/guide.md, "Metrics"). Without the
//! feature every function here is empty.

use std::time::Duration;

use crate::error::{Error, LostReason};

/// Acquisitions that ended, by `outcome`: `granted`, `timeout`, `busy`, `closed` (the client
/// was closed), `error`.
pub const ACQUISITIONS: &str = "zk_lock_acquisitions_total";
/// How long acquisitions waited, by `outcome` as [`ACQUISITIONS`], in seconds.
pub const WAIT_SECONDS: &str = "zk_lock_wait_seconds";
/// Acquisitions waiting now.
pub const WAITING: &str = "zk_lock_acquisitions_waiting";
/// Locks held now (a re-entered lock counts once: it is one node).
pub const HELD: &str = "zk_lock_locks_held";
/// How long locks were held, by `outcome`: `released` or `lost`, in seconds.
pub const HOLD_SECONDS: &str = "zk_lock_hold_seconds";
/// Locks lost while held, by `reason`: `session_expired`, `session_closed`,
/// `connection_lost`, `node_deleted`.
pub const LOST: &str = "zk_lock_locks_lost_total";
/// Extensions of a hold's `max_hold` by its holder (`extend_max_hold`).
pub const MAX_HOLD_EXTENSIONS: &str = "zk_lock_max_hold_extensions_total";

/// The place in line (2: next; the holder is 1st) of the latest waiter of this recipe and
/// template that learnt of a change, as its `QueuePosition` said, among those still waiting: a
/// waiter that is granted, gives up or is cancelled takes its place off (the gauge shows the
/// place of the latest waiter still waiting), and the gauge is 0 once none waits.
pub const QUEUE_PLACE: &str = "zk_lock_queue_place";

/// The `template` label of a lock taken without an attribute (`Mutex::new(path)` and the
/// like): its rendered path could take any number of values.
pub const UNANNOTATED: &str = "(api)";

/// The labels every metric of one lock carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Labels {
    /// `mutex`, `read`, `write`, `semaphore`, `semaphore-mutex`, `leader`.
    pub recipe: &'static str,
    /// The path template of the annotated function, or the class an API lock was given.
    pub template: &'static str,
}

/// The outcome label of an acquisition that ended with `result`.
fn acquisition_outcome<T>(result: &Result<T, Error>) -> &'static str {
    match result {
        Ok(_) => "granted",
        Err(Error::Timeout { .. }) => "timeout",
        // A timeout an outage caused: told apart, so that a dashboard does not read it as contention.
        Err(Error::ConnectionDown { .. }) => "connection_down",
        Err(Error::Busy { .. }) => "busy",
        Err(Error::ClientClosed { .. }) => "closed",
        Err(_) => "error",
    }
}

fn reason_label(reason: LostReason) -> &'static str {
    match reason {
        LostReason::SessionExpired => "session_expired",
        LostReason::SessionClosed => "session_closed",
        LostReason::ConnectionLost => "connection_lost",
        LostReason::NodeDeleted => "node_deleted",
        LostReason::MaxHoldReached { .. } => "max_hold",
    }
}

/// One acquisition, counted as waiting from [`Waiting::start`] until [`Waiting::end`] or until
/// it is dropped (a cancelled acquisition stops waiting too, and is counted as nothing else).
#[derive(Debug)]
pub(crate) struct Waiting {
    /// Kept only with the feature: without it, a waiting acquisition carries nothing for it.
    #[cfg(feature = "metrics")]
    labels: Labels,
}

impl Waiting {
    pub(crate) fn start(labels: Labels) -> Self {
        #[cfg(feature = "metrics")]
        {
            ::metrics::gauge!(WAITING, "recipe" => labels.recipe, "template" => labels.template).increment(1.0);
            Self { labels }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = labels;
            Self {}
        }
    }

    /// The acquisition ended with `result` after `waited`.
    pub(crate) fn end<T>(self, result: &Result<T, Error>, waited: Duration) {
        let outcome = acquisition_outcome(result);
        #[cfg(feature = "metrics")]
        {
            let Labels { recipe, template } = self.labels;
            ::metrics::counter!(ACQUISITIONS, "recipe" => recipe, "template" => template, "outcome" => outcome)
                .increment(1);
            ::metrics::histogram!(WAIT_SECONDS, "recipe" => recipe, "template" => template, "outcome" => outcome)
                .record(waited);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (outcome, waited);
    }
}

#[cfg(feature = "metrics")]
impl Drop for Waiting {
    fn drop(&mut self) {
        ::metrics::gauge!(WAITING, "recipe" => self.labels.recipe, "template" => self.labels.template).decrement(1.0);
    }
}

/// One waiter's places in line on the [`QUEUE_PLACE`] gauge: told through
/// [`told`](Self::told), taken off the gauge when it is dropped (the waiter was granted, gave up
/// or was cancelled).
#[derive(Debug)]
pub(crate) struct QueuePlaces {
    /// Kept only with the feature: without it, a waiter carries nothing for it.
    #[cfg(feature = "metrics")]
    labels: Labels,
    /// The waiter's entry in the record, once it was told a place.
    #[cfg(feature = "metrics")]
    waiter: std::sync::OnceLock<places::Waiter>,
}

impl QueuePlaces {
    pub(crate) fn new(labels: Labels) -> Self {
        #[cfg(feature = "metrics")]
        {
            Self { labels, waiter: std::sync::OnceLock::new() }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = labels;
            Self {}
        }
    }

    /// The waiter learnt it is `place` in line.
    pub(crate) fn told(&self, place: usize) {
        #[cfg(feature = "metrics")]
        places::told(self.labels, place, &self.waiter);
        #[cfg(not(feature = "metrics"))]
        let _ = place;
    }
}

#[cfg(feature = "metrics")]
impl Drop for QueuePlaces {
    fn drop(&mut self) {
        if let Some(&waiter) = self.waiter.get() {
            places::left(self.labels, waiter);
        }
    }
}

/// A holder extended its hold's `max_hold` ([`MAX_HOLD_EXTENSIONS`]).
pub(crate) fn max_hold_extended(labels: Labels) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(MAX_HOLD_EXTENSIONS, "recipe" => labels.recipe, "template" => labels.template).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = labels;
}

/// A lock was granted: it counts as held until [`held_ended`].
pub(crate) fn held(labels: Labels) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!(HELD, "recipe" => labels.recipe, "template" => labels.template).increment(1.0);
    #[cfg(not(feature = "metrics"))]
    let _ = labels;
}

/// A held lock ended after `held_for`: released (`lost: None`) or lost. Called once per lock.
pub(crate) fn held_ended(labels: Labels, lost: Option<LostReason>, held_for: Duration) {
    #[cfg(feature = "metrics")]
    {
        let Labels { recipe, template } = labels;
        ::metrics::gauge!(HELD, "recipe" => recipe, "template" => template).decrement(1.0);
        let outcome = if lost.is_some() { "lost" } else { "released" };
        ::metrics::histogram!(HOLD_SECONDS, "recipe" => recipe, "template" => template, "outcome" => outcome)
            .record(held_for);
        if let Some(reason) = lost {
            ::metrics::counter!(LOST, "recipe" => recipe, "template" => template, "reason" => reason_label(reason))
                .increment(1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (labels, lost.map(reason_label), held_for);
}

/// The record behind [`QUEUE_PLACE`]: for each recipe and template, the latest place told to
/// each waiter still waiting, in the order they were told. The gauge shows the latest of them,
/// or 0. Only waiters that were told a place are in it (an acquisition granted at once never
/// is), so an uncontended acquisition never locks it.
#[cfg(feature = "metrics")]
mod places {
    use std::collections::BTreeMap;
    use std::sync::{Mutex, OnceLock, PoisonError};

    use super::{Labels, QUEUE_PLACE};

    /// A waiter in the record: the number of its first report.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub(super) struct Waiter(u64);

    /// The places of one recipe and template.
    #[derive(Debug, Default)]
    struct Places {
        /// Each waiter's latest report.
        latest_of: BTreeMap<Waiter, u64>,
        /// The place told by each report still standing, by report number.
        by_report: BTreeMap<u64, usize>,
    }

    /// Every waiter's place, process-wide (the gauge is too).
    #[derive(Debug)]
    struct Told {
        /// Reports made so far: the next report's number.
        reports: u64,
        /// The places of each recipe and template that has a waiter told one.
        places: BTreeMap<Labels, Places>,
    }

    static TOLD: Mutex<Told> = Mutex::new(Told { reports: 0, places: BTreeMap::new() });

    /// Shows `place` on the gauge of `labels`.
    fn set(labels: Labels, place: usize) {
        ::metrics::gauge!(QUEUE_PLACE, "recipe" => labels.recipe, "template" => labels.template).set(place as f64);
    }

    /// The waiter `waiter` (which its first report fills in) was told `place`.
    pub(super) fn told(labels: Labels, place: usize, waiter: &OnceLock<Waiter>) {
        let mut places_told = TOLD.lock().unwrap_or_else(PoisonError::into_inner);
        let report = places_told.reports;
        places_told.reports += 1;
        let waiter = *waiter.get_or_init(|| Waiter(report));
        let places = places_told.places.entry(labels).or_default();
        if let Some(earlier) = places.latest_of.insert(waiter, report) {
            places.by_report.remove(&earlier);
        }
        places.by_report.insert(report, place);
        set(labels, place);
    }

    /// `waiter` stopped waiting: granted, given up or cancelled. Its place goes; the gauge shows
    /// the latest place of those still waiting, or 0.
    pub(super) fn left(labels: Labels, waiter: Waiter) {
        let mut places_told = TOLD.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(places) = places_told.places.get_mut(&labels) else { return };
        let Some(report) = places.latest_of.remove(&waiter) else { return };
        let was_shown = places.by_report.last_key_value().is_some_and(|(&latest, _)| latest == report);
        places.by_report.remove(&report);
        if was_shown {
            set(labels, places.by_report.last_key_value().map_or(0, |(_, &place)| place));
        }
        if places.latest_of.is_empty() {
            places_told.places.remove(&labels);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_reasons_have_stable_labels() {
        let path = || "/p".to_owned();
        assert_eq!(acquisition_outcome(&Ok::<(), Error>(())), "granted");
        assert_eq!(
            acquisition_outcome::<()>(&Err(Error::Timeout {
                path: path(),
                waited: Duration::ZERO,
                held_by_this_task: false
            })),
            "timeout"
        );
        let down = Error::ConnectionDown {
            path: path(),
            waited: Duration::ZERO,
            down: Duration::ZERO,
            connect_string: "127.0.0.1:2181".into(),
        };
        assert_eq!(acquisition_outcome::<()>(&Err(down)), "connection_down");
        assert_eq!(acquisition_outcome::<()>(&Err(Error::Busy { path: path() })), "busy");
        assert_eq!(acquisition_outcome::<()>(&Err(Error::ClientClosed { path: path() })), "closed");
        assert_eq!(acquisition_outcome::<()>(&Err(Error::invalid_path("/p", "no"))), "error");
        assert_eq!(reason_label(LostReason::NodeDeleted), "node_deleted");
        assert_eq!(reason_label(LostReason::ConnectionLost), "connection_lost");
    }
}
