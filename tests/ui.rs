//! What the attributes accept and how they explain what they refuse: trybuild compiles each
//! file under `ui/pass` (and runs it) and each file under `ui/fail`, comparing its errors with the
//! `.stderr` beside it. Regenerate those with `TRYBUILD=overwrite cargo test --test ui`, then read
//! the diff: every message must point at the user's token and say what to write instead.

/// The compiler the `.stderr` snapshots were made with: rustc's wording changes between
/// releases, so another version must regenerate them (and update this line) rather than fail
/// on a diff of rustc's own text.
const SNAPSHOT_RUSTC: &str = "rustc 1.95.0 ";

#[test]
fn ui() {
    let rustc = std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("--version")
        .output()
        .expect("run rustc --version");
    let version = String::from_utf8_lossy(&rustc.stdout);
    assert!(
        version.starts_with(SNAPSHOT_RUSTC),
        "the UI snapshots were made with `{}`, this is `{}`: regenerate them with \
         `TRYBUILD=overwrite cargo test --test ui`, read the diff, and update SNAPSHOT_RUSTC",
        SNAPSHOT_RUSTC.trim(),
        version.trim()
    );
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
