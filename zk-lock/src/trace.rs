//! What the library tells `tracing`: a span per acquisition and events for its outcome, the
//! queue position it started from, the release (with how long the lock was held), loss and
//! revocation. Names and fields are part of the public contract (see the crate docs, "Tracing").

use std::future::Future;
use std::time::Instant;

use futures::FutureExt;
use tracing::field::Empty;
use tracing::Instrument;

use crate::error::{LostReason, Result};
use crate::layout::Recipe;
use crate::metrics::{self, Labels, QueuePlaces, Waiting};

/// The target of every span and event, so `RUST_LOG=zk_lock=debug` selects them all.
pub(crate) const TARGET: &str = "zk_lock";

/// Runs `acquire` in a `zk_lock.acquire` span and reports its outcome with the time it waited,
/// to `tracing` and to the metrics (labelled with the path's `template`).
///
/// Not an `async fn`: the span and the metrics' labels are made when it is called, so the
/// future keeps neither the path nor the template while it waits (thousands may wait at once).
pub(crate) fn acquisition<T>(
    recipe: Recipe,
    path: &str,
    template: &'static str,
    acquire: impl Future<Output = Result<T>>,
) -> impl Future<Output = Result<T>> {
    let recipe = recipe.as_str();
    let waiting = Waiting::start(Labels { recipe, template });
    let span = tracing::debug_span!(
        target: TARGET,
        "zk_lock.acquire",
        recipe,
        path,
        node = Empty,
        fencing_token = Empty
    );
    let started = Instant::now();
    // A combinator, not an `async` block: a block would keep `acquire` twice, as what it
    // captured and as what it awaits, in every waiting acquisition.
    acquire.instrument(span.clone()).map(move |outcome| {
        waiting.end(&outcome, started.elapsed());
        let waited_ms = millis(started);
        span.in_scope(|| match &outcome {
            Ok(_) => tracing::debug!(target: TARGET, waited_ms, "lock acquired"),
            Err(error) => tracing::debug!(target: TARGET, waited_ms, %error, "lock not acquired"),
        });
        outcome
    })
}

/// The task starting to acquire `path` holds it already, outside the acquiring code (seen while
/// lock-order checking is on): a sibling future's lock, which it waits for like anyone else, or
/// the task's own earlier lock, which it would wait for forever.
pub(crate) fn waits_for_own_task(path: &str) {
    tracing::warn!(
        target: TARGET,
        path,
        "this task already holds the lock it starts to acquire, outside the acquiring code: the \
         acquisition waits for that holder to release it; if the holder is the code now waiting, \
         it waits for itself (take the lock inside the guard's `scope(..)` to re-enter it)"
    );
}

/// Code nested in the holder of `path` waits for the holder's loan, which another acquisition
/// nested in it has (seen while lock-order checking is on): a sibling's, which it waits for like
/// anyone else, or this code's own earlier guard, which it would wait for forever.
pub(crate) fn waits_for_a_loan(path: &str) {
    tracing::warn!(
        target: TARGET,
        path,
        "another acquisition nested in the holder of this lock has it on loan: this one waits \
         until that guard goes; if this code holds that guard itself, it waits for itself (take \
         the lock inside that guard's `scope(..)` to re-enter it)"
    );
}

/// Our node was created, with `in_line_ahead` nodes ahead of it in line (by its recipe's rule,
/// as [`QueuePosition::ahead`](crate::QueuePosition::ahead) counts them) and waiting for `ahead`
/// of them itself. Reported as `queue_position`, its place in line numbered as
/// [`QueuePosition::place`](crate::QueuePosition::place) and "2nd in line" number it: the holder
/// is 1st (a node granted at once is 1), the next waiter 2nd.
pub(crate) fn joined_queue(node: &str, in_line_ahead: usize, ahead: usize) {
    let queue_position = in_line_ahead + 1;
    tracing::debug!(target: TARGET, node, queue_position, ahead, "joined the lock queue");
}

/// Whether anyone takes the waiters' places in line: the feature `metrics` (the gauge), or a
/// subscriber of DEBUG events of this crate. Otherwise a waiter keeps nothing for them.
pub(crate) fn queue_places_observed() -> bool {
    cfg!(feature = "metrics") || tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
}

/// A waiter learnt it is `place` in line (`said`, as `QueuePosition` reads), behind `holder`
/// (its description or node, and how long its node has existed) when it read the holder's node;
/// its `places` on the gauge show it.
pub(crate) fn queue_place(
    places: &QueuePlaces,
    place: usize,
    holder: Option<(String, u64)>,
    said: &dyn std::fmt::Display,
) {
    places.told(place);
    let (holder, held_ms) = holder.unzip();
    tracing::debug!(target: TARGET, place, holder, held_ms, "{said}");
}

/// ZooKeeper refused to authenticate `session` (its credentials, on a reconnect, or a server that
/// requires authentication), so zookeeper-client gave it up: its locks are lost as
/// `SessionClosed`, whose message cannot tell this apart from a close and names no credentials.
/// Not reported for a close, which makes zookeeper-client give the session up the same way.
pub(crate) fn authentication_refused(session: &dyn std::fmt::Display) {
    tracing::warn!(
        target: TARGET,
        session = %session,
        "zookeeper refused to authenticate the session (AuthFailed), so zookeeper-client gave it up \
         and its locks are lost; check the credentials given to `ClientBuilder::auth`, and whether \
         the servers require authentication"
    );
}

/// The node a `create` made before its reply was lost was found again by its protected prefix,
/// so no second node is made.
pub(crate) fn found_again(parent: &str, node: &str) {
    tracing::debug!(target: TARGET, parent, node, "found our node again after a lost create reply");
}

/// Our node was deleted (by someone else, or with a broken connection's session) while it
/// waited: the acquisition joins the queue again with a new node.
pub(crate) fn deleted_while_waiting(node: &str) {
    tracing::info!(target: TARGET, node, "our node was deleted while it waited: joining the queue again");
}

/// A node was granted: names it and its fencing token on the acquisition's span.
pub(crate) fn granted(node: &str, fencing_token: i64) {
    let span = tracing::Span::current();
    span.record("node", node);
    span.record("fencing_token", fencing_token);
}

/// What the events and the metrics of a held lock say about it (of its node, named by the
/// caller). Its end is told once, by the node's status (`session::HeldStatus`), which is the one
/// record of whether it ended.
#[derive(Debug)]
pub(crate) struct HoldTrace {
    labels: Labels,
    /// The lock path's length: the node's path starts with it (the node lies under the lock
    /// path), so a hold keeps one string, the node's.
    path_len: u32,
    since: Instant,
}

impl HoldTrace {
    /// A lock of the path `template` at `path` granted just now, its node at `node`.
    ///
    /// # Panics
    ///
    /// If `node` does not lie under `path`.
    pub(crate) fn new(recipe: Recipe, template: &'static str, path: &str, node: &str) -> Self {
        assert!(node.starts_with(path) && node[path.len()..].starts_with('/'), "{node} is not under {path}");
        let labels = Labels { recipe: recipe.as_str(), template };
        metrics::held(labels);
        // A ZooKeeper path is far shorter than 4 GiB (its packets are limited to 1 MB or so).
        let path_len = u32::try_from(path.len()).expect("a ZooKeeper path");
        Self { labels, path_len, since: Instant::now() }
    }

    /// Its holder extended its `max_hold` of `limit`, `extensions` times so far.
    pub(crate) fn max_hold_extended(&self, node: &str, limit: std::time::Duration, extensions: u32) {
        metrics::max_hold_extended(self.labels);
        let limit_ms = limit.as_millis() as u64;
        tracing::debug!(target: TARGET, node, limit_ms, extensions, "max_hold extended");
    }

    /// The holder let the lock on `node` go, and ZooKeeper confirmed the delete (`dropped`: by
    /// dropping its guard rather than releasing it).
    pub(crate) fn released(&self, node: &str, dropped: bool) {
        metrics::held_ended(self.labels, None, self.since.elapsed());
        let (recipe, path, held_ms) = self.fields(node);
        tracing::debug!(target: TARGET, recipe, path, node, held_ms, dropped, "lock released");
    }

    /// The lock on `node` was lost while held (seen by its session, the watch on its node, its
    /// `max_hold`), or its release found it lost.
    pub(crate) fn lost(&self, node: &str, reason: LostReason) {
        metrics::held_ended(self.labels, Some(reason), self.since.elapsed());
        let (recipe, path, held_ms) = self.fields(node);
        tracing::warn!(target: TARGET, recipe, path, node, held_ms, %reason, "lock lost");
    }

    /// The hold ended without a known outcome (its release failed, or was cancelled): it stops
    /// counting as held, with no event.
    pub(crate) fn ended_quietly(&self) {
        metrics::held_ended(self.labels, None, self.since.elapsed());
    }

    /// Someone asked the holder of `node` to give the lock up.
    pub(crate) fn revocation_requested(&self, node: &str) {
        let (recipe, path, held_ms) = self.fields(node);
        tracing::info!(target: TARGET, recipe, path, node, held_ms, "lock revocation requested");
    }

    /// The lock path of the hold on `node`.
    pub(crate) fn path<'a>(&self, node: &'a str) -> &'a str {
        &node[..self.path_len as usize]
    }

    fn fields<'a>(&self, node: &'a str) -> (&'static str, &'a str, f64) {
        (self.labels.recipe, self.path(node), millis(self.since))
    }
}

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}
