//! Copies of the running example as child processes: the parent talks to them through their
//! stdin and reads their stdout line by line (like examples/lock_order.rs). Children wait on
//! their stdin and give up when it closes, so a parent that fails leaves none waiting.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;

/// What a child said.
pub enum Event {
    /// A line the child printed; children are numbered from 1.
    Line(usize, String),
    /// The child closed its stdout (it is exiting).
    Closed(usize),
}

/// Running copies of this program.
pub struct Copies {
    children: Vec<Child>,
    stdins: Vec<ChildStdin>,
    events: mpsc::Receiver<Event>,
}

impl Copies {
    /// Starts `count` copies with the arguments `args(n)` for child `n`, and `ZK_LOCK_CONNECT`
    /// set to `connect` when given.
    pub fn spawn(
        count: usize,
        args: impl Fn(usize) -> Vec<String>,
        connect: Option<&str>,
    ) -> Result<Copies, Box<dyn std::error::Error>> {
        let program = std::env::current_exe()?;
        let (sender, events) = mpsc::channel();
        let mut copies = Copies { children: Vec::new(), stdins: Vec::new(), events };
        for n in 1..=count {
            let mut command = Command::new(&program);
            command.args(args(n)).stdin(Stdio::piped()).stdout(Stdio::piped());
            if let Some(connect) = connect {
                command.env(zk_lock::config::CONNECT_ENV, connect);
            }
            let mut child = command.spawn()?;
            copies.stdins.push(child.stdin.take().ok_or("child without stdin")?);
            let stdout = child.stdout.take().ok_or("child without stdout")?;
            copies.children.push(child);
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let _ = sender.send(Event::Line(n, line));
                }
                let _ = sender.send(Event::Closed(n));
            });
        }
        Ok(copies)
    }

    /// The next thing a child said; `None` once every child has closed its stdout.
    pub fn next(&self) -> Option<Event> {
        self.events.recv().ok()
    }

    /// Waits until every child has printed `word` alone on a line; other lines are printed.
    pub fn wait_for_all(&self, word: &str) -> Result<Vec<String>, String> {
        let mut said = vec![None; self.children.len()];
        while said.iter().any(Option::is_none) {
            match self.next() {
                Some(Event::Line(n, line)) => match line.strip_prefix(word) {
                    Some(rest) => said[n - 1] = Some(rest.trim().to_owned()),
                    None => println!("{line}"),
                },
                Some(Event::Closed(n)) => return Err(format!("process {n} exited before it said `{word}`")),
                None => return Err(format!("the processes exited before they said `{word}`")),
            }
        }
        Ok(said.into_iter().flatten().collect())
    }

    /// Writes `line` to every child's stdin.
    pub fn tell_all(&mut self, line: &str) -> std::io::Result<()> {
        for stdin in &mut self.stdins {
            writeln!(stdin, "{line}")?;
        }
        Ok(())
    }

    /// Closes the children's stdin and waits for them to exit.
    pub fn wait(mut self) -> Result<(), String> {
        self.stdins.clear();
        for (n, child) in self.children.iter_mut().enumerate() {
            let status = child.wait().map_err(|e| format!("wait for process {}: {e}", n + 1))?;
            if !status.success() {
                return Err(format!("process {} failed: {status}", n + 1));
            }
        }
        Ok(())
    }
}

/// In a child: waits for the parent's next line on stdin; `None` when stdin is closed.
pub async fn parent_says() -> Option<String> {
    tokio::task::spawn_blocking(|| std::io::stdin().lines().next()?.ok()).await.ok().flatten()
}
