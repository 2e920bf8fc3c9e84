//! The metrics of feature `metrics`, read back through a Prometheus recorder: every way an
//! acquisition or a hold can end is counted under its outcome, and the waiting and held gauges
//! come back to zero after each (timeout, busy, cancellation, loss, leases, downgrade, close).
//!
//! A binary of its own: the recorder is process-wide, and the counts must be this test's alone.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::sync::mpsc;
use tokio::time::timeout;
use zk_lock::testing::{shared_server as server, wait_for_children};
use zk_lock::{Client, Error, LostReason, Mutex, RwLock, Semaphore};

const PATIENCE: Duration = Duration::from_secs(30);

/// The process's recorder, installed by the first test to ask. The tests label their locks
/// apart (the API's `(api)` template, or a template of their own), so their counts do not mix.
fn recorder() -> &'static PrometheusHandle {
    static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();
    RECORDER.get_or_init(|| PrometheusBuilder::new().install_recorder().expect("install the recorder"))
}

async fn new_client() -> Client {
    Client::builder(server().connect_string()).connect().await.expect("connect to the test server")
}

/// The value of `name{labels}` (labels in the order recorded), or 0 if the page lacks it.
fn value(page: &str, name: &str, labels: &str) -> f64 {
    let prefix = format!("{name}{{{labels}}} ");
    page.lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok()).unwrap_or(0.0)
}

/// Every gauge sample of `name` on the page.
fn gauges(page: &str, name: &str) -> Vec<(String, f64)> {
    let samples = page.lines().filter(|line| line.starts_with(&format!("{name}{{")));
    samples.filter_map(|line| Some((line.to_owned(), line.rsplit(' ').next()?.parse().ok()?))).collect()
}

/// The page once no acquisition waits and no lock is held (a release is confirmed in the
/// background, after the guard is gone).
async fn settled(metrics: &PrometheusHandle) -> String {
    let at_zero = |page: &str| {
        let all = [gauges(page, "zk_lock_acquisitions_waiting"), gauges(page, "zk_lock_locks_held")].concat();
        all.iter().all(|(_, value)| *value == 0.0)
    };
    timeout(PATIENCE, async {
        loop {
            let page = metrics.render();
            if at_zero(&page) {
                return page;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the gauges never came back to zero:\n{}", metrics.render()))
}

#[tokio::test]
async fn every_way_an_acquisition_or_a_hold_ends_is_counted_and_the_gauges_return_to_zero() {
    let metrics = recorder();
    let (client, other) = (new_client().await, new_client().await);
    let api = |recipe: &str| format!(r#"recipe="{recipe}",template="(api)""#);
    let ended = |recipe: &str, outcome: &str| format!(r#"{},outcome="{outcome}""#, api(recipe));

    // Timeout, busy and a cancelled wait, behind a holder.
    let held = Mutex::with_client(&other, "/it-metrics/busy").lock().await.unwrap();
    let mutex = Mutex::with_client(&client, "/it-metrics/busy");
    assert!(matches!(mutex.lock_timeout(Duration::from_millis(100)).await, Err(Error::Timeout { .. })));
    assert!(matches!(mutex.try_lock().await, Err(Error::Busy { .. })));
    assert!(timeout(Duration::from_millis(100), mutex.lock()).await.is_err(), "cancelled while waiting");
    held.release().await.unwrap();

    // A loss: the node deleted by someone else.
    let lost = Mutex::with_client(&client, "/it-metrics/lost").lock().await.unwrap();
    other.zookeeper().delete(lost.node_path(), None).await.unwrap();
    assert_eq!(timeout(PATIENCE, lost.lost()).await, Ok(LostReason::NodeDeleted));
    drop(lost);

    // Several leases at once, a re-entry, a downgrade.
    let leases = Semaphore::with_client(&client, "/it-metrics/leases", 3).acquire_many(2).await.unwrap();
    drop(leases);
    let rw = RwLock::with_client(&client, "/it-metrics/rw");
    let write = rw.write().await.unwrap();
    let again = write.scope(rw.write()).await.unwrap();
    // Inside the re-entry's scope: `again` has the writer's loan until it goes.
    let read = again.scope(rw.read()).await.unwrap();
    drop((read, again, write));

    // A close: the held lock is lost, the waiting acquisition ends as closed.
    let closing = new_client().await;
    let holder = Mutex::with_client(&other, "/it-metrics/close").lock().await.unwrap();
    let kept = Mutex::with_client(&closing, "/it-metrics/kept").lock().await.unwrap();
    let waiting = tokio::spawn({
        let closing = closing.clone();
        async move { Mutex::with_client(&closing, "/it-metrics/close").lock().await }
    });
    wait_for_children(&other, "/it-metrics/close", |nodes| nodes.len() == 2).await.unwrap();
    closing.close().await;
    assert!(matches!(waiting.await.unwrap(), Err(Error::ClientClosed { .. })));
    drop((kept, holder));

    // An API lock named with its template is labelled with it.
    let labelled = Mutex::with_client(&client, "/it-metrics/orders/7").with_template("/it-metrics/orders/<id>");
    labelled.lock().await.unwrap().release().await.unwrap();

    let page = settled(metrics).await;
    println!("{page}");
    let counted = [
        (ended("mutex", "granted"), 4.0),
        (ended("mutex", "timeout"), 1.0),
        (ended("mutex", "busy"), 1.0),
        (ended("mutex", "closed"), 1.0),
        (ended("semaphore", "granted"), 1.0),
        (ended("write", "granted"), 1.0),
        (ended("read", "granted"), 1.0),
    ];
    for (labels, expected) in counted {
        assert_eq!(value(&page, "zk_lock_acquisitions_total", &labels), expected, "{labels}\n{page}");
        assert_eq!(value(&page, "zk_lock_wait_seconds_count", &labels), expected, "{labels}\n{page}");
    }
    let held_for = [
        (ended("mutex", "released"), 2.0),
        (ended("mutex", "lost"), 2.0),
        (ended("semaphore", "released"), 2.0),
        (ended("write", "released"), 1.0),
        (ended("read", "released"), 1.0),
    ];
    for (labels, expected) in held_for {
        assert_eq!(value(&page, "zk_lock_hold_seconds_count", &labels), expected, "{labels}\n{page}");
    }
    let named = r#"recipe="mutex",template="/it-metrics/orders/<id>",outcome="granted""#;
    assert_eq!(value(&page, "zk_lock_acquisitions_total", named), 1.0, "{page}");
    let lost_by = |reason: &str| format!(r#"{},reason="{reason}""#, api("mutex"));
    assert_eq!(value(&page, "zk_lock_locks_lost_total", &lost_by("node_deleted")), 1.0, "{page}");
    assert_eq!(value(&page, "zk_lock_locks_lost_total", &lost_by("session_closed")), 1.0, "{page}");
}

/// Waits until `waiter` (an acquisition reporting its places to `places`) was told its place in
/// line, and returns it; panics if it ends first.
async fn told_place<T: std::fmt::Debug>(
    waiter: &mut (impl std::future::Future<Output = T> + Unpin),
    places: &mut mpsc::UnboundedReceiver<usize>,
) -> usize {
    tokio::select! {
        ended = waiter => panic!("the acquisition ended before it was told its place: {ended:?}"),
        place = timeout(PATIENCE, places.recv()) => place.expect("told its place in time").expect("a place"),
    }
}

/// `zk_lock_queue_place` shows a waiter's place only while it waits: a waiter that is cancelled,
/// gives up or is granted takes its place off (the gauge shows the latest place of a waiter
/// still waiting), and it is 0 once nobody waits.
#[tokio::test]
async fn the_queue_place_gauge_forgets_each_waiter_that_left() {
    let metrics = recorder();
    let (path, template) = ("/it-metrics/place", "/it-metrics/<place>");
    let labels = format!(r#"recipe="mutex",template="{template}""#);
    let place_now = || value(&metrics.render(), "zk_lock_queue_place", &labels);
    let (client, other) = (new_client().await, new_client().await);
    let waiter = || {
        let (told, places) = mpsc::unbounded_channel();
        let mutex = Mutex::with_client(&client, path).with_template(template).with_queue_reports(move |position| {
            let _ = told.send(position.place);
        });
        (mutex, places)
    };
    let holder = Mutex::with_client(&other, path).with_template(template).lock().await.unwrap();

    // The first waiter is next: 2nd.
    let (first, mut first_places) = waiter();
    let mut first_waits = Box::pin(first.lock());
    assert_eq!(told_place(&mut first_waits, &mut first_places).await, 2);
    assert_eq!(place_now(), 2.0);

    // A second waiter is 3rd, and the latest to learn its place; cancelled, its place goes and
    // the first waiter's shows again.
    let (second, mut second_places) = waiter();
    let mut second_waits = Box::pin(second.lock());
    assert_eq!(told_place(&mut second_waits, &mut second_places).await, 3);
    assert_eq!(place_now(), 3.0);
    drop(second_waits);
    assert_eq!(place_now(), 2.0, "the cancelled waiter's place went");
    wait_for_children(&other, path, |nodes| nodes.len() == 2).await.unwrap();

    // A waiter that gives up.
    let (third, mut third_places) = waiter();
    let mut third_waits = Box::pin(third.lock_timeout(Duration::from_secs(2)));
    assert_eq!(told_place(&mut third_waits, &mut third_places).await, 3);
    assert_eq!(place_now(), 3.0);
    assert!(matches!(third_waits.await, Err(Error::Timeout { .. })));
    assert_eq!(place_now(), 2.0, "the waiter that gave up took its place off");

    // The first waiter is granted: nobody waits any more.
    holder.release().await.unwrap();
    let guard = timeout(PATIENCE, first_waits).await.expect("granted in time").unwrap();
    assert_eq!(place_now(), 0.0, "nobody waits: {}", metrics.render());
    guard.release().await.unwrap();
}

/// A holder's extensions of its `max_hold` are counted (issue 36, point 4).
#[tokio::test]
async fn extensions_of_a_max_hold_are_counted() {
    let metrics = recorder();
    let client = new_client().await;
    let template = r#"recipe="mutex",template="/it-metrics/extended""#;
    let mutex = Mutex::with_client(&client, "/it-metrics/extended")
        .with_template("/it-metrics/extended")
        .with_max_hold(Duration::from_secs(30));
    let guard = mutex.lock().await.unwrap();
    for _ in 0..3 {
        guard.extend_max_hold().unwrap();
    }
    assert_eq!(value(&metrics.render(), "zk_lock_max_hold_extensions_total", template), 3.0, "{}", metrics.render());
    guard.release().await.unwrap();
}

/// A leader election is counted under `recipe="leader"` (issue 36, point 1).
#[tokio::test]
async fn leaderships_are_counted_as_the_leader_recipe() {
    let metrics = recorder();
    let client = new_client().await;
    let election =
        zk_lock::LeaderElection::with_client(&client, "/it-metrics/leader").with_template("/it-metrics/leader");
    election.lead().await.unwrap().resign().await.unwrap();
    let page = settled(metrics).await;
    let granted = r#"recipe="leader",template="/it-metrics/leader",outcome="granted""#;
    assert_eq!(value(&page, "zk_lock_acquisitions_total", granted), 1.0, "{page}");
    let released = r#"recipe="leader",template="/it-metrics/leader",outcome="released""#;
    assert_eq!(value(&page, "zk_lock_hold_seconds_count", released), 1.0, "{page}");
}
