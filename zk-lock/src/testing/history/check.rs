//! The checker: the rules a history of grants and fenced writes must obey, and the report that
//! lists every violation.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use super::record::{FencedWrite, Grant, GrantKind};

/// A broken rule, naming the path and the grants or writes that broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// Two grants of one path that exclude each other were held at once (a mutex or write grant
    /// with any other grant of its path).
    Overlap {
        /// The lock path.
        path: String,
        /// The grant that started first.
        earlier: Grant,
        /// The grant that started while `earlier` was held.
        later: Grant,
    },
    /// More permits of a semaphore were out at once than it has leases: `holders`, granted
    /// under a lease count of `leases` or less, were more than `leases`. With a fixed count,
    /// every permit out; with a changing one (a [`SharedCount`](crate::SharedCount)), the last
    /// of them to be granted counted the others against its count, which was at most `leases`.
    OverLease {
        /// The semaphore's path.
        path: String,
        /// Its lease count: the largest that `holders` were granted under.
        leases: u32,
        /// The grants out at that moment granted under a count of `leases` or less.
        holders: Vec<Grant>,
    },
    /// A grant got a fencing token no larger than one granted before it on the same path.
    TokenBackwards {
        /// The lock path.
        path: String,
        /// The earlier grant, with the larger token.
        earlier: Grant,
        /// The later grant.
        later: Grant,
    },
    /// Two grants of one path carry the same fencing token.
    TokenReused {
        /// The lock path.
        path: String,
        /// The first grant recorded with the token.
        first: Grant,
        /// Another grant with the same token.
        second: Grant,
    },
    /// One path was granted by recipes that cannot share it (only readers and writers of one
    /// read/write lock can, and the permits of one semaphore whatever the lease count each was
    /// granted under): often two locks recorded under one path. The grants of each recipe are
    /// still checked, as if alone on the path.
    MixedKinds {
        /// The lock path.
        path: String,
        /// The kinds recorded for it.
        kinds: Vec<GrantKind>,
    },
    /// A mutex or write holder's fenced write, sent and answered while it held the lock and did
    /// not see it lost, was refused: the store had seen a newer token during the hold.
    LiveWriteRefused {
        /// The refused write.
        write: FencedWrite,
        /// The grant whose token it carried.
        grant: Grant,
    },
    /// A write with an old token was accepted after a write with a newer token of the same path
    /// had been: the store let a stale holder through.
    LateWriteAccepted {
        /// The write with the old token.
        late: FencedWrite,
        /// The write with the newer token, answered before `late` was sent.
        newer: FencedWrite,
    },
}

impl Violation {
    /// The lock path the violation is about.
    pub fn path(&self) -> &str {
        match self {
            Violation::Overlap { path, .. }
            | Violation::OverLease { path, .. }
            | Violation::TokenBackwards { path, .. }
            | Violation::TokenReused { path, .. }
            | Violation::MixedKinds { path, .. } => path,
            Violation::LiveWriteRefused { write, .. } => &write.path,
            Violation::LateWriteAccepted { late, .. } => &late.path,
        }
    }
}

/// A grant in a violation's words: `w1/t0 (mutex, token 12, held [100, 200] ns)`.
struct Held<'a>(&'a Grant);

impl fmt::Display for Held<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.0;
        write!(f, "{} ({}, token {}, held [{}, {}] ns)", g.holder, g.kind, g.token, g.start, g.end)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path();
        match self {
            Violation::Overlap { earlier, later, .. } => write!(
                f,
                "`{path}`: two holders at once for {} ns: {} and {}",
                earlier.end.min(later.end).saturating_sub(later.start),
                Held(earlier),
                Held(later)
            ),
            Violation::OverLease { leases, holders, .. } => {
                let one_count = holders.iter().all(|g| g.kind == GrantKind::Semaphore { leases: *leases });
                let names: Vec<String> = holders.iter().map(|g| Held(g).to_string()).collect();
                let (n, names) = (holders.len(), names.join(", "));
                match one_count {
                    true => write!(f, "`{path}`: {n} permits out at once, but the semaphore has {leases}: {names}"),
                    false => write!(
                        f,
                        "`{path}`: {n} permits out at once, granted under a lease count of {leases} or less: {names}"
                    ),
                }
            }
            Violation::TokenBackwards { earlier, later, .. } => write!(
                f,
                "`{path}`: the fencing token went backwards: {} was granted after {}",
                Held(later),
                Held(earlier)
            ),
            Violation::TokenReused { first, second, .. } => {
                write!(f, "`{path}`: token {} granted twice: to {} and {}", first.token, Held(first), Held(second))
            }
            Violation::MixedKinds { kinds, .. } => {
                let kinds: Vec<String> = kinds.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "`{path}`: granted by recipes that cannot share a path ({}); were two locks recorded under one path?",
                    kinds.join(", ")
                )
            }
            Violation::LiveWriteRefused { write, grant } => write!(
                f,
                "`{path}`: the fenced write of {} with token {} (sent at {}, answered at {} ns) was refused while it \
                 held the lock without seeing it lost: {}",
                write.writer,
                write.token,
                write.sent,
                write.answered,
                Held(grant)
            ),
            Violation::LateWriteAccepted { late, newer } => write!(
                f,
                "`{path}`: the write of {} with old token {} (sent at {} ns) was accepted after the write of {} with \
                 newer token {} had been (answered at {} ns)",
                late.writer, late.token, late.sent, newer.writer, newer.token, newer.answered
            ),
        }
    }
}

/// What [`History::check`](super::History::check) found: every violation, and how much it
/// looked at. Its `Display` is a summary line followed by one line per violation, for an
/// assertion message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    grants: usize,
    writes: usize,
    paths: usize,
    violations: Vec<Violation>,
}

impl Report {
    /// Whether no rule was broken.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// Every violation, path by path.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// How many grants were checked.
    pub fn grants(&self) -> usize {
        self.grants
    }

    /// How many fenced writes were checked.
    pub fn fenced_writes(&self) -> usize {
        self.writes
    }

    /// Panics with the report unless it is clean.
    ///
    /// # Panics
    ///
    /// When a rule was broken; the message lists every violation.
    #[track_caller]
    pub fn assert_clean(&self) {
        assert!(self.is_clean(), "{self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (grants, paths) = (counted(self.grants, "grant"), counted(self.paths, "path"));
        write!(f, "{grants} on {paths} and {}: ", counted(self.writes, "fenced write"))?;
        match self.violations.len() {
            0 => f.write_str("no violation"),
            n => {
                write!(f, "{}:", counted(n, "violation"))?;
                for violation in &self.violations {
                    write!(f, "\n  - {violation}")?;
                }
                Ok(())
            }
        }
    }
}

/// `1 path`, `2 paths`.
fn counted(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// Checks every rule on `grants` and `writes` (see [`History`](super::History)).
pub(super) fn check(grants: &[Grant], writes: &[FencedWrite]) -> Report {
    let mut violations = Vec::new();
    let mut by_path: BTreeMap<&str, Vec<&Grant>> = BTreeMap::new();
    for grant in grants {
        by_path.entry(&grant.path).or_default().push(grant);
    }
    for (path, grants) in &by_path {
        check_grants(path, grants, &mut violations);
    }
    check_refused_writes(&by_path, writes, &mut violations);
    check_late_writes(writes, &mut violations);
    let paths: BTreeSet<&str> = by_path.keys().copied().chain(writes.iter().map(|w| w.path.as_str())).collect();
    Report { grants: grants.len(), writes: writes.len(), paths: paths.len(), violations }
}

/// The recipes a path may be granted by, one at a time: the sides of a read/write lock are one,
/// and so are the permits of a semaphore whatever the count each was granted under.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recipe {
    Mutex,
    ReadWrite,
    Semaphore,
}

fn recipe_of(kind: GrantKind) -> Recipe {
    match kind {
        GrantKind::Mutex => Recipe::Mutex,
        GrantKind::Read | GrantKind::Write => Recipe::ReadWrite,
        GrantKind::Semaphore { .. } => Recipe::Semaphore,
    }
}

/// The rules on the grants of one path: one recipe, unique tokens, and each recipe's grants
/// checked as if alone on the path (so a second recipe hides nothing of the first's).
fn check_grants<'a>(path: &str, grants: &[&'a Grant], violations: &mut Vec<Violation>) {
    // The few distinct kinds first, then sorted by name: not a name built per grant.
    let mut kinds: Vec<GrantKind> = Vec::new();
    for grant in grants {
        if !kinds.contains(&grant.kind) {
            kinds.push(grant.kind);
        }
    }
    kinds.sort_by_key(ToString::to_string);
    let mut recipes: Vec<Recipe> = Vec::new();
    for &kind in &kinds {
        if !recipes.contains(&recipe_of(kind)) {
            recipes.push(recipe_of(kind));
        }
    }
    if recipes.len() > 1 {
        violations.push(Violation::MixedKinds { path: path.to_owned(), kinds });
    }

    let mut tokens: HashMap<i64, &Grant> = HashMap::new();
    for grant in grants {
        if let Some(first) = tokens.insert(grant.token, grant) {
            let (first, second) = ((*first).clone(), (*grant).clone());
            violations.push(Violation::TokenReused { path: path.to_owned(), first, second });
        }
    }

    // A holder that saw the loss is exempt: the lock was taken from it, and it was told.
    let mut live: Vec<&'a Grant> = grants.iter().copied().filter(|g| !g.outcome.is_lost()).collect();
    live.sort_by_key(|g| (g.start, g.end));
    for recipe in recipes {
        let live: Vec<&'a Grant> = live.iter().copied().filter(|g| recipe_of(g.kind) == recipe).collect();
        match recipe {
            Recipe::Semaphore => check_leases(path, &live, violations),
            Recipe::Mutex | Recipe::ReadWrite => check_exclusion(path, &live, violations),
        }
    }
}

/// No exclusive grant (mutex, write) overlaps another grant of its recipe, and each has a token
/// larger than those granted before it. `live` is sorted by start.
fn check_exclusion<'a>(path: &str, live: &[&'a Grant], violations: &mut Vec<Violation>) {
    // Sorted by start, X (earlier) and Y overlap iff Y starts before X ends; the pair must not
    // overlap, and is ordered by token, iff one of them is exclusive.
    let mut latest_end: Option<&'a Grant> = None;
    let mut latest_exclusive_end: Option<&'a Grant> = None;
    let mut top_token: Option<&'a Grant> = None;
    let mut top_exclusive_token: Option<&'a Grant> = None;
    for &grant in live {
        let (overlap_with, order_with) = if grant.kind.is_exclusive() {
            (latest_end, top_token)
        } else {
            (latest_exclusive_end, top_exclusive_token)
        };
        if let Some(earlier) = overlap_with.filter(|earlier| grant.start <= earlier.end) {
            let (earlier, later) = (earlier.clone(), grant.clone());
            violations.push(Violation::Overlap { path: path.to_owned(), earlier, later });
        }
        if let Some(earlier) = order_with.filter(|earlier| grant.token <= earlier.token) {
            let (earlier, later) = (earlier.clone(), grant.clone());
            violations.push(Violation::TokenBackwards { path: path.to_owned(), earlier, later });
        }
        let larger = |best: Option<&'a Grant>, key: fn(&Grant) -> i128| match best {
            Some(best) if key(best) >= key(grant) => Some(best),
            _ => Some(grant),
        };
        latest_end = larger(latest_end, |g| g.end.into());
        top_token = larger(top_token, |g| g.token.into());
        if grant.kind.is_exclusive() {
            latest_exclusive_end = larger(latest_exclusive_end, |g| g.end.into());
            top_exclusive_token = larger(top_exclusive_token, |g| g.token.into());
        }
    }
}

/// The lease count a semaphore permit was granted under.
fn leases_of(grant: &Grant) -> u32 {
    match grant.kind {
        GrantKind::Semaphore { leases } => leases,
        _ => u32::MAX,
    }
}

/// A semaphore never has more permits out than the count they were granted under. Each grant
/// records the count in force when it was granted, which a [`SharedCount`](crate::SharedCount)
/// may change between grants: a raised count admits more, a lowered one takes no lease back but
/// admits nobody new until the permits out are under it. Of any permits out at once, the last to
/// be granted counted all the others (they were out before it was granted, and still are)
/// against its own count. So at every instant, for every count `L`, at most `L` of the permits
/// out were granted under a count of `L` or less; with one fixed count, at most that many are
/// out. (The largest count ever seen would miss permits granted under a lowered count while an
/// old permit is out.) Reports the first such instant only: the ones after it usually follow
/// from it.
fn check_leases(path: &str, live: &[&Grant], violations: &mut Vec<Violation>) {
    // At equal times a release counts before a grant: intervals that touch do not overlap. The
    // permits out only grow at a grant, so checking there is enough.
    let mut events: Vec<(u64, bool, usize)> =
        live.iter().enumerate().flat_map(|(i, g)| [(g.start, true, i), (g.end.saturating_add(1), false, i)]).collect();
    events.sort_unstable_by_key(|&(at, granted, _)| (at, granted));
    // How many permits are out under each count.
    let mut out: BTreeMap<u32, i64> = BTreeMap::new();
    for (at, granted, i) in events {
        let leases = leases_of(live[i]);
        *out.entry(leases).or_default() += if granted { 1 } else { -1 };
        if !granted {
            continue;
        }
        let mut under = 0;
        let broken = out.iter().find_map(|(&leases, &n)| {
            under += n;
            (under > i64::from(leases)).then_some(leases)
        });
        if let Some(leases) = broken {
            let holders = live
                .iter()
                .filter(|g| g.start <= at && at <= g.end && leases_of(g) <= leases)
                .map(|g| (*g).clone())
                .collect();
            violations.push(Violation::OverLease { path: path.to_owned(), leases, holders });
            return;
        }
    }
}

/// A mutex or write holder that held the lock throughout its write, and did not see it lost,
/// has the write accepted.
fn check_refused_writes(
    by_path: &BTreeMap<&str, Vec<&Grant>>,
    writes: &[FencedWrite],
    violations: &mut Vec<Violation>,
) {
    for write in writes.iter().filter(|w| !w.accepted) {
        let grants = by_path.get(write.path.as_str()).map_or(&[][..], Vec::as_slice);
        let holding = grants.iter().find(|g| {
            g.token == write.token
                && g.kind.is_exclusive()
                && !g.outcome.is_lost()
                && g.start <= write.sent
                && write.answered <= g.end
        });
        if let Some(grant) = holding {
            violations.push(Violation::LiveWriteRefused { write: write.clone(), grant: (*grant).clone() });
        }
    }
}

/// No accepted write carries a token smaller than one whose write was accepted before it was
/// sent.
fn check_late_writes(writes: &[FencedWrite], violations: &mut Vec<Violation>) {
    let mut by_path: BTreeMap<&str, Vec<&FencedWrite>> = BTreeMap::new();
    for write in writes.iter().filter(|w| w.accepted) {
        by_path.entry(&write.path).or_default().push(write);
    }
    for accepted in by_path.values() {
        let mut by_answer = accepted.clone();
        by_answer.sort_by_key(|w| w.answered);
        let mut by_send = accepted.clone();
        by_send.sort_by_key(|w| w.sent);
        // Sweep the writes by send time, knowing the largest token answered before each.
        let mut answered = by_answer.iter().peekable();
        let mut newest: Option<&FencedWrite> = None;
        for late in by_send {
            while let Some(w) = answered.next_if(|w| w.answered < late.sent) {
                if newest.is_none_or(|n| w.token > n.token) {
                    newest = Some(w);
                }
            }
            if let Some(newer) = newest.filter(|n| n.token > late.token) {
                violations.push(Violation::LateWriteAccepted { late: late.clone(), newer: newer.clone() });
            }
        }
    }
}
