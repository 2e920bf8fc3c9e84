//! Re-entry, decided once per acquisition: what a lock taken inside a holder of the same lock
//! does, from its recipe and the holders that enclose the call (through the same client; the
//! scope chain is walked once, `holds::scope`). Beside the blocker rule (`layout`), which says
//! whom a queued node waits for, this says whether it queues at all.
//!
//! | acquiring        | innermost holders of the same lock enclosing the call | decision                 |
//! |------------------|-------------------------------------------------------|--------------------------|
//! | mutex            | a mutex                                               | borrow its hold          |
//! | leader           | a leader (of the same election)                       | borrow its hold          |
//! | mutex, leader    | the other one (one queue at one path)                 | refuse: it would wait for itself |
//! | read             | a reader                                              | borrow its hold          |
//! | read             | a writer, no reader                                   | downgrade (a read node at the writer's place) |
//! | write            | a writer                                              | borrow its hold          |
//! | write            | a reader, no writer                                   | refuse: it would wait for itself |
//! | semaphore mutex  | a semaphore mutex whose lease is still held           | refuse: not re-entrant   |
//! | semaphore        | (not looked for: leases are counted, never shared)    | queue                    |
//! | any              | none (or only a lost semaphore mutex)                 | queue                    |

use crate::client::Client;
use crate::error::Error;
use crate::holds::scope::{self, Enclosing};
use crate::layout::Recipe;

/// What an acquisition does about the holders of the same lock it is nested in.
pub(crate) enum Reentry {
    /// None encloses it: it queues like any contender.
    Queue,
    /// Nested in a holder of the same recipe: it borrows that holder's hold, with no request.
    Borrow(Enclosing),
    /// A read nested in a writer (and in no reader): a read node at the writer's own place.
    Downgrade(Enclosing),
    /// It would wait for the holder it is nested in: refused at once, with why.
    Refuse(&'static str),
}

/// Why a write inside a reader is refused.
const WRITE_INSIDE_A_READER: &str = "this code runs inside a holder of the read lock, and the write lock waits \
                                     for every reader; release the read lock first (take the write lock first \
                                     to downgrade instead)";

/// Why a mutex inside the leader of an election at the same path (or the reverse) is refused.
const MUTEX_AND_LEADER: &str = "this code runs inside the holder of a mutex or a leadership at the same path, \
                                and a mutex and a leader election at one path share one queue: it would wait \
                                for itself; use one recipe per path";

/// Why a semaphore mutex inside its holder is refused.
const SEMAPHORE_MUTEX_AGAIN: &str = "this code runs inside the holder of this semaphore mutex, which is not \
                                     re-entrant; release its guard first, or use `Mutex` for a lock that code \
                                     nested in its holder may take again";

/// The decision for an acquisition of `recipe` at `path` through `client`, here.
pub(crate) fn decide(client: &Client, recipe: Recipe, path: &str) -> Reentry {
    let mut holders = scope::enclosing_holders(client.id(), recipe, path);
    let mut take = |wanted: Recipe| holders.iter().position(|(r, _)| *r == wanted).map(|i| holders.swap_remove(i).1);
    match recipe {
        Recipe::Mutex | Recipe::Leader => {
            let other = if recipe == Recipe::Mutex { Recipe::Leader } else { Recipe::Mutex };
            match (take(recipe), take(other)) {
                (Some(holder), _) => Reentry::Borrow(holder),
                (None, Some(_)) => Reentry::Refuse(MUTEX_AND_LEADER),
                (None, None) => Reentry::Queue,
            }
        }
        Recipe::Read => match (take(Recipe::Read), take(Recipe::Write)) {
            (Some(reader), _) => Reentry::Borrow(reader),
            (None, Some(writer)) => Reentry::Downgrade(writer),
            (None, None) => Reentry::Queue,
        },
        Recipe::Write => match (take(Recipe::Write), take(Recipe::Read)) {
            (Some(writer), _) => Reentry::Borrow(writer),
            (None, Some(_)) => Reentry::Refuse(WRITE_INSIDE_A_READER),
            (None, None) => Reentry::Queue,
        },
        // A lost lease no longer excludes anyone: taking the lock again cannot deadlock.
        Recipe::SemaphoreMutex => match take(Recipe::SemaphoreMutex) {
            Some(holder) if holder.holder.hold().lost_reason().is_none() => Reentry::Refuse(SEMAPHORE_MUTEX_AGAIN),
            _ => Reentry::Queue,
        },
        Recipe::Semaphore => Reentry::Queue,
    }
}

/// The error of an acquisition at `path` that re-entry refused for `reason`.
pub(crate) fn refused(path: &str, reason: &str) -> Error {
    Error::WouldDeadlock { path: path.to_owned(), reason: reason.to_owned() }
}
