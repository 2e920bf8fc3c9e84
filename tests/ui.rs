//! What the attributes accept and how they explain what they refuse: trybuild compiles each
//! file under `ui/pass` (and runs it) and each file under `ui/fail`, comparing its errors with the
//! `.stderr` beside it. Regenerate those with `TRYBUILD=overwrite cargo test --test ui`, then read
//! the diff: every message must point at the user's token and say what to write instead.
//!
//! A binary of its own: trybuild runs cargo and rustc on those files, a build of its own, for
//! minutes; nothing here needs a server. The snapshots' compiler is named once, below, and in
//! the README's test section.

/// The compiler the `.stderr` snapshots were made with. rustc's wording changes between releases,
/// so with another compiler the refused attributes are not compared with the snapshots (that
/// would fail on rustc's own text, not ours); the accepted ones are still compiled and run. CI
/// runs 1.95.0, where both are checked; regenerate the snapshots for a new compiler with
/// `TRYBUILD=overwrite cargo test --test ui`, read the diff, and update this line.
const SNAPSHOT_RUSTC: &str = "rustc 1.95.0 ";

#[test]
fn ui() {
    let rustc = std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("--version")
        .output()
        .expect("run rustc --version");
    let version = String::from_utf8_lossy(&rustc.stdout);
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    if version.starts_with(SNAPSHOT_RUSTC) {
        cases.compile_fail("tests/ui/fail/*.rs");
    } else {
        // Skipping is for people building with another compiler, not for CI, which must check them.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs `{}`, not `{}`: the refused attributes' messages would go unchecked; run CI with that \
             compiler, or regenerate the snapshots and update SNAPSHOT_RUSTC",
            version.trim(),
            SNAPSHOT_RUSTC.trim()
        );
        eprintln!(
            "tests/ui/fail: the error snapshots were made with `{}`, this is `{}`: only the accepted \
             attributes are checked; regenerate the snapshots with `TRYBUILD=overwrite cargo test --test ui`",
            SNAPSHOT_RUSTC.trim(),
            version.trim()
        );
    }
}
