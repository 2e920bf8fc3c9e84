//! What a process costs while it runs, read from the kernel: its CPU time (in all, or per named
//! thread), and the bytes a server sent and received on its client connections. For the `idle`
//! row, whose figures are too small for the 10 ms ticks of `/proc/<pid>/stat`, and the
//! `many-paths` row's CPU share of each thread.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on every Linux the benchmark
/// runs on).
const TICKS_PER_S: u64 = 100;

/// The CPU time of every thread of a process at one moment.
#[derive(Debug, Clone, Default)]
pub struct Cpu {
    /// Nanoseconds on a CPU, by thread id (`/proc/<pid>/task/<tid>/schedstat`, first field).
    threads: HashMap<u32, u64>,
    /// `utime + stime` of the whole process, in clock ticks (`/proc/<pid>/stat`): the fallback
    /// when the kernel has no `schedstat`.
    ticks: u64,
}

impl Cpu {
    /// Reads the CPU time of process `pid`.
    pub fn read(pid: u32) -> Result<Cpu, String> {
        let stat =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
        // The command name, in parentheses, may hold spaces: count the fields after it.
        let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line, the 12th and 13th after the name.
        let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        let ticks = tick(11) + tick(12);
        let mut threads = HashMap::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
                // A thread that ended meanwhile has no file any more: it is simply not counted.
                let ran = std::fs::read_to_string(task.path().join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()));
                if let Some(ran) = ran {
                    threads.insert(tid, ran);
                }
            }
        }
        Ok(Cpu { threads, ticks })
    }

    /// CPU time spent since `earlier`: per thread, a thread new since then counted whole (the
    /// time of a thread that ended in between is lost: none of the measured processes starts or
    /// ends threads while idle). Whole ticks when the kernel keeps no per-thread time.
    pub fn since(&self, earlier: &Cpu) -> Duration {
        let exact: u64 = self
            .threads
            .iter()
            .map(|(tid, ran)| ran.saturating_sub(earlier.threads.get(tid).copied().unwrap_or(0)))
            .sum();
        let from_ticks = self.ticks.saturating_sub(earlier.ticks) * (1_000_000_000 / TICKS_PER_S);
        if self.threads.values().all(|ran| *ran == 0) {
            Duration::from_nanos(from_ticks)
        } else {
            Duration::from_nanos(exact)
        }
    }
}

/// The CPU time and name of each thread of a process at one moment: which thread does the work,
/// and whether one of them is a ceiling (a thread cannot use more than one core).
#[derive(Debug, Clone, Default)]
pub struct Threads(HashMap<u32, (String, u64)>);

impl Threads {
    /// Reads `/proc/<pid>/task/*/comm` (the thread's name, at most 15 bytes) and `schedstat`
    /// (nanoseconds on a CPU). A thread that ended meanwhile is left out.
    pub fn read(pid: u32) -> Result<Threads, String> {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| format!("/proc/{pid}/task: {e}"))?;
        let mut threads = HashMap::new();
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
            let ran = std::fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()));
            let name = std::fs::read_to_string(task.path().join("comm")).map(|n| n.trim_end().to_owned());
            if let (Some(ran), Ok(name)) = (ran, name) {
                threads.insert(tid, (name, ran));
            }
        }
        Ok(Threads(threads))
    }

    /// Each thread's name and CPU time since `earlier` (a thread new since then counted whole).
    pub fn since(&self, earlier: &Threads) -> Vec<(String, u64)> {
        let mut spent: Vec<(String, u64)> = self
            .0
            .iter()
            .map(|(tid, (name, ran))| {
                let before = earlier.0.get(tid).map_or(0, |(_, ran)| *ran);
                (name.clone(), ran.saturating_sub(before))
            })
            .collect();
        spent.sort();
        spent
    }
}

/// The bytes a process passed to `write`-like system calls (`wchar` of `/proc/<pid>/io`):
/// socket writes, and its log and transaction log. `None` when the kernel does not say.
pub fn written(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines().find_map(|line| line.strip_prefix("wchar:")?.trim().parse().ok())
}

/// The byte counters of the established TCP connections of a local server port, by peer
/// address, from the kernel's `tcp_info` (`ss -tin`).
#[derive(Debug, Clone, Default)]
pub struct Sockets(HashMap<String, Traffic>);

/// Bytes of one connection, or of several, as the server's side counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// `bytes_sent`: what the server put on the connection (retransmissions included; there are
    /// none on loopback).
    pub sent: u64,
    /// `bytes_received`: what it got from the client.
    pub received: u64,
}

impl Sockets {
    /// Reads the connections whose local port is `port` (blocking: runs `ss`, a few ms).
    pub fn read(port: u16) -> Result<Sockets, String> {
        let filter = format!("( sport = :{port} )");
        let output = Command::new("ss")
            .args(["-tinH", "state", "established", &filter])
            .output()
            .map_err(|e| format!("cannot run `ss` (iproute2): {e}"))?;
        if !output.status.success() {
            return Err(format!("`ss` failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
        }
        Ok(Sockets::parse(&String::from_utf8_lossy(&output.stdout)))
    }

    /// Parses `ss -tinH state established`: a line per connection (`Recv-Q Send-Q local peer`),
    /// then an indented line of its `tcp_info` (`... bytes_sent:N ... bytes_received:N ...`;
    /// a counter still at zero is left out).
    fn parse(text: &str) -> Sockets {
        let mut sockets = HashMap::new();
        let mut peer: Option<String> = None;
        for line in text.lines() {
            if !line.starts_with(char::is_whitespace) {
                peer = line.split_whitespace().last().map(str::to_owned);
                continue;
            }
            let Some(peer) = peer.take() else { continue };
            let counter = |name: &str| {
                line.split_whitespace().find_map(|field| field.strip_prefix(name)?.parse::<u64>().ok()).unwrap_or(0)
            };
            sockets.insert(peer, Traffic { sent: counter("bytes_sent:"), received: counter("bytes_received:") });
        }
        Sockets(sockets)
    }

    /// Bytes since `earlier` on the connections open at both readings (one opened or closed in
    /// between is left out: none is, in an idle window).
    pub fn since(&self, earlier: &Sockets) -> Traffic {
        let mut total = Traffic::default();
        for (peer, now) in &self.0 {
            if let Some(then) = earlier.0.get(peer) {
                total.sent += now.sent.saturating_sub(then.sent);
                total.received += now.received.saturating_sub(then.received);
            }
        }
        total
    }

    /// How many connections the server has open.
    pub fn count(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{Cpu, Sockets, Traffic};

    #[test]
    fn socket_counters_are_read_per_connection() {
        let before = Sockets::parse(
            "0      0      [::ffff:127.0.0.1]:2181 [::ffff:127.0.0.1]:47636\n\
             \t bbr wscale:10,10 rto:204 bytes_sent:1000 bytes_acked:1000 bytes_received:400 segs_out:3\n\
             0      0      [::ffff:127.0.0.1]:2181 [::ffff:127.0.0.1]:45456\n\
             \t bbr wscale:10,10 rto:204 segs_in:2\n",
        );
        let after = Sockets::parse(
            "0      0      [::ffff:127.0.0.1]:2181 [::ffff:127.0.0.1]:47636\n\
             \t bbr bytes_sent:1500 bytes_acked:1500 bytes_received:450\n\
             0      0      [::ffff:127.0.0.1]:2181 [::ffff:127.0.0.1]:45456\n\
             \t bbr bytes_sent:16 bytes_received:12\n\
             0      0      [::ffff:127.0.0.1]:2181 [::ffff:127.0.0.1]:40000\n\
             \t bbr bytes_sent:99999 bytes_received:99999\n",
        );
        assert_eq!(after.count(), 3);
        assert_eq!(after.since(&before), Traffic { sent: 516, received: 62 });
    }

    #[test]
    fn own_cpu_time_grows() {
        let pid = std::process::id();
        let before = Cpu::read(pid).unwrap();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 50 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let spent = Cpu::read(pid).unwrap().since(&before);
        assert!(spent.as_millis() >= 20, "{spent:?}");
    }
}
