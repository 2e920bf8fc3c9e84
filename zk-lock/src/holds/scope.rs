//! Who may re-enter a held lock: the code nested inside its holder, and nothing else.
//!
//! A holder's scope is the body of an annotated function (and everything it awaits) or the
//! future given to a guard's `scope`. It is a tokio task-local, so it is seen only while that
//! future is polled: sibling futures of the same task (`join!`, `select!`, streams), spawned
//! tasks and later code of the task are outside it and wait like any contender. Futures of one
//! task interleave at every `.await`, so the task could not be the holder (it was, and two
//! joined calls ran one body at once).
//!
//! Each scope is a [`Frame`] on a chain that leads out to the enclosing scopes. A nested
//! acquisition of a lock held by an enclosing frame borrows that frame's hold, one nested
//! acquisition at a time: two nested calls joined inside a body are siblings of each other and
//! take turns, while code that is nested in the nested call (its own frame) re-enters freely.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::HeldNode;
use crate::layout::Recipe;
use crate::lock_order;

tokio::task_local! {
    /// The innermost holder scope of the code being polled.
    static SCOPE: Arc<Frame>;
}

/// One holder's scope: the hold it may lend to code nested in it, and the scope it is in.
pub(crate) struct Frame {
    lent: Lent,
    parent: Option<Arc<Frame>>,
}

/// What one holder lends to the code nested in it: its hold, to one nested acquisition at a
/// time across all of the holder's scopes (a guard may open several, one after the other, while
/// a guard borrowed in an earlier one still lives).
pub(crate) struct Lent {
    hold: Arc<HeldNode>,
    lending: Arc<Semaphore>,
}

/// A holder's side of the loans: the semaphore its scopes lend from, made when first needed
/// (most holders nest nothing).
#[derive(Default)]
pub(crate) struct Lending(OnceLock<Arc<Semaphore>>);

impl Lending {
    /// What the holder of `hold` lends to the code of a scope of its.
    pub(crate) fn lend(&self, hold: &Arc<HeldNode>) -> Lent {
        let lending = self.0.get_or_init(|| Arc::new(Semaphore::new(1))).clone();
        Lent { hold: hold.clone(), lending }
    }
}

/// A nested acquisition's loan of an enclosing holder's lock: while it lasts, the holder lends
/// the lock to no other nested acquisition.
pub(crate) struct Loan {
    _permit: OwnedSemaphorePermit,
    /// Dropped with the loan, which tells the nested acquisition's `max_hold` timer, if it has
    /// one, that the loan was returned in time.
    _returned: Option<oneshot::Sender<()>>,
}

impl Loan {
    fn new(permit: OwnedSemaphorePermit) -> Self {
        Self { _permit: permit, _returned: None }
    }

    /// Resolves once this loan is returned (dropped).
    pub(crate) fn until_returned(&mut self) -> impl Future<Output = ()> + Send + 'static {
        let (returned, told) = oneshot::channel::<()>();
        self._returned = Some(returned);
        async move {
            // Only ever dropped, never sent: an error is the return.
            let _ = told.await;
        }
    }
}

/// What an acquisition gives its guard: a share of a hold, and, for an acquisition nested in
/// the hold's holder, the loan it borrowed it on.
pub(crate) struct Share {
    pub hold: Arc<HeldNode>,
    pub loan: Option<Loan>,
}

impl Share {
    /// A share of a node just granted, or of one granted to an enclosing holder on `loan`.
    pub(crate) fn new(hold: Arc<HeldNode>, loan: Option<Loan>) -> Self {
        Self { hold, loan }
    }
}

impl Frame {
    /// The hold this scope lends.
    pub(crate) fn hold(&self) -> &Arc<HeldNode> {
        &self.lent.hold
    }

    /// The lock this frame lends, once no other nested acquisition has it: fair, in the order
    /// asked. Cancel safe: a dropped wait leaves the queue.
    pub(crate) async fn borrow(&self) -> Loan {
        let lending = self.lent.lending.clone();
        Loan::new(lending.acquire_owned().await.expect("the lending semaphore is never closed"))
    }

    /// The loan now, or `None` if another nested acquisition has it.
    pub(crate) fn try_borrow(&self) -> Option<Loan> {
        self.lent.lending.clone().try_acquire_owned().ok().map(Loan::new)
    }

    fn chain(self: &Arc<Self>) -> impl Iterator<Item = &Arc<Self>> {
        std::iter::successors(Some(self), |frame| frame.parent.as_ref())
    }
}

/// Runs `work` nested inside the holders of `lent`: the code that may re-enter their locks (and
/// borrow them, one nested acquisition at a time), inside whatever scope encloses it where it
/// is polled (read at its first poll, not where the future was made).
pub(crate) async fn nest<F: Future>(lent: impl IntoIterator<Item = Lent>, work: F) -> F::Output {
    let mut frame = SCOPE.try_with(Arc::clone).ok();
    let mut nested = false;
    for lent in lent {
        frame = Some(Arc::new(Frame { lent, parent: frame }));
        nested = true;
    }
    match frame {
        Some(frame) if nested => SCOPE.scope(frame, work).await,
        // Nothing lent (a multi-lock of no member): the enclosing scope, unchanged.
        _ => work.await,
    }
}

/// An enclosing holder of the lock being acquired, and the scope that lends it.
pub(crate) struct Enclosing {
    /// The innermost enclosing scope that holds the lock's side being acquired.
    pub holder: Arc<Frame>,
    /// The innermost enclosing scope of the same lock, either side: the holder itself, or a
    /// nested acquisition that borrowed it (a downgrade's read inside a write holder), which
    /// has the holder's loan and lends it on to what is nested in it.
    pub lender: Arc<Frame>,
    /// The locks of the scopes inside the lender, for lock-order checking (empty while it is
    /// off): a wait for the loan is a wait while holding them.
    pub inside_lender: Vec<lock_order::HeldKey>,
}

/// The innermost scope holding each recipe of `recipe`'s family (a read/write lock's two sides,
/// or the recipe alone) at `path` through the client `client` that the code being polled is
/// nested in: one walk of the scope chain, for [`recipes::reentry`](crate::recipes) to decide
/// on.
pub(crate) fn enclosing_holders(client: u64, recipe: Recipe, path: &str) -> Vec<(Recipe, Enclosing)> {
    let checking = lock_order::lock_order_checking();
    let found = SCOPE.try_with(|innermost| {
        let (mut found, mut lender, mut inside_lender) = (Vec::new(), None::<Arc<Frame>>, Vec::new());
        for frame in innermost.chain() {
            let hold = frame.hold();
            if !hold.is_at(client, path) || hold.recipe().family() != recipe.family() {
                if checking && lender.is_none() {
                    inside_lender.extend(hold.order_key());
                }
                continue;
            }
            let lender = lender.get_or_insert_with(|| frame.clone()).clone();
            if !found.iter().any(|(seen, _)| *seen == hold.recipe()) {
                let inside_lender = inside_lender.clone();
                found.push((hold.recipe(), Enclosing { holder: frame.clone(), lender, inside_lender }));
            }
        }
        found
    });
    found.unwrap_or_default()
}

/// The locks the code being polled is nested in, as lock-order checking knows them: the
/// classes an acquisition here waits while holding.
pub(crate) fn enclosing_orders() -> Vec<lock_order::HeldKey> {
    SCOPE
        .try_with(|innermost| innermost.chain().filter_map(|frame| frame.hold().order_key()).collect())
        .unwrap_or_default()
}
