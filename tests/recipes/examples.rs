//! The examples run, briefly, against the shared test server.

use crate::support::examples::run_example;

#[test]
fn lock_order_prints_every_task_once_in_the_order_granted() {
    let output = run_example("lock_order", &["--processes", "2", "--tasks", "2"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let grants = stdout.lines().filter(|line| line.contains("got the lock")).count();
    assert_eq!(grants, 4, "expected 4 grants in:\n{stdout}");
}

/// The number just before `marker` in `line`: `number_before("job 1 (2 running)", " running)")` is 2.
fn number_before(line: &str, marker: &str) -> Option<i64> {
    let (before, _) = line.split_once(marker)?;
    before.rsplit(['(', ' ']).next()?.parse().ok()
}

#[test]
fn semaphore_workers_run_at_most_two_jobs_at_once_and_the_third_waits() {
    let output = run_example("semaphore_workers", &["--workers", "3", "--jobs", "2", "--work-ms", "200"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let running: Vec<i64> = stdout
        .lines()
        .filter(|line| line.contains(" starts job "))
        .filter_map(|line| number_before(line, " running)"))
        .collect();
    assert_eq!(running.len(), 6, "every job starts once in:\n{stdout}");
    assert_eq!(running.iter().max(), Some(&2), "2 jobs at once, never more, in:\n{stdout}");
    assert_eq!(stdout.lines().filter(|line| line.contains(" finishes job ")).count(), 6, "in:\n{stdout}");
}

#[test]
fn read_write_readers_overlap_writers_are_alone_a_downgrade_keeps_writers_out_and_an_upgrade_is_refused() {
    let output = run_example("read_write", &["--readers", "3", "--work-ms", "100"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reads: Vec<&str> =
        stdout.lines().filter(|line| line.contains("] reader ") && line.contains(" reads price ")).collect();
    assert_eq!(reads.len(), 5, "3 readers, then 2 behind the writer, in:\n{stdout}");
    let most_reading = reads.iter().filter_map(|line| number_before(line, " reading")).max();
    assert_eq!(most_reading, Some(3), "the first 3 readers hold the lock together in:\n{stdout}");
    assert!(reads.iter().all(|line| line.ends_with(", 0 writing)")), "no reader meets a writer in:\n{stdout}");
    for late in ["reader 4 reads price 1200", "reader 5 reads price 1200"] {
        assert!(stdout.contains(late), "the later readers wait for writer A: `{late}` in:\n{stdout}");
    }
    let writes: Vec<&str> = stdout.lines().filter(|line| line.contains(" writes price ")).collect();
    assert_eq!(writes.len(), 2, "writers A and B in:\n{stdout}");
    assert!(writes.iter().all(|line| line.ends_with("(0 reading, 1 writing)")), "writers alone in:\n{stdout}");
    assert!(stdout.contains("editor still reads price 1250"), "the downgrade keeps writer B out in:\n{stdout}");
    assert!(stdout.contains("with Error::WouldDeadlock"), "the upgrade is refused in:\n{stdout}");
}

#[test]
fn transfer_shows_the_naive_deadlock_then_finishes_every_transfer_and_conserves_the_total() {
    let output = run_example("transfer", &["--processes", "2", "--tasks", "2", "--transfers", "3", "--work-ms", "5"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.matches(" gave up after ").count(), 2, "both naive transfers deadlock in:\n{stdout}");
    let transfers = stdout.lines().filter(|line| line.contains(": ") && line.contains(" task ")).count();
    assert_eq!(transfers, 12, "every transfer reports once in:\n{stdout}");
    assert!(stdout.contains("(total 300; it was 300)"), "the total is conserved in:\n{stdout}");
    assert!(stdout.contains("All 12 transfers done"), "in:\n{stdout}");
}

#[test]
fn leader_workers_take_turns_one_leader_at_a_time_with_growing_tokens() {
    let output = run_example("leader", &["--workers", "2", "--rounds", "4", "--work", "50ms"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The table: report, worker, token.
    let rows: Vec<(i64, i64)> = stdout
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [report, worker, token] if report.parse::<u32>().is_ok() => {
                Some((worker.parse().ok()?, token.parse().ok()?))
            }
            _ => None,
        })
        .collect();
    assert_eq!(rows.len(), 4, "4 reports in:\n{stdout}");
    assert!(rows.windows(2).all(|pair| pair[0].1 < pair[1].1), "tokens grow in:\n{stdout}");
    assert!(rows.windows(2).all(|pair| pair[0].0 != pair[1].0), "two workers in line take turns in:\n{stdout}");
    assert!(stdout.contains("4 reports by 2 of 2 workers, one leader at a time"), "{stdout}");
}
