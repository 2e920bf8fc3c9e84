//! `zk-lock dev-server` run as a developer runs it: a child process starting a real ZooKeeper of
//! its own (no shared test server), read from its stdout, used with zk-lock clients, and stopped
//! by the signals a terminal's Ctrl-C (SIGINT to the whole foreground process group), a closed
//! terminal (SIGHUP) and a service manager (SIGTERM to the process) send. Every wait is for an event (a line, an exit),
//! bounded by `PATIENCE`; none is a sleep.

use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{kill_process, kill_process_group, test_kill_process, Pid, Signal};
use serde_json::Value;
use zk_lock::{Client, Mutex};
use zookeeper_client::{Acls, CreateMode};

const BIN: &str = env!("CARGO_BIN_EXE_zk-lock");
/// How long a test waits for the command to print or exit: a JVM starts in seconds, but slowly
/// on a busy two-core machine.
const PATIENCE: Duration = Duration::from_secs(90);

/// `zk-lock` with `args`, without the caller's ZooKeeper settings.
fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args).env_remove("ZK_LOCK_CONNECT").env_remove("ZK_LOCK_DIGEST").stdin(Stdio::null());
    command
}

/// Runs `f` off the test's runtime, failing the test after [`PATIENCE`].
async fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::time::timeout(PATIENCE, tokio::task::spawn_blocking(f)).await {
        Ok(done) => done.expect("the blocking task panicked"),
        Err(_) => panic!("{what}: nothing after {PATIENCE:?}"),
    }
}

/// Runs the command to its end.
async fn output(mut command: Command) -> Output {
    within("zk-lock to exit", move || command.output().expect("run zk-lock")).await
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// A running `zk-lock dev-server`, which leads a process group of its own, as a command started
/// by an interactive shell does. Killed if the test fails before it exited.
struct DevServer {
    child: Option<Child>,
    pid: Pid,
    /// The first line of its stdout, without the line break.
    first_line: String,
    /// Its stdout after that line (nothing more is expected).
    stdout: Option<BufReader<ChildStdout>>,
    stderr: Option<ChildStderr>,
}

impl DevServer {
    /// Starts `zk-lock dev-server ARGS` and waits for its first line of stdout.
    async fn start(args: &[&str]) -> DevServer {
        let mut command = command(&["dev-server"]);
        command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        let mut child = command.spawn().expect("run zk-lock dev-server");
        let pid = Pid::from_child(&child);
        let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take());
        let mut server = DevServer { child: Some(child), pid, first_line: String::new(), stdout: None, stderr };
        let (line, stdout) = within("the connect string on stdout", move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            stdout.read_line(&mut line).expect("read stdout");
            (line, stdout)
        })
        .await;
        if line.is_empty() {
            let (status, stderr) = server.wait().await;
            panic!("dev-server printed nothing on stdout and exited ({status}): {stderr}");
        }
        assert!(line.ends_with('\n'), "one whole line: {line:?}");
        server.first_line = line.trim_end().to_owned();
        server.stdout = Some(stdout);
        server
    }

    /// Sends `signal` to the command alone.
    fn signal(&self, signal: Signal) {
        kill_process(self.pid, signal).expect("signal zk-lock");
    }

    /// Presses Ctrl-C, as a terminal does: SIGINT to the whole foreground process group.
    fn ctrl_c(&self) {
        kill_process_group(self.pid, Signal::INT).expect("signal the process group of zk-lock");
    }

    /// Waits until the command exits; returns its status and its whole stderr.
    async fn wait(&mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("not waited for yet");
        let stderr = self.stderr.take();
        let stdout = self.stdout.take();
        within("zk-lock to exit", move || {
            let mut text = String::new();
            if let Some(mut stderr) = stderr {
                stderr.read_to_string(&mut text).expect("read stderr");
            }
            let mut rest = String::new();
            if let Some(mut stdout) = stdout {
                stdout.read_to_string(&mut rest).expect("read stdout");
            }
            assert_eq!(rest, "", "nothing on stdout after the first line");
            (child.wait().expect("wait for zk-lock"), text)
        })
        .await
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        // A failed test: the command's watchdog stops the JVM once the command is gone.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `--json` line of a dev-server.
fn document(server: &DevServer) -> Value {
    serde_json::from_str(&server.first_line).unwrap_or_else(|e| panic!("not JSON ({e}): {}", server.first_line))
}

/// Asserts that nothing runs as `pid` any more and nothing listens on `addr`.
fn assert_gone(pid: u32, addr: SocketAddr) {
    let pid = Pid::from_raw(pid as i32).expect("a real pid");
    assert_eq!(test_kill_process(pid), Err(Errno::SRCH), "the JVM {pid:?} outlived the command");
    let refused = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect_err("nothing listens any more");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
}

/// A fresh directory for a test, deleted when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("zk-lock-cli-dev-server-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o700));
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Takes and releases a lock on the server at `connect`: it serves zk-lock's recipes.
async fn lock_and_release(connect: &str, path: &str) -> Client {
    let client = Client::builder(connect).connect().await.expect("connect to the dev server");
    let guard = Mutex::with_client(&client, path).lock().await.expect("take the lock");
    let other = Client::builder(connect).connect().await.expect("connect a second client");
    let busy = Mutex::with_client(&other, path).try_lock().await;
    assert!(matches!(busy, Err(zk_lock::Error::Busy { .. })), "{busy:?}");
    guard.release().await.expect("release the lock");
    Mutex::with_client(&other, path).try_lock().await.expect("free again").release().await.unwrap();
    other.close().await;
    client
}

#[tokio::test]
async fn ctrl_c_stops_a_temporary_server_and_deletes_its_directory() {
    let mut server = DevServer::start(&["--port", "0", "--json"]).await;
    let doc = document(&server);
    let port = doc["port"].as_u64().expect("a port") as u16;
    assert_ne!(port, 0);
    assert_eq!(doc["connect"], format!("127.0.0.1:{port}"), "{doc}");
    assert_eq!(doc["temporary"], true, "{doc}");
    assert!(doc["version"].as_str().is_some_and(|v| v.starts_with("3.")), "{doc}");
    let jvm = doc["pid"].as_u64().expect("the JVM's pid") as u32;
    let data_dir = PathBuf::from(doc["data_dir"].as_str().unwrap());
    let log = PathBuf::from(doc["log"].as_str().unwrap());
    let dir = data_dir.parent().unwrap().to_owned();
    assert!(data_dir.is_dir() && log.is_file() && log.starts_with(&dir), "{doc}");

    let client = lock_and_release(doc["connect"].as_str().unwrap(), "/dev-server/temporary").await;
    client.close().await;

    server.ctrl_c();
    let (status, stderr) = server.wait().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("export ZK_LOCK_CONNECT=127.0.0.1:{port}\n")), "{stderr}");
    assert!(stderr.contains(&format!("stopping the server (pid {jvm})")), "{stderr}");
    assert_gone(jvm, SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    assert!(!dir.exists(), "the temporary directory {} is left", dir.display());
}

#[tokio::test]
async fn a_data_dir_is_kept_after_sigterm_and_served_again() {
    let scratch = Scratch::new("kept");
    // Created, with its parent, when missing.
    let data_dir = scratch.0.join("new").join("zk-data");
    let data_arg = data_dir.to_str().unwrap();

    let mut server = DevServer::start(&["--port", "0", "--data-dir", data_arg]).await;
    // Without --json, the first line is the connect string alone.
    let connect = server.first_line.clone();
    let port: u16 = connect.strip_prefix("127.0.0.1:").and_then(|p| p.parse().ok()).expect(&connect);
    let client = lock_and_release(&connect, "/dev-server/kept").await;
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.zookeeper().create("/kept", b"still here", &persistent).await.expect("create /kept");
    client.close().await;

    server.signal(Signal::TERM);
    let (status, stderr) = server.wait().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("\n  export ZK_LOCK_CONNECT={connect}\n")), "{stderr}");
    let pid = stderr.split("(standalone, pid ").nth(1).and_then(|rest| rest.split(')').next()).expect(&stderr);
    assert_gone(pid.parse().unwrap(), SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    assert!(stderr.contains(&format!("its data stays in {}", data_dir.display())), "{stderr}");
    assert!(data_dir.join("version-2").is_dir(), "ZooKeeper's data is kept");
    assert!(data_dir.join("zookeeper.log").is_file(), "the log is kept with it");

    // A second run on the same directory serves the same nodes.
    let mut again = DevServer::start(&["--data-dir", data_arg, "--port", "0", "--json"]).await;
    let doc = document(&again);
    assert_eq!((&doc["temporary"], &doc["data_dir"]), (&false.into(), &data_arg.into()), "{doc}");
    let client = Client::builder(doc["connect"].as_str().unwrap()).connect().await.unwrap();
    let (data, _) = client.zookeeper().get_data("/kept").await.expect("/kept survived the restart");
    assert_eq!(data, b"still here");
    client.close().await;
    // Its terminal closed.
    again.signal(Signal::HUP);
    let (status, stderr) = again.wait().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(data_dir.join("version-2").is_dir());
}

#[tokio::test]
async fn a_taken_port_is_refused_naming_it() {
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let output = output(command(&["dev-server", "--port", &port])).await;
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "zk-lock: port {port} on 127.0.0.1 is already in use (another ZooKeeper?); choose another with \
             --port N, or --port 0 for any free port\n"
        )
    );
    assert!(output.stdout.is_empty());
}

#[tokio::test]
async fn unusable_data_dirs_are_refused() {
    let scratch = Scratch::new("refused");
    let file = scratch.0.join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let locked = scratch.0.join("read-only");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
    // Root writes anywhere: then a read-only directory is no refusal to check.
    let writable_anyway = std::fs::write(locked.join("probe"), "").is_ok();
    let mut cases = vec![
        (file.clone(), "it exists and is not a directory"),
        (file.join("below"), "cannot create it"),
        (scratch.0.join("donn\u{e9}es"), "choose a plain ASCII path"),
    ];
    if !writable_anyway {
        cases.push((locked.clone(), "cannot write in it"));
    }
    for (dir, reason) in cases {
        let output = output(command(&["dev-server", "--port", "0", "--data-dir", dir.to_str().unwrap()])).await;
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{}: {stderr}", dir.display());
        assert!(stderr.starts_with(&format!("zk-lock: --data-dir {}: ", dir.display())), "{stderr}");
        assert!(stderr.contains(reason), "{}: {stderr}", dir.display());
    }

    let output = output(command(&["dev-server", "--connect", "127.0.0.1:2181"])).await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains("--connect is for the commands that talk to a server"));
}

#[tokio::test]
async fn missing_java_or_zookeeper_says_what_to_install() {
    let scratch = Scratch::new("missing");
    let mut no_java = command(&["dev-server", "--port", "0"]);
    no_java.env("PATH", scratch.0.as_os_str()).env_remove("JAVA_HOME");
    let no_zookeeper = {
        let mut command = command(&["dev-server", "--port", "0"]);
        command.env("ZOOKEEPER_CLASSPATH", scratch.0.join("zookeeper.jar"));
        command
    };
    for (command, missing) in [(no_java, "cannot find `java`"), (no_zookeeper, "cannot find the zookeeper server jars")]
    {
        let output = output(command).await;
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(4), "{stderr}");
        assert!(stderr.starts_with("zk-lock: cannot start a ZooKeeper server: "), "{stderr}");
        assert!(stderr.contains(missing), "{stderr}");
        assert!(
            stderr.contains("apt-get install zookeeper default-jre-headless")
                && stderr.contains("scripts/install-deps"),
            "{stderr}"
        );
        assert!(output.stdout.is_empty());
    }
}

#[tokio::test]
async fn a_server_that_dies_ends_the_command_with_its_log() {
    let mut server = DevServer::start(&["--port", "0", "--json"]).await;
    let doc = document(&server);
    let jvm = doc["pid"].as_u64().unwrap() as i32;
    let dir = Path::new(doc["data_dir"].as_str().unwrap()).parent().unwrap().to_owned();
    kill_process(Pid::from_raw(jvm).unwrap(), Signal::KILL).expect("kill the JVM");
    let (status, stderr) = server.wait().await;
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("\nthe end of the server's log, "), "{stderr}");
    assert!(stderr.contains("\n  [main] INFO org.apache.zookeeper"), "the end of its log: {stderr}");
    assert!(
        stderr.ends_with(
            "\nzk-lock: the zookeeper server exited on its own (its log went with its temporary directory; the \
             end of its log is above)\n"
        ),
        "{stderr}"
    );
    assert!(!dir.exists(), "the temporary directory {} is left", dir.display());
}

#[tokio::test]
async fn a_server_that_cannot_start_ends_the_command_with_its_log() {
    let scratch = Scratch::new("unstartable");
    // ZooKeeper keeps its snapshots in version-2/; a file there makes it give up.
    std::fs::write(scratch.0.join("version-2"), "not a directory").unwrap();
    let data_dir = scratch.0.to_str().unwrap();
    let output = output(command(&["dev-server", "--port", "0", "--data-dir", data_dir])).await;
    let stderr = stderr_of(&output);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(stderr.starts_with(&format!("the end of the server's log, {data_dir}/zookeeper.log:\n")), "{stderr}");
    assert!(stderr.contains("  [main] ERROR org.apache.zookeeper"), "its log, each line indented: {stderr}");
    assert!(stderr.contains("\n      at org.apache.zookeeper") && !stderr.contains("\\t"), "tabs as spaces: {stderr}");
    assert!(
        stderr.ends_with(
            "\nzk-lock: cannot start a ZooKeeper server: it exited before serving (exit status: 1; its log stays; \
             the end of its log is above)\n"
        ),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}
