//! Lock-order checking against a real ZooKeeper: `lock_order()` and `check_lock_order()` after
//! annotated functions (and the API) took locks while holding others.
//!
//! The graph is one per process and the tests of this binary run at once, so each test uses
//! templates of its own (`/it-lock-order/<test>/..`) and looks only at the edges and cycles among
//! them. Calls mostly run in spawned tasks, so that each test's locks are held by tasks of its
//! own. An edge is recorded only from the locks an acquisition is nested in (an annotated
//! function's body, a guard's `scope`). Each test turns checking on, for a run in a release build.

use std::future::Future;

use zk_lock::lock_order::{check_lock_order, lock_order, set_lock_order_checking, LockOrderCycle, LockOrderEdge};
use zk_lock::{zk_lock, zk_multi_lock, zk_read_lock, zk_write_lock, Error, Mutex};

use crate::support::{install, PATIENCE};

/// Runs `call` in a task of its own, bounded, and returns what it returned.
async fn in_a_task<T: Send + 'static>(call: impl Future<Output = T> + Send + 'static) -> T {
    let task = tokio::spawn(call);
    tokio::time::timeout(PATIENCE, task).await.expect("the call finished").expect("the call did not panic")
}

/// The recorded edges among the classes under `prefix`.
fn edges_under(prefix: &str) -> Vec<LockOrderEdge> {
    let ours = |edge: &&LockOrderEdge| edge.held.starts_with(prefix) && edge.taken.starts_with(prefix);
    lock_order().edges().iter().filter(ours).cloned().collect()
}

/// The cycles `check_lock_order()` reports among the classes under `prefix`.
fn cycles_under(prefix: &str) -> Vec<LockOrderCycle> {
    match check_lock_order() {
        Ok(()) => Vec::new(),
        Err(cycles) => cycles
            .cycles()
            .iter()
            .filter(|cycle| cycle.classes().all(|class| class.starts_with(prefix)))
            .cloned()
            .collect(),
    }
}

/// An edge in short: held class, taken class, count, the functions that held and took.
type Summary<'a> = (&'a str, &'a str, u64, Option<&'a str>, Option<&'a str>);

/// Each edge in short.
fn summary(edges: &[LockOrderEdge]) -> Vec<Summary<'_>> {
    let function = |by: &Option<zk_lock::declared::Declaration>| by.map(|site| site.function);
    edges
        .iter()
        .map(|e| (e.held.as_str(), e.taken.as_str(), e.count, function(&e.held_by), function(&e.taken_by)))
        .collect()
}

// --- opposite orders -------------------------------------------------------------------------

const OPPOSITE: &str = "/it-lock-order/opposite/";

#[zk_lock(path = "/it-lock-order/opposite/stock_<id>", client = "lock-order-opposite")]
async fn reserve(id: u64) -> Result<(), Error> {
    charge(id).await
}

#[zk_lock(path = "/it-lock-order/opposite/payment_<id>", client = "lock-order-opposite")]
async fn charge(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_lock(path = "/it-lock-order/opposite/payment_<id>", client = "lock-order-opposite")]
async fn refund(id: u64) -> Result<(), Error> {
    restock(id).await
}

#[zk_lock(path = "/it-lock-order/opposite/stock_<id>", client = "lock-order-opposite")]
async fn restock(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[tokio::test]
async fn two_functions_taking_two_templates_in_opposite_orders_are_a_cycle() {
    set_lock_order_checking(true);
    install("lock-order-opposite").await;
    in_a_task(reserve(1)).await.unwrap();
    assert_eq!(
        summary(&edges_under(OPPOSITE)),
        [(
            "/it-lock-order/opposite/stock_<_>",
            "/it-lock-order/opposite/payment_<_>",
            1,
            Some("reserve"),
            Some("charge")
        )]
    );
    assert!(cycles_under(OPPOSITE).is_empty(), "one order so far");

    // Never at the same time here, and with other values: a deadlock only waits for the day two
    // processes run these at once on the same product.
    in_a_task(refund(2)).await.unwrap();
    let cycles = cycles_under(OPPOSITE);
    let [cycle] = &cycles[..] else { panic!("one cycle: {cycles:#?}") };
    assert_eq!(
        summary(cycle.edges()),
        [
            (
                "/it-lock-order/opposite/payment_<_>",
                "/it-lock-order/opposite/stock_<_>",
                1,
                Some("refund"),
                Some("restock")
            ),
            (
                "/it-lock-order/opposite/stock_<_>",
                "/it-lock-order/opposite/payment_<_>",
                1,
                Some("reserve"),
                Some("charge")
            ),
        ]
    );
    let text = check_lock_order().unwrap_err().to_string();
    println!("check_lock_order() says:\n{text}");
    for function in ["reserve", "charge", "refund", "restock"] {
        assert!(text.contains(&format!("`{function}` at tests/recipes/lock_order.rs:")), "{function} in {text}");
    }
}

// --- one order -------------------------------------------------------------------------------

const ONE_ORDER: &str = "/it-lock-order/one-order/";

#[zk_lock(path = "/it-lock-order/one-order/cart_<id>", client = "lock-order-one-order")]
async fn checkout(id: u64) -> Result<(), Error> {
    reserve_stock(id).await
}

#[zk_lock(path = "/it-lock-order/one-order/cart_<cart>", client = "lock-order-one-order")]
async fn cancel(cart: u64, product: u64) -> Result<(), Error> {
    reserve_stock(product).await
}

#[zk_lock(path = "/it-lock-order/one-order/product_<id>", client = "lock-order-one-order")]
async fn reserve_stock(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[tokio::test]
async fn functions_taking_templates_in_one_order_make_no_cycle() {
    set_lock_order_checking(true);
    install("lock-order-one-order").await;
    in_a_task(checkout(1)).await.unwrap();
    in_a_task(cancel(2, 3)).await.unwrap();
    in_a_task(reserve_stock(4)).await.unwrap();
    assert_eq!(
        summary(&edges_under(ONE_ORDER)),
        [(
            "/it-lock-order/one-order/cart_<_>",
            "/it-lock-order/one-order/product_<_>",
            2,
            Some("checkout"),
            Some("reserve_stock")
        )],
        "one edge, made twice: the first functions are kept"
    );
    assert!(cycles_under(ONE_ORDER).is_empty());
}

// --- one class twice -------------------------------------------------------------------------

const SAME_CLASS: &str = "/it-lock-order/same-class/";

#[zk_lock(path = "/it-lock-order/same-class/account_<from>", client = "lock-order-same-class")]
async fn transfer(from: u64, to: u64) -> Result<(), Error> {
    deposit(to).await
}

#[zk_lock(path = "/it-lock-order/same-class/account_<id>", client = "lock-order-same-class")]
async fn deposit(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_multi_lock(
    paths = ["/it-lock-order/same-class/sorted_<from>", "/it-lock-order/same-class/sorted_<to>"],
    client = "lock-order-same-class"
)]
async fn sorted_transfer(from: u64, to: u64) -> Result<(), Error> {
    audit().await
}

#[zk_lock(path = "/it-lock-order/same-class/audit", client = "lock-order-same-class")]
async fn audit() -> Result<(), Error> {
    Ok(())
}

#[tokio::test]
async fn a_template_taken_under_itself_is_a_cycle_of_one_edge_but_not_in_a_multi_lock() {
    set_lock_order_checking(true);
    install("lock-order-same-class").await;
    in_a_task(transfer(1, 2)).await.unwrap();
    in_a_task(sorted_transfer(3, 4)).await.unwrap();

    let cycles = cycles_under(SAME_CLASS);
    let [cycle] = &cycles[..] else { panic!("one cycle: {cycles:#?}") };
    assert_eq!(
        summary(cycle.edges()),
        [(
            "/it-lock-order/same-class/account_<_>",
            "/it-lock-order/same-class/account_<_>",
            1,
            Some("transfer"),
            Some("deposit")
        )]
    );
    assert!(cycle.to_string().contains("two calls with the values swapped can deadlock"), "{cycle}");

    // The multi-lock's members are sorted: no edge among them; the lock taken under them has one
    // edge from their class, counted once.
    let sorted: Vec<_> = edges_under(SAME_CLASS).into_iter().filter(|edge| edge.held.contains("sorted_")).collect();
    assert_eq!(
        summary(&sorted),
        [(
            "/it-lock-order/same-class/sorted_<_>",
            "/it-lock-order/same-class/audit",
            1,
            Some("sorted_transfer"),
            Some("audit")
        )]
    );
}

// --- re-entry and downgrade ------------------------------------------------------------------

const REENTRY: &str = "/it-lock-order/reentry/";

#[zk_lock(path = "/it-lock-order/reentry/order_<id>", client = "lock-order-reentry")]
async fn ship(id: u64) -> Result<(), Error> {
    label(id).await
}

#[zk_lock(path = "/it-lock-order/reentry/order_<id>", client = "lock-order-reentry")]
async fn label(id: u64) -> Result<(), Error> {
    let _ = id;
    Ok(())
}

#[zk_write_lock(path = "/it-lock-order/reentry/price_<sku>", client = "lock-order-reentry")]
async fn reprice(sku: u64) -> Result<(), Error> {
    show_price(sku).await
}

#[zk_read_lock(path = "/it-lock-order/reentry/price_<sku>", client = "lock-order-reentry")]
async fn show_price(sku: u64) -> Result<(), Error> {
    let _ = sku;
    Ok(())
}

#[tokio::test]
async fn re_entering_a_held_lock_or_downgrading_it_is_no_edge() {
    set_lock_order_checking(true);
    install("lock-order-reentry").await;
    in_a_task(ship(1)).await.unwrap();
    in_a_task(reprice(1)).await.unwrap();
    assert_eq!(summary(&edges_under(REENTRY)), []);
    // With another value the same template is another lock: that one is an edge.
    in_a_task(reprice_other(1, 2)).await.unwrap();
    assert_eq!(
        summary(&edges_under(REENTRY)),
        [(
            "/it-lock-order/reentry/price_<_>",
            "/it-lock-order/reentry/price_<_>",
            1,
            Some("reprice_other"),
            Some("show_price")
        )]
    );
}

#[zk_write_lock(path = "/it-lock-order/reentry/price_<sku>", client = "lock-order-reentry")]
async fn reprice_other(sku: u64, other: u64) -> Result<(), Error> {
    show_price(other).await
}

// --- guards across tasks, and code outside tasks ---------------------------------------------

const MOVED: &str = "/it-lock-order/moved/";

#[tokio::test]
async fn api_code_makes_edges_inside_a_guards_scope_only_wherever_the_guard_goes() {
    set_lock_order_checking(true);
    let client = install("lock-order-moved").await;
    let (give, take) = tokio::sync::oneshot::channel();
    let (tell_dropped, dropped) = tokio::sync::oneshot::channel::<()>();
    let taker = {
        let client = client.clone();
        tokio::spawn(async move {
            let guard = Mutex::with_client(&client, "/it-lock-order/moved/first").lock().await.unwrap();
            let while_held = Mutex::with_client(&client, "/it-lock-order/moved/while-held");
            drop(guard.scope(while_held.lock()).await.unwrap());
            // Sequential code of the same task, outside the scope: not nested, no edge.
            drop(Mutex::with_client(&client, "/it-lock-order/moved/sequential").lock().await.unwrap());
            give.send(guard).unwrap();
            dropped.await.unwrap();
            drop(Mutex::with_client(&client, "/it-lock-order/moved/after-drop").lock().await.unwrap());
        })
    };
    let guard = take.await.unwrap();
    in_a_task(async move { drop(guard) }).await;
    tell_dropped.send(()).unwrap();
    tokio::time::timeout(PATIENCE, taker).await.unwrap().unwrap();

    // Through the API a class is the path, and no function is known.
    assert_eq!(
        summary(&edges_under(MOVED)),
        [("/it-lock-order/moved/first", "/it-lock-order/moved/while-held", 1, None, None)],
        "no edge from code outside the scope, nor from the lock dropped in the other task"
    );

    // The body of `#[tokio::test]` runs outside any task: a scope works there too.
    let outer = Mutex::with_client(&client, "/it-lock-order/moved/outside-a").lock().await.unwrap();
    drop(outer.scope(Mutex::with_client(&client, "/it-lock-order/moved/outside-b").lock()).await.unwrap());
    drop(outer);
    // `lock_order()` sorts its edges by held, then taken class.
    assert_eq!(
        summary(&edges_under(MOVED)),
        [
            ("/it-lock-order/moved/first", "/it-lock-order/moved/while-held", 1, None, None),
            ("/it-lock-order/moved/outside-a", "/it-lock-order/moved/outside-b", 1, None, None)
        ],
        "recorded outside a task too"
    );
}

// --- siblings -------------------------------------------------------------------------------

const SIBLINGS: &str = "/it-lock-order/siblings/";

static A_INSIDE: tokio::sync::Notify = tokio::sync::Notify::const_new();

#[zk_lock(path = "/it-lock-order/siblings/a_<id>", client = "lock-order-siblings")]
async fn sibling_a(id: u64) -> Result<(), Error> {
    A_INSIDE.notify_one();
    // Let the sibling start its acquisition while this body holds `a`.
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
    Ok(())
}

#[zk_lock(path = "/it-lock-order/siblings/b_<id>", client = "lock-order-siblings")]
async fn sibling_b(id: u64) -> Result<(), Error> {
    Ok(())
}

#[tokio::test]
async fn joined_siblings_make_no_edge() {
    set_lock_order_checking(true);
    install("lock-order-siblings").await;
    in_a_task(async {
        let b_once_a_is_held = async {
            A_INSIDE.notified().await;
            sibling_b(1).await
        };
        let (a, b) = tokio::join!(sibling_a(1), b_once_a_is_held);
        a.unwrap();
        b.unwrap();
    })
    .await;
    assert_eq!(summary(&edges_under(SIBLINGS)), [], "`b` was taken beside `a`, not nested in it");
}

// --- a nested acquisition waiting for its holder's loan ------------------------------------

const LOAN: &str = "/it-lock-order/loan/";

#[tokio::test]
async fn a_nested_acquisition_that_may_wait_for_the_loan_makes_edges_from_the_locks_inside_its_lender() {
    set_lock_order_checking(true);
    let client = crate::support::new_client().await;
    in_a_task(async move {
        let (a, b) = (
            Mutex::with_client(&client, "/it-lock-order/loan/a"),
            Mutex::with_client(&client, "/it-lock-order/loan/b"),
        );
        let held_a = a.lock().await.unwrap();
        held_a
            .scope(async {
                let held_b = b.lock().await.unwrap();
                // Holding b, it borrows a: a sibling nested in `held_a` with a's loan could be
                // waiting for b.
                drop(held_b.scope(a.lock()).await.unwrap());
                drop(held_b);
            })
            .await;
        drop(held_a);
    })
    .await;
    // `lock_order()` sorts its edges by held, then taken class.
    assert_eq!(
        summary(&edges_under(LOAN)),
        [
            ("/it-lock-order/loan/a", "/it-lock-order/loan/b", 1, None, None),
            ("/it-lock-order/loan/b", "/it-lock-order/loan/a", 1, None, None)
        ]
    );
}

// --- single attempts -------------------------------------------------------------------------

const TRYING: &str = "/it-lock-order/trying/";

#[tokio::test]
async fn a_single_attempt_makes_no_edge_but_the_locks_taken_under_it_do() {
    set_lock_order_checking(true);
    let client = crate::support::new_client().await;
    in_a_task(async move {
        let outer = Mutex::with_client(&client, "/it-lock-order/trying/outer").lock().await.unwrap();
        outer
            .scope(async {
                // Nested in `outer`, only tried: a single attempt never waits, so it cannot deadlock.
                let tried = Mutex::with_client(&client, "/it-lock-order/trying/tried").try_lock().await.unwrap();
                let under = Mutex::with_client(&client, "/it-lock-order/trying/under");
                drop(tried.scope(under.lock()).await.unwrap());
                drop(tried);
            })
            .await;
        drop(outer);
    })
    .await;
    // `lock_order()` sorts its edges by held, then taken class.
    assert_eq!(
        summary(&edges_under(TRYING)),
        [
            ("/it-lock-order/trying/outer", "/it-lock-order/trying/under", 1, None, None),
            ("/it-lock-order/trying/tried", "/it-lock-order/trying/under", 1, None, None)
        ]
    );
    // Through the API no function is known: the edge says where each recipe was made.
    let edge = &edges_under(TRYING)[0];
    let here = |at: Option<&std::panic::Location>| at.is_some_and(|at| at.file().ends_with("lock_order.rs"));
    assert!(here(edge.held_at) && here(edge.taken_at), "{edge:?}");
    assert!(edge.to_string().contains("a lock made at tests/recipes/lock_order.rs:"), "{edge}");
}
