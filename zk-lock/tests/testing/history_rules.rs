//! The history checker, `zk_lock::testing::History`, on crafted histories: one that obeys every
//! rule, one or more that break each rule, and the record lines worker processes print.

use zk_lock::testing::{FencedWrite, Grant, GrantKind, History, Outcome, Record, Report, Violation};

const PATH: &str = "/history/p";

fn grant(holder: &str, kind: GrantKind, token: i64, start: u64, end: u64) -> Grant {
    Grant { holder: holder.into(), kind, path: PATH.into(), token, start, end, outcome: Outcome::Released }
}

fn mutex(holder: &str, token: i64, start: u64, end: u64) -> Grant {
    grant(holder, GrantKind::Mutex, token, start, end)
}

fn lost(mut grant: Grant) -> Grant {
    grant.outcome = Outcome::Lost { reason: "the zookeeper session expired".into() };
    grant
}

fn write(writer: &str, token: i64, sent: u64, answered: u64, accepted: bool) -> FencedWrite {
    FencedWrite { writer: writer.into(), path: PATH.into(), token, sent, answered, accepted }
}

fn check(records: Vec<Record>) -> Report {
    records.into_iter().collect::<History>().check()
}

fn check_grants(grants: Vec<Grant>) -> Report {
    grants.into_iter().collect::<History>().check()
}

/// The one violation of `report`, which must be the only one.
fn only_violation(report: &Report) -> &Violation {
    match report.violations() {
        [violation] => violation,
        other => panic!("expected exactly one violation, got {}: {report}", other.len()),
    }
}

#[test]
fn a_history_that_obeys_every_rule_is_clean() {
    let sem = GrantKind::Semaphore { leases: 2 };
    let mut records: Vec<Record> = vec![
        // A mutex handed from a to b to c, each writing with its token.
        mutex("a", 10, 100, 200).into(),
        write("a", 10, 110, 120, true).into(),
        mutex("b", 12, 201, 300).into(),
        write("b", 12, 210, 220, true).into(),
        // c saw the lock lost; its late write with the old token was refused.
        lost(mutex("c", 15, 400, 500)).into(),
        write("c", 15, 410, 420, true).into(),
        mutex("d", 16, 450, 600).into(),
        write("d", 16, 460, 470, true).into(),
        write("c", 15, 510, 520, false).into(),
    ];
    // Readers share a lock; a writer comes between them.
    for (holder, kind, token, start, end) in [
        ("r1", GrantKind::Read, 20, 100, 300),
        ("r2", GrantKind::Read, 21, 150, 250),
        ("w", GrantKind::Write, 22, 301, 400),
    ] {
        records.push(Grant { path: "/history/rw".into(), ..grant(holder, kind, token, start, end) }.into());
    }
    // Two permits out at once, never three; releases and grants that touch do not overlap.
    for (holder, token, start, end) in [("s1", 30, 100, 300), ("s2", 31, 150, 400), ("s3", 32, 301, 500)] {
        records.push(Grant { path: "/history/sem".into(), ..grant(holder, sem, token, start, end) }.into());
    }
    // Writes recorded without their grants; the same token may write again.
    for (sent, answered) in [(100, 110), (200, 210)] {
        records.push(FencedWrite { path: "/history/w".into(), ..write("z", 40, sent, answered, true) }.into());
    }
    let report = check(records);
    assert!(report.is_clean(), "{report}");
    assert_eq!((report.grants(), report.fenced_writes()), (10, 7));
    assert_eq!(report.to_string(), "10 grants on 4 paths and 7 fenced writes: no violation");
    report.assert_clean();
}

#[test]
fn two_mutex_holders_at_once_are_an_overlap_naming_both() {
    let report = check_grants(vec![mutex("a", 10, 100, 200), mutex("b", 12, 200, 300)]);
    let Violation::Overlap { path, earlier, later } = only_violation(&report) else { panic!("{report}") };
    assert_eq!((path.as_str(), earlier.holder.as_str(), later.holder.as_str()), (PATH, "a", "b"));
    let text = report.to_string();
    assert!(text.contains("`/history/p`: two holders at once for 0 ns: a (mutex, token 10"), "{text}");
    assert!(text.contains("and b (mutex, token 12, held [200, 300] ns)"), "{text}");

    // Overlap with an earlier grant that is not the latest one by start.
    let report = check_grants(vec![mutex("a", 10, 100, 1000), mutex("b", 12, 150, 160), mutex("c", 13, 500, 600)]);
    let overlapping: Vec<_> = report
        .violations()
        .iter()
        .filter_map(|v| match v {
            Violation::Overlap { earlier, later, .. } => Some((earlier.holder.as_str(), later.holder.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(overlapping, [("a", "b"), ("a", "c")], "{report}");
}

#[test]
fn a_reader_and_a_writer_at_once_are_an_overlap() {
    let (read, write) = (GrantKind::Read, GrantKind::Write);
    // A writer starting while readers hold the lock.
    let report = check_grants(vec![
        grant("r1", read, 10, 100, 300),
        grant("r2", read, 11, 150, 250),
        grant("w", write, 12, 290, 400),
    ]);
    assert!(matches!(only_violation(&report), Violation::Overlap { later, .. } if later.holder == "w"), "{report}");
    // A reader starting inside an earlier, longer write.
    let report = check_grants(vec![grant("w", write, 10, 100, 500), grant("r", read, 11, 200, 300)]);
    assert!(matches!(only_violation(&report), Violation::Overlap { earlier, .. } if earlier.holder == "w"), "{report}");
}

#[test]
fn more_permits_out_than_leases_is_an_over_lease() {
    let sem = GrantKind::Semaphore { leases: 2 };
    let report = check_grants(vec![
        grant("a", sem, 10, 100, 300),
        grant("b", sem, 11, 150, 400),
        grant("c", sem, 12, 301, 500),
        grant("d", sem, 13, 250, 260),
    ]);
    let Violation::OverLease { leases, holders, .. } = only_violation(&report) else { panic!("{report}") };
    assert_eq!(*leases, 2);
    let mut names: Vec<&str> = holders.iter().map(|g| g.holder.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b", "d"]);
    assert!(report.to_string().contains("3 permits out at once, but the semaphore has 2"), "{report}");
}

#[test]
fn a_token_smaller_than_an_earlier_grants_is_going_backwards() {
    let report = check_grants(vec![mutex("a", 12, 100, 200), mutex("b", 10, 300, 400)]);
    let Violation::TokenBackwards { earlier, later, .. } = only_violation(&report) else { panic!("{report}") };
    assert_eq!((earlier.token, later.token), (12, 10));
    assert!(report.to_string().contains("the fencing token went backwards: b (mutex, token 10"), "{report}");
    // A writer after a reader of its lock.
    let report =
        check_grants(vec![grant("r", GrantKind::Read, 20, 100, 200), grant("w", GrantKind::Write, 15, 300, 400)]);
    assert!(matches!(only_violation(&report), Violation::TokenBackwards { .. }), "{report}");
    // Readers, and semaphore permits, have no order among themselves.
    let readers =
        check_grants(vec![grant("a", GrantKind::Read, 20, 100, 200), grant("b", GrantKind::Read, 15, 300, 400)]);
    assert!(readers.is_clean(), "{readers}");
    let sem = GrantKind::Semaphore { leases: 2 };
    let permits = check_grants(vec![grant("a", sem, 20, 100, 200), grant("b", sem, 15, 300, 400)]);
    assert!(permits.is_clean(), "{permits}");
}

#[test]
fn one_token_granted_twice_is_reused() {
    let sem = GrantKind::Semaphore { leases: 5 };
    let report = check_grants(vec![grant("a", sem, 10, 100, 200), grant("b", sem, 10, 300, 400)]);
    let Violation::TokenReused { first, second, .. } = only_violation(&report) else { panic!("{report}") };
    assert_eq!((first.holder.as_str(), second.holder.as_str()), ("a", "b"));
}

#[test]
fn two_recipes_on_one_path_are_mixed_kinds() {
    let sem = GrantKind::Semaphore { leases: 2 };
    let report = check_grants(vec![mutex("a", 10, 100, 200), grant("b", sem, 12, 300, 400)]);
    let Violation::MixedKinds { kinds, .. } = only_violation(&report) else { panic!("{report}") };
    assert_eq!(kinds, &[GrantKind::Mutex, sem]);
    assert!(report.to_string().contains("were two locks recorded under one path?"), "{report}");
}

/// Issue 34 (7): two recipes on one path are reported, and each recipe's grants are still
/// checked as if alone: the overlap of two mutex holders, a semaphore's over-lease.
#[test]
fn mixed_kinds_do_not_hide_the_other_violations_of_the_path() {
    let sem = GrantKind::Semaphore { leases: 1 };
    let report = check_grants(vec![
        mutex("a", 10, 100, 200),
        mutex("b", 12, 150, 300),
        grant("s1", sem, 13, 100, 300),
        grant("s2", sem, 14, 200, 400),
        grant("s3", sem, 14, 500, 600),
    ]);
    let found: Vec<String> = report
        .violations()
        .iter()
        .map(|v| match v {
            Violation::MixedKinds { kinds, .. } => format!("mixed {kinds:?}"),
            Violation::TokenReused { first, second, .. } => format!("reused {} {}", first.holder, second.holder),
            Violation::Overlap { earlier, later, .. } => format!("overlap {} {}", earlier.holder, later.holder),
            Violation::OverLease { holders, .. } => {
                format!("over-lease {:?}", holders.iter().map(|g| g.holder.as_str()).collect::<Vec<_>>())
            }
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        found,
        [
            format!("mixed {:?}", [GrantKind::Mutex, sem]),
            "reused s2 s3".to_owned(),
            "overlap a b".to_owned(),
            r#"over-lease ["s1", "s2"]"#.to_owned(),
        ],
        "{report}"
    );
}

/// Issue 34 (7): the lease count of a `SharedCount` semaphore may change between grants (each
/// records the count it was granted under); that is one recipe, checked against the counts.
#[test]
fn a_semaphore_whose_count_changes_is_one_recipe() {
    let (two, three) = (GrantKind::Semaphore { leases: 2 }, GrantKind::Semaphore { leases: 3 });
    // Two cycles one after the other: two permits out under a count of 2, then three under 3.
    let report = check_grants(vec![
        grant("a", two, 10, 100, 200),
        grant("b", two, 11, 150, 200),
        grant("c", three, 12, 300, 400),
        grant("d", three, 13, 310, 400),
        grant("e", three, 14, 320, 400),
    ]);
    assert!(report.is_clean(), "{report}");
    // Raised while a permit is out: the later grant counted the earlier against its count.
    let one = GrantKind::Semaphore { leases: 1 };
    let report = check_grants(vec![grant("a", one, 10, 100, 500), grant("b", two, 11, 200, 300)]);
    assert!(report.is_clean(), "{report}");
}

/// Issue 34 (7): a lowered count lets the permits out keep their leases but admits nobody new
/// until they are back under it. Whichever of the permits out at once was granted last counted
/// the others against its own count: for every count `L`, at most `L` of them were granted under
/// `L` or less.
#[test]
fn a_lowered_count_still_bounds_the_permits_granted_under_it() {
    let (two, three, five) =
        (GrantKind::Semaphore { leases: 2 }, GrantKind::Semaphore { leases: 3 }, GrantKind::Semaphore { leases: 5 });
    // Three permits under a count of 3, then a fourth under 2 while they are out.
    let report = check_grants(vec![
        grant("a", three, 10, 100, 1000),
        grant("b", three, 11, 110, 1000),
        grant("c", three, 12, 120, 1000),
        grant("d", two, 13, 500, 600),
    ]);
    let Violation::OverLease { leases, holders, .. } = only_violation(&report) else { panic!("{report}") };
    assert_eq!((*leases, holders.len()), (3, 4), "{report}");
    assert!(report.to_string().contains("4 permits out at once, granted under a lease count of 3 or less"), "{report}");
    // The count was 5 long ago and one permit of that time is still out; it is 2 now, and three
    // permits were granted under it at once (the largest count seen, 5, would allow it).
    let report = check_grants(vec![
        grant("old", five, 10, 100, 1000),
        grant("x", two, 11, 200, 600),
        grant("y", two, 12, 210, 600),
        grant("z", two, 13, 220, 600),
    ]);
    let Violation::OverLease { leases, holders, .. } = only_violation(&report) else { panic!("{report}") };
    let mut names: Vec<&str> = holders.iter().map(|g| g.holder.as_str()).collect();
    names.sort_unstable();
    assert_eq!((*leases, names), (2, vec!["x", "y", "z"]), "{report}");
}

#[test]
fn a_holder_that_saw_the_loss_is_exempt_from_exclusion_and_order() {
    // b's token is below a's and b starts inside a's hold, but a was told it lost the lock.
    let report = check_grants(vec![lost(mutex("a", 10, 100, 900)), mutex("b", 9, 200, 300), mutex("c", 12, 400, 500)]);
    assert!(report.is_clean(), "{report}");
}

#[test]
fn a_refused_write_of_a_live_holder_is_a_violation() {
    let report = check(vec![
        mutex("a", 10, 100, 200).into(),
        mutex("b", 12, 300, 400).into(),
        write("b", 12, 310, 320, false).into(),
    ]);
    let Violation::LiveWriteRefused { write: refused, grant } = only_violation(&report) else { panic!("{report}") };
    assert_eq!((refused.writer.as_str(), grant.token), ("b", 12));
    assert!(report.to_string().contains("the fenced write of b with token 12"), "{report}");
    // A refusal after the hold, or of a holder that saw the loss, is what fencing is for.
    let after = check(vec![mutex("b", 12, 300, 400).into(), write("b", 12, 410, 420, false).into()]);
    assert!(after.is_clean(), "{after}");
    let told = check(vec![lost(mutex("b", 12, 300, 400)).into(), write("b", 12, 310, 320, false).into()]);
    assert!(told.is_clean(), "{told}");
}

#[test]
fn an_old_token_accepted_after_a_newer_one_is_a_late_write() {
    let grants = || -> Vec<Record> { vec![lost(mutex("old", 10, 100, 900)).into(), mutex("new", 12, 300, 400).into()] };
    let newer = write("new", 12, 310, 320, true);
    let with = |late: FencedWrite| {
        let mut records = grants();
        records.extend([Record::from(newer.clone()), late.into()]);
        check(records)
    };
    let report = with(write("old", 10, 1000, 1010, true));
    let Violation::LateWriteAccepted { late, newer } = only_violation(&report) else { panic!("{report}") };
    assert_eq!((late.token, newer.token), (10, 12));
    assert!(
        report.to_string().contains("the write of old with old token 10 (sent at 1000 ns) was accepted"),
        "{report}"
    );
    // Refused: fenced as it should be.
    let refused = with(write("old", 10, 1000, 1010, false));
    assert!(refused.is_clean(), "{refused}");
    // Sent before the newer write was answered, the store may still have taken it first.
    let racing = with(write("old", 10, 315, 330, true));
    assert!(racing.is_clean(), "{racing}");
}

#[test]
fn records_round_trip_through_their_lines() {
    let mut dropped = grant("w1/t0 attr", GrantKind::Semaphore { leases: 3 }, 4_294_967_300, 1, 2);
    dropped.outcome = Outcome::Dropped;
    let mut failed = mutex("w1", 7, 3, 4);
    failed.outcome = Outcome::ReleaseFailed { error: "connection loss\n100% sure".into() };
    let records: Vec<Record> = vec![
        dropped.into(),
        failed.into(),
        lost(grant("w2", GrantKind::Write, 8, 5, 6)).into(),
        mutex("w3", 9, 7, 8).into(),
        write("w3", 9, 9, 10, true).into(),
        FencedWrite { path: "/with space".into(), ..write("w3", 9, 11, 12, false) }.into(),
    ];
    for record in records {
        let line = record.to_string();
        assert!(line.starts_with("@zk-lock-history ") && !line.contains('\n'), "{line}");
        assert_eq!(line.parse::<Record>(), Ok(record.clone()), "{line}");
        // libtest prints `test name ... ` before a test's first line of output.
        let found = Record::find_in(&format!("test fault_worker ... {line}"));
        assert_eq!(found, Some(Ok(record)));
    }
    assert_eq!(
        Record::from(lost(mutex("w1", 10, 100, 200))).to_string(),
        "@zk-lock-history grant holder=w1 kind=mutex path=/history/p token=10 start=100 end=200 outcome=lost \
         reason=the%20zookeeper%20session%20expired"
    );
    assert_eq!(Record::find_in("test fault_worker ... ok"), None);

    let history = History::new();
    assert_eq!(history.record_output_line("running 1 test"), Ok(false));
    assert_eq!(history.record_output_line(&Record::from(mutex("w1", 10, 100, 200)).to_string()), Ok(true));
    assert_eq!(history.grants(), [mutex("w1", 10, 100, 200)]);
}

#[test]
fn a_malformed_record_line_is_refused_naming_the_problem() {
    let cases = [
        ("@zk-lock-history", "the record type (`grant` or `write`) is missing"),
        ("@zk-lock-history lease holder=a", "unknown record type `lease`: expected grant or write"),
        ("@zk-lock-history write writer=a path=/p token=1 sent=1 answered=2", "the field `result` is missing"),
        ("@zk-lock-history write writer=a path=/p token=x sent=1 answered=2 result=accepted", "`token=x` is not"),
        (
            "@zk-lock-history write writer=a path=/p token=1 sent=1 answered=2 result=maybe",
            "expected accepted or refused",
        ),
        (
            "@zk-lock-history write writer=a path=/p token=1 sent=1 answered=2 result=accepted at=3",
            "unknown field `at`",
        ),
        ("@zk-lock-history write writer=a writer=b", "the field `writer` is given twice"),
        ("@zk-lock-history write writer=a%2", "bad escape in `a%2`"),
        ("@zk-lock-history grant holder=a kind=lock", "unknown kind `lock`: expected mutex, read, write or semaphore"),
        (
            "@zk-lock-history grant holder=a kind=mutex path=/p token=1 start=1 end=2 outcome=lost",
            "`reason` is missing",
        ),
        ("@zk-lock-history grant holder", "`holder` is not a `key=value` field"),
    ];
    for (line, problem) in cases {
        let error = line.parse::<Record>().expect_err(line);
        assert!(error.problem.contains(problem), "{line}: expected `{problem}` in `{}`", error.problem);
        assert_eq!(error.line, line);
        let message = error.to_string();
        assert!(message.starts_with(&format!("cannot read the history record `{line}`: ")), "{message}");
    }
    let history = History::new();
    let broken = history.record_output_line("test worker ... @zk-lock-history grant holder=a");
    assert!(broken.is_err_and(|e| e.problem.contains("the field `kind` is missing")));
    assert_eq!(history.grant_count(), 0);
}
