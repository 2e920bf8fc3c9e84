//! `History::record_grants_under`: every grant the process makes under a path, recorded with
//! the code that takes it unchanged (annotated functions included), and checked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};

use futures::stream::{self, StreamExt};
use tokio::sync::Notify;
use zk_lock::testing::{Grant, GrantKind, History, Outcome};
use zk_lock::{zk_lock, Client, Error, LostReason, Mutex, RwLock, Semaphore, SharedCount};

use crate::support::{new_client, queue_of, server, PATIENCE};

const PREFIX: &str = "/it-recording";

/// A store that refuses a token smaller than the largest it accepted, per lock path.
#[derive(Default)]
struct FencedStore(StdMutex<HashMap<String, i64>>);

impl FencedStore {
    async fn write(&self, path: &str, token: i64) -> Result<bool, Error> {
        tokio::task::yield_now().await;
        let mut largest = self.0.lock().unwrap();
        let newest = largest.get(path).is_none_or(|&seen| token >= seen);
        if newest {
            largest.insert(path.to_owned(), token);
        }
        Ok(newest)
    }
}

#[zk_lock(path = "/it-recording/orders/<order_id>-<sku>", client = "recording-orders", guard = g)]
async fn reserve(history: &History, store: &FencedStore, order_id: u64, sku: &str) -> Result<bool, Error> {
    // The write of the holder, named as the recording names the grant: its node.
    history.time_write(g.node_path(), g.path(), g.fencing_token(), store.write(g.path(), g.fencing_token())).await
}

#[zk_lock(path = "/it-recording/orders/<order_id>-cancelled", client = "recording-orders")]
async fn cancelled_inside(order_id: u64, inside: &Notify) -> Result<(), Error> {
    inside.notify_one();
    std::future::pending().await
}

/// The calls that ran bodies at once before issue 21: a stream with repeated ids, a staggered
/// join, a spawned task; a cancelled call. Every grant is in the history, with its times, and
/// the check finds no two holders at once and every write accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_grant_of_annotated_functions_is_recorded_and_checked() {
    Client::builder(server().connect_string()).install_as("recording-orders").await.unwrap();
    let history = Arc::new(History::new());
    let store = Arc::new(FencedStore::default());
    let recording = history.record_grants_under(format!("{PREFIX}/orders"));

    let ids = [1, 1, 2, 1, 2, 2, 1];
    let results: Vec<_> =
        stream::iter(ids).map(|id| reserve(&history, &store, id, "apple")).buffer_unordered(4).collect().await;
    assert!(results.iter().all(|accepted| matches!(accepted, Ok(true))), "{results:?}");
    let (first, second) = tokio::join!(reserve(&history, &store, 3, "pear"), async {
        tokio::task::yield_now().await;
        reserve(&history, &store, 3, "pear").await
    });
    assert!(matches!((first, second), (Ok(true), Ok(true))));
    let spawned = {
        let (history, store) = (history.clone(), store.clone());
        tokio::spawn(async move { reserve(&history, &store, 3, "pear").await })
    };
    assert!(matches!(reserve(&history, &store, 3, "pear").await, Ok(true)));
    assert!(matches!(spawned.await.unwrap(), Ok(true)));

    let inside = Notify::new();
    tokio::select! {
        _ = cancelled_inside(4, &inside) => unreachable!("it never returns"),
        () = inside.notified() => {}
    }
    drop(recording);

    let report = history.check();
    assert!(report.is_clean(), "{report}");
    let grants = history.grants();
    assert_eq!(grants.len(), ids.len() + 4 + 1, "every call is one grant: {grants:#?}");
    assert_eq!(report.fenced_writes(), ids.len() + 4);
    let on = |path: &str| grants.iter().filter(|grant| grant.path == path).count();
    assert_eq!(on("/it-recording/orders/1-apple"), 4, "rendered as the template renders it");
    assert_eq!(on("/it-recording/orders/2-apple"), 3);
    assert_eq!(on("/it-recording/orders/3-pear"), 4);
    for grant in &grants {
        assert_eq!(grant.kind, GrantKind::Mutex);
        assert!(grant.start <= grant.end, "{grant:?}");
        assert!(grant.holder.starts_with(&format!("{}/", grant.path)), "the holder is the node: {grant:?}");
        let cancelled = grant.path.ends_with("-cancelled");
        let expected = if cancelled { Outcome::Dropped } else { Outcome::Released };
        assert_eq!(grant.outcome, expected, "{grant:?}");
    }
    // One path's grants, in the order they were granted, follow each other.
    let mut pear: Vec<_> = grants.iter().filter(|grant| grant.path.ends_with("3-pear")).collect();
    pear.sort_by_key(|grant| grant.token);
    assert!(pear.windows(2).all(|pair| pair[0].end <= pair[1].start), "{pear:#?}");
}

/// A loss told at release, a downgrade (recorded from its write lock's release), a re-entry
/// (one grant), semaphore leases with their count; nothing outside the prefix, nothing after
/// the recording stopped.
#[tokio::test]
async fn a_recording_knows_losses_downgrades_reentries_and_leases() {
    let (client, other) = (new_client().await, new_client().await);
    let history = Arc::new(History::new());
    let prefix = format!("{PREFIX}/kinds");
    let recording = history.record_grants_under(&prefix);

    // Lost: deleted by someone else; the release says so.
    let lost = Mutex::with_client(&client, format!("{prefix}/lost")).lock().await.unwrap();
    let told = lost.lost();
    other.zookeeper().delete(lost.node_path(), None).await.unwrap();
    assert_eq!(tokio::time::timeout(PATIENCE, told).await.unwrap(), LostReason::NodeDeleted);
    assert!(matches!(lost.release().await, Err(Error::Lost { .. })));

    // Re-entered: one node, one grant.
    let mutex = Mutex::with_client(&client, format!("{prefix}/reentered"));
    let outer = mutex.lock().await.unwrap();
    let inner = outer.scope(mutex.lock()).await.unwrap();
    inner.release().await.unwrap();
    outer.release().await.unwrap();

    // A downgrade: the read lock holds the path alone once the write lock is let go.
    let rw = RwLock::with_client(&client, format!("{prefix}/downgraded"));
    let write = rw.write().await.unwrap();
    let read = write.scope(rw.read()).await.unwrap();
    write.release().await.unwrap();
    read.release().await.unwrap();

    let semaphore = Semaphore::with_client(&client, format!("{prefix}/pool"), 3);
    for permit in semaphore.acquire_many(2).await.unwrap() {
        permit.release().await.unwrap();
    }

    // Outside the prefix, or after the recording: not recorded.
    Mutex::with_client(&client, format!("{prefix}-elsewhere")).lock().await.unwrap().release().await.unwrap();
    drop(recording);
    Mutex::with_client(&client, format!("{prefix}/after")).lock().await.unwrap().release().await.unwrap();

    let report = history.check();
    assert!(report.is_clean(), "{report}");
    let grants = history.grants();
    let of = |name: &str| grants.iter().filter(|grant| grant.path == format!("{prefix}/{name}")).collect::<Vec<_>>();
    assert!(
        matches!(&of("lost")[..], [grant] if grant.outcome == Outcome::Lost { reason: LostReason::NodeDeleted.to_string() })
    );
    assert_eq!(of("reentered").len(), 1, "one grant for the node of a re-entered lock");
    let downgraded = of("downgraded");
    let (writes, reads): (Vec<&&Grant>, Vec<&&Grant>) =
        downgraded.iter().partition(|grant| grant.kind == GrantKind::Write);
    assert!(matches!((&writes[..], &reads[..]), ([write], [read]) if read.start >= write.end), "{downgraded:#?}");
    let pool = of("pool");
    assert_eq!(pool.len(), 2);
    assert!(pool.iter().all(|grant| grant.kind == GrantKind::Semaphore { leases: 3 }), "{pool:#?}");
    assert_eq!(grants.len(), 1 + 1 + 2 + 2, "nothing outside the prefix or after the recording: {grants:#?}");
}

/// Issue 34 (7): a `SharedCount` semaphore whose count changes between two cycles, then while a
/// request waits, is one recipe with the count each lease was granted under; its history is
/// clean (it was "granted by recipes that cannot share a path (semaphore:2, semaphore:3)").
#[tokio::test]
async fn a_semaphore_whose_shared_count_changes_is_recorded_and_checked_as_one() {
    let (client, other) = (new_client().await, new_client().await);
    let history = Arc::new(History::new());
    let prefix = format!("{PREFIX}/shared-count");
    let path = format!("{prefix}/pool");
    let count_path = format!("{prefix}-count");
    let recording = history.record_grants_under(&prefix);
    let admin = SharedCount::with_client(&client, &count_path, 2);
    admin.start().await.unwrap();
    let semaphore = |client: &Client| {
        Semaphore::with_client_and_count(client, &path, SharedCount::with_client(client, &count_path, 2))
    };

    // Two cycles one after the other: two leases under a count of 2, three under 3.
    for n in [2, 3] {
        admin.set(n).await.unwrap();
        let counted = semaphore(&client);
        let permits = counted.acquire_many(n.unsigned_abs()).await.unwrap();
        for permit in permits {
            permit.release().await.unwrap();
        }
    }

    // Lowered to 1 with a lease out; a request waits, and is granted when the count rises.
    admin.set(1).await.unwrap();
    let held = semaphore(&client).acquire().await.unwrap();
    let waiter = {
        let counted = semaphore(&other);
        tokio::spawn(async move { counted.acquire().await })
    };
    queue_of(&client, &format!("{path}/leases"), 2).await;
    // Not proof on its own (the waiter may not have looked yet): the leases counted at the end are.
    assert!(!waiter.is_finished(), "2 leases exceed a count of 1");
    admin.set(2).await.unwrap();
    let second = tokio::time::timeout(PATIENCE, waiter).await.expect("woken by the count").unwrap().unwrap();
    assert!(held.is_held() && second.is_held());
    held.release().await.unwrap();
    second.release().await.unwrap();
    drop(recording);

    let report = history.check();
    assert!(report.is_clean(), "{report}");
    let counts: Vec<u32> = history
        .grants()
        .iter()
        .map(|grant| match grant.kind {
            GrantKind::Semaphore { leases } => leases,
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(counts.len(), 2 + 3 + 2, "{counts:?}");
    assert_eq!(counts.iter().filter(|&&leases| leases == 2).count(), 2 + 1, "{counts:?}");
    assert_eq!(counts.iter().filter(|&&leases| leases == 3).count(), 3, "{counts:?}");
}
