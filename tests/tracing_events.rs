//! The spans and events the library reports to `tracing`, with the field names the crate docs
//! promise, recorded by a small subscriber of our own.
//!
//! A binary of its own: it installs that subscriber as the process's global default, which
//! would record (and slow down) every other test's locks too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use zk_lock::testing::{shared_server, wait_for_children};
use zk_lock::{revoke_with, Client, LostReason, Mutex, RwLock};

/// How long a test waits for an expected event before failing.
const PATIENCE: Duration = Duration::from_secs(30);

/// A new client (its own session) of the shared server.
async fn new_client() -> Client {
    Client::builder(shared_server().connect_string())
        .session_timeout(Duration::from_secs(10))
        .connect()
        .await
        .expect("connect to the test server")
}

/// One event as recorded: its level, its own fields and those of the spans it happened in.
#[derive(Debug, Clone)]
struct Recorded {
    level: tracing::Level,
    message: String,
    fields: HashMap<String, String>,
    span_name: Option<&'static str>,
    span_fields: HashMap<String, String>,
}

impl Recorded {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).or_else(|| self.span_fields.get(name)).map(String::as_str)
    }
}

#[derive(Default)]
struct FieldsOf(HashMap<String, String>);

impl Visit for FieldsOf {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// A span's metadata and the fields recorded on it so far.
type SpanRecord = (&'static Metadata<'static>, HashMap<String, String>);

/// Keeps every span's fields and every event of the `zk_lock` target.
#[derive(Default)]
struct Recorder {
    next_id: AtomicU64,
    spans: StdMutex<HashMap<u64, SpanRecord>>,
    events: StdMutex<Vec<Recorded>>,
    /// Woken on every event, for events reported from the background.
    recorded: tokio::sync::Notify,
}

thread_local! {
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Subscriber for Recorder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("zk_lock")
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = FieldsOf::default();
        span.record(&mut fields);
        self.spans.lock().unwrap().insert(id, (span.metadata(), fields.0));
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut fields = FieldsOf::default();
        values.record(&mut fields);
        if let Some((_, known)) = self.spans.lock().unwrap().get_mut(&span.into_u64()) {
            known.extend(fields.0);
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = FieldsOf::default();
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        let current = ENTERED.with(|entered| entered.borrow().last().copied());
        let (span_name, span_fields) = match current.and_then(|id| self.spans.lock().unwrap().get(&id).cloned()) {
            Some((metadata, fields)) => (Some(metadata.name()), fields),
            None => (None, HashMap::new()),
        };
        let recorded = Recorded { level: *event.metadata().level(), message, fields: fields.0, span_name, span_fields };
        self.events.lock().unwrap().push(recorded);
        self.recorded.notify_waiters();
    }
    // `Span::current()` asks the subscriber, so the library's `record` calls find their span.
    fn current_span(&self) -> tracing_core::span::Current {
        let current = ENTERED.with(|entered| entered.borrow().last().copied());
        match current.and_then(|id| self.spans.lock().unwrap().get(&id).map(|(metadata, _)| (id, *metadata))) {
            Some((id, metadata)) => tracing_core::span::Current::new(Id::from_u64(id), metadata),
            None => tracing_core::span::Current::none(),
        }
    }
    fn enter(&self, span: &Id) {
        ENTERED.with(|entered| entered.borrow_mut().push(span.into_u64()));
    }
    fn exit(&self, span: &Id) {
        ENTERED.with(|entered| {
            let mut entered = entered.borrow_mut();
            if let Some(at) = entered.iter().rposition(|&id| id == span.into_u64()) {
                entered.remove(at);
            }
        });
    }
}

fn recorder() -> &'static Arc<Recorder> {
    static RECORDER: OnceLock<Arc<Recorder>> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = Arc::new(Recorder::default());
        tracing::subscriber::set_global_default(recorder.clone()).expect("the only subscriber of this test binary");
        recorder
    })
}

/// The recorded events about `path` (by the `path` field of the event or of its span).
fn events_about(path: &str) -> Vec<Recorded> {
    let events = recorder().events.lock().unwrap();
    events.iter().filter(|e| e.field("path") == Some(path)).cloned().collect()
}

/// Waits until `count` events `message` about `path` were recorded; panics after [`PATIENCE`].
async fn wait_for_events(path: &str, message: &str, count: usize) {
    let about = |e: &&Recorded| e.field("path") == Some(path) && e.message == message;
    wait_until(&format!("{count} `{message}` events about {path}"), |events| {
        events.iter().filter(about).count() >= count
    })
    .await;
}

/// Every event recorded so far.
fn all_events() -> Vec<Recorded> {
    recorder().events.lock().unwrap().clone()
}

/// Waits until the recorded events satisfy `done`; panics after [`PATIENCE`], saying `what` was
/// awaited.
async fn wait_until(what: &str, done: impl Fn(&[Recorded]) -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let recorded = recorder().recorded.notified();
        tokio::pin!(recorded);
        recorded.as_mut().enable();
        if done(&all_events()) {
            return;
        }
        if tokio::time::timeout_at(deadline, recorded).await.is_err() {
            panic!("never saw {what}: {:#?}", all_events());
        }
    }
}

fn one(events: &[Recorded], message: &str, matching: impl Fn(&Recorded) -> bool) -> Recorded {
    let found: Vec<_> = events.iter().filter(|e| e.message == message && matching(e)).collect();
    assert_eq!(found.len(), 1, "expected one `{message}` event, found {found:#?} among {events:#?}");
    found[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisition_queue_position_release_and_drop_are_reported() {
    recorder();
    let path = "/it-tracing/acquire";
    let (first_client, second_client) = (new_client().await, new_client().await);
    let first = Mutex::with_client(&first_client, path).lock().await.unwrap();
    let waiting = tokio::spawn({
        let second_client = second_client.clone();
        async move { Mutex::with_client(&second_client, path).lock().await }
    });
    wait_for_children(&first_client, path, |children| children.len() == 2).await.unwrap();
    let first_token = first.fencing_token();
    first.release().await.unwrap();
    let second = waiting.await.unwrap().unwrap();
    let second_token = second.fencing_token();
    drop(second);
    wait_for_children(&first_client, path, <[String]>::is_empty).await.unwrap();
    // A dropped guard's release is reported once ZooKeeper confirmed the delete, in the background.
    wait_for_events(path, "lock released", 2).await;

    let events = events_about(path);
    // Places in line: the holder is 1st.
    let joined_first = one(&events, "joined the lock queue", |e| e.field("queue_position") == Some("1"));
    assert_eq!(joined_first.field("ahead"), Some("0"));
    assert_eq!(joined_first.span_name, Some("zk_lock.acquire"));
    assert_eq!(joined_first.field("recipe"), Some("mutex"));
    let joined_second = one(&events, "joined the lock queue", |e| e.field("queue_position") == Some("2"));
    assert_eq!(joined_second.field("ahead"), Some("1"));

    for token in [first_token, second_token] {
        let acquired = one(&events, "lock acquired", |e| e.field("fencing_token") == Some(&token.to_string()));
        assert_eq!(acquired.level, tracing::Level::DEBUG);
        assert_eq!(acquired.field("recipe"), Some("mutex"));
        let node = acquired.field("node").expect("the granted node is on the span");
        assert!(node.starts_with(&format!("{path}/_c_")), "node {node}");
        let waited: f64 = acquired.field("waited_ms").unwrap().parse().unwrap();
        assert!(waited >= 0.0);
    }
    let released = one(&events, "lock released", |e| e.field("dropped") == Some("false"));
    assert_eq!(released.field("recipe"), Some("mutex"));
    assert!(released.field("held_ms").unwrap().parse::<f64>().unwrap() >= 0.0);
    one(&events, "lock released", |e| e.field("dropped") == Some("true"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_a_loss_and_a_revocation_are_reported() {
    recorder();
    let path = "/it-tracing/lost";
    let (client, other) = (new_client().await, new_client().await);
    let guard = Mutex::with_client(&client, path).lock().await.unwrap();

    let timed_out = Mutex::with_client(&other, path).try_lock().await.unwrap_err();
    assert!(matches!(timed_out, zk_lock::Error::Busy { .. }), "{timed_out}");

    assert_eq!(revoke_with(&other, path).await.unwrap(), 1);
    guard.revoked().await;
    other.zookeeper().delete(guard.node_path(), None).await.unwrap();
    assert_eq!(guard.lost().await, LostReason::NodeDeleted);

    let events = events_about(path);
    let refused = one(&events, "lock not acquired", |_| true);
    assert!(refused.field("error").unwrap().contains(path), "{refused:?}");
    let revoked = one(&events, "lock revocation requested", |_| true);
    assert_eq!(revoked.level, tracing::Level::INFO);
    assert_eq!(revoked.field("node"), Some(guard.node_path()));
    let lost = one(&events, "lock lost", |_| true);
    assert_eq!(lost.level, tracing::Level::WARN);
    assert_eq!(lost.field("reason"), Some(LostReason::NodeDeleted.to_string().as_str()));
    assert!(lost.field("held_ms").is_some());

    // Releasing the lost lock reports no release, and the loss only once.
    assert!(matches!(guard.release().await, Err(zk_lock::Error::Lost { .. })));
    let events = events_about(path);
    assert!(!events.iter().any(|e| e.message == "lock released"), "{events:#?}");
    one(&events, "lock lost", |_| true);
}

/// The one WARN event about `path`; panics if there is none or more.
fn the_only_warning_about(path: &str) -> Recorded {
    let events = events_about(path);
    let warned: Vec<_> = events.iter().filter(|e| e.level == tracing::Level::WARN).cloned().collect();
    assert_eq!(warned.len(), 1, "one warning: {events:#?}");
    warned.into_iter().next().expect("one")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_locking_again_outside_its_holders_scope_is_warned_that_it_may_wait_for_itself() {
    recorder();
    zk_lock::lock_order::set_lock_order_checking(true);
    let path = "/it-tracing/self-wait";
    let client = new_client().await;
    let mutex = Mutex::with_client(&client, path);
    let guard = mutex.lock().await.unwrap();
    // Inside the holder's scope: a re-entry, no warning.
    drop(guard.scope(mutex.lock()).await.unwrap());
    assert!(events_about(path).iter().all(|e| e.level != tracing::Level::WARN), "{:#?}", events_about(path));

    // Sequential code of the same task, outside the scope: it waits for itself, and is told.
    let again = mutex.lock_timeout(Duration::from_millis(300)).await;
    assert!(matches!(again, Err(zk_lock::Error::Timeout { held_by_this_task: true, .. })), "{again:?}");
    // The error says it too, not only the event (issue 34).
    let said = again.unwrap_err().to_string();
    assert!(said.contains("waited for itself") && said.contains("scope(..)"), "{said}");
    let warned = the_only_warning_about(path);
    assert!(warned.message.contains("waits for itself") && warned.message.contains("scope(..)"), "{warned:?}");
    guard.release().await.unwrap();

    // Another task waits behind the same holder like any contender: no such word.
    let guard = mutex.lock().await.unwrap();
    let elsewhere =
        tokio::spawn(async move { Mutex::with_client(&client, path).lock_timeout(Duration::from_millis(300)).await });
    let elsewhere = elsewhere.await.unwrap();
    assert!(matches!(elsewhere, Err(zk_lock::Error::Timeout { held_by_this_task: false, .. })), "{elsewhere:?}");
    assert!(elsewhere.unwrap_err().to_string().contains("zk-lock inspect"));
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_code_waiting_for_its_own_earlier_guards_loan_is_warned() {
    recorder();
    zk_lock::lock_order::set_lock_order_checking(true);
    let path = "/it-tracing/loan-wait";
    let client = new_client().await;
    let mutex = Mutex::with_client(&client, path);
    let guard = mutex.lock().await.unwrap();
    let waited = guard
        .scope(async {
            let first = mutex.lock().await.unwrap();
            let second = mutex.lock_timeout(Duration::from_millis(300)).await;
            drop(first);
            second
        })
        .await;
    assert!(matches!(waited, Err(zk_lock::Error::Timeout { .. })), "{waited:?}");
    let warned = the_only_warning_about(path);
    assert!(warned.message.contains("on loan") && warned.message.contains("scope(..)"), "{warned:?}");
    guard.release().await.unwrap();
}

/// Places in line are numbered one way everywhere, the holder being 1st: the `queue_position` of
/// `joined the lock queue` is the place the waiter is told (`place`, "2nd in line"). A writer
/// joining an empty queue is 1st; two readers behind it both wait for it alone, so both are 2nd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_positions_and_places_in_line_both_count_the_holder_as_first() {
    recorder();
    let path = "/it-tracing/places";
    let (client, other) = (new_client().await, new_client().await);
    let writer = RwLock::with_client(&client, path).write().await.unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let other = other.clone();
            tokio::spawn(async move { RwLock::with_client(&other, path).read().await })
        })
        .collect();
    let told = |events: &[Recorded]| {
        events.iter().filter(|e| e.field("path") == Some(path) && e.fields.contains_key("place")).count()
    };
    wait_until("both readers told their place", |events| told(events) == 2).await;
    writer.release().await.unwrap();
    for reader in readers {
        reader.await.unwrap().unwrap().release().await.unwrap();
    }

    let events = events_about(path);
    let mut joined: Vec<&str> = events
        .iter()
        .filter(|e| e.message == "joined the lock queue")
        .map(|e| e.field("queue_position").expect("a queue_position"))
        .collect();
    joined.sort_unstable();
    assert_eq!(joined, ["1", "2", "2"], "the writer is 1st, each reader 2nd: {events:#?}");
    for place in events.iter().filter(|e| e.fields.contains_key("place")) {
        assert_eq!(place.field("place"), Some("2"), "{place:#?}");
        assert!(place.message.starts_with("2nd in line"), "{place:#?}");
    }
}

/// The WARN event of a session whose authentication ZooKeeper refused, if any.
fn refusal_of(session: &str) -> Option<Recorded> {
    let events = all_events();
    events.into_iter().find(|e| e.level == tracing::Level::WARN && e.field("session") == Some(session))
}

/// A session whose authentication ZooKeeper refuses is given up by zookeeper-client: its locks
/// are lost as `SessionClosed`, and a WARN event names the session and says its authentication
/// was refused (the loss's own message cannot know whether credentials were given, and names
/// none). A close makes zookeeper-client give its session up the same way, and is no refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_authentication_is_warned_of_and_a_close_is_not() {
    recorder();
    let client = new_client().await;
    let guard = Mutex::with_client(&client, "/it-tracing/auth-refused").lock().await.unwrap();
    let zk = client.zookeeper();
    let session = zk.session_id().to_string();
    // A scheme no server knows: the server refuses it, and zookeeper-client gives the session up.
    let refused = zk.auth("zk-lock-test-no-such-scheme", b"").await;
    assert!(matches!(refused, Err(zookeeper_client::Error::AuthFailed)), "{refused:?}");
    assert_eq!(tokio::time::timeout(PATIENCE, guard.lost()).await, Ok(LostReason::SessionClosed));
    wait_until("the refusal's warning", |_| refusal_of(&session).is_some()).await;
    let warned = refusal_of(&session).expect("warned");
    assert!(warned.message.contains("refused to authenticate"), "{warned:#?}");
    assert!(warned.message.contains("ClientBuilder::auth"), "what to check is named: {warned:#?}");

    let closing = new_client().await;
    let held = Mutex::with_client(&closing, "/it-tracing/auth-closed").lock().await.unwrap();
    let closed_session = closing.zookeeper().session_id().to_string();
    closing.close().await;
    assert_eq!(tokio::time::timeout(PATIENCE, held.lost()).await, Ok(LostReason::SessionClosed));
    assert!(refusal_of(&closed_session).is_none(), "a close is no refusal: {:#?}", refusal_of(&closed_session));
}
