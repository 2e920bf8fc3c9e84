//! What a history holds, grants and fenced writes, and their one-line text form, in which worker
//! processes report them to the test that checks them.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// The recipe a grant was made by: it decides which rules apply to its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GrantKind {
    /// A [`Mutex`](crate::Mutex) (or a `#[zk_lock]` function): one holder at a time.
    Mutex,
    /// The read side of an [`RwLock`](crate::RwLock): readers share the lock with each other,
    /// never with a writer.
    Read,
    /// The write side of an [`RwLock`](crate::RwLock): one holder, and no reader.
    Write,
    /// A permit of a [`Semaphore`](crate::Semaphore) of `leases` permits. A
    /// [`SemaphoreMutex`](crate::SemaphoreMutex) is a semaphore of one lease.
    Semaphore {
        /// The semaphore's lease count: at most this many permits are out at once.
        leases: u32,
    },
}

impl GrantKind {
    /// Whether a grant of this kind overlaps no other grant of its path and gets a fencing
    /// token larger than every grant before it: a mutex or a write lock.
    pub fn is_exclusive(self) -> bool {
        matches!(self, GrantKind::Mutex | GrantKind::Write)
    }
}

impl fmt::Display for GrantKind {
    /// `mutex`, `read`, `write` or `semaphore:<leases>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrantKind::Mutex => f.write_str("mutex"),
            GrantKind::Read => f.write_str("read"),
            GrantKind::Write => f.write_str("write"),
            GrantKind::Semaphore { leases } => write!(f, "semaphore:{leases}"),
        }
    }
}

impl FromStr for GrantKind {
    type Err = String;

    /// The [`Display`](fmt::Display) form; the error says what is allowed.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mutex" => Ok(GrantKind::Mutex),
            "read" => Ok(GrantKind::Read),
            "write" => Ok(GrantKind::Write),
            _ => match s.strip_prefix("semaphore:").map(str::parse) {
                Some(Ok(leases)) => Ok(GrantKind::Semaphore { leases }),
                _ => Err(format!("unknown kind `{s}`: expected mutex, read, write or semaphore:<leases>")),
            },
        }
    }
}

/// How a grant ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Released, and the release confirmed the lock was still held.
    Released,
    /// The guard was dropped while the lock was held: a panic or a cancellation in the critical
    /// section (the release then happens in the background).
    Dropped,
    /// The release failed for another reason than a loss; the lock was held at the end.
    ReleaseFailed {
        /// The release's error.
        error: String,
    },
    /// The holder saw the lock lost by the end of its critical section: `is_held()` was false,
    /// or the release said [`Error::Lost`](crate::Error::Lost). Such a grant is exempt from the
    /// rules on overlap and token order: the lock was taken from it, and it was told.
    Lost {
        /// Why, as the holder learnt it (a [`LostReason`](crate::LostReason) or your own words).
        reason: String,
    },
}

impl Outcome {
    /// Whether the holder saw the lock lost.
    pub fn is_lost(&self) -> bool {
        matches!(self, Outcome::Lost { .. })
    }
}

/// One grant of a lock, as its holder recorded it.
///
/// Take the times with [`now_ns`](super::now_ns): `start` after the acquire returned and `end`
/// before the release is sent, so that the recorded interval lies inside the real hold and two
/// recorded intervals that overlap prove two holders at once.
/// [`History::time_grant`](super::History::time_grant) takes them for you.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Who held it: a name of your choice, such as `worker-1/task-0`; violations name it.
    pub holder: String,
    /// The recipe that granted it.
    pub kind: GrantKind,
    /// The lock path.
    pub path: String,
    /// The guard's fencing token.
    pub token: i64,
    /// [`now_ns`](super::now_ns) after the acquire returned.
    pub start: u64,
    /// [`now_ns`](super::now_ns) before the release was sent (or the guard dropped).
    pub end: u64,
    /// How it ended.
    pub outcome: Outcome,
}

/// One write to a fenced store (a store that refuses a token smaller than the largest it has
/// accepted), as the writer recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedWrite {
    /// Who wrote: the holder name of the grant whose token it carried.
    pub writer: String,
    /// The lock path whose fencing token the write carried; the store is assumed to fence per
    /// lock path.
    pub path: String,
    /// The fencing token the write carried.
    pub token: i64,
    /// [`now_ns`](super::now_ns) before the write was sent.
    pub sent: u64,
    /// [`now_ns`](super::now_ns) after the store answered.
    pub answered: u64,
    /// Whether the store accepted it.
    pub accepted: bool,
}

/// A grant or a fenced write, in the one-line text form worker processes print and the test
/// reads back with [`FromStr`] or [`Record::find_in`].
///
/// ```text
/// @zk-lock-history grant holder=w1/t0 kind=mutex path=/jobs/a token=4294967310 start=1717000000000000000 end=1717000000002000000 outcome=released
/// @zk-lock-history grant holder=w2/t0 kind=semaphore:2 path=/pool token=4294967320 start=... end=... outcome=lost reason=the%20zookeeper%20session%20expired
/// @zk-lock-history write writer=w1/t0 path=/jobs/a token=4294967310 sent=1717000000000500000 answered=1717000000000900000 result=accepted
/// ```
///
/// Fields may come in any order. `outcome` is `released`, `dropped`, `release-failed` (with
/// `error=`) or `lost` (with `reason=`); `result` is `accepted` or `refused`. Values escape `%`,
/// space, tab, carriage return and newline as `%25`, `%20`, `%09`, `%0D` and `%0A`, so any path
/// or name fits on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A grant.
    Grant(Grant),
    /// A fenced write.
    Write(FencedWrite),
}

impl Record {
    /// The word every record line starts with.
    pub const PREFIX: &'static str = "@zk-lock-history";

    /// The record in a line of a process's output, which may hold other text before it (libtest
    /// prints `test name ... ` before a test's first output line): `None` when the line holds
    /// no record.
    ///
    /// # Errors
    ///
    /// [`ParseRecordError`], naming the line and the field, when the text from
    /// [`PREFIX`](Self::PREFIX) on is not a well-formed record.
    pub fn find_in(line: &str) -> Option<Result<Record, ParseRecordError>> {
        line.find(Self::PREFIX).map(|at| line[at..].parse())
    }
}

impl From<Grant> for Record {
    fn from(grant: Grant) -> Record {
        Record::Grant(grant)
    }
}

impl From<FencedWrite> for Record {
    fn from(write: FencedWrite) -> Record {
        Record::Write(write)
    }
}

impl fmt::Display for Record {
    /// The one-line form (see [`Record`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = |f: &mut fmt::Formatter<'_>, key: &str, value: &dyn fmt::Display| {
            write!(f, " {key}={}", escape(&value.to_string()))
        };
        match self {
            Record::Grant(g) => {
                write!(f, "{} grant", Self::PREFIX)?;
                field(f, "holder", &g.holder)?;
                field(f, "kind", &g.kind)?;
                field(f, "path", &g.path)?;
                field(f, "token", &g.token)?;
                field(f, "start", &g.start)?;
                field(f, "end", &g.end)?;
                match &g.outcome {
                    Outcome::Released => field(f, "outcome", &"released"),
                    Outcome::Dropped => field(f, "outcome", &"dropped"),
                    Outcome::ReleaseFailed { error } => {
                        field(f, "outcome", &"release-failed")?;
                        field(f, "error", error)
                    }
                    Outcome::Lost { reason } => {
                        field(f, "outcome", &"lost")?;
                        field(f, "reason", reason)
                    }
                }
            }
            Record::Write(w) => {
                write!(f, "{} write", Self::PREFIX)?;
                field(f, "writer", &w.writer)?;
                field(f, "path", &w.path)?;
                field(f, "token", &w.token)?;
                field(f, "sent", &w.sent)?;
                field(f, "answered", &w.answered)?;
                field(f, "result", &if w.accepted { "accepted" } else { "refused" })
            }
        }
    }
}

impl FromStr for Record {
    type Err = ParseRecordError;

    /// Reads the one-line form (see [`Record`]); surrounding whitespace is ignored.
    fn from_str(line: &str) -> Result<Record, ParseRecordError> {
        parse(line.trim()).map_err(|problem| ParseRecordError { line: line.trim().to_owned(), problem })
    }
}

/// A line that starts like a history record but is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot read the history record `{line}`: {problem}; a record is `@zk-lock-history grant holder=.. kind=.. \
     path=.. token=.. start=.. end=.. outcome=..` or `@zk-lock-history write writer=.. path=.. token=.. sent=.. \
     answered=.. result=accepted|refused`"
)]
pub struct ParseRecordError {
    /// The line.
    pub line: String,
    /// What is wrong with it.
    pub problem: String,
}

fn parse(line: &str) -> Result<Record, String> {
    let rest =
        line.strip_prefix(Record::PREFIX).ok_or_else(|| format!("it does not start with `{}`", Record::PREFIX))?;
    let mut words = rest.split(' ').filter(|word| !word.is_empty());
    let tag = words.next().ok_or("the record type (`grant` or `write`) is missing")?;
    let mut fields = Fields::default();
    for word in words {
        let (key, value) = word.split_once('=').ok_or_else(|| format!("`{word}` is not a `key=value` field"))?;
        if fields.0.insert(key, unescape(value)?).is_some() {
            return Err(format!("the field `{key}` is given twice"));
        }
    }
    let record = match tag {
        "grant" => Record::Grant(Grant {
            holder: fields.take("holder")?,
            kind: fields.take("kind")?.parse()?,
            path: fields.take("path")?,
            token: fields.number("token")?,
            start: fields.number("start")?,
            end: fields.number("end")?,
            outcome: match fields.take("outcome")?.as_str() {
                "released" => Outcome::Released,
                "dropped" => Outcome::Dropped,
                "release-failed" => Outcome::ReleaseFailed { error: fields.take("error")? },
                "lost" => Outcome::Lost { reason: fields.take("reason")? },
                other => {
                    return Err(format!(
                        "unknown outcome `{other}`: expected released, dropped, release-failed or lost"
                    ))
                }
            },
        }),
        "write" => Record::Write(FencedWrite {
            writer: fields.take("writer")?,
            path: fields.take("path")?,
            token: fields.number("token")?,
            sent: fields.number("sent")?,
            answered: fields.number("answered")?,
            accepted: match fields.take("result")?.as_str() {
                "accepted" => true,
                "refused" => false,
                other => return Err(format!("unknown result `{other}`: expected accepted or refused")),
            },
        }),
        other => return Err(format!("unknown record type `{other}`: expected grant or write")),
    };
    match fields.0.keys().next() {
        Some(extra) => Err(format!("unknown field `{extra}` for a {tag} record")),
        None => Ok(record),
    }
}

/// The fields of a line not read yet.
#[derive(Default)]
struct Fields<'a>(HashMap<&'a str, String>);

impl Fields<'_> {
    fn take(&mut self, key: &str) -> Result<String, String> {
        self.0.remove(key).ok_or_else(|| format!("the field `{key}` is missing"))
    }

    fn number<T: FromStr>(&mut self, key: &str) -> Result<T, String> {
        let value = self.take(key)?;
        value.parse().map_err(|_| format!("`{key}={value}` is not a whole number in range"))
    }
}

/// The characters a value may not hold as they are: `%` starts an escape, the others would split
/// the line.
const ESCAPED: [char; 5] = ['%', ' ', '\t', '\r', '\n'];

fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if ESCAPED.contains(&c) {
            escaped.push_str(&format!("%{:02X}", c as u32));
        } else {
            escaped.push(c);
        }
    }
    escaped
}

fn unescape(value: &str) -> Result<String, String> {
    let mut plain = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('%') {
        plain.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3).and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match code.map(char::from).filter(|c| ESCAPED.contains(c)) {
            Some(c) => plain.push(c),
            None => return Err(format!("bad escape in `{value}`: `%` must start one of %25, %20, %09, %0D, %0A")),
        }
        rest = &rest[at + 3..];
    }
    plain.push_str(rest);
    Ok(plain)
}
