//! The methods every lock guard shares, generated once for each guard type.

/// Defines a guard type around an [`Arc<HeldNode>`](crate::holds::HeldNode): release, fencing token,
/// node path, loss and revocation, `Debug`. Each recipe keeps its own named type, as tokio's do.
macro_rules! lock_guard {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[must_use = "the lock is released as soon as the guard is dropped"]
        #[clippy::has_significant_drop]
        pub struct $name {
            pub(crate) hold: ::std::sync::Arc<$crate::holds::HeldNode>,
            /// A nested acquisition's loan of its holder's lock, returned when this guard goes.
            loan: ::core::option::Option<$crate::holds::scope::Loan>,
            /// What this guard's scopes lend to the code nested in them.
            lending: $crate::holds::scope::Lending,
        }

        impl $name {
            pub(crate) fn new(share: $crate::holds::Share) -> Self {
                Self { hold: share.hold, loan: share.loan, lending: ::core::default::Default::default() }
            }

            /// The share and loan a multi-lock keeps of its members' guards.
            #[allow(dead_code, reason = "only the guard types that can be a multi-lock's members use it")]
            pub(crate) fn into_share(self) -> $crate::holds::Share {
                $crate::holds::Share::new(self.hold, self.loan)
            }

            /// Runs `work` as code nested inside this lock's holder: an acquisition of this lock
            /// in it (the same recipe and path, through the same client) shares this guard's node
            /// instead of waiting for it, and lock-order checking records the locks it takes as
            /// taken while holding this one. Nested acquisitions borrow the lock one at a time, so
            /// two of them joined inside `work` still exclude each other.
            ///
            /// Code outside `work` is outside the holder, even in the same task: a sibling future
            /// (`join!`, `select!`, a stream), a spawned task, or later code that locks again
            /// waits its turn like any contender, and so would wait for this guard.
            ///
            /// ```no_run
            /// # async fn demo(orders: zk_lock::Mutex) -> zk_lock::Result<()> {
            /// let guard = orders.lock().await?;
            /// guard.scope(async {
            ///     let inner = orders.lock().await?; // re-enters: no new node, no wait
            ///     inner.release().await
            /// }).await?;
            /// guard.release().await?;
            /// # Ok(()) }
            /// ```
            ///
            /// The returned future borrows the guard, so the lock cannot be released while code
            /// nested in it may still run.
            ///
            /// # Cancel safety
            ///
            /// Cancel safe if `work` is.
            pub fn scope<F: ::core::future::Future>(
                &self,
                work: F,
            ) -> impl ::core::future::Future<Output = F::Output> + use<'_, F> {
                $crate::holds::scope::nest([self.lending.lend(&self.hold)], work)
            }

            /// Releases the lock and waits until ZooKeeper confirmed the delete. Releasing a
            /// re-entrant acquisition only gives up its share (and its loan); the node goes with the last guard.
            ///
            /// # Errors
            ///
            /// [`Error::Lost`](crate::Error::Lost) if the lock had been lost before the release:
            /// the work done under it may have overlapped with another holder's.
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: the delete is sent before the first await and retried in the background.
            pub async fn release(self) -> $crate::Result<()> {
                let released = $crate::holds::HeldNode::release_shared(self.hold).await;
                // Lent to the next nested acquisition only once this one has let go.
                drop(self.loan);
                released
            }

            /// The fencing token: the lock node's creation zxid. It grows with every grant of every
            /// lock on the ensemble, so a store that remembers the largest token it has seen can
            /// refuse writes from a holder that lost the lock without knowing it.
            pub fn fencing_token(&self) -> i64 {
                self.hold.token
            }

            /// A fenced ZooKeeper write: a multi-op whose first operation checks that our lock
            /// node still exists, so the writes added to it apply only while the lock is held.
            /// Commit it with `commit()`; if the lock was lost (node deleted, session expired),
            /// the whole multi fails with `CheckWriteError::CheckFailed` and nothing is written.
            ///
            /// ```no_run
            /// # async fn demo(guard: zk_lock::MutexGuard) -> Result<(), Box<dyn std::error::Error>> {
            /// let mut write = guard.fenced_writer()?;
            /// write.add_set_data("/config/leader", b"host-a", None)?;
            /// write.commit().await?; // Err(CheckFailed) if the lock is no longer ours
            /// # Ok(()) }
            /// ```
            ///
            /// # Errors
            ///
            /// [`Error::Zookeeper`](crate::Error::Zookeeper) if the client refuses the node path
            /// (it does not for a node it created).
            pub fn fenced_writer(&self) -> $crate::Result<$crate::zookeeper::CheckWriter<'_>> {
                self.hold.session().zk.new_check_writer(self.hold.node_path(), None).map_err($crate::Error::from_zk)
            }

            /// The full path of the lock node, `<path>/_c_<uuid>-<name><sequence>`.
            pub fn node_path(&self) -> &str {
                self.hold.node_path()
            }

            /// The lock path.
            pub fn path(&self) -> &str {
                self.hold.path()
            }

            /// Extends this lock's `max_hold` (`with_max_hold`, the attribute's `max_hold`): the
            /// library now ends the hold once it has lasted its limit counted from now (never
            /// sooner than it would have), as a watchdog renews a lease. A long job calls it as it
            /// makes progress; a stuck one cannot, so it is still ended within the limit of its
            /// last call. Counted in `zk_lock_max_hold_extensions_total`; the new end is written
            /// into the node's holder description (`max_hold_until=<ms since the epoch>`) in the
            /// background, which `zk-lock inspect` shows (not into data given with `with_data`,
            /// nor into a leader's node, whose data is its id). It sends nothing before it
            /// returns, so it does not wait for a disconnected session.
            ///
            /// # Errors
            ///
            /// [`Error::InvalidArgument`]($crate::Error::InvalidArgument) if the lock has no
            /// `max_hold`, or this guard borrows its holder's lock (a call nested in the holder:
            /// extend from the holder's guard); [`Error::Lost`]($crate::Error::Lost) if the hold
            /// was lost, or its `max_hold` came before the call.
            pub fn extend_max_hold(&self) -> $crate::Result<()> {
                self.hold.extend_max_hold(self.loan.is_some())
            }

            /// Whether the lock is still held: not released, and not lost to a session expiry, a
            /// long disconnection or a deletion of the node by someone else.
            pub fn is_held(&self) -> bool {
                self.hold.is_held()
            }

            /// Resolves when the lock is lost, with the reason; never, if it is released first.
            /// Race it against the work done under the lock to stop that work when the lock goes.
            ///
            /// When the ensemble stops answering the session's heartbeat (a partition between the
            /// client and its server or between the servers, a dead server), it resolves 4/5 of the
            /// session timeout after the latest moment the leader provably renewed the session
            /// (about 0.36 of it after the last answer): at least 1/5 of it before the leader could
            /// expire the session and grant the lock to anyone else (see docs/reliability.md,
            /// "Told first"). A deletion of the node by someone else is seen
            /// within 2/9 of the session timeout and a round trip: a hold that lasts one heartbeat
            /// period (1/9) is followed by a watch from then on. A frozen process learns it only when it runs again: fence your
            /// writes with [`fencing_token`](Self::fencing_token).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: it only observes.
            pub fn lost(&self) -> impl ::core::future::Future<Output = $crate::LostReason> + Send + 'static {
                self.hold.lost()
            }

            /// Resolves once someone asked the holder to give the lock up, with
            /// [`revoke`](crate::revoke) or Curator's `Revoker` (a `__REVOKE__` written into the
            /// node). The lock is still held: releasing it is the holder's decision. While it is
            /// awaited, a watch on the node's data tells at once (one request when first polled).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: it only observes (a dropped watch is removed from the server).
            pub fn revoked(&self) -> impl ::core::future::Future<Output = ()> + Send + 'static {
                self.hold.revoked()
            }

            /// Whether a revocation was requested: seen within 2/9 of the session timeout and a
            /// round trip (the session's watch on a hold older than a heartbeat period), or at once
            /// while [`revoked`](Self::revoked) is awaited.
            pub fn is_revoked(&self) -> bool {
                self.hold.is_revoked()
            }
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("node_path", self.hold.node_path())
                    .field("fencing_token", &self.hold.token)
                    .field("is_held", &self.is_held())
                    .finish()
            }
        }
    };
}

pub(crate) use lock_guard;
