//! Support for the code the attributes generate. Not public API: no semver promises.
//!
//! An annotated function renders its path (`Template`, `paths`), acquires the lock with `Lock`,
//! runs its body with `abort_on_lost` or `ignore_lost`, and drops the guard: the delete request
//! is sent before the function returns and its reply awaited in the background. Dropping the
//! function's future at any point (cancellation, panic) drops the guard the same way. A failure
//! to take or keep the lock becomes the function's error through `LockError::lock_error`. The crate docs
//! show a whole expansion.
//!
//! Files: `template` (the path), `lock` (taking the lock), `body` (the body while it is held).

pub use inventory;

pub use crate::declared::{Declaration, Declared};

mod body;
mod lock;
mod template;

pub use body::{abort_on_lost, ignore_lost, AnnotatedGuard, LockError};
pub use lock::Lock;
pub use template::{paths, PathValue, Template};
