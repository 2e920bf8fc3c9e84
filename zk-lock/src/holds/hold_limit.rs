//! A hold's `max_hold` as its timer and its guard share it: the moment the library ends the
//! hold, which the guard may push back while its holder runs (`extend_max_hold`, as Redisson's
//! watchdog renews a lease), by at most the limit from now each time. A holder that is stuck
//! cannot extend, so it is still ended within the limit of its last sign of life.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use crate::holder::HolderDescription;

/// The end of one hold's `max_hold`.
#[derive(Debug)]
pub(crate) struct HoldLimit {
    limit: Duration,
    ends_at: watch::Sender<Instant>,
    extensions: AtomicU32,
}

impl HoldLimit {
    /// A limit of `limit`, counted from now.
    pub(crate) fn starting_now(limit: Duration) -> Self {
        Self { limit, ends_at: watch::Sender::new(Instant::now() + limit), extensions: AtomicU32::new(0) }
    }

    /// The limit: how long the hold lasts from its grant, or from its last extension.
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    /// The hold now ends `limit` from now (never sooner than it would have); returns when.
    /// `None` if its end has come already: the timer is ending it.
    pub(crate) fn extend(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut extended = None;
        self.ends_at.send_if_modified(|ends_at| {
            if *ends_at <= now {
                return false;
            }
            *ends_at = (*ends_at).max(now + self.limit);
            extended = Some(*ends_at);
            true
        });
        if extended.is_some() {
            self.extensions.fetch_add(1, Ordering::Relaxed);
        }
        extended
    }

    /// How many times the limit was extended.
    pub(crate) fn extensions(&self) -> u32 {
        self.extensions.load(Ordering::Relaxed)
    }

    /// Resolves once the hold's end, extended meanwhile or not, has come.
    pub(crate) async fn reached(&self) {
        let mut ends_at = self.ends_at.subscribe();
        loop {
            let at = *ends_at.borrow_and_update();
            tokio::select! {
                () = tokio::time::sleep_until(at) => {
                    // An extension made as the timer fired counts.
                    if *ends_at.borrow() <= Instant::now() {
                        return;
                    }
                }
                _ = ends_at.changed() => {}
            }
        }
    }
}

/// Writes when the hold of `node` now ends (`ends_at`) into its data, if the data is zk-lock's
/// holder description (data given with `with_data` is left as it is). Best effort, in the
/// background: the extension holds whether or not the write lands; a write that raced another
/// (a revocation request, or a later extension's) is not repeated.
pub(super) async fn note_in_node(zk: zookeeper_client::Client, node: Arc<str>, ends_at: Instant) {
    let node = &*node;
    let Ok((data, stat)) = zk.get_data(node).await else { return };
    let Some(mut description) = HolderDescription::parse(&data) else { return };
    let from_now = ends_at.saturating_duration_since(Instant::now());
    let until = SystemTime::now() + from_now;
    description.max_hold_until = until.duration_since(UNIX_EPOCH).ok().map(|since| since.as_millis() as u64);
    let written = zk.set_data(node, description.to_string().as_bytes(), Some(stat.version)).await;
    if let Err(error) = written {
        tracing::debug!(target: crate::trace::TARGET, node, %error, "the extended max_hold was not written into the node");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_extension_moves_the_end_by_the_limit_from_now_and_never_earlier() {
        let limit = HoldLimit::starting_now(Duration::from_millis(300));
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ends_at = limit.extend().expect("not ended yet");
        assert!(ends_at >= started + Duration::from_millis(500), "the limit from the extension");
        assert_eq!(limit.extensions(), 1);
        tokio::time::timeout(Duration::from_secs(30), limit.reached()).await.expect("reached");
        assert!(Instant::now() >= ends_at, "not before the extended end");
        assert!(Instant::now() >= started + Duration::from_millis(500));
        assert_eq!(limit.extend(), None, "an end that has come is not extended");
        assert_eq!(limit.extensions(), 1);
    }
}
