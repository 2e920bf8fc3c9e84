//! Helpers shared by the integration tests (`mod support;` in a test file).

// Each test binary compiles this module separately and uses only part of it.
#![allow(dead_code)]

pub mod examples;
pub mod exclusion;
pub mod java_peer;
pub mod kazoo;
pub mod zk;
