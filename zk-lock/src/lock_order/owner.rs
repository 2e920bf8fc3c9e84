//! Whom lock-order checking files a granted lock under, to warn of a task waiting for a lock it
//! holds outside the waiting code. It decides nothing: only code nested in a holder's scope
//! re-enters (`holds::scope`).

/// The tokio task that took a lock, or the thread for code that runs outside any task (the body
/// of `block_on` and `#[tokio::main]`): a diagnostic, since futures of one task interleave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Owner {
    pub(crate) fn current() -> Self {
        match tokio::task::try_id() {
            Some(task) => Self::Task(task),
            None => Self::Thread(std::thread::current().id()),
        }
    }
}
