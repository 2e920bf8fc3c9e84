//! Runs the programs of `examples/`, which `cargo test` builds before it runs the tests.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// The built example `name` (`target/<profile>/examples/<name>`), next to this test's own binary
/// (`target/<profile>/deps/<test>-<hash>`).
pub fn example_binary(name: &str) -> PathBuf {
    let test_binary = std::env::current_exe().expect("the test binary's path");
    let profile_dir = test_binary.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps");
    let binary = profile_dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(binary.exists(), "example `{name}` is not built at {}; run the tests with `cargo test`", binary.display());
    binary
}

/// Runs example `name` with `args` against the shared test server and returns what it printed;
/// panics, showing its output, if it fails.
pub fn run_example(name: &str, args: &[&str]) -> Output {
    let output = Command::new(example_binary(name))
        .args(args)
        .env(zk_lock::config::CONNECT_ENV, super::server().connect_string())
        .output()
        .unwrap_or_else(|e| panic!("start example `{name}`: {e}"));
    assert!(
        output.status.success(),
        "example `{name}` {args:?} failed with {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The number at `key` of an example's JSON results.
pub fn number(results: &Value, key: &str) -> i64 {
    results[key].as_i64().unwrap_or_else(|| panic!("`{key}` is not a number in {results}"))
}
