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

use futures::future::Either;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::HeldNode;
use crate::layout::Recipe;
use crate::lock_order;

tokio::task_local! {
    /// The innermost holder scope of the code being polled.
    static SCOPE: Arc<Frame>;
}

/// One holder's scope: the hold it may lend to code nested in it, and the scope it is in.
pub(crate) struct Frame {
    hold: Arc<HeldNode>,
    /// Lent to one nested acquisition at a time; made when first needed (most bodies nest none).
    lending: OnceLock<Arc<Semaphore>>,
    parent: Option<Arc<Frame>>,
}

/// A nested acquisition's loan of an enclosing holder's lock: while it lasts, the holder lends
/// the lock to no other nested acquisition.
pub(crate) type Loan = OwnedSemaphorePermit;

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
        &self.hold
    }

    /// The lock this frame lends, once no other nested acquisition has it: fair, in the order
    /// asked. Cancel safe: a dropped wait leaves the queue.
    pub(crate) async fn borrow(&self) -> Loan {
        let lending = self.lending().clone();
        lending.acquire_owned().await.expect("the lending semaphore is never closed")
    }

    /// The loan now, or `None` if another nested acquisition has it.
    pub(crate) fn try_borrow(&self) -> Option<Loan> {
        self.lending().clone().try_acquire_owned().ok()
    }

    fn lending(&self) -> &Arc<Semaphore> {
        self.lending.get_or_init(|| Arc::new(Semaphore::new(1)))
    }

    fn chain(self: &Arc<Self>) -> impl Iterator<Item = &Arc<Self>> {
        std::iter::successors(Some(self), |frame| frame.parent.as_ref())
    }
}

/// Runs `work` nested inside `holds`: the code that may re-enter them (and borrow them, one
/// nested acquisition at a time), inside whatever scope encloses this call.
pub(crate) fn nest<F: Future>(holds: &[Arc<HeldNode>], work: F) -> impl Future<Output = F::Output> + use<F> {
    let mut frame = SCOPE.try_with(Arc::clone).ok();
    let outer = frame.as_ref().map(Arc::as_ptr);
    for hold in holds {
        frame = Some(Arc::new(Frame { hold: hold.clone(), lending: OnceLock::new(), parent: frame }));
    }
    match frame {
        Some(frame) if Some(Arc::as_ptr(&frame)) != outer => Either::Left(SCOPE.scope(frame, work)),
        _ => Either::Right(work),
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
}

/// The innermost scope holding `recipe` at `path` through the client `client` that the code
/// being polled is nested in, if any.
pub(crate) fn enclosing(client: u64, recipe: Recipe, path: &str) -> Option<Enclosing> {
    let found = SCOPE.try_with(|innermost| {
        let mut lender = None;
        for frame in innermost.chain() {
            let hold = &frame.hold;
            if !hold.is_at(client, path) || hold.recipe().family() != recipe.family() {
                continue;
            }
            let lender = lender.get_or_insert_with(|| frame.clone()).clone();
            if hold.recipe() == recipe {
                return Some(Enclosing { holder: frame.clone(), lender });
            }
        }
        None
    });
    found.ok().flatten()
}

/// The locks the code being polled is nested in, as lock-order checking knows them: the
/// classes an acquisition here waits while holding.
pub(crate) fn enclosing_orders() -> Vec<lock_order::HeldKey> {
    SCOPE
        .try_with(|innermost| innermost.chain().filter_map(|frame| frame.hold.order_key()).collect())
        .unwrap_or_default()
}
