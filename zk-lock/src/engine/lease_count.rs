//! What counts against a semaphore's limit, and how long a single attempt waits for the
//! internal mutex: only while the leases have room.
//!
//! A request that may hold the internal mutex creates its leases ahead of time (see `lease`);
//! if it does not hold it, they are deleted a round trip later. Until then they are children of
//! `P/leases`, and counting them would make the semaphore look full to everyone else at the very
//! moment several requests arrive together. Their names give them away: they share their
//! request node's key ([`request_key`]).
//!
//! The holder of the mutex leaves out those of the requests behind it. That is safe: such a
//! request keeps them only if its own listing of the queue shows it first, so a listing made
//! after the holder let the mutex go (its reply delayed by a lost connection, say), and the
//! listing of `P/leases` made with it counts the leases the holder was granted.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use futures::future;
use zookeeper_client::{Client as ZkClient, Error as ZkError, WatchedEvent};

use super::not_granted::NotGranted;
use crate::background;
use crate::layout::{request_key, SEMAPHORE_REQUEST};
use crate::zk::Reconnects;

/// How many leases may exist at once: a fixed number, or a shared count that changes.
pub(crate) trait LeaseLimit: Send {
    /// The limit now.
    fn current(&mut self) -> usize;

    /// Resolves when the limit may have changed; never, for a fixed one.
    fn changed(&mut self) -> impl Future<Output = ()> + Send;
}

/// How many of `leases` count against the limit, `requests` being a listing of the internal
/// mutex's queue: all but those made ahead of time by a request queued behind `holder`. Nothing
/// is left out if `holder` is not listed.
pub(super) fn taken(leases: &[String], requests: &[String], holder: &str) -> usize {
    counted(leases, requests, holder).count()
}

/// The leases that [`taken`] counts.
pub(super) fn counted<'l>(
    leases: &'l [String],
    requests: &[String],
    holder: &str,
) -> impl Iterator<Item = &'l String> + use<'l> {
    let queue = SEMAPHORE_REQUEST.sorted(requests.iter().cloned());
    let behind: HashSet<String> = match queue.iter().position(|node| node.name == holder) {
        Some(place) => {
            queue[place + 1..].iter().filter_map(|node| request_key(&node.name)).map(str::to_owned).collect()
        }
        None => HashSet::new(),
    };
    leases.iter().filter(move |lease| !request_key(lease).is_some_and(|key| behind.contains(key)))
}

/// Resolves once the leases leave no room for `count` more: then a single attempt waiting for
/// the internal mutex gives up with `Busy`. Until then whoever holds the mutex is taking free
/// leases and lets it go within a round trip or two; once they are full, it may be waiting for
/// a lease while it holds the mutex, for as long as the leases stay taken.
///
/// Counted as [`taken`] counts behind the first request in the queue, listed again whenever
/// either parent or the limit changes.
pub(super) async fn until_full(
    zk: &ZkClient,
    requests_parent: &str,
    leases_parent: &str,
    count: usize,
    limit: &mut impl LeaseLimit,
) -> Result<(), NotGranted> {
    loop {
        // Sent together, leases first: a lease made ahead of time is listed before its request.
        let (leases, requests) = tokio::join!(watch_children(zk, leases_parent), watch_children(zk, requests_parent));
        let ((leases, leases_changed), (requests, requests_changed)) = (leases?, requests?);
        let holder = SEMAPHORE_REQUEST.sorted(requests.iter().cloned()).into_iter().next();
        let holder = holder.map(|node| node.name).unwrap_or_default();
        if taken(&leases, &requests, &holder) + count > limit.current() {
            return Ok(());
        }
        let mut changed = future::select(leases_changed, requests_changed);
        tokio::select! {
            fired = &mut changed => {
                // Left to fire: removing a watch costs a request.
                let (_, unfired) = fired.factor_first();
                background::let_watch_fire(unfired.into_inner());
            }
            () = limit.changed() => {
                background::let_watch_fire(changed);
            }
        }
    }
}

type Changed = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// Lists `parent` with a child watch; a missing parent lists as empty, watched for its creation.
async fn watch_children(zk: &ZkClient, parent: &str) -> Result<(Vec<String>, Changed), NotGranted> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        let error = match zk.list_and_watch_children(parent).await {
            Ok((children, watcher)) => return Ok((children, Box::pin(watcher.changed()))),
            Err(ZkError::NoNode) => match zk.check_and_watch_stat(parent).await {
                Ok((None, watcher)) => return Ok((Vec::new(), Box::pin(watcher.changed()))),
                // Created meanwhile: list it.
                Ok((Some(_), _)) => continue,
                Err(error) => error,
            },
            Err(error) => error,
        };
        reconnects.wait(error).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::taken;
    use crate::layout::{lease_prefix_ahead_of_time, new_protected_prefix};

    fn request(prefix: &str, sequence: u32) -> String {
        format!("{prefix}lock-{sequence:010}")
    }

    fn leases_ahead_of_time(request_prefix: &str, count: usize) -> Vec<String> {
        (0..count)
            .map(|index| format!("{}lease-{index:010}", lease_prefix_ahead_of_time(request_prefix, index)))
            .collect()
    }

    #[test]
    fn leases_made_ahead_of_time_behind_the_holder_do_not_count() {
        let (first, second, third) = (new_protected_prefix(), new_protected_prefix(), new_protected_prefix());
        let requests = [request(&third, 3), request(&first, 1), request(&second, 2)];
        let granted = format!("{}lease-0000000000", new_protected_prefix());
        let mut leases = vec![granted, "kazoo-lease-0000000001".to_owned()];
        leases.extend(leases_ahead_of_time(&first, 2));
        leases.extend(leases_ahead_of_time(&second, 1));
        leases.extend(leases_ahead_of_time(&third, 2));
        // Behind the first request: the granted lease, kazoo's, and the first request's two.
        assert_eq!(taken(&leases, &requests, &requests[1]), 4);
        // Behind the second: the third's two are left out only.
        assert_eq!(taken(&leases, &requests, &requests[2]), 5);
        // A holder not listed (its node vanished) leaves nothing out.
        assert_eq!(taken(&leases, &requests, "gone"), leases.len());
        assert_eq!(taken(&leases, &[], ""), leases.len());
    }
}
