//! What lock-order checking records: the locks granted and not yet released, and the edges
//! from the classes of the locks an acquisition is nested in (its holders' scopes, see
//! `holds::scope`) to the class of the lock it starts to acquire. One process-wide table behind
//! a mutex, touched only while checking is on.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::panic::Location;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use super::graph::{LockOrder, LockOrderEdge};
use super::owner::Owner;
use super::switch::lock_order_checking;
use crate::declared::Declaration;

/// A lock as lock-order checking sees it: a path, the template it was rendered from, and the
/// annotated function that takes it.
#[derive(Clone, Copy)]
pub(crate) struct OrderedLock<'a> {
    pub path: &'a str,
    /// The annotated function's template, or the one named through the API (`with_template`).
    pub template: Option<&'static str>,
    /// `None` for a lock taken through the API.
    pub site: Option<&'static Declaration>,
    /// Where the recipe was made: named for a lock taken through the API.
    pub made_at: &'static Location<'static>,
}

impl OrderedLock<'_> {
    /// The lock's class: its template without the placeholders' names (`/account_<from>` and
    /// `/account_<to>` are one class, `/account_<_>`), or else its path.
    fn class(&self) -> Cow<'static, str> {
        self.template.map_or_else(|| Cow::Owned(self.path.to_owned()), template_class)
    }
}

/// `template` with every `<placeholder>` written `<_>`.
fn template_class(template: &'static str) -> Cow<'static, str> {
    if !template.contains('<') {
        return Cow::Borrowed(template);
    }
    let mut class = String::with_capacity(template.len());
    let mut in_placeholder = false;
    for c in template.chars() {
        match c {
            '<' => {
                in_placeholder = true;
                class.push_str("<_>");
            }
            '>' if in_placeholder => in_placeholder = false,
            _ if in_placeholder => {}
            c => class.push(c),
        }
    }
    Cow::Owned(class)
}

/// Which granted lock: the task (or thread) that took it, and its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeldKey {
    owner: Owner,
    id: u64,
}

/// A granted lock among the locks held; dropped (by whichever task releases the lock), it
/// leaves them.
pub(crate) struct Held(HeldKey);

impl Held {
    pub(crate) fn key(&self) -> HeldKey {
        self.0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let HeldKey { owner, id } = self.0;
        let mut recorder = recorder();
        if let Some(held) = recorder.held.get_mut(&owner) {
            held.retain(|lock| lock.id != id);
            if held.is_empty() {
                recorder.held.remove(&owner);
            }
        }
    }
}

struct HeldLock {
    id: u64,
    /// Its path, to tell a task that waits for a lock it holds outside the waiting code.
    path: Box<str>,
    class: Cow<'static, str>,
    site: Option<&'static Declaration>,
    made_at: &'static Location<'static>,
}

/// What the first acquisition that made an edge says, and how many made it.
struct EdgeSeen {
    count: u64,
    held_by: Option<&'static Declaration>,
    taken_by: Option<&'static Declaration>,
    held_at: &'static Location<'static>,
    taken_at: &'static Location<'static>,
}

#[derive(Default)]
struct Recorder {
    /// The locks each task (or thread) took and holds (no entry for one that holds none).
    held: HashMap<Owner, Vec<HeldLock>>,
    /// held class -> taken class -> the edge: memory grows with the edges between classes only.
    edges: HashMap<Arc<str>, HashMap<Arc<str>, EdgeSeen>>,
    next_id: u64,
}

static RECORDER: LazyLock<Mutex<Recorder>> = LazyLock::new(Mutex::default);

fn recorder() -> MutexGuard<'static, Recorder> {
    RECORDER.lock().unwrap_or_else(PoisonError::into_inner)
}

tokio::task_local! {
    /// The members a multi-lock acquisition has taken so far. Each next one is acquired nested
    /// in their scopes (so they are among its enclosing locks); listed here so that those of its
    /// own class make no edge.
    static TOGETHER: RefCell<Vec<HeldKey>>;
}

/// Runs `acquire`, the acquisition of a multi-lock's members, as one: each member is acquired
/// while holding those taken before it, and members of one class make no edge between them
/// (see [`acquiring`]).
pub(crate) async fn together<F: Future>(acquire: F) -> F::Output {
    TOGETHER.scope(RefCell::default(), acquire).await
}

/// An acquisition of `lock` starts (a re-entry is no acquisition), nested in the locks
/// `enclosing` gives: records an edge from each of their classes to `lock`'s, and warns of a
/// lock the task holds outside the waiting code (it may be waiting for itself).
pub(crate) fn acquiring(lock: OrderedLock<'_>, enclosing: impl FnOnce() -> Vec<HeldKey>) {
    if !lock_order_checking() {
        return;
    }
    let nested_in = enclosing();
    let members = TOGETHER.try_with(|members| members.borrow().clone()).unwrap_or_default();
    let mut recorder = recorder();
    warn_of_a_wait_for_itself(&recorder.held, &nested_in, lock.path);
    record_edges(&mut recorder, lock, nested_in, &members);
}

/// A nested acquisition of `lock` may wait for its holder's loan, which a sibling nested in the
/// same holder has: records an edge from each class of `inside_lender` (the scopes between the
/// acquisition and the holder that lends) to `lock`'s, since such a sibling may wait for one of
/// them.
pub(crate) fn borrowing(lock: OrderedLock<'_>, inside_lender: Vec<HeldKey>) {
    if !lock_order_checking() || inside_lender.is_empty() {
        return;
    }
    record_edges(&mut recorder(), lock, inside_lender, &[]);
}

/// Records an edge from the class of each of `nested_in` to `lock`'s, but from a member of the
/// multi-lock acquisition taking `lock` (`members`) of its own class.
fn record_edges(recorder: &mut Recorder, lock: OrderedLock<'_>, nested_in: Vec<HeldKey>, members: &[HeldKey]) {
    let taken = lock.class();
    let Recorder { held, edges, .. } = recorder;
    let mut from: Vec<&HeldLock> = Vec::with_capacity(nested_in.len());
    for key in &nested_in {
        let Some(holding) = held.get(&key.owner).and_then(|locks| locks.iter().find(|lock| lock.id == key.id)) else {
            continue;
        };
        // A multi-lock takes its members in sorted order: two of one class never wait for
        // each other across its calls. Members of different classes do make an edge: code
        // taking those classes one by one in the other order can deadlock with it.
        let sorted_sibling = members.contains(key) && holding.class == taken;
        if !sorted_sibling && !from.iter().any(|seen| seen.class == holding.class) {
            from.push(holding);
        }
    }
    for holding in from {
        if !edges.contains_key(&*holding.class) {
            edges.insert(Arc::from(&*holding.class), HashMap::new());
        }
        let to = edges.get_mut(&*holding.class).expect("inserted above");
        match to.get_mut(&*taken) {
            Some(edge) => edge.count += 1,
            None => {
                let seen = EdgeSeen {
                    count: 1,
                    held_by: holding.site,
                    taken_by: lock.site,
                    held_at: holding.made_at,
                    taken_at: lock.made_at,
                };
                to.insert(Arc::from(&*taken), seen);
            }
        }
    }
}

/// Warns when the current task holds `path`, taken outside the code now acquiring it: a sibling
/// future's lock, which it waits for like any contender, or the task's own earlier lock, which
/// it would wait for forever.
fn warn_of_a_wait_for_itself(held: &HashMap<Owner, Vec<HeldLock>>, nested_in: &[HeldKey], path: &str) {
    if held_outside(held, nested_in, path) {
        crate::trace::waits_for_own_task(path);
    }
}

/// Whether the current task holds `path`, taken outside the code nested in `nested_in`.
fn held_outside(held: &HashMap<Owner, Vec<HeldLock>>, nested_in: &[HeldKey], path: &str) -> bool {
    let owner = Owner::current();
    let Some(locks) = held.get(&owner) else { return false };
    locks.iter().any(|lock| *lock.path == *path && !nested_in.contains(&HeldKey { owner, id: lock.id }))
}

/// Whether the current task holds `path`, taken outside the code nested in the locks
/// `enclosing` gives: the condition of the warning that it waits for itself, asked again when
/// its wait timed out, so that the error says it too. `false` while checking is off.
pub(crate) fn holds_outside(path: &str, enclosing: impl FnOnce() -> Vec<HeldKey>) -> bool {
    if !lock_order_checking() {
        return false;
    }
    let nested_in = enclosing();
    held_outside(&recorder().held, &nested_in, path)
}

/// The current task was granted `lock`: it is held until the returned [`Held`] is dropped.
/// `None` when checking is off.
pub(crate) fn granted(lock: OrderedLock<'_>) -> Option<Held> {
    if !lock_order_checking() {
        return None;
    }
    let owner = Owner::current();
    let class = lock.class();
    let mut recorder = recorder();
    let id = recorder.next_id;
    recorder.next_id += 1;
    let held = HeldLock { id, path: lock.path.into(), class, site: lock.site, made_at: lock.made_at };
    recorder.held.entry(owner).or_default().push(held);
    let key = HeldKey { owner, id };
    // Not a member of a multi-lock acquisition: the try_with finds none.
    let _ = TOGETHER.try_with(|members| members.borrow_mut().push(key));
    Some(Held(key))
}

/// The edges recorded so far.
pub(crate) fn recorded() -> LockOrder {
    let recorder = recorder();
    let edges = recorder.edges.iter().flat_map(|(held, to)| {
        to.iter().map(|(taken, edge)| LockOrderEdge {
            held: held.to_string(),
            taken: taken.to_string(),
            count: edge.count,
            held_by: edge.held_by.copied(),
            taken_by: edge.taken_by.copied(),
            held_at: edge.held_by.is_none().then_some(edge.held_at),
            taken_at: edge.taken_by.is_none().then_some(edge.taken_at),
        })
    });
    LockOrder::new(edges.collect())
}

#[cfg(test)]
mod tests {
    use super::super::switch::set_lock_order_checking;
    use super::*;

    fn api(path: &str) -> OrderedLock<'_> {
        OrderedLock { path, site: None, template: None, made_at: Location::caller() }
    }

    /// The recorded edges whose classes start with `prefix`, as (held, taken, count).
    fn edges_under(prefix: &str) -> Vec<(String, String, u64)> {
        let graph = recorded();
        let ours = graph.edges().iter().filter(|edge| edge.held.starts_with(prefix) && edge.taken.starts_with(prefix));
        ours.map(|edge| (edge.held.clone(), edge.taken.clone(), edge.count)).collect()
    }

    fn edge(held: &str, taken: &str, count: u64) -> (String, String, u64) {
        (held.to_owned(), taken.to_owned(), count)
    }

    /// Taken by the tests that set the switch, so that one does not turn it off under another.
    static SWITCH: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[test]
    fn a_template_class_leaves_out_the_placeholders_names() {
        assert_eq!(template_class("/account_<from>"), template_class("/account_<to>"));
        assert_eq!(template_class("/users/<req.user_id>/x_<self.0>"), "/users/<_>/x_<_>");
        assert!(matches!(template_class("/plain"), Cow::Borrowed("/plain")));
    }

    /// The keys of `held`, as the scopes of the code acquiring would give them.
    fn nested_in(held: &[&Option<Held>]) -> impl FnOnce() -> Vec<HeldKey> {
        let keys: Vec<HeldKey> = held.iter().filter_map(|held| held.as_ref().map(Held::key)).collect();
        move || keys
    }

    #[tokio::test]
    async fn records_edges_from_the_locks_the_acquisition_is_nested_in_only_while_on() {
        let _switch = SWITCH.lock().await;
        set_lock_order_checking(false);
        tokio::spawn(async {
            assert!(granted(api("/unit-off/a")).is_none(), "off: no hold is kept");
            acquiring(api("/unit-off/b"), || panic!("off: the scopes are not even looked at"));
        })
        .await
        .unwrap();
        assert_eq!(edges_under("/unit-off/"), []);

        set_lock_order_checking(true);
        let outside = granted(api("/unit-on/outside"));
        assert!(outside.is_some(), "on, outside a task");
        acquiring(api("/unit-on/under-outside"), nested_in(&[&outside]));
        drop(outside);
        let moved = tokio::spawn(async {
            let a = granted(api("/unit-on/a"));
            acquiring(api("/unit-on/b"), nested_in(&[&a]));
            let b = granted(api("/unit-on/b"));
            drop(b);
            acquiring(api("/unit-on/c"), nested_in(&[&a]));
            // A sibling of the holder of a: the same task, not nested in it.
            acquiring(api("/unit-on/sibling"), Vec::new);
            a
        })
        .await
        .unwrap();
        assert_eq!(
            edges_under("/unit-on/"),
            [
                edge("/unit-on/a", "/unit-on/b", 1),
                edge("/unit-on/a", "/unit-on/c", 1),
                edge("/unit-on/outside", "/unit-on/under-outside", 1)
            ]
        );
        assert_eq!(recorder().held.values().flatten().filter(|held| held.class.starts_with("/unit-on/")).count(), 1);
        drop(moved);
        assert_eq!(
            recorder().held.values().flatten().filter(|held| held.class.starts_with("/unit-on/")).count(),
            0,
            "dropped in another task, the hold left the locks held"
        );
    }

    #[tokio::test]
    async fn an_api_lock_named_with_its_template_is_of_the_template_class() {
        let _switch = SWITCH.lock().await;
        set_lock_order_checking(true);
        let named = |path| OrderedLock {
            path,
            site: None,
            template: Some("/unit-named/account_<id>"),
            made_at: Location::caller(),
        };
        tokio::spawn(async move {
            let first = granted(named("/unit-named/account_1"));
            acquiring(named("/unit-named/account_2"), nested_in(&[&first]));
            drop(first);
        })
        .await
        .unwrap();
        assert_eq!(edges_under("/unit-named/"), [edge("/unit-named/account_<_>", "/unit-named/account_<_>", 1)]);
    }

    #[tokio::test]
    async fn the_members_of_one_multi_lock_make_edges_only_between_classes() {
        let _switch = SWITCH.lock().await;
        set_lock_order_checking(true);
        let member = |path| OrderedLock {
            path,
            site: None,
            template: Some("/unit-together/m_<id>"),
            made_at: Location::caller(),
        };
        tokio::spawn(async move {
            let before = granted(api("/unit-together/before"));
            let members = together(async {
                let first = granted(member("/unit-together/m_1"));
                // Each member is acquired nested in the scopes of those taken before it.
                acquiring(member("/unit-together/m_2"), nested_in(&[&before, &first]));
                let second = granted(member("/unit-together/m_2"));
                acquiring(api("/unit-together/other"), nested_in(&[&before, &first, &second]));
                [first, second, granted(api("/unit-together/other"))]
            })
            .await;
            acquiring(api("/unit-together/after"), nested_in(&[&before, &members[0], &members[1], &members[2]]));
            drop((before, members));
        })
        .await
        .unwrap();
        assert_eq!(
            edges_under("/unit-together/"),
            [
                edge("/unit-together/before", "/unit-together/after", 1),
                edge("/unit-together/before", "/unit-together/m_<_>", 1),
                edge("/unit-together/before", "/unit-together/other", 1),
                edge("/unit-together/m_<_>", "/unit-together/after", 1),
                edge("/unit-together/m_<_>", "/unit-together/other", 1),
                edge("/unit-together/other", "/unit-together/after", 1),
            ]
        );
    }
}
