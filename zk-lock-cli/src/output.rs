//! Rendering: aligned tables, human durations, session ids and participants as JSON; and the
//! one rule that keeps what the server says from driving the terminal ([`escape`]).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::prelude::{Engine as _, BASE64_STANDARD};
use serde_json::{json, Value};
// What must not reach a terminal as it is: the rule `HolderDescription::parse` applies to host names.
use zk_lock::holder::is_unsafe_to_print as is_unsafe;
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

/// `c`, which [`is_unsafe`], as visible text: `\n`, `\r`, `\t`, `\x1b` (other ASCII controls and
/// DEL), `\u{202e}` (the others).
fn push_escaped(out: &mut String, c: char) {
    let _ = match c {
        '\n' => write!(out, "\\n"),
        '\r' => write!(out, "\\r"),
        '\t' => write!(out, "\\t"),
        '\0'..='\u{7f}' => write!(out, "\\x{:02x}", u32::from(c)),
        _ => write!(out, "\\u{{{:x}}}", u32::from(c)),
    };
}

/// Text from the server (node names, node data, paths, parsed fields, messages that quote them)
/// made safe to print on a terminal and to keep on one line: every character that [`is_unsafe`]
/// is written as its escape (`\x1b`, `\n`, `\u{202e}`), so an escape sequence cannot clear the
/// screen or retitle the terminal, and a line break or tab cannot forge a row. Everything the
/// command prints outside JSON passes through here. A backslash is left as it is, so escaping
/// twice changes nothing; `--json` carries the exact text.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match is_unsafe(c) {
            true => push_escaped(&mut out, c),
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`escape`] for each line of `text`, keeping its line feeds: the last guard on a whole report,
/// whose lines the command made.
pub fn escape_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.split('\n').map(escape).collect::<Vec<_>>().join("\n"))
}

/// Where [`shorten`] cuts a text that is too long; `...` stands for what it leaves out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Keeps the start: data, read from its beginning.
    End,
    /// Keeps the start and the last third: a path, whose start names where it is and whose end
    /// which node.
    Middle,
}

/// How [`shorten`] writes the characters it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// [`escape`]d, for a line of text.
    Escaped,
    /// As they are, for `--json`, which carries the exact text ([`json_text`] makes it safe).
    Exact,
}

/// `text` written as `shown` says, then cut to at most `max` characters (`max` at least 10)
/// where `cut` says, with `...` for what is left out. Escaping comes first, so the escapes
/// count toward `max`; the cut falls between characters of `text`, so an escape is never cut
/// in two (it is left out whole when it does not fit). The one way the command shortens text.
pub fn shorten(text: &str, max: usize, cut: Cut, shown: Shown) -> Cow<'_, str> {
    // The pieces from one end of the text that fit in `room` characters. The two ends never
    // meet: together they have room for less than the whole.
    fn fit(pieces: impl Iterator<Item = String>, room: usize) -> Vec<String> {
        let mut used = 0;
        pieces
            .take_while(|piece| {
                used += piece.chars().count();
                used <= room
            })
            .collect()
    }
    let whole = match shown {
        Shown::Escaped => escape(text),
        Shown::Exact => Cow::Borrowed(text),
    };
    if whole.chars().count() <= max {
        return whole;
    }
    let tail_max = match cut {
        Cut::End => 0,
        Cut::Middle => max / 3,
    };
    let head_max = max.saturating_sub(tail_max + 3);
    // Each character of `text` as written: one piece, kept whole or left out.
    let piece = |c: char| {
        let mut piece = String::new();
        match shown == Shown::Escaped && is_unsafe(c) {
            true => push_escaped(&mut piece, c),
            false => piece.push(c),
        }
        piece
    };
    let head = fit(text.chars().map(piece), head_max);
    let mut tail = fit(text.chars().rev().map(piece), tail_max);
    tail.reverse();
    Cow::Owned(format!("{}...{}", head.concat(), tail.concat()))
}

/// `value` as JSON text (indented with `pretty`) that is also safe on a terminal: JSON escapes
/// C0 controls itself; DEL, C1 controls and the format characters of [`is_unsafe`] are written
/// as `\uXXXX` escapes too, which every JSON parser reads back as the same string.
pub fn json_text(value: &Value, pretty: bool) -> String {
    let text = if pretty { format!("{value:#}") } else { value.to_string() };
    // Outside strings, JSON text is ASCII; raw C0 controls never appear inside them.
    if !text.chars().any(|c| c > '\u{7e}' && is_unsafe(c)) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c > '\u{7e}' && is_unsafe(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Left-aligned columns separated by two spaces; the last column is not padded. Every cell is
/// [`escape`]d: one row is one line.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with a header row.
    pub fn new(header: &[&str]) -> Self {
        Self { rows: vec![header.iter().map(|h| (*h).to_owned()).collect()] }
    }

    /// Adds a row, each cell [`escape`]d; it should have as many cells as the header.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.into_iter().map(|cell| escape(&cell).into_owned()).collect());
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

/// The most characters of other data `describe` shows.
const MAX_DATA_SHOWN: usize = 60;

/// Who a node belongs to, from its data: zk-lock's holder description, a note that revocation
/// was requested (which overwrote the description), other data (Curator's default is the
/// host's IP address) shown as [`escape`]d text, cut at [`MAX_DATA_SHOWN`] characters, or a note
/// that the data was too large to read ([`too_large`]).
pub fn describe(p: &Participant) -> String {
    if p.data_too_large {
        return too_large(p);
    }
    if let Some(holder) = &p.holder {
        // `HolderDescription::parse` refuses what is unsafe to print; escaped all the same.
        let mut described = escape(&holder.to_string()).into_owned();
        if let Some(until) = holder.max_hold_until {
            described.push_str(&max_hold_note(until, SystemTime::now()));
        }
        return described;
    }
    if p.data == REVOKE_MESSAGE {
        return "(revocation requested)".to_owned();
    }
    if p.data.is_empty() {
        return "-".to_owned();
    }
    match std::str::from_utf8(&p.data) {
        Ok(text) => shorten(text, MAX_DATA_SHOWN, Cut::End, Shown::Escaped).into_owned(),
        Err(_) => format!("({} bytes of data)", p.data.len()),
    }
}

/// When an extended `max_hold` ends the hold (`until`, ms since the epoch), seen at `now`:
/// ` (max_hold extended: ends in 9.6 s)`, or `.. ended 1.2 s ago` when the holder is late.
fn max_hold_note(until: u64, now: SystemTime) -> String {
    let until = UNIX_EPOCH + Duration::from_millis(until);
    match until.duration_since(now) {
        Ok(left) => format!(" (max_hold extended: ends in {:.1} s)", left.as_secs_f64()),
        Err(past) => format!(" (max_hold extended: ended {:.1} s ago)", past.duration().as_secs_f64()),
    }
}

/// The note for a node whose data is over [`Participant::MAX_DATA`], which `participants` does
/// not read: `(data too large to show: 1000000 bytes, over 64 KiB; not read)`.
pub fn too_large(p: &Participant) -> String {
    format!("(data too large to show: {} bytes, over {} KiB; not read)", p.data_length, Participant::MAX_DATA / 1024)
}

/// One participant as JSON. Session ids are hex strings: they exceed the 2^53 that JSON numbers
/// carry safely in many parsers. The node's data is `data_base64`, its exact bytes in standard
/// base64 (with padding), and `data`, the same as text when it is UTF-8 and `null` otherwise: a
/// lossy text (U+FFFD for each bad byte) would not tell the bytes. Both are `null` when the data
/// was too large to read (`data_too_large`; `data_length` is its size either way).
pub fn participant_json(position: usize, p: &Participant) -> Value {
    let holder = p
        .holder
        .as_ref()
        .map(|h| json!({ "host": h.host, "pid": h.pid, "task": h.task, "max_hold_until_ms": h.max_hold_until }));
    let read = (!p.data_too_large).then_some(&p.data);
    let data = read.and_then(|bytes| std::str::from_utf8(bytes).ok());
    let data_base64 = read.map(|bytes| BASE64_STANDARD.encode(bytes));
    json!({
        "position": position,
        "role": p.role.as_str(),
        "kind": p.kind.as_str(),
        "node": p.node_path,
        "sequence": p.sequence,
        "session_id": session_hex(p.session_id),
        "fencing_token": p.fencing_token,
        "holder": holder,
        "data": data,
        "data_base64": data_base64,
        "data_length": p.data_length,
        "data_too_large": p.data_too_large,
        "revoke_requested": p.data == REVOKE_MESSAGE,
        "created_ms": p.created.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
        "age_ms": p.age.as_millis() as u64,
        "age": human_duration(p.age),
    })
}

/// Writes `zk-lock: <message>` to stderr, [`escape`]d: every error and warning goes through here.
pub fn write_stderr(message: &str) {
    eprintln!("zk-lock: {}", escape(message));
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

    /// The issue's sample of holder data that clears the screen, retitles the terminal and
    /// forges a row.
    const HOSTILE: &str = "host=web-1\x1b[2J\x1b[H\x1b]0;pwned\x07\nFORGED\trow pid=1 task=none";

    #[test]
    fn escapes_controls_c1_del_and_bidi_and_leaves_the_rest() {
        assert_eq!(escape(HOSTILE), "host=web-1\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07\\nFORGED\\trow pid=1 task=none");
        assert_eq!(escape("a\rb\0c\x7fd\u{9b}31m\u{85}"), "a\\rb\\x00c\\x7fd\\u{9b}31m\\u{85}");
        assert_eq!(
            escape("txt.\u{202e}exe\u{2066}\u{200b}\u{2028}\u{feff}"),
            "txt.\\u{202e}exe\\u{2066}\\u{200b}\\u{2028}\\u{feff}"
        );
        for plain in ["/locks/orders", "host=münchen pid=1 task=none", "サーバー", "a b", "10.0.0.7", "C:\\x1b"] {
            assert!(matches!(escape(plain), Cow::Borrowed(_)), "{plain}");
        }
        let once = escape(HOSTILE).into_owned();
        assert_eq!(escape(&once), once, "escaping twice changes nothing");
        assert!(!once.chars().any(is_unsafe));
    }

    #[test]
    fn escape_lines_keeps_the_line_feeds_only() {
        assert_eq!(escape_lines("a\x1b[2J\nb\r\n"), "a\\x1b[2J\nb\\r\n");
        assert!(matches!(escape_lines("a\nb\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_is_safe_on_a_terminal_and_reads_back_the_same() {
        let value = json!({ "data": format!("{HOSTILE}\u{7f}\u{9b}\u{202e}\u{e0041}"), "node": "a\u{2028}b" });
        for pretty in [false, true] {
            let text = json_text(&value, pretty);
            assert!(!text.chars().any(|c| is_unsafe(c) && c != '\n'), "{text:?}");
            assert!(
                text.contains("\\u001b[2J") && text.contains("\\u202e") && text.contains("\\udb40\\udc41"),
                "{text}"
            );
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
        assert_eq!(json_text(&json!({"a": "b"}), false), r#"{"a":"b"}"#);
    }

    #[test]
    fn tables_escape_every_cell_so_a_row_stays_one_line() {
        let mut table = Table::new(&["NODE", "HOLDER"]);
        table.row(vec!["x\u{202e}y".into(), HOSTILE.into()]);
        let text = table.render();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.contains("x\\u{202e}y  host=web-1\\x1b[2J"), "{text}");
        assert!(!text.chars().any(|c| is_unsafe(c) && c != '\n'), "{text:?}");
    }

    #[test]
    fn other_data_is_cut_without_cutting_an_escape() {
        let cut = |text: &str| shorten(text, 60, Cut::End, Shown::Escaped).into_owned();
        assert_eq!(cut("short"), "short");
        assert_eq!(cut(&"a".repeat(61)), format!("{}...", "a".repeat(57)));
        assert_eq!(
            cut(&format!("{}\x1b[2J", "a".repeat(55))),
            format!("{}...", "a".repeat(55)),
            "the escape would not fit whole"
        );
        assert_eq!(cut(HOSTILE).chars().count(), 60);
    }

    #[test]
    fn long_paths_are_cut_in_the_middle_on_character_boundaries() {
        assert_eq!(shorten("/a/b", 10, Cut::Middle, Shown::Escaped), "/a/b");
        let long = format!("/{}", "é".repeat(40));
        for shown in [Shown::Escaped, Shown::Exact] {
            let cut = shorten(&long, 12, Cut::Middle, shown);
            assert_eq!(cut, "/éééé...éééé");
            assert_eq!(cut.chars().count(), 12);
        }
    }

    /// Shortened first, 40 characters fit in 60 and then escape to 100: the limit is for what
    /// is printed. Each `\x1b` here is kept or left out whole.
    #[test]
    fn text_is_escaped_first_then_shortened() {
        let text = "a\x1b".repeat(20);
        assert_eq!(escape(&text).chars().count(), 100);
        let cut = shorten(&text, 60, Cut::Middle, Shown::Escaped);
        assert_eq!(cut, format!("{}a...{}", "a\\x1b".repeat(7), "a\\x1b".repeat(4)));
        assert!(cut.chars().count() <= 60, "{cut}");
        let cut = shorten(&text, 60, Cut::End, Shown::Escaped);
        assert_eq!(cut, format!("{}a...", "a\\x1b".repeat(11)));
        // `--json` carries the exact text: only its length is cut.
        assert_eq!(shorten(&text, 60, Cut::Middle, Shown::Exact), text);
        assert_eq!(shorten(&text, 30, Cut::End, Shown::Exact), format!("{}...", "a\x1b".repeat(13) + "a"));
    }

    #[test]
    fn counts_are_plural_when_they_should_be() {
        assert_eq!(counts(1, 0, 0), "1 holder, 0 waiters");
        assert_eq!(counts(2, 1, 1), "2 holders, 1 waiter, 1 node of unknown role");
    }

    #[test]
    fn an_extended_max_hold_says_when_it_ends() {
        let now = UNIX_EPOCH + Duration::from_millis(1_000_000);
        assert_eq!(max_hold_note(1_009_600, now), " (max_hold extended: ends in 9.6 s)");
        assert_eq!(max_hold_note(998_800, now), " (max_hold extended: ended 1.2 s ago)");
    }
}
