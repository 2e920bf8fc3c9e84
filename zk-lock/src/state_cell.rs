//! A byte of state shared by tasks, with a wake-up for those waiting for it to change: what a
//! held node's status and a queue node's fate are kept in. Lighter than a `watch` channel (no
//! allocation of its own), which matters with thousands of nodes in one process.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::Notify;

#[derive(Debug)]
pub(crate) struct StateCell {
    state: AtomicU8,
    changed: Notify,
}

impl StateCell {
    pub(crate) fn new(initial: u8) -> Self {
        Self { state: AtomicU8::new(initial), changed: Notify::new() }
    }

    pub(crate) fn get(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// Applies `change` to the state (`None`: leave it). If the state changed, calls
    /// `before_waking` with the new state, then wakes every waiter, so that whoever wakes finds
    /// what `before_waking` did. Returns whether the state changed.
    pub(crate) fn update(&self, mut change: impl FnMut(u8) -> Option<u8>, before_waking: impl FnOnce(u8)) -> bool {
        let mut new = 0;
        let changing = |old| {
            let next = change(old);
            new = next.unwrap_or(old);
            next
        };
        if self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, changing).is_err() {
            return false;
        }
        before_waking(new);
        self.changed.notify_waiters();
        true
    }

    /// Resolves with `check`'s answer once it has one for the state. Cancel safe: it only
    /// observes.
    pub(crate) async fn wait_for<T>(&self, mut check: impl FnMut(u8) -> Option<T>) -> T {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change between the two still wakes us.
            changed.as_mut().enable();
            if let Some(answer) = check(self.get()) {
                return answer;
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_on_the_change_it_waits_for_and_sees_what_was_done_before() {
        let cell = Arc::new(StateCell::new(0));
        let noted = Arc::new(std::sync::Mutex::new(Vec::new()));
        let waiter = {
            let (cell, noted) = (cell.clone(), noted.clone());
            tokio::spawn(async move {
                let seen = cell.wait_for(|state| (state >= 2).then_some(state)).await;
                (seen, noted.lock().unwrap().clone())
            })
        };
        tokio::task::yield_now().await;
        assert!(cell.update(|state| Some(state + 1), |_| {}));
        let note = |state| noted.lock().unwrap().push(state);
        assert!(cell.update(|state| Some(state + 1), note));
        assert!(!cell.update(|_| None, |_| unreachable!("no change, nothing to do")));
        assert_eq!(waiter.await.unwrap(), (2, vec![2]));
    }
}
