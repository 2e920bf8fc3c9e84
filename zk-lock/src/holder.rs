//! Who a lock node says holds (or waits for) the lock: the data zk-lock writes into its nodes,
//! `host=<name> pid=<pid> task=<task>`, as [`HolderDescription::parse`] reads it back (for
//! [`Participant::holder`](crate::Participant::holder) and
//! [`QueueHolder::description`](crate::QueueHolder::description)), and the characters that
//! must not reach a terminal as they are ([`is_unsafe_to_print`]), which that parsing refuses.

use std::fmt;
use std::sync::LazyLock;

/// This machine's host name, or `unknown` if there is none that [`HolderDescription::parse`]
/// would accept back.
static HOST: LazyLock<String> = LazyLock::new(|| {
    let name = gethostname::gethostname();
    Some(name.to_string_lossy().trim().to_owned())
        .filter(|name| is_host_name(name))
        .unwrap_or_else(|| "unknown".to_owned())
});

/// The most characters a host name in a holder description may have: a DNS name has at most 253.
const MAX_HOST_CHARS: usize = 253;

/// Whether `host` can stand in a holder description: 1 to [`MAX_HOST_CHARS`] characters, none of
/// them whitespace (which separates the fields), a control character (C0, DEL, C1: terminal
/// escape sequences, line breaks) or a Unicode format character that reorders or hides text
/// ([`is_format`]). Unicode host names (IDN) are accepted as they are.
fn is_host_name(host: &str) -> bool {
    let fitting = !host.is_empty() && host.chars().count() <= MAX_HOST_CHARS;
    fitting && !host.chars().any(|c| c.is_whitespace() || is_unsafe_to_print(c))
}

/// Whether `c` must not reach a terminal as it is: a control character (C0, which includes ESC,
/// BEL, CR, LF and tab; DEL; C1, which includes the one-byte CSI U+009B and NEL U+0085) or a
/// Unicode format character or separator that reorders or hides text. The characters
/// [`HolderDescription::parse`] refuses in a host name (with whitespace), and those `zk-lock`
/// (the CLI) escapes in everything it prints from the server.
pub fn is_unsafe_to_print(c: char) -> bool {
    c.is_control() || is_format(c)
}

/// The Unicode format characters (category Cf) and separators that change how text around them
/// is shown while showing nothing themselves: bidirectional embeddings, overrides and isolates
/// (U+202A-U+202E, U+2066-U+2069), zero-width and invisible characters (U+200B-U+200F,
/// U+2060-U+2064, U+FEFF, the soft hyphen U+00AD, U+180E), the line and paragraph separators
/// U+2028-U+2029, interlinear annotations (U+FFF9-U+FFFB) and tags (U+E0000-U+E007F).
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// A decimal number as [`fmt::Display`] writes it: digits only, no sign, no leading zero (but
/// `0`), so that a parsed description prints exactly as it was read.
fn canonical_number<T: std::str::FromStr>(text: &str) -> Option<T> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let canonical = digits && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// `host=<name> pid=<pid> task=`, the same for every node of this process.
static PROCESS_PREFIX: LazyLock<String> = LazyLock::new(|| format!("host={} pid={} task=", *HOST, std::process::id()));

/// `host=<name> pid=<pid> task=<tokio task id>`: plain text, so `zkCli.sh get` shows it too.
/// Written for every acquisition, so only the task id is formatted each time.
pub(crate) fn describe_current_holder() -> Vec<u8> {
    use std::io::Write;
    let mut data = Vec::with_capacity(PROCESS_PREFIX.len() + 20);
    data.extend_from_slice(PROCESS_PREFIX.as_bytes());
    let written = match tokio::task::try_id() {
        Some(task) => write!(data, "{task}"),
        None => data.write_all(b"none"),
    };
    written.expect("writing to a Vec cannot fail");
    data
}

/// Who created a node, as zk-lock writes it by default: `host=<name> pid=<pid> task=<task>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct HolderDescription {
    /// The host name of the machine.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// The tokio task id, or `None` for code that ran outside any task.
    pub task: Option<u64>,
    /// When the hold's `max_hold` ends it, in milliseconds since the Unix epoch, once its holder
    /// extended it (`extend_max_hold`): written into the node then, for `zk-lock inspect`.
    pub max_hold_until: Option<u64>,
}

impl HolderDescription {
    /// Parses node data in zk-lock's format; `None` for anything else, such as data set with
    /// `with_data`, Curator's default (the host's IP address) or a kazoo identifier.
    ///
    /// Only what [`Display`](fmt::Display) writes back byte for byte is accepted, so a parsed
    /// description is safe to print on a terminal and one line long: three fields separated by
    /// single spaces; a host of 1 to 253 characters without whitespace, control characters (C0,
    /// DEL, C1, so no terminal escape sequence, line break or tab) or Unicode format characters
    /// that reorder or hide text (bidirectional overrides like U+202E, zero-width characters);
    /// pid and task in decimal without sign or leading zeros, task `none` outside a task. Anyone
    /// who may create nodes under a lock path can write any data there: what is refused here
    /// stays in [`Participant::data`](crate::Participant::data), unparsed.
    pub fn parse(data: &[u8]) -> Option<Self> {
        let mut fields = std::str::from_utf8(data).ok()?.split(' ');
        let host = fields.next()?.strip_prefix("host=").filter(|host| is_host_name(host))?;
        let pid = canonical_number(fields.next()?.strip_prefix("pid=")?)?;
        let task = match fields.next()?.strip_prefix("task=")? {
            "none" => None,
            id => Some(canonical_number(id)?),
        };
        let max_hold_until = match fields.next() {
            Some(until) => Some(canonical_number(until.strip_prefix("max_hold_until=")?)?),
            None => None,
        };
        if fields.next().is_some() {
            return None;
        }
        Some(Self { host: host.to_owned(), pid, task, max_hold_until })
    }
}

impl fmt::Display for HolderDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host={} pid={} task=", self.host, self.pid)?;
        match self.task {
            Some(task) => write!(f, "{task}")?,
            None => f.write_str("none")?,
        }
        match self.max_hold_until {
            Some(until) => write!(f, " max_hold_until={until}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HolderDescription;

    #[test]
    fn parses_our_holder_description() {
        let ours = crate::holder::describe_current_holder();
        let parsed = HolderDescription::parse(&ours).expect("our own format parses");
        assert_eq!(parsed.pid, std::process::id());
        assert_eq!(parsed.task, None, "outside a task");
        assert_eq!(parsed.to_string().into_bytes(), ours, "display round-trips");

        let in_task = HolderDescription::parse(b"host=web-1 pid=42 task=17").unwrap();
        assert_eq!((in_task.host.as_str(), in_task.pid, in_task.task), ("web-1", 42, Some(17)));
        for foreign in [&b"10.0.0.7"[..], b"", b"host= pid=1 task=none", b"host=a pid=x task=none", b"host=a pid=1"] {
            assert_eq!(HolderDescription::parse(foreign), None, "{:?}", String::from_utf8_lossy(foreign));
        }
        assert_eq!(HolderDescription::parse(b"host=a pid=1 task=none extra"), None);
        let extended = HolderDescription::parse(b"host=a pid=1 task=2 max_hold_until=1764000000000").unwrap();
        assert_eq!(extended.max_hold_until, Some(1_764_000_000_000));
        assert_eq!(extended.to_string(), "host=a pid=1 task=2 max_hold_until=1764000000000", "round-trips");
        for bad in [
            &b"host=a pid=1 task=2 max_hold_until=x"[..],
            b"host=a pid=1 task=2 until=1",
            b"host=a pid=1 task=2 max_hold_until=1 x",
        ] {
            assert_eq!(HolderDescription::parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn accepts_host_names_of_every_script_and_round_trips_them() {
        for ours in [
            "host=web-1 pid=42 task=17",
            "host=db.example.com pid=0 task=none",
            "host=münchen-1.example pid=4294967295 task=18446744073709551615",
            "host=サーバー pid=7 task=none",
            "host=[::1] pid=1 task=1",
        ] {
            let parsed = HolderDescription::parse(ours.as_bytes()).unwrap_or_else(|| panic!("{ours}"));
            assert_eq!(parsed.to_string(), ours, "display round-trips");
        }
        let longest = format!("host={} pid=1 task=none", "a".repeat(253));
        assert!(HolderDescription::parse(longest.as_bytes()).is_some());
    }

    #[test]
    fn refuses_what_would_not_print_as_it_was_read_or_would_drive_a_terminal() {
        let hostile: &[&[u8]] = &[
            // The sample: clears the screen, retitles the terminal, forges a row.
            b"host=web-1\x1b[2J\x1b[H\x1b]0;pwned\x07\nFORGED\trow pid=1 task=none",
            b"host=web-1\x1b[31m pid=1 task=none",
            b"host=web\r pid=1 task=none",
            b"host=web\x7f pid=1 task=none",
            "host=web\u{9b}31m pid=1 task=none".as_bytes(),       // C1 CSI
            "host=web\u{85}x pid=1 task=none".as_bytes(),         // C1 next line
            "host=gro\u{202e}gnp.exe pid=1 task=none".as_bytes(), // right-to-left override
            "host=a\u{2067}b\u{2069} pid=1 task=none".as_bytes(), // right-to-left isolate
            "host=a\u{200b}b pid=1 task=none".as_bytes(),         // zero-width space
            "host=a\u{2028}b pid=1 task=none".as_bytes(),         // line separator
            "host=a\u{a0}b pid=1 task=none".as_bytes(),           // no-break space
            "host=a\u{feff} pid=1 task=none".as_bytes(),
            "host=a\u{e0041} pid=1 task=none".as_bytes(), // a tag character
            b"host=a\tb pid=1 task=none",
            b"host=a  pid=1 task=none",
            b"host=a pid=1 task=none\n",
            b"host=a pid=1 task=none ",
            b"host=a pid=1\ttask=none",
            b"host=a\0 pid=1 task=none",
            b"host=a pid=+1 task=none",
            b"host=a pid=01 task=none",
            b"host=a pid=-1 task=none",
            b"host=a pid=1 task=+2",
            b"host=a pid=1 task=007",
            b"host=a pid=4294967296 task=none",
            b"host=a pid=1 task=None",
            b"host=\xff pid=1 task=none",
        ];
        for data in hostile {
            assert_eq!(HolderDescription::parse(data), None, "{:?}", String::from_utf8_lossy(data));
        }
        let too_long = format!("host={} pid=1 task=none", "a".repeat(254));
        assert_eq!(HolderDescription::parse(too_long.as_bytes()), None);
    }

    #[test]
    fn names_host_pid_and_task() {
        let text = String::from_utf8(super::describe_current_holder()).unwrap();
        assert!(text.starts_with("host="), "{text}");
        assert!(text.contains(&format!(" pid={} ", std::process::id())), "{text}");
        assert!(text.ends_with("task=none"), "outside a task: {text}");
    }
}
