//! Attribute macros for [`zk-lock`](https://docs.rs/zk-lock).
//!
//! This crate is re-exported by `zk-lock`; depend on `zk-lock` instead. The attributes
//! (`#[zk_lock]`, `#[zk_read_lock]`, ...) arrive with the macros milestone.
