//! What lock-order checking records: the locks each holder (a tokio task, or a thread outside
//! any task, as re-entrancy knows holders) holds, and the edges from the classes it holds to the
//! class of each lock it starts to acquire. One process-wide table
//! behind a mutex, touched only while checking is on.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use super::graph::{LockOrder, LockOrderEdge};
use super::switch::lock_order_checking;
use crate::declared::Declaration;
use crate::holder::Owner;

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

/// A granted lock in its holder's set of held locks; dropped (by whichever task releases the
/// lock), it leaves that set.
pub(crate) struct Held {
    owner: Owner,
    id: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut recorder = recorder();
        if let Some(held) = recorder.held.get_mut(&self.owner) {
            held.retain(|lock| lock.id != self.id);
            if held.is_empty() {
                recorder.held.remove(&self.owner);
            }
        }
    }
}

struct HeldLock {
    id: u64,
    class: Cow<'static, str>,
    site: Option<&'static Declaration>,
    made_at: &'static Location<'static>,
    /// The multi-lock acquisition that took it, if one did.
    together: Option<u64>,
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
    /// The locks each holder holds (no entry for one that holds none).
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
    /// The multi-lock acquisition the task is in: its members are taken in sorted order, so two
    /// of one class make no edge between them.
    static TOGETHER: u64;
}

/// Runs `acquire`, the acquisition of a multi-lock's members, as one: its members of one class
/// make no edge between them (see [`acquiring`]).
pub(crate) async fn together<F: Future>(acquire: F) -> F::Output {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    TOGETHER.scope(NEXT.fetch_add(1, Ordering::Relaxed), acquire).await
}

/// The current holder starts to acquire `lock` (a re-entry is no acquisition): records an edge
/// from each class it holds to `lock`'s class.
pub(crate) fn acquiring(lock: OrderedLock<'_>) {
    if !lock_order_checking() {
        return;
    }
    let owner = Owner::current();
    let together = TOGETHER.try_with(|id| *id).ok();
    let taken = lock.class();
    let mut recorder = recorder();
    let Recorder { held, edges, .. } = &mut *recorder;
    let Some(holding_now) = held.get(&owner) else { return };
    let mut from: Vec<&HeldLock> = Vec::with_capacity(holding_now.len());
    for holding in holding_now {
        // A multi-lock takes its members in sorted order: two of one class never wait for
        // each other across its calls. Members of different classes do make an edge: code
        // taking those classes one by one in the other order can deadlock with it.
        let sorted_sibling = together.is_some() && holding.together == together && holding.class == taken;
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

/// The current holder was granted `lock`: it holds it until the returned [`Held`] is dropped.
/// `None` when checking is off.
pub(crate) fn granted(lock: OrderedLock<'_>) -> Option<Held> {
    if !lock_order_checking() {
        return None;
    }
    let owner = Owner::current();
    let together = TOGETHER.try_with(|id| *id).ok();
    let class = lock.class();
    let mut recorder = recorder();
    let id = recorder.next_id;
    recorder.next_id += 1;
    let held = HeldLock { id, class, site: lock.site, made_at: lock.made_at, together };
    recorder.held.entry(owner).or_default().push(held);
    Some(Held { owner, id })
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

    #[tokio::test]
    async fn records_edges_from_the_locks_the_task_holds_only_while_on() {
        let _switch = SWITCH.lock().await;
        set_lock_order_checking(false);
        tokio::spawn(async {
            assert!(granted(api("/unit-off/a")).is_none(), "off: no hold is kept");
            acquiring(api("/unit-off/b"));
        })
        .await
        .unwrap();
        assert_eq!(edges_under("/unit-off/"), []);

        set_lock_order_checking(true);
        // Outside any task (this test's body), the thread is the holder, as for re-entrancy.
        let outside = granted(api("/unit-on/outside")).expect("on, outside a task");
        acquiring(api("/unit-on/under-outside"));
        drop(outside);
        let moved = tokio::spawn(async {
            let a = granted(api("/unit-on/a")).expect("on, in a task");
            acquiring(api("/unit-on/b"));
            let b = granted(api("/unit-on/b"));
            drop(b);
            acquiring(api("/unit-on/c"));
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
            "dropped in another task, the hold left the set of the task that took it"
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
            acquiring(named("/unit-named/account_2"));
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
                acquiring(member("/unit-together/m_2"));
                let second = granted(member("/unit-together/m_2"));
                acquiring(api("/unit-together/other"));
                [first, second, granted(api("/unit-together/other"))]
            })
            .await;
            acquiring(api("/unit-together/after"));
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
