//! The data written into lock nodes: who holds or waits, for `zk-lock inspect` and operators.

use std::sync::LazyLock;

static HOST: LazyLock<String> = LazyLock::new(|| {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
});

/// `host=<name> pid=<pid> task=<tokio task id>`: plain text, so `zkCli.sh get` shows it too.
pub(crate) fn describe_current_holder() -> Vec<u8> {
    let task = tokio::task::try_id().map_or_else(|| "none".to_owned(), |id| id.to_string());
    format!("host={} pid={} task={task}", *HOST, std::process::id()).into_bytes()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_host_pid_and_task() {
        let text = String::from_utf8(super::describe_current_holder()).unwrap();
        assert!(text.starts_with("host="), "{text}");
        assert!(text.contains(&format!(" pid={} ", std::process::id())), "{text}");
        assert!(text.ends_with("task=none"), "outside a task: {text}");
    }
}
