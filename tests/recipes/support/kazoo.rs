//! Runs real kazoo (Python) lock contenders next to the Rust code under test.
//!
//! [`KazooLock`] runs a short python3 script that takes a kazoo `Lock` or `ReadLock`, prints
//! `locked <session id> <node name>`, and holds the lock until its stdin closes, so the test
//! decides how long it is held.

use std::process::Stdio;

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;
use zk_lock::testing::python_with_kazoo;

const SCRIPT: &str = r#"
import sys
from kazoo.client import KazooClient
hosts, path, recipe, identifier = sys.argv[1:5]
zk = KazooClient(hosts=hosts)
zk.start()
lock = (zk.ReadLock if recipe == "read" else zk.Lock)(path, identifier)
lock.acquire()
print("locked", zk.client_id[0], lock.node, flush=True)
sys.stdin.read()
lock.release()
zk.stop()
"#;

/// How long the script may take to print a line or to exit (a Python start plus a session).
const KAZOO_TIMEOUT: Duration = Duration::from_secs(60);

/// Which kazoo recipe the script takes.
#[derive(Debug, Clone, Copy)]
pub enum Recipe {
    /// `kazoo.recipe.lock.Lock`: nodes `<uuid>__lock__<seq>`.
    Lock,
    /// `kazoo.recipe.lock.ReadLock`: nodes `<uuid>__rlock__<seq>`.
    ReadLock,
}

/// A python3 process holding (or waiting for) a kazoo lock.
pub struct KazooLock {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl KazooLock {
    /// Starts a contender for `path` whose node data is `identifier`. It queues at once; await
    /// [`locked`](Self::locked) for the grant.
    pub fn start(connect_string: &str, path: &str, recipe: Recipe, identifier: &str) -> Self {
        let recipe = match recipe {
            Recipe::Lock => "lock",
            Recipe::ReadLock => "read",
        };
        let mut child = Command::new(python_with_kazoo().unwrap_or_else(|e| panic!("{e}")))
            .args(["-c", SCRIPT, connect_string, path, recipe, identifier])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start python3");
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        Self { child, stdin, lines }
    }

    /// Waits until the lock is granted; returns the kazoo session id and the node name.
    pub async fn locked(&mut self) -> (i64, String) {
        let line = timeout(KAZOO_TIMEOUT, self.lines.next_line())
            .await
            .expect("kazoo took too long to lock")
            .expect("read kazoo's output")
            .expect("kazoo exited before locking");
        match line.split(' ').collect::<Vec<_>>()[..] {
            ["locked", session, node] => (session.parse().expect("session id"), node.to_owned()),
            _ => panic!("unexpected kazoo output: {line}"),
        }
    }

    /// The python3 process, to freeze it (`kill -STOP`) as a stuck holder.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Releases the lock (by closing stdin) and waits for the script to exit cleanly.
    pub async fn release(mut self) {
        drop(self.stdin.take());
        let status = timeout(KAZOO_TIMEOUT, self.child.wait()).await.expect("kazoo exits").expect("wait for kazoo");
        assert!(status.success(), "kazoo script failed: {status}");
    }
}
