//! Who took a lock: the [`Owner`] lock-order checking files a granted lock under (to warn of a
//! task waiting for a lock it holds outside the waiting code), and the data written into lock
//! nodes (who holds or waits, for `zk-lock inspect` and operators). Neither decides re-entry:
//! only code nested in a holder's scope re-enters (`holds::scope`).

use std::fmt;
use std::sync::LazyLock;

/// The tokio task that took a lock, or the thread for code that runs outside any task (the body
/// of `block_on` and `#[tokio::main]`): a diagnostic, since futures of one task interleave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Owner {
    pub(crate) fn current() -> Self {
        match tokio::task::try_id() {
            Some(task) => Self::Task(task),
            None => Self::Thread(std::thread::current().id()),
        }
    }
}

static HOST: LazyLock<String> = LazyLock::new(|| {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
});

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
}

impl HolderDescription {
    /// Parses node data in zk-lock's format; `None` for anything else, such as data set with
    /// `with_data`, Curator's default (the host's IP address) or a kazoo identifier.
    pub fn parse(data: &[u8]) -> Option<Self> {
        let mut fields = std::str::from_utf8(data).ok()?.split(' ');
        let host = fields.next()?.strip_prefix("host=").filter(|host| !host.is_empty())?;
        let pid = fields.next()?.strip_prefix("pid=")?.parse().ok()?;
        let task = match fields.next()?.strip_prefix("task=")? {
            "none" => None,
            id => Some(id.parse().ok()?),
        };
        if fields.next().is_some() {
            return None;
        }
        Some(Self { host: host.to_owned(), pid, task })
    }
}

impl fmt::Display for HolderDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host={} pid={} task=", self.host, self.pid)?;
        match self.task {
            Some(task) => write!(f, "{task}"),
            None => f.write_str("none"),
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
    }

    #[test]
    fn names_host_pid_and_task() {
        let text = String::from_utf8(super::describe_current_holder()).unwrap();
        assert!(text.starts_with("host="), "{text}");
        assert!(text.contains(&format!(" pid={} ", std::process::id())), "{text}");
        assert!(text.ends_with("task=none"), "outside a task: {text}");
    }
}
