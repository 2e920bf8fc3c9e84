//! The history of grants that worker processes report, and the checker that judges it.
//!
//! Every grant is reported as one line on the worker's stdout (`@faults grant k=v ...`). Times
//! are taken on the worker with [`now_ns`]: after the acquire returned (`start`) and before the
//! release was sent (`end`), so each measured interval lies inside the real hold, and two
//! measured intervals that overlap prove two real holders at once.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::LazyLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The prefix of every line a worker reports; the rest of its stdout is libtest's chatter.
pub const LINE_PREFIX: &str = "@faults ";

/// Nanoseconds on a clock all processes of the machine share: the wall clock read once per
/// process, advanced with the monotonic clock so that a clock step during the run cannot
/// reorder one process's own times.
pub fn now_ns() -> u64 {
    static ANCHOR: LazyLock<(u64, Instant)> = LazyLock::new(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos();
        (wall as u64, Instant::now())
    });
    ANCHOR.0 + ANCHOR.1.elapsed().as_nanos() as u64
}

/// The recipe a grant was made by; it decides which rules apply to its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Mutex,
    Read,
    Write,
    /// A semaphore permit, with the semaphore's lease count.
    Semaphore(u32),
}

impl Kind {
    /// Whether the holder writes to the fenced store: only one holder at a time may.
    pub fn exclusive(self) -> bool {
        matches!(self, Kind::Mutex | Kind::Write)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Mutex => f.write_str("mutex"),
            Kind::Read => f.write_str("read"),
            Kind::Write => f.write_str("write"),
            Kind::Semaphore(max) => write!(f, "semaphore:{max}"),
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mutex" => Ok(Kind::Mutex),
            "read" => Ok(Kind::Read),
            "write" => Ok(Kind::Write),
            _ => match s.strip_prefix("semaphore:").map(str::parse) {
                Some(Ok(max)) => Ok(Kind::Semaphore(max)),
                _ => Err(format!("unknown kind `{s}`")),
            },
        }
    }
}

/// How a grant ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Released, and the release confirmed the lock was still ours.
    Released,
    /// The holder observed the loss: `is_held()` was false at the end, or the release said `Lost`.
    Lost,
    /// The guard was dropped (a panic in the critical section) while `is_held()` was true.
    Dropped,
    /// The release failed for another reason; the lock was held at the end.
    Failed,
}

/// What the fenced store said to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// No write was made (shared recipes do not write).
    None,
    Accepted,
    Rejected,
}

macro_rules! words {
    ($name:ident { $($variant:ident = $word:literal),* $(,)? }) => {
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $($name::$variant => $word),* })
            }
        }
        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s { $($word => Ok($name::$variant),)* _ => Err(format!("unknown {} `{s}`", stringify!($name))) }
            }
        }
    };
}
words!(Outcome { Released = "released", Lost = "lost", Dropped = "dropped", Failed = "failed" });
words!(Written { None = "none", Accepted = "accepted", Rejected = "rejected" });

/// One grant, as its holder reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Which worker (and task) held it.
    pub proc: String,
    pub kind: Kind,
    pub path: String,
    pub token: i64,
    pub start: u64,
    pub end: u64,
    pub outcome: Outcome,
    /// The fenced write made at the start of the critical section.
    pub write: Written,
}

/// A fenced write made after the holder learnt it lost the lock, with the old token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateWrite {
    pub proc: String,
    pub path: String,
    pub token: i64,
    pub at: u64,
    pub write: Written,
}

/// One reported line: its tag and fields. A `msg=` field takes the rest of the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub tag: String,
    pub fields: BTreeMap<String, String>,
}

impl Line {
    pub fn new(tag: &str) -> Self {
        Self { tag: tag.to_owned(), fields: BTreeMap::new() }
    }

    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Self {
        self.fields.insert(key.to_owned(), value.to_string());
        self
    }

    /// Parses a line of a worker's stdout; `None` for lines that are not ours. Our report may
    /// follow libtest's `test fault_worker ... ` on the worker's first line.
    pub fn parse(text: &str) -> Option<Line> {
        let rest = &text[text.find(LINE_PREFIX)? + LINE_PREFIX.len()..];
        let (tag, mut rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let mut line = Line::new(tag);
        while !rest.is_empty() {
            if let Some(msg) = rest.strip_prefix("msg=") {
                line.fields.insert("msg".to_owned(), msg.to_owned());
                break;
            }
            let (field, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let (key, value) = field.split_once('=')?;
            line.fields.insert(key.to_owned(), value.to_owned());
            rest = tail;
        }
        Some(line)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    fn field<T: std::str::FromStr>(&self, key: &str) -> Result<T, String> {
        let value = self.get(key).ok_or_else(|| format!("`{key}` missing in {self}"))?;
        value.parse().map_err(|_| format!("bad `{key}` in {self}"))
    }

    pub fn to_grant(&self) -> Result<Grant, String> {
        Ok(Grant {
            proc: self.field("proc")?,
            kind: self.field("kind")?,
            path: self.field("path")?,
            token: self.field("token")?,
            start: self.field("start")?,
            end: self.field("end")?,
            outcome: self.field("outcome")?,
            write: self.field("write")?,
        })
    }

    pub fn to_late_write(&self) -> Result<LateWrite, String> {
        Ok(LateWrite {
            proc: self.field("proc")?,
            path: self.field("path")?,
            token: self.field("token")?,
            at: self.field("at")?,
            write: self.field("write")?,
        })
    }
}

impl fmt::Display for Line {
    /// The wire form, `@faults <tag> k=v ... [msg=...]`; values must not contain spaces, except
    /// `msg`, which is written last.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{LINE_PREFIX}{}", self.tag)?;
        for (key, value) in self.fields.iter().filter(|(key, _)| *key != "msg") {
            write!(f, " {key}={value}")?;
        }
        if let Some(msg) = self.fields.get("msg") {
            write!(f, " msg={}", msg.replace('\n', " | "))?;
        }
        Ok(())
    }
}

impl From<&Grant> for Line {
    fn from(g: &Grant) -> Line {
        Line::new("grant")
            .with("proc", &g.proc)
            .with("kind", g.kind)
            .with("path", &g.path)
            .with("token", g.token)
            .with("start", g.start)
            .with("end", g.end)
            .with("outcome", g.outcome)
            .with("write", g.write)
    }
}

impl From<&LateWrite> for Line {
    fn from(l: &LateWrite) -> Line {
        Line::new("late")
            .with("proc", &l.proc)
            .with("path", &l.path)
            .with("token", l.token)
            .with("at", l.at)
            .with("write", l.write)
    }
}

/// Everything the workers reported.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub grants: Vec<Grant>,
    pub late_writes: Vec<LateWrite>,
}

/// Checks `history`; returns one message per violation, empty when it is sound.
///
/// Rules, per lock path:
/// - Mutex and write grants overlap no other grant of their path (reads may overlap reads), and
///   a semaphore never has more permits out than its lease count. Grants whose holder observed
///   the loss are exempt: the lock was taken from them, which is what loss detection is for.
/// - Fencing tokens are unique per path, and strictly increase in grant order where that order
///   is defined: between exclusive grants, and between a write grant and the other grants of its
///   read-write lock (readers that share the lock have no order among themselves, nor have
///   semaphore permits).
/// - A holder that did not observe a loss had its fenced write accepted.
/// - A write a holder made after it observed the loss, carrying its old token, was rejected if a
///   newer holder of that path had finished its own write before.
pub fn check(history: &History) -> Vec<String> {
    let mut violations = Vec::new();
    let mut by_path: HashMap<&str, Vec<&Grant>> = HashMap::new();
    for grant in &history.grants {
        by_path.entry(&grant.path).or_default().push(grant);
    }
    let mut paths: Vec<_> = by_path.into_iter().collect();
    paths.sort_by_key(|(path, _)| *path);
    for (path, grants) in &paths {
        check_path(path, grants, &mut violations);
    }
    for late in &history.late_writes {
        if late.write != Written::Accepted {
            continue;
        }
        let newer = history
            .grants
            .iter()
            .find(|g| g.path == late.path && g.token > late.token && g.write == Written::Accepted && g.end < late.at);
        if let Some(newer) = newer {
            violations.push(format!(
                "{path}: late write of {} with old token {} was accepted after {} wrote with token {}",
                late.proc,
                late.token,
                newer.proc,
                newer.token,
                path = late.path
            ));
        }
    }
    violations
}

fn check_path<'a>(path: &str, grants: &[&'a Grant], violations: &mut Vec<String>) {
    let mut kinds: Vec<Kind> = grants.iter().map(|g| g.kind).collect();
    kinds.sort_by_key(|k| k.to_string());
    kinds.dedup();
    let rw = kinds.iter().all(|k| matches!(k, Kind::Read | Kind::Write));
    if kinds.len() > 1 && !rw {
        violations.push(format!("{path}: granted by different recipes {kinds:?}"));
        return;
    }

    let mut tokens: HashMap<i64, &Grant> = HashMap::new();
    for grant in grants {
        if let Some(other) = tokens.insert(grant.token, grant) {
            violations.push(format!("{path}: token {} granted twice ({} and {})", grant.token, other.proc, grant.proc));
        }
    }

    let mut live: Vec<&'a Grant> = grants.iter().copied().filter(|g| g.outcome != Outcome::Lost).collect();
    live.sort_by_key(|g| (g.start, g.end));
    for grant in &live {
        if grant.write == Written::Rejected {
            violations.push(format!(
                "{path}: the fenced write of {} (token {}) was rejected though it never observed a loss",
                grant.proc, grant.token
            ));
        }
    }

    if let [Kind::Semaphore(max), ..] = kinds[..] {
        check_leases(path, max, &live, violations);
        return;
    }
    // Sorted by start, X (earlier) and Y overlap iff Y starts before X ends; the pair is ordered
    // (and must not overlap) iff one of them is exclusive, i.e. a mutex or write grant.
    let mut latest: Option<&'a Grant> = None; // the grant ending last so far
    let mut latest_exclusive: Option<&'a Grant> = None;
    let mut top_token: Option<&'a Grant> = None; // the largest token so far
    let mut top_exclusive_token: Option<&'a Grant> = None;
    for grant in &live {
        let (overlap_with, order_with) =
            if grant.kind.exclusive() { (latest, top_token) } else { (latest_exclusive, top_exclusive_token) };
        if let Some(other) = overlap_with.filter(|other| grant.start <= other.end) {
            violations.push(format!(
                "{path}: two holders at once: {} {} [{}, {}] token {} and {} {} [{}, {}] token {} ({} ns overlap)",
                other.proc,
                other.kind,
                other.start,
                other.end,
                other.token,
                grant.proc,
                grant.kind,
                grant.start,
                grant.end,
                grant.token,
                other.end.min(grant.end).saturating_sub(grant.start)
            ));
        }
        if let Some(other) = order_with.filter(|other| grant.token <= other.token) {
            violations.push(format!(
                "{path}: fencing token went back: {} {} got {} after {} {} had {}",
                grant.proc, grant.kind, grant.token, other.proc, other.kind, other.token
            ));
        }
        let later = |best: Option<&'a Grant>, key: fn(&Grant) -> i128| match best {
            Some(best) if key(best) >= key(grant) => Some(best),
            _ => Some(*grant),
        };
        latest = later(latest, |g| g.end.into());
        top_token = later(top_token, |g| g.token.into());
        if grant.kind.exclusive() {
            latest_exclusive = later(latest_exclusive, |g| g.end.into());
            top_exclusive_token = later(top_exclusive_token, |g| g.token.into());
        }
    }
}

/// At no instant are more than `max` permits of one semaphore out.
fn check_leases(path: &str, max: u32, live: &[&Grant], violations: &mut Vec<String>) {
    // At equal times a release counts before a grant: touching intervals do not overlap.
    let mut events: Vec<(u64, i32)> = live.iter().flat_map(|g| [(g.start, 1), (g.end + 1, -1)]).collect();
    events.sort_by_key(|&(at, delta)| (at, delta));
    let mut out = 0i32;
    for (at, delta) in events {
        out += delta;
        if out > max as i32 {
            let holders: Vec<String> = live
                .iter()
                .filter(|g| g.start <= at && at <= g.end)
                .map(|g| format!("{} [{}, {}]", g.proc, g.start, g.end))
                .collect();
            violations.push(format!("{path}: {out} permits out at once, max {max}: {}", holders.join(", ")));
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(proc: &str, kind: Kind, token: i64, start: u64, end: u64) -> Grant {
        let write = if kind.exclusive() { Written::Accepted } else { Written::None };
        Grant { proc: proc.into(), kind, path: "/p".into(), token, start, end, outcome: Outcome::Released, write }
    }

    fn violations(grants: Vec<Grant>) -> Vec<String> {
        check(&History { grants, late_writes: Vec::new() })
    }

    fn assert_violation(grants: Vec<Grant>, expected: &str) {
        let found = violations(grants);
        assert!(found.iter().any(|v| v.contains(expected)), "expected a violation with `{expected}`, got {found:?}");
    }

    #[test]
    fn a_sound_history_passes() {
        let history = History {
            grants: vec![
                grant("a", Kind::Mutex, 10, 100, 200),
                grant("b", Kind::Mutex, 12, 201, 300),
                grant("c", Kind::Mutex, 15, 400, 500),
            ],
            late_writes: Vec::new(),
        };
        assert_eq!(check(&history), Vec::<String>::new());
    }

    #[test]
    fn overlapping_mutex_holders_fail() {
        assert_violation(
            vec![grant("a", Kind::Mutex, 10, 100, 200), grant("b", Kind::Mutex, 12, 200, 300)],
            "two holders at once",
        );
        // Overlap with an earlier grant that is not the latest one by start.
        assert_violation(
            vec![
                grant("a", Kind::Mutex, 10, 100, 1000),
                grant("b", Kind::Mutex, 12, 150, 160),
                grant("c", Kind::Mutex, 13, 500, 600),
            ],
            "c mutex",
        );
    }

    #[test]
    fn a_holder_that_observed_the_loss_is_exempt_from_overlap_and_order() {
        let mut lost = grant("a", Kind::Mutex, 10, 100, 900);
        lost.outcome = Outcome::Lost;
        lost.write = Written::Rejected;
        let grants = vec![lost, grant("b", Kind::Mutex, 9, 200, 300), grant("c", Kind::Mutex, 12, 400, 500)];
        // b's token is below a's, but a lost the lock: only live grants are ordered.
        assert_eq!(violations(grants), Vec::<String>::new());
    }

    #[test]
    fn readers_may_share_but_not_with_a_writer() {
        let readers = vec![grant("a", Kind::Read, 10, 100, 300), grant("b", Kind::Read, 11, 150, 250)];
        assert_eq!(violations(readers.clone()), Vec::<String>::new());
        let mut with_writer = readers;
        with_writer.push(grant("w", Kind::Write, 12, 290, 400));
        assert_violation(with_writer, "two holders at once");
        // A reader starting inside an earlier, longer write.
        assert_violation(
            vec![grant("w", Kind::Write, 10, 100, 500), grant("r", Kind::Read, 11, 200, 300)],
            "two holders at once",
        );
    }

    #[test]
    fn semaphore_permits_never_exceed_the_count() {
        let sem = Kind::Semaphore(2);
        let two = vec![grant("a", sem, 10, 100, 300), grant("b", sem, 11, 150, 400), grant("c", sem, 12, 301, 500)];
        assert_eq!(violations(two.clone()), Vec::<String>::new());
        let mut three = two;
        three.push(grant("d", sem, 13, 250, 260));
        assert_violation(three, "3 permits out at once, max 2");
    }

    #[test]
    fn fencing_tokens_must_grow_in_grant_order() {
        assert_violation(
            vec![grant("a", Kind::Mutex, 12, 100, 200), grant("b", Kind::Mutex, 10, 300, 400)],
            "fencing token went back",
        );
        assert_violation(
            vec![grant("r", Kind::Read, 20, 100, 200), grant("w", Kind::Write, 15, 300, 400)],
            "fencing token went back",
        );
        // Two readers have no order.
        assert_eq!(
            violations(vec![grant("a", Kind::Read, 20, 100, 200), grant("b", Kind::Read, 15, 300, 400)]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_token_granted_twice_fails() {
        let sem = Kind::Semaphore(5);
        assert_violation(vec![grant("a", sem, 10, 100, 200), grant("b", sem, 10, 300, 400)], "granted twice");
    }

    #[test]
    fn a_live_holder_whose_write_was_rejected_fails() {
        let mut rejected = grant("b", Kind::Mutex, 12, 300, 400);
        rejected.write = Written::Rejected;
        assert_violation(vec![grant("a", Kind::Mutex, 10, 100, 200), rejected], "was rejected");
    }

    #[test]
    fn a_late_write_must_be_rejected_once_a_newer_holder_wrote() {
        let mut old = grant("old", Kind::Mutex, 10, 100, 900);
        old.outcome = Outcome::Lost;
        let grants = vec![old, grant("new", Kind::Mutex, 12, 300, 400)];
        let late = |write, at| LateWrite { proc: "old".into(), path: "/p".into(), token: 10, at, write };
        let accepted = History { grants: grants.clone(), late_writes: vec![late(Written::Accepted, 1000)] };
        let found = check(&accepted);
        assert!(found.iter().any(|v| v.contains("late write of old")), "{found:?}");
        let rejected = History { grants: grants.clone(), late_writes: vec![late(Written::Rejected, 1000)] };
        assert_eq!(check(&rejected), Vec::<String>::new());
        // Before the newer holder finished writing, the store may still take it.
        let early = History { grants, late_writes: vec![late(Written::Accepted, 350)] };
        assert_eq!(check(&early), Vec::<String>::new());
    }

    #[test]
    fn lines_round_trip() {
        let mut g = grant("w1/t0", Kind::Semaphore(3), 4_294_967_300, 1, 2);
        g.outcome = Outcome::Dropped;
        let text = Line::from(&g).to_string();
        assert!(text.starts_with(LINE_PREFIX), "{text}");
        assert_eq!(Line::parse(&text).unwrap().to_grant().unwrap(), g);
        let fail = Line::new("fail").with("proc", "w2").with("msg", "timed out after 1s waiting for lock `/x`");
        let parsed = Line::parse(&fail.to_string()).unwrap();
        assert_eq!(parsed.get("msg"), Some("timed out after 1s waiting for lock `/x`"));
        assert_eq!(Line::parse("test fault_worker ... ok"), None);
        let first = Line::parse(&format!("test fault_worker ... {fail}")).unwrap();
        assert_eq!(first.get("proc"), Some("w2"));
    }
}
