//! The recipes users call: Curator's mutex, semaphore mutex, read/write lock, semaphore (with a
//! fixed or shared count), multi-lock, and the tools around them (`participants`, `revoke`).
//! Every acquisition runs the one loop in `acquire_loop`, with a [`Patience`](patience::Patience).
//!
//! May use: `registry` (the default client), `client`, `holds`, `engine`, `zk`, `session`,
//! `layout` and the foundations.

/// The constructors and settings of a recipe on one lock path, written once with one set of
/// docs: `new` and `with_client` (unless the recipe's take more arguments), `with_template`,
/// `with_data` and `path`. `$what` names the recipe in the docs ("mutex"); `$($target).+` is
/// the field path of its [`LockTarget`](target::LockTarget); `on` builds it from a target.
macro_rules! lock_path_api {
    (queue_reports: $what:literal) => {
        #[doc = concat!("Tells `report` where each waiting acquisition of this ", $what, " stands in its queue, each time the waiter learns of a change: when it joins the queue, and each time the node it watches goes. Its place (the holder is 1st), and the holder's node data (`host=.. pid=.. task=..`) and age once the waiter has read the holder's node: at once when it is next in line, otherwise with the listing after a wake-up. No request is added for it.")]
        ///
        /// `report` runs inside the acquisition (on the task that awaits it): keep it short.
        /// The same news goes to a DEBUG event (target `zk_lock`) and to the gauge
        /// `zk_lock_queue_place` for every acquisition, reported or not.
        ///
        /// ```no_run
        /// # async fn demo() -> zk_lock::Result<()> {
        /// let orders = zk_lock::Mutex::new("/locks/orders")
        ///     .with_queue_reports(|position| println!("{position}")); // "3rd in line behind host=a pid=12 task=none (held 2.1 s)"
        /// let guard = orders.lock().await?;
        /// # Ok(()) }
        /// ```
        #[must_use]
        pub fn with_queue_reports(mut self, report: impl Fn(&crate::QueuePosition) + Send + Sync + 'static) -> Self {
            self.target.set_queue_reports(std::sync::Arc::new(report));
            self
        }
    };
    (constructors: $what:literal) => {
        #[doc = concat!("A ", $what, " at `path`, on the registry's default client.")]
        ///
        /// The path is checked when locking: with an invalid one, every lock call fails with
        /// [`Error::InvalidPath`](crate::Error::InvalidPath).
        #[track_caller]
        pub fn new(path: impl Into<String>) -> Self {
            Self::on(crate::recipes::target::LockTarget::new(None, path.into()))
        }

        #[doc = concat!("A ", $what, " at `path` on `client`; the path is checked as [`new`](Self::new)'s.")]
        #[track_caller]
        pub fn with_client(client: &crate::Client, path: impl Into<String>) -> Self {
            Self::on(crate::recipes::target::LockTarget::new(Some(client), path.into()))
        }
    };
    (settings: $what:literal, $($target:ident).+) => {
        /// Names the template this lock's path was made from (`"/orders/<id>"`): the `template`
        /// label of its metrics (feature `metrics`; otherwise `(api)`) and its class for
        /// lock-order checking (otherwise its path). A `&'static str`, so the number of labels
        /// stays bounded by the program's text, whatever the rendered paths.
        #[must_use]
        pub fn with_template(mut self, template: &'static str) -> Self {
            self.$($target).+.set_template(template);
            self
        }

        #[doc = concat!("Sets the data of this ", $what, "'s nodes (Curator's `setNodeData`; default: `host=.. pid=.. task=..`, which `zk-lock inspect` shows).")]
        #[must_use]
        pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
            self.$($target).+.set_data(data.into());
            self
        }

        #[doc = concat!("Limits how long each hold of this ", $what, " may last: when a hold reaches `limit`, the library ends it, whatever its holder is doing. The guard's `lost()` resolves with [`LostReason::MaxHoldReached`](crate::LostReason::MaxHoldReached) (an annotated function's body is dropped and the call returns [`Error::Lost`](crate::Error::Lost) naming the path and the limit), and the node is deleted through a session on the library's own thread, so the next waiter, in this process or another, is granted within `limit` and a round trip even when the holder's runtime is stuck. A holder that wakes up late has a fencing token older than the next holder's: a fenced store refuses its writes.")]
        ///
        /// The limit is checked when locking: zero, or more than 49 days, fails with
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
        #[must_use]
        pub fn with_max_hold(mut self, limit: std::time::Duration) -> Self {
            self.$($target).+.set_max_hold(limit);
            self
        }

        #[doc = concat!("The ", $what, "'s path.")]
        pub fn path(&self) -> &str {
            &self.$($target).+.path
        }
    };
}

pub(crate) mod acquire_loop;
mod bounded_read;
mod count_node;
mod downgrade;
pub(crate) mod force_release;
pub(crate) mod leader;
mod max_hold;
pub(crate) mod multi_lock;
pub(crate) mod mutex;
pub(crate) mod participants;
pub(crate) mod patience;
mod reentry;
pub(crate) mod revoke;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod semaphore_mutex;
pub(crate) mod shared_count;
pub(crate) mod target;
