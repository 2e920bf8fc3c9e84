//! What every queue-based recipe holds: a client (or the default one), a lock path and node
//! data, and the acquisition they share, which borrows an enclosing holder's lock (re-entry)
//! or queues; for an annotated function, the declaration of its lock (the site lock-order
//! checking reports).

use std::future::Future;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::Acls;

use super::acquire_loop;
use super::max_hold;
use super::patience::{Deadline, Patience};
use super::reentry::{self, Reentry};
use crate::client::Client;
use crate::declared::Declaration;
use crate::engine::{Attempt, Grant, LockAttempt, LockSpec, PositionReport, QueuePosition};
use crate::error::{Error, Result};
use crate::holder::describe_current_holder;
use crate::holds::grant_log::Granted;
use crate::holds::scope::{self, Enclosing};
use crate::holds::{HeldNode, Share};
use crate::layout::Recipe;
use crate::lock_order::{self, OrderedLock};
use crate::metrics::{Labels, QueuePlaces};
use crate::path::validate_lock_path;
use crate::registry;
use crate::session::Session;
use crate::trace;

/// A lock path on a client, with the data its nodes carry.
#[derive(Clone)]
pub(crate) struct LockTarget {
    client: Option<Client>,
    pub path: String,
    /// What was wrong with the path, found once when the target was made: every call reports
    /// the same error (boxed: one pointer in every waiting acquisition's recipe).
    path_refused: Option<Box<Error>>,
    data: Option<Vec<u8>>,
    /// The annotated function's declaration of this lock; `None` through the API.
    site: Option<&'static Declaration>,
    /// The template an API caller named with `with_template`.
    template: Option<&'static str>,
    /// Where the recipe was made (`Mutex::new` and the like), which lock-order checking names
    /// for a lock taken through the API.
    pub made_at: &'static Location<'static>,
    /// How long a hold may last before the library ends it (`with_max_hold`).
    max_hold: Option<Duration>,
    /// Told each waiter's place in line (`with_queue_reports`).
    positions: Option<PositionReport>,
}

impl LockTarget {
    #[track_caller]
    pub(crate) fn new(client: Option<&Client>, path: String) -> Self {
        let made_at = Location::caller();
        Self {
            client: client.cloned(),
            path_refused: validate_lock_path(&path).err().map(Box::new),
            path,
            data: None,
            site: None,
            template: None,
            made_at,
            max_hold: None,
            positions: None,
        }
    }

    /// The lock of the annotated function declared at `site`.
    pub(crate) fn declared_at(mut self, site: Option<&'static Declaration>) -> Self {
        self.site = site;
        self
    }

    /// This lock as lock-order checking sees it.
    fn ordered(&self) -> OrderedLock<'_> {
        OrderedLock { path: &self.path, template: self.named_template(), site: self.site, made_at: self.made_at }
    }

    /// The template this lock's path was rendered from: its annotated function's, or the one
    /// named through the API.
    fn named_template(&self) -> Option<&'static str> {
        self.site.map(|site| site.template).or(self.template)
    }

    pub(crate) fn set_template(&mut self, template: &'static str) {
        self.template = Some(template);
    }

    pub(crate) fn set_data(&mut self, data: Vec<u8>) {
        self.data = Some(data);
    }

    pub(crate) fn set_queue_reports(&mut self, report: PositionReport) {
        self.positions = Some(report);
    }

    pub(crate) fn set_max_hold(&mut self, limit: Duration) {
        self.max_hold = Some(limit);
    }

    /// Refuses a `max_hold` no hold could live with, before anything is asked of the server.
    pub(crate) fn check_max_hold(&self) -> Result<()> {
        max_hold::check(&self.path, self.max_hold)
    }

    /// [`Error::InvalidPath`] (and the like) if the lock path is not one, as found when the
    /// target was made.
    pub(crate) fn check_path(&self) -> Result<()> {
        match &self.path_refused {
            Some(refused) => Err(Error::clone(refused)),
            None => Ok(()),
        }
    }

    /// The client given at construction, or the registry's default, for an acquisition with
    /// `patience`: a timeout, counted from the public call, bounds connecting the default client
    /// too. The path is checked first, so a bad path is reported before the default client is
    /// connected; a closed client is refused before anything (a re-entry, a downgrade) is asked
    /// of it.
    pub(crate) async fn client_within(&self, patience: Patience) -> Result<Client> {
        match self.ready_client() {
            Some(ready) => ready,
            // Boxed: connecting is rare, and inline it would swell every acquisition's future.
            None => Box::pin(self.connect_default_within(patience)).await,
        }
    }

    /// [`client_within`](Self::client_within) without a wait: `None` if the default client is
    /// still to be connected.
    fn ready_client(&self) -> Option<Result<Client>> {
        if let Err(refused) = self.check_path() {
            return Some(Err(refused));
        }
        let client = self.client.clone().or_else(registry::installed_default)?;
        Some(self.usable(client))
    }

    /// Connects the registry's default client, within `patience`.
    async fn connect_default_within(&self, patience: Patience) -> Result<Client> {
        let client = registry::default_client_by(patience.call_deadline(&self.path)).await?;
        self.usable(client)
    }

    /// `client`, unless it is closed or cannot keep this lock's `max_hold`.
    fn usable(&self, client: Client) -> Result<Client> {
        client.refuse_if_closed(&self.path)?;
        max_hold::check_client(&self.path, self.max_hold, &client)?;
        Ok(client)
    }

    /// The label of this lock's path in the metrics: its named template, or
    /// [`UNANNOTATED`](crate::metrics::UNANNOTATED).
    pub(crate) fn template(&self) -> &'static str {
        self.named_template().unwrap_or(crate::metrics::UNANNOTATED)
    }

    /// The current holder starts to acquire this lock with `patience`: an edge for lock-order
    /// checking, unless it is a single attempt, which never waits and so cannot deadlock
    /// (lockdep's trylock).
    pub(crate) fn note_acquiring(&self, patience: Patience) {
        if patience.may_wait() {
            lock_order::acquiring(self.ordered(), scope::enclosing_orders);
        }
    }

    /// The hold of a node of `recipe` granted to `client` in `granted`, counted in the metrics
    /// and among the locks held.
    pub(crate) fn hold(&self, client: &Client, recipe: Recipe, granted: Grant, what: Granted<'_>) -> Arc<HeldNode> {
        let order = lock_order::granted(self.ordered());
        let hold = HeldNode::new(client.id(), recipe, (&self.path, self.template()), granted, order, what);
        if let Some(limit) = self.max_hold {
            max_hold::enforce_or_defer(client, &hold, limit, None);
        }
        hold
    }

    /// Borrows the lock of an enclosing holder (a re-entry: no request), once no other
    /// acquisition nested in its lender has it, within `patience`.
    pub(crate) async fn borrow(&self, client: &Client, enclosing: Enclosing, patience: Patience) -> Result<Share> {
        let lender = &enclosing.lender;
        let deadline = patience.deadline(client.default_timeout());
        if deadline.may_wait() {
            lock_order::borrowing(self.ordered(), enclosing.inside_lender);
        }
        let mut loan = match (lender.try_borrow(), deadline) {
            (Some(loan), _) => loan,
            (None, Deadline::FirstAttempt) => return Err(Error::Busy { path: self.path.clone() }),
            (None, deadline) => {
                if lock_order::lock_order_checking() {
                    trace::waits_for_a_loan(&self.path);
                }
                // Boxed: a rare wait, which inline would swell every acquisition's future.
                let borrowed = Box::pin(deadline.limit(lender.borrow())).await;
                borrowed.ok_or_else(|| Error::Timeout {
                    path: self.path.clone(),
                    waited: patience.since().elapsed(),
                    // The wait was for a loan: a trace event says so.
                    held_by_this_task: false,
                })?
            }
        };
        let hold = enclosing.holder.hold().clone().reenter()?;
        // The nested call's own limit ends the hold it borrows, unless the loan is returned first.
        if let Some(limit) = self.max_hold {
            max_hold::enforce_or_defer(client, &hold, limit, Some(Box::pin(loan.until_returned())));
        }
        Ok(Share::new(hold, Some(loan)))
    }

    /// Acquires a node of `recipe`'s queue, or does what re-entry decides for a call nested in
    /// a holder of the same lock: borrow its hold, downgrade, or refuse.
    pub(crate) async fn acquire(&self, recipe: Recipe, patience: Patience) -> Result<Share> {
        let client = &self.client_within(patience).await?;
        self.check_max_hold()?;
        match reentry::decide(client, recipe, &self.path) {
            Reentry::Queue => {}
            Reentry::Borrow(holder) => return self.borrow(client, holder, patience).await,
            // Boxed: rare, and inline it would swell every read acquisition's future.
            Reentry::Downgrade(writer) => return Box::pin(self.downgrade(client, writer, patience)).await,
            Reentry::Refuse(reason) => return Err(reentry::refused(&self.path, reason)),
        }
        let data = self.node_data();
        let places = QueuePlaces::new(Labels { recipe: recipe.as_str(), template: self.template() });
        let report = |position: &QueuePosition| {
            let holder = position.holder.as_ref().map(|holder| {
                let who = holder.description.as_ref().map_or_else(|| holder.node_name.clone(), ToString::to_string);
                (who, holder.held_for.as_millis() as u64)
            });
            trace::queue_place(&places, position.place, holder, position);
            if let Some(report) = &self.positions {
                report(position);
            }
        };
        let observed = self.positions.is_some() || trace::queue_places_observed();
        let positions = observed.then_some(&report as &(dyn Fn(&QueuePosition) + Send + Sync));
        let spec = LockSpec { path: &self.path, queue: recipe.queue(), data: &data, positions };
        let start = |session, may_wait, acls| LockAttempt::new(session, &spec, acls, may_wait);
        self.run_attempts(client, recipe, patience, start, |grant| {
            Share::new(self.hold(client, recipe, grant, Granted::Lock), None)
        })
        .await
    }

    /// What every acquisition of queue nodes runs once its request was checked (a lock's, a
    /// semaphore's leases): noted for lock-order checking, traced and counted as one acquisition
    /// of `recipe`, attempts made by `start` (given the session, whether it may wait and the
    /// nodes' ACLs) until one is granted, whose grant `hold` turns into what the caller keeps.
    pub(crate) fn run_attempts<'a, A, T, S, H>(
        &'a self,
        client: &'a Client,
        recipe: Recipe,
        patience: Patience,
        start: S,
        hold: H,
    ) -> impl Future<Output = Result<T>> + 'a
    where
        A: Attempt + 'a,
        T: 'a,
        S: Fn(Arc<Session>, bool, Acls<'a>) -> A + 'a,
        H: FnOnce(A::Grant) -> T + 'a,
    {
        // Not an `async fn`: its frame would keep the arguments twice in every waiting
        // acquisition, as what it was called with and as what the block below captured.
        self.note_acquiring(patience);
        trace::acquisition(recipe, &self.path, self.template(), async move {
            let acls = client.node_acls();
            let start = |session, may_wait| start(session, may_wait, acls);
            // Boxed: the span around it would otherwise hold the loop's future a second time.
            let grant = Box::pin(acquire_loop::acquire(client, &self.path, patience, start)).await?;
            Ok(hold(grant))
        })
    }

    /// The data for a new node: the caller's, or a description of the current holder.
    pub(crate) fn node_data(&self) -> Vec<u8> {
        self.data.clone().unwrap_or_else(describe_current_holder)
    }
}
