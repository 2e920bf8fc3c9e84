//! [`SharedCount`]: Curator's `SharedCount`, an `i32` every process sees, changed with a
//! versioned compare-and-set.

use std::fmt;
use std::sync::{Arc, Mutex as StdMutex};

use tokio::sync::{watch, OnceCell};
use tokio::task::AbortHandle;
use zookeeper_client::Error as ZkError;

pub use super::count_node::VersionedCount;
use super::count_node::{create_and_watch, decode, follow, publish};
use crate::background;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::path::validate_lock_path;
use crate::registry;
use crate::zk::Reconnects;

/// A shared `i32` at a ZooKeeper path, compatible with Curator's `SharedCount`: a PERSISTENT
/// node holding the count as 4 big-endian bytes, so Java and Rust processes share it.
///
/// [`start`](Self::start) creates the node with the initial count if it does not exist yet,
/// reads it and watches it: [`get`](Self::get) then returns the latest count without a request,
/// and [`subscribe`](Self::subscribe) tells about every change. [`try_set`](Self::try_set)
/// changes it only if nobody changed it since a given version. Give it to
/// [`Semaphore::with_count`](crate::Semaphore::with_count) to let the count decide how many leases
/// a semaphore grants.
///
/// Clones share one watch; it stops when the last clone is dropped. The watch runs on the
/// runtime that started the count (the one that runs its session's I/O): if that runtime ends,
/// the next async call on the count (or a semaphore's acquisition driven by it) watches again
/// from the calling runtime, and until then [`get`](Self::get) returns the last count seen.
///
/// ```no_run
/// # async fn demo() -> zk_lock::Result<()> {
/// let workers = zk_lock::SharedCount::new("/config/transcode-workers", 4);
/// workers.start().await?;
/// println!("{} workers allowed", workers.get());
/// // Raise it by one, unless someone else changed it meanwhile.
/// let seen = workers.versioned();
/// if !workers.try_set(seen.value + 1, seen.version).await? {
///     println!("changed meanwhile, now {}", workers.get());
/// }
/// let mut changes = workers.subscribe();
/// changes.changed().await.ok();
/// println!("now {}", changes.borrow().value);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SharedCount {
    inner: Arc<Inner>,
}

struct Inner {
    client: Option<Client>,
    path: String,
    initial: i32,
    value: Arc<watch::Sender<VersionedCount>>,
    /// The client the count was started on.
    started: OnceCell<Client>,
    /// The task following the node's changes.
    follower: StdMutex<Option<AbortHandle>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(follower) = self.follower.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            follower.abort();
        }
    }
}

impl SharedCount {
    /// A shared count at `path` on the registry's default client, created with `initial` if it
    /// does not exist when started.
    pub fn new(path: impl Into<String>, initial: i32) -> Self {
        Self::build(None, path.into(), initial)
    }

    /// A shared count at `path` on `client`, created with `initial` if it does not exist when
    /// started.
    pub fn with_client(client: &Client, path: impl Into<String>, initial: i32) -> Self {
        Self::build(Some(client.clone()), path.into(), initial)
    }

    fn build(client: Option<Client>, path: String, initial: i32) -> Self {
        let (value, _) = watch::channel(VersionedCount { value: initial, version: -1, zxid: -1 });
        let inner = Inner {
            client,
            path,
            initial,
            value: Arc::new(value),
            started: OnceCell::new(),
            follower: StdMutex::new(None),
        };
        Self { inner: Arc::new(inner) }
    }

    /// The path of the count's node.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// Creates the node with the initial count if it does not exist (its missing parents as
    /// container nodes), reads it, and keeps watching it. Starting again does nothing; the other
    /// async methods start the count themselves.
    ///
    /// The create and the first read are sent back to back: one round trip.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidPath`] if the path is not valid.
    /// - [`Error::InvalidArgument`] if the node holds something other than a 4-byte count (the
    ///   message names the path and the size found).
    /// - [`Error::NoAuth`] if the ACL of the node (or of its parent) refuses this client.
    /// - [`Error::Connect`] or [`Error::Zookeeper`] if ZooKeeper cannot be reached or refuses a
    ///   request.
    /// - [`Error::ClientClosed`] once the client is closed
    ///   ([`Client::close`](crate::Client::close), [`shutdown`](crate::shutdown)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a cancelled start leaves the count unstarted (the node may have been
    /// created), and the next call starts it.
    pub async fn start(&self) -> Result<()> {
        self.started_client().await.map(drop)
    }

    /// The client the count was started on; started, or followed again if the runtime that
    /// followed it ended.
    async fn started_client(&self) -> Result<&Client> {
        let mut started_now = false;
        let client = self
            .inner
            .started
            .get_or_try_init(|| {
                started_now = true;
                self.start_now()
            })
            .await?;
        if !started_now && self.follower_ended() {
            self.follow_from_here(client).await?;
        }
        Ok(client)
    }

    async fn start_now(&self) -> Result<Client> {
        let inner = &self.inner;
        validate_lock_path(&inner.path)?;
        let client = match &inner.client {
            Some(client) => client.clone(),
            None => registry::default_client().await?,
        };
        self.follow_from_here(&client).await?;
        Ok(client)
    }

    /// Whether nothing follows the count any more: the runtime that followed it ended, or the
    /// client could open no further session.
    fn follower_ended(&self) -> bool {
        let follower = self.inner.follower.lock().unwrap_or_else(|e| e.into_inner());
        follower.as_ref().is_none_or(AbortHandle::is_finished)
    }

    /// Creates the node if needed, reads it, and follows its changes on the calling runtime:
    /// the one that runs the session's I/O, whose end drops the follower unpolled (polled
    /// elsewhere after that I/O ended, its watch would panic in zookeeper-client).
    async fn follow_from_here(&self, client: &Client) -> Result<()> {
        let inner = &self.inner;
        let session = client.session(&inner.path).await?;
        let (count, watcher) = create_and_watch(&session.zk, &inner.path, inner.initial, client.node_acls())
            .await
            .map_err(|e| e.at_path(&inner.path))?;
        publish(&inner.value, count);
        let follow = follow(client.clone(), session, inner.path.clone(), watcher, inner.value.clone());
        let follower = background::spawn_here(follow).abort_handle();
        if let Some(old) = inner.follower.lock().unwrap_or_else(|e| e.into_inner()).replace(follower) {
            old.abort();
        }
        Ok(())
    }

    /// The latest count seen: the initial count until [`start`](Self::start) read the node.
    /// No request is sent.
    pub fn get(&self) -> i32 {
        self.inner.value.borrow().value
    }

    /// The node's data version of the latest count seen; `-1` until the node was read.
    pub fn version(&self) -> i32 {
        self.inner.value.borrow().version
    }

    /// The latest count seen with its version, for [`try_set`](Self::try_set).
    pub fn versioned(&self) -> VersionedCount {
        *self.inner.value.borrow()
    }

    /// A receiver of every change of the count seen by this shared count (its own writes and,
    /// once started, everyone else's, through a ZooKeeper data watch).
    pub fn subscribe(&self) -> watch::Receiver<VersionedCount> {
        self.inner.value.subscribe()
    }

    /// Waits for the next change of the count after this call and returns the new count.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start), which it calls first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only observes.
    pub async fn changed(&self) -> Result<i32> {
        self.start().await?;
        let mut changes = self.subscribe();
        if changes.changed().await.is_err() {
            // The sender lives as long as `self`.
            std::future::pending::<()>().await;
        }
        let value = changes.borrow().value;
        Ok(value)
    }

    /// Reads the count from ZooKeeper now (the cached one may lag behind by a watch event).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); [`Error::Zookeeper`] with `NoNode` if someone deleted the node.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn read(&self) -> Result<VersionedCount> {
        self.read_now().await.map_err(|e| e.at_path(&self.inner.path))
    }

    async fn read_now(&self) -> Result<VersionedCount> {
        let client = self.started_client().await?;
        let zk = client.session(&self.inner.path).await?.zk.clone();
        let mut reconnects = Reconnects::new(&zk);
        loop {
            match zk.get_data(&self.inner.path).await {
                Ok((data, stat)) => {
                    let count = decode(&self.inner.path, &data, &stat)?;
                    publish(&self.inner.value, count);
                    return Ok(self.versioned());
                }
                Err(error) => reconnects.wait(error).await.map_err(Error::from_zk)?,
            }
        }
    }

    /// Sets the count, whatever it was (Curator's `setCount`).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); [`Error::Zookeeper`] with `NoNode` if someone deleted the node.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in that nothing is left behind, but a dropped future may or may not have
    /// written the new count: read it again to know.
    pub async fn set(&self, value: i32) -> Result<()> {
        self.set_now(value).await.map_err(|e| e.at_path(&self.inner.path))
    }

    async fn set_now(&self, value: i32) -> Result<()> {
        let client = self.started_client().await?;
        let zk = client.session(&self.inner.path).await?.zk.clone();
        let mut reconnects = Reconnects::new(&zk);
        loop {
            // Writing the same value again after a lost reply is harmless.
            match zk.set_data(&self.inner.path, &value.to_be_bytes(), None).await {
                Ok(stat) => {
                    publish(&self.inner.value, VersionedCount { value, version: stat.version, zxid: stat.mzxid });
                    return Ok(());
                }
                Err(error) => reconnects.wait(error).await.map_err(Error::from_zk)?,
            }
        }
    }

    /// Sets the count to `value` only if the node is still at `expected_version` (Curator's
    /// `trySetCount(VersionedValue, int)`): `Ok(false)` if someone changed it since, and the
    /// cached count is then refreshed, so [`versioned`](Self::versioned) gives the next attempt's
    /// input. A negative `expected_version` (never read) always gets `Ok(false)`.
    ///
    /// # Errors
    ///
    /// As [`set`](Self::set).
    ///
    /// # Cancel safety
    ///
    /// As [`set`](Self::set).
    pub async fn try_set(&self, value: i32, expected_version: i32) -> Result<bool> {
        self.try_set_now(value, expected_version).await.map_err(|e| e.at_path(&self.inner.path))
    }

    async fn try_set_now(&self, value: i32, expected_version: i32) -> Result<bool> {
        let client = self.started_client().await?;
        let zk = client.session(&self.inner.path).await?.zk.clone();
        let path = &self.inner.path;
        if expected_version < 0 {
            self.read().await?;
            return Ok(false);
        }
        let mut reconnects = Reconnects::new(&zk);
        loop {
            match zk.set_data(path, &value.to_be_bytes(), Some(expected_version)).await {
                Ok(stat) => {
                    publish(&self.inner.value, VersionedCount { value, version: stat.version, zxid: stat.mzxid });
                    return Ok(true);
                }
                Err(ZkError::BadVersion) => {
                    self.read().await?;
                    return Ok(false);
                }
                Err(error) => {
                    // The reply was lost: find out whether our write was applied.
                    reconnects.wait(error).await.map_err(Error::from_zk)?;
                    let now = self.read().await?;
                    if now.version == expected_version {
                        continue;
                    }
                    return Ok(now.version == expected_version.wrapping_add(1) && now.value == value);
                }
            }
        }
    }
}

impl fmt::Debug for SharedCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.versioned();
        f.debug_struct("SharedCount")
            .field("path", &self.inner.path)
            .field("value", &count.value)
            .field("version", &count.version)
            .field("started", &self.inner.started.initialized())
            .finish()
    }
}
