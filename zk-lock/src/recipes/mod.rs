//! The recipes users call: Curator's mutex, semaphore mutex, read/write lock, semaphore (with a
//! fixed or shared count), multi-lock, and the tools around them (`participants`, `revoke`).
//! Every acquisition runs the one loop in `acquire_loop`, with a [`Patience`](patience::Patience).
//!
//! May use: `registry` (the default client), `client`, `holds`, `engine`, `zk`, `session`,
//! `layout` and the foundations.

pub(crate) mod acquire_loop;
mod count_node;
pub(crate) mod multi_lock;
pub(crate) mod mutex;
pub(crate) mod participants;
pub(crate) mod patience;
pub(crate) mod revoke;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod semaphore_mutex;
pub(crate) mod shared_count;
pub(crate) mod target;
