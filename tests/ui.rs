//! What the attributes accept and how they explain what they refuse: trybuild compiles each
//! file under `ui/pass` (and runs it) and each file under `ui/fail`, comparing its errors with the
//! `.stderr` beside it. Regenerate those with `TRYBUILD=overwrite cargo test --test ui`, then read
//! the diff: every message must point at the user's token and say what to write instead.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
