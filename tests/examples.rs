//! The examples run, briefly, against the shared test server.

mod support;

use support::examples::run_example;

#[test]
fn lock_order_prints_every_task_once_in_the_order_granted() {
    let output = run_example("lock_order", &["--processes", "2", "--tasks", "2"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let grants = stdout.lines().filter(|line| line.contains("got the lock")).count();
    assert_eq!(grants, 4, "expected 4 grants in:\n{stdout}");
}
