//! Semaphore leases, Curator's `InterProcessSemaphoreV2` algorithm and layout: take the
//! semaphore's internal mutex (`P/locks/_c_<uuid>-lock-<seq>`), create lease nodes
//! (`P/leases/_c_<uuid>-lease-<seq>`), wait until every child of `P/leases` fits the limit, let
//! the mutex go.
//!
//! Only the holder of the internal mutex ever waits with a lease node in `P/leases`: that is what
//! keeps waiters from filling the leases with nodes that all wait for each other. Counting is
//! safe without the mutex (a lease node is always created before the listing that counts it, so
//! of two contenders the later one sees both), which allows one shortcut:
//!
//! - Uncontended, everything is one round trip. The lock node and the lease nodes are created
//!   and both parents listed (one multi-read) back to back (`pipelined`); the server answers in
//!   order, so the listing of `P/locks` tells whether we held the mutex when our leases were
//!   created and counted. Curator needs five round trips (create, list, create, list, delete).
//! - If someone held the mutex, the leases made ahead of time are deleted at once and this
//!   acquisition waits for the mutex in the engine's queue, like Curator's. The next acquisition
//!   through the same semaphore then creates no lease ahead of time until one finds the mutex
//!   free again, so a busy semaphore does not pay for the shortcut over and over. Until they are
//!   deleted, such leases are told apart by their names and not counted (`lease_count`).
//!
//! A single attempt (`try_`, a zero timeout) waits for the mutex too, but only while the leases
//! have room: whoever holds it is then only taking free leases. Once they are full it fails with
//! `Busy`, rather than wait behind a holder that waits for a lease.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use zookeeper_client::{Acls, Client as ZkClient, Error as ZkError, EventType, OneshotWatcher, WatchedEvent};

use super::attempt::Attempt;
use super::lease_count::{counted, taken, until_full, LeaseLimit};
use super::not_granted::NotGranted;
use super::pipelined::{create_then_list, GrantedLease, PipelinedNode};
use super::queue::{never_released, not_ephemeral, wait_for_grant, LockSpec};
use crate::background;
use crate::layout::{
    lease_prefix_ahead_of_time, new_protected_prefix, ParticipantKind, SEMAPHORE_LEASES, SEMAPHORE_REQUEST,
    SEMAPHORE_REQUESTS,
};
use crate::session::Session;
use crate::trace;
use crate::zk::Reconnects;

/// What a semaphore asks for.
pub(crate) struct LeaseSpec<'a> {
    /// The semaphore path `P`, already validated.
    pub path: &'a str,
    /// How many leases, at least one.
    pub count: usize,
    /// Data of the lease nodes (and of the internal lock node).
    pub data: &'a [u8],
    /// Whether the last acquisition through this semaphore found it free: then lease nodes are
    /// created together with the lock node, before we know that we hold the internal mutex.
    pub uncontended: &'a AtomicBool,
}

/// Granted leases: node paths and creation zxids (fencing tokens).
pub(crate) struct LeaseGrant {
    pub session: Arc<Session>,
    /// The session's loss count when the leases were granted.
    pub losses_seen: u64,
    pub leases: Vec<GrantedLease>,
}

/// One try at `spec.count` leases on one session, Curator's algorithm in named steps: join the
/// request queue (with the leases made ahead of time when the semaphore was free last time),
/// wait for our turn, create the leases, wait until they fit the limit.
pub(crate) struct LeaseAttempt<'a, L> {
    session: Arc<Session>,
    spec: &'a LeaseSpec<'a>,
    acls: Acls<'a>,
    limit: L,
    may_wait: bool,
    losses_seen: u64,
    /// `P/locks` and `P/leases`.
    requests_parent: String,
    leases_parent: String,
    /// Our node in the request queue (the internal mutex).
    request: PipelinedNode,
    leases: Vec<PipelinedNode>,
    /// Others' leases whose stat was read while we waited ([`refuse_everlasting_leases`]), and
    /// those of them that are not ephemeral.
    ///
    /// [`refuse_everlasting_leases`]: Self::refuse_everlasting_leases
    checked: HashSet<String>,
    everlasting: Vec<String>,
}

impl<'a, L: LeaseLimit> LeaseAttempt<'a, L> {
    /// An attempt on `session` whose nodes get `acls`; with `may_wait` false it fails with
    /// `Busy` rather than wait for the internal mutex or for leases.
    pub(crate) fn new(
        session: Arc<Session>,
        spec: &'a LeaseSpec<'a>,
        acls: Acls<'a>,
        limit: L,
        may_wait: bool,
    ) -> Self {
        let requests_parent = format!("{}/{SEMAPHORE_REQUESTS}", spec.path);
        let leases_parent = format!("{}/{SEMAPHORE_LEASES}", spec.path);
        let request =
            PipelinedNode::new(&session, &requests_parent, ParticipantKind::LeaseRequest, new_protected_prefix());
        let losses_seen = session.health().losses;
        let leases = Vec::with_capacity(spec.count);
        let (checked, everlasting) = (HashSet::new(), Vec::new());
        Self {
            session,
            spec,
            acls,
            limit,
            may_wait,
            losses_seen,
            requests_parent,
            leases_parent,
            request,
            leases,
            checked,
            everlasting,
        }
    }

    fn new_lease(&self) -> PipelinedNode {
        PipelinedNode::new(&self.session, &self.leases_parent, ParticipantKind::Lease, new_protected_prefix())
    }

    /// The `index`th lease made ahead of time, named after our request so that others know not
    /// to count it unless the request holds the mutex.
    fn lease_ahead_of_time(&self, index: usize) -> PipelinedNode {
        let prefix = lease_prefix_ahead_of_time(self.request.node.prefix(), index);
        PipelinedNode::new(&self.session, &self.leases_parent, ParticipantKind::Lease, prefix)
    }

    /// Creates our request node, and when the semaphore was free last time the leases too,
    /// listing both parents in the same round trip. Returns the request queue's listing and, if
    /// the leases were made, the listing of `P/leases`.
    async fn join_request_queue(&mut self) -> Result<(Vec<String>, Option<Vec<String>>), NotGranted> {
        let zk = &self.session.zk;
        if self.spec.uncontended.load(Ordering::Relaxed) {
            let leases: Vec<PipelinedNode> = (0..self.spec.count).map(|i| self.lease_ahead_of_time(i)).collect();
            self.leases.extend(leases);
            let mut nodes: Vec<&mut PipelinedNode> =
                std::iter::once(&mut self.request).chain(self.leases.iter_mut()).collect();
            let parents = [self.requests_parent.as_str(), self.leases_parent.as_str()];
            let mut listed = create_then_list(zk, self.spec.data, self.acls, &mut nodes, &parents).await?;
            let lease_children = listed.pop();
            Ok((listed.pop().unwrap_or_default(), lease_children))
        } else {
            let parents = [self.requests_parent.as_str()];
            let listed = create_then_list(zk, self.spec.data, self.acls, &mut [&mut self.request], &parents).await?;
            Ok((listed.into_iter().next().unwrap_or_default(), None))
        }
    }

    /// Waits until our request holds the internal mutex. `Ok(true)` if it was free at once;
    /// leases made ahead of time are deleted first if it was not (they must not wait while we
    /// do not hold the mutex).
    async fn wait_for_our_turn(&mut self, children: &[String]) -> Result<bool, NotGranted> {
        let name = self.request.name().unwrap_or_default().to_owned();
        let queue = SEMAPHORE_REQUEST.sorted(children.iter().cloned());
        let Some(place) = queue.iter().position(|node| node.name == name) else {
            return Err(NotGranted::NodeVanished);
        };
        // The leases are counted once the internal mutex is ours: its queue is the semaphore's.
        trace::joined_queue(&name, place, place);
        if place == 0 {
            return Ok(true);
        }
        self.spec.uncontended.store(false, Ordering::Relaxed);
        // Removed in the background: the deletes are sent at once.
        self.leases.clear();
        if !self.wait_for_mutex(&name, children).await? {
            return Err(NotGranted::NodeVanished);
        }
        Ok(false)
    }

    /// Waits in the request queue until our request `name` holds the internal mutex; `Ok(false)`
    /// if the request vanished. `children` is a listing made after it was created.
    async fn wait_for_mutex(&mut self, name: &str, children: &[String]) -> Result<bool, NotGranted> {
        let spec =
            LockSpec { path: &self.requests_parent, queue: &SEMAPHORE_REQUEST, data: self.spec.data, positions: None };
        let granted = wait_for_grant(&self.session.zk, &spec, name, children.to_vec());
        if self.may_wait {
            return Ok(granted.await?);
        }
        // A single attempt waits only while the leases have room: whoever holds the mutex is then
        // taking free leases and lets it go. Once they are full it may hold the mutex while it
        // waits for a lease, and `Busy` is the answer.
        let (zk, count) = (&self.session.zk, self.spec.count);
        let full = until_full(zk, &self.requests_parent, &self.leases_parent, count, &mut self.limit);
        tokio::select! {
            granted = granted => Ok(granted?),
            full = full => full.and(Err(NotGranted::Busy)),
        }
    }

    /// Creates (again) every lease node not in `children`, a listing of `P/leases` made after
    /// their creates, and returns a new listing, and one of the request queue: only nodes in a
    /// listing count, so a lease node that vanished (deleted by someone, or lost with a
    /// connection) is made again and counted once (CURATOR-315/335/462).
    async fn create_leases(&mut self, children: Option<&[String]>) -> Result<Listings, NotGranted> {
        let present = |lease: &PipelinedNode| {
            lease.name().is_some_and(|name| children.is_some_and(|children| children.iter().any(|c| c == name)))
        };
        let missing = self.spec.count - self.leases.iter().filter(|lease| present(lease)).count();
        // Not in a listing made after its create: gone (its claim checks again).
        self.leases.retain(present);
        let leases: Vec<PipelinedNode> = (0..missing).map(|_| self.new_lease()).collect();
        self.leases.extend(leases);
        let mut nodes: Vec<&mut PipelinedNode> = self.leases.iter_mut().collect();
        // The queue too (in the same read), to tell which leases others made ahead of time.
        let parents = [self.requests_parent.as_str(), self.leases_parent.as_str()];
        let listed = create_then_list(&self.session.zk, self.spec.data, self.acls, &mut nodes, &parents).await?;
        Ok(Listings::from(listed))
    }

    /// Waits until every child of `P/leases`, ours included, fits the limit (Curator's rule),
    /// but those that requests behind ours made ahead of time: they never keep them. `listings`
    /// were made after every one of our lease nodes was created, while we held the mutex.
    async fn wait_until_leases_fit(&mut self, listings: Listings, mutex_was_free: bool) -> Result<(), NotGranted> {
        let Listings { mut requests, leases: mut children } = listings;
        let ours = self.request.name().unwrap_or_default().to_owned();
        let zk = self.session.zk.clone();
        let mut first_count = true;
        let mut watch: ChildWatch = None;
        loop {
            let all_listed =
                self.leases.iter().all(|lease| lease.name().is_some_and(|name| children.iter().any(|c| c == name)));
            if !all_listed {
                watch = None;
                Listings { requests, leases: children } = self.create_leases(Some(&children)).await?;
                continue;
            }
            // An older listing of the queue serves as well: who was behind us still is.
            let fits = taken(&children, &requests, &ours) <= self.limit.current();
            if first_count {
                first_count = false;
                self.spec.uncontended.store(mutex_was_free && fits, Ordering::Relaxed);
            }
            if fits {
                if let Some(watch) = watch {
                    // Dropping a pending watch costs a request to remove it; it fires on the next
                    // change of `P/leases` (at the latest our own release) and ends quietly.
                    background::let_watch_fire(watch);
                }
                return Ok(());
            }
            if !self.may_wait {
                return Err(NotGranted::Busy);
            }
            self.refuse_everlasting_leases(&children, &requests, &ours).await?;
            match watch.take() {
                None => (children, watch) = list_and_watch(&zk, &self.leases_parent).await?,
                Some(mut changed) => tokio::select! {
                    event = &mut changed => {
                        if event.event_type == EventType::Session && event.session_state.is_terminated() {
                            return Err(NotGranted::SessionGone);
                        }
                        (children, watch) = list_and_watch(&zk, &self.leases_parent).await?;
                    }
                    () = self.limit.changed() => watch = Some(changed),
                },
            }
        }
    }
}

impl<L: LeaseLimit> LeaseAttempt<'_, L> {
    /// Before waiting for leases to be released: fails, as a mutex does for such a node ahead of
    /// it, if persistent nodes named like leases (which no session ever releases) leave no room
    /// for ours under the limit as it is now. `children` is a listing of `P/leases` made while we
    /// hold the internal mutex, `requests` one of its queue. Each lease of someone else is read
    /// once per attempt, all in one round trip: while we hold the mutex only foreign nodes can
    /// join the leases that count, so the later listings rarely have one to read.
    async fn refuse_everlasting_leases(
        &mut self,
        children: &[String],
        requests: &[String],
        ours: &str,
    ) -> Result<(), NotGranted> {
        let is_ours = |name: &str| self.leases.iter().any(|lease| lease.name() == Some(name));
        let unread: Vec<&String> =
            counted(children, requests, ours).filter(|name| !is_ours(name) && !self.checked.contains(*name)).collect();
        let zk = &self.session.zk;
        let reads: Vec<_> =
            unread.iter().map(|name| zk.check_stat(&format!("{}/{name}", self.leases_parent))).collect();
        for (name, read) in unread.into_iter().zip(reads) {
            match read.await {
                Ok(Some(stat)) if never_released(&stat) => self.everlasting.push(name.clone()),
                Ok(_) => {}
                // Read again before the next wait, if it is still there.
                Err(_) => continue,
            }
            self.checked.insert(name.clone());
        }
        let mut present = self.everlasting.iter().filter(|name| children.contains(name));
        let Some(first) = present.next() else { return Ok(()) };
        if 1 + present.count() + self.spec.count > self.limit.current() {
            let child = format!("{SEMAPHORE_LEASES}/{first}");
            return Err(NotGranted::Error(not_ephemeral(self.spec.path, &child, "counted among the leases")));
        }
        Ok(())
    }
}

impl<L: LeaseLimit> Attempt for LeaseAttempt<'_, L> {
    type Grant = LeaseGrant;

    async fn run(&mut self) -> Result<(), NotGranted> {
        let (requests, leases) = self.join_request_queue().await?;
        let mutex_was_free = self.wait_for_our_turn(&requests).await?;
        let listings = match leases.filter(|_| mutex_was_free) {
            Some(leases) => Listings { requests, leases },
            None => self.create_leases(None).await?,
        };
        self.wait_until_leases_fit(listings, mutex_was_free).await
    }

    fn grant(mut self) -> LeaseGrant {
        // Let the internal mutex go: the delete is sent now, its reply awaited in the background
        // (it is retried there after a connection loss).
        self.request.node.remove_in_background();
        let leases = self.leases.iter_mut().filter_map(PipelinedNode::grant).collect();
        LeaseGrant { session: self.session.clone(), losses_seen: self.losses_seen, leases }
    }

    fn let_go(mut self) {
        self.request.node.let_go();
        self.leases.iter_mut().for_each(|lease| lease.node.let_go());
    }

    /// Removes every node the attempt made and still owns, all deletes sent at once.
    async fn remove(mut self) {
        let removals = std::iter::once(&mut self.request).chain(&mut self.leases).map(|node| node.node.remove());
        futures::future::join_all(removals).await;
    }
}

/// Listings of `P/locks` and `P/leases`, made in one read after our nodes were created.
struct Listings {
    requests: Vec<String>,
    leases: Vec<String>,
}

impl From<Vec<Vec<String>>> for Listings {
    /// From the listings of both parents, in that order.
    fn from(mut listed: Vec<Vec<String>>) -> Self {
        let leases = listed.pop().unwrap_or_default();
        Self { requests: listed.pop().unwrap_or_default(), leases }
    }
}

type ChildWatch = Option<Pin<Box<dyn Future<Output = WatchedEvent> + Send>>>;

/// Lists `parent` with a child watch. A missing parent lists as empty, without a watch.
async fn list_and_watch(zk: &ZkClient, parent: &str) -> Result<(Vec<String>, ChildWatch), NotGranted> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        match zk.list_and_watch_children(parent).await {
            Ok((children, watcher)) => return Ok((children, Some(Box::pin(OneshotWatcher::changed(watcher))))),
            Err(ZkError::NoNode) => return Ok((Vec::new(), None)),
            Err(error) => reconnects.wait(error).await?,
        }
    }
}
