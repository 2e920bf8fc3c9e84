//! Rendering: aligned tables, human durations, session ids and participants as JSON.

use std::io::{self, Write};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Value};
use zk_lock::{Participant, ParticipantKind, Role};
use zookeeper_client::SessionId;

/// What a command produced: the result for stdout, in both forms, and whether it is exit code 1.
#[derive(Debug)]
pub struct Report {
    /// The readable form, printed without `--json`.
    pub text: String,
    /// The machine-readable form, printed with `--json`.
    pub json: Value,
    /// Set for exit code 1 (path missing, nothing to revoke): the message for stderr.
    pub not_found: Option<String>,
    /// Something the result lacks and why, for stderr; the exit code stays 0.
    pub warning: Option<String>,
}

/// The data Curator's `Revoker` writes into a holder's node.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Left-aligned columns separated by two spaces; the last column is not padded.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with a header row.
    pub fn new(header: &[&str]) -> Self {
        Self { rows: vec![header.iter().map(|h| (*h).to_owned()).collect()] }
    }

    /// Adds a row; it should have as many cells as the header.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| self.rows.iter().filter_map(|row| row.get(c)).map(|cell| cell.chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  ", width = widths[c]));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `850ms`, `4.2s`, `37s`, `3m05s`, `2h03m`, `4d07h`: two significant units at most.
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.subsec_millis()),
        1..=9 => format!("{secs}.{}s", d.subsec_millis() / 100),
        10..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..=86_399 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// A session's time left, in whole seconds below a minute (`dump` tells no more): `0s`, `9s`,
/// `1m05s`.
pub fn seconds_left(d: Duration) -> String {
    match d.as_secs() {
        secs @ 0..=59 => format!("{secs}s"),
        _ => human_duration(d),
    }
}

/// A session id as ZooKeeper prints it in its logs and `zkCli.sh`: `0x1000a3b2c4d0001`.
pub fn session_hex(id: i64) -> String {
    SessionId(id).to_string()
}

/// The recipe a lock's nodes belong to, for headers and `tree`: `mutex`, `rwlock`, `semaphore`,
/// `kazoo-lock`, `kazoo-rwlock`, `unknown`, or several joined by `+` when recipes share a path.
pub fn lock_kind(participants: &[Participant]) -> String {
    let kazoo_rw = participants.iter().any(|p| p.kind == ParticipantKind::KazooRead);
    let mut kinds: Vec<&str> = Vec::new();
    for p in participants {
        // kazoo's write lock names its nodes like its plain lock: readers on the path tell them apart.
        let kind = if kazoo_rw && p.kind == ParticipantKind::KazooLock { "kazoo-rwlock" } else { p.kind.lock_kind() };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        "none".to_owned()
    } else {
        kinds.join("+")
    }
}

/// How many hold, wait, and have an unknown role. A semaphore requester that waits with a lease
/// node has its request node too; it is counted once.
pub fn count_roles(participants: &[Participant]) -> (usize, usize, usize) {
    let holders = participants.iter().filter(|p| p.role == Role::Holder).count();
    let waiters = participants.iter().filter(|p| p.role == Role::Waiter && p.kind != ParticipantKind::Lease).count();
    let others = participants.iter().filter(|p| p.role != Role::Holder && p.role != Role::Waiter).count();
    (holders, waiters, others)
}

/// `1 holder, 2 waiters`, plus unknown-role nodes when there are any.
pub fn counts(holders: usize, waiters: usize, others: usize) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut text = format!("{}, {}", plural(holders, "holder"), plural(waiters, "waiter"));
    if others > 0 {
        text.push_str(&format!(", {}", plural(others, "node")));
        text.push_str(" of unknown role");
    }
    text
}

/// Who a node belongs to, from its data: zk-lock's holder description, a note that revocation
/// was requested (which overwrote the description), or other data (Curator's default is the
/// host's IP address) shown as text.
pub fn describe(p: &Participant) -> String {
    if let Some(holder) = &p.holder {
        return holder.to_string();
    }
    if p.data == REVOKE_MESSAGE {
        return "(revocation requested)".to_owned();
    }
    if p.data.is_empty() {
        return "-".to_owned();
    }
    match std::str::from_utf8(&p.data) {
        Ok(text) if !text.chars().any(char::is_control) && text.chars().count() <= 60 => text.to_owned(),
        Ok(text) if !text.chars().any(char::is_control) => {
            format!("{}...", text.chars().take(57).collect::<String>())
        }
        _ => format!("({} bytes of data)", p.data.len()),
    }
}

/// One participant as JSON. Session ids are hex strings: they exceed the 2^53 that JSON numbers
/// carry safely in many parsers.
pub fn participant_json(position: usize, p: &Participant) -> Value {
    let holder = p.holder.as_ref().map(|h| json!({ "host": h.host, "pid": h.pid, "task": h.task }));
    json!({
        "position": position,
        "role": p.role.as_str(),
        "kind": p.kind.as_str(),
        "node": p.node_path,
        "sequence": p.sequence,
        "session_id": session_hex(p.session_id),
        "fencing_token": p.fencing_token,
        "holder": holder,
        "data": String::from_utf8_lossy(&p.data),
        "revoke_requested": p.data == REVOKE_MESSAGE,
        "created_ms": p.created.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
        "age_ms": p.age.as_millis() as u64,
        "age": human_duration(p.age),
    })
}

/// Writes `text` to stdout and flushes it: every command's output goes through here.
pub fn write_stdout(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_human_wrote_them() {
        let cases = [
            (Duration::from_millis(850), "850ms"),
            (Duration::from_millis(4_250), "4.2s"),
            (Duration::from_secs(37), "37s"),
            (Duration::from_secs(185), "3m05s"),
            (Duration::from_secs(2 * 3600 + 3 * 60 + 9), "2h03m"),
            (Duration::from_secs(4 * 86_400 + 7 * 3600), "4d07h"),
        ];
        for (d, text) in cases {
            assert_eq!(human_duration(d), text);
        }
    }

    #[test]
    fn seconds_left_are_whole() {
        assert_eq!(seconds_left(Duration::from_millis(999)), "0s");
        assert_eq!(seconds_left(Duration::from_millis(9_900)), "9s");
        assert_eq!(seconds_left(Duration::from_secs(65)), "1m05s");
    }

    #[test]
    fn session_ids_print_like_zookeeper() {
        assert_eq!(session_hex(0x1000_a3b2_c4d0_0001), "0x1000a3b2c4d00001");
    }

    #[test]
    fn tables_align_and_do_not_pad_the_last_column() {
        let mut table = Table::new(&["POS", "ROLE", "HOLDER"]);
        table.row(vec!["1".into(), "holder".into(), "host=a pid=1 task=2".into()]);
        table.row(vec!["10".into(), "waiter".into(), "-".into()]);
        assert_eq!(table.render(), "POS  ROLE    HOLDER\n1    holder  host=a pid=1 task=2\n10   waiter  -\n");
    }

    #[test]
    fn counts_are_plural_when_they_should_be() {
        assert_eq!(counts(1, 0, 0), "1 holder, 0 waiters");
        assert_eq!(counts(2, 1, 1), "2 holders, 1 waiter, 1 node of unknown role");
    }
}
