//! zk-lock `Semaphore` and Apache Curator's `InterProcessSemaphoreV2` (real Java peers) on the
//! same path: together they never hold more leases than the limit, and they do hold the limit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;
use zk_lock::testing::children;
use zk_lock::Semaphore;

use crate::support::java_peer::JavaPeer;
use crate::support::{new_client, scratch_dir, server, unique_name};

/// Bound of a single acquisition: generous, because JVMs start slowly on a loaded machine.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound of the whole contention run.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a holder keeps its lease, as the Java peer does.
const HOLD: Duration = Duration::from_millis(5);

fn semaphore_path(name: &str) -> String {
    format!("/zk-lock-tests/interop-semaphore/{}", unique_name(name))
}

/// The number of holders' files in `dir` that all existed at one instant: listed, then checked
/// again (as the Java peer counts). Every holder's file has a unique name and exists for one
/// interval; a file both listed and found afterwards existed from its listing to its check, and
/// every listing comes before every check, so the counted files coexisted when the listing
/// ended. A file deleted (and maybe replaced by another holder's) while the directory was being
/// read is not counted, so a correct semaphore never shows more holders than leases.
fn count_holders(dir: &Path) -> usize {
    let listed: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    listed.iter().filter(|file| file.exists()).count()
}

/// Takes a lease `rounds` times; under each, announces itself with a file in `dir` and counts
/// the holders. Returns the largest count seen.
async fn rust_holder(semaphore: Semaphore, dir: PathBuf, name: String, rounds: u32, max_leases: usize) -> usize {
    let mut max_seen = 0;
    for round in 1..=rounds {
        let permit = tokio::time::timeout(ACQUIRE_TIMEOUT, semaphore.acquire())
            .await
            .unwrap_or_else(|_| panic!("{name}: no lease within {ACQUIRE_TIMEOUT:?}"))
            .expect("acquire a lease");
        let mine = dir.join(format!("{name}-{round}"));
        std::fs::File::create_new(&mine).unwrap_or_else(|e| panic!("create {}: {e}", mine.display()));
        let holders = count_holders(&dir);
        assert!(holders <= max_leases, "violation: {holders} holders of a semaphore with {max_leases} leases");
        max_seen = max_seen.max(holders);
        tokio::time::sleep(HOLD).await;
        // The file goes before the lease does.
        std::fs::remove_file(&mine).unwrap_or_else(|e| panic!("remove {}: {e}", mine.display()));
        permit.release().await.expect("release the lease");
    }
    max_seen
}

/// Parses a Java peer's `done <iterations> <max-holders-seen>`.
fn java_done(line: &str, iterations: u32) -> usize {
    let rest = line.strip_prefix("done ").unwrap_or_else(|| panic!("not a `done` line: {line:?}"));
    let (done, max_seen) = rest.split_once(' ').unwrap_or_else(|| panic!("not `done <n> <max>`: {line:?}"));
    assert_eq!(done, iterations.to_string(), "{line:?}");
    max_seen.parse().unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_holders_never_exceed_the_leases_and_reach_them() {
    const MAX_LEASES: u32 = 2;
    const JAVA_PEERS: usize = 2;
    const JAVA_ITERATIONS: u32 = 20;
    const RUST_SESSIONS: usize = 2;
    const RUST_TASKS: usize = 2;
    const RUST_ROUNDS: u32 = 20;
    let connect = server().connect_string();
    let path = semaphore_path("holders");
    let dir = scratch_dir("curator_semaphore", "holders");
    let dir_arg = dir.to_str().expect("UTF-8 temp path").to_owned();
    let (max_arg, iterations) = (MAX_LEASES.to_string(), JAVA_ITERATIONS.to_string());

    let mut peers: Vec<JavaPeer> = (0..JAVA_PEERS)
        .map(|_| JavaPeer::spawn(&connect, &["semaphore-holders", &path, &max_arg, &iterations, &dir_arg]))
        .collect();
    let mut clients = Vec::new();
    for _ in 0..RUST_SESSIONS {
        clients.push(new_client().await);
    }
    // Everyone is connected before anyone starts, so they really contend.
    for peer in &mut peers {
        peer.expect_line("ready").await;
    }
    let started = Instant::now();
    for peer in &mut peers {
        peer.send("go").await;
    }
    let mut tasks = Vec::new();
    for (session, client) in clients.iter().enumerate() {
        for task in 0..RUST_TASKS {
            let semaphore = Semaphore::with_client(client, &path, MAX_LEASES);
            let name = format!("rust-{session}-{task}");
            tasks.push(tokio::spawn(rust_holder(semaphore, dir.clone(), name, RUST_ROUNDS, MAX_LEASES as usize)));
        }
    }

    let run = async {
        let mut max_seen = Vec::new();
        for task in tasks {
            max_seen.push(task.await.expect("Rust holder"));
        }
        max_seen
    };
    let rust_max = tokio::time::timeout(RUN_TIMEOUT, run).await.expect("Rust holders finish");
    let mut java_max = Vec::new();
    for peer in &mut peers {
        // A peer that counted too many holders printed `violation <n>` and failed.
        java_max.push(java_done(&peer.expect_line("done ").await, JAVA_ITERATIONS));
    }
    for peer in peers {
        peer.wait_success().await;
    }
    let acquisitions = JAVA_PEERS as u32 * JAVA_ITERATIONS + (RUST_SESSIONS * RUST_TASKS) as u32 * RUST_ROUNDS;
    eprintln!(
        "{acquisitions} acquisitions in {:?}; most holders seen: Rust {rust_max:?}, Java {java_max:?}",
        started.elapsed()
    );

    // Each side saw at most the limit (checked as it went). The limit was also reached, so the
    // semaphore did not merely serialise everyone.
    let most = rust_max.iter().chain(&java_max).copied().max().expect("holders");
    assert_eq!(most, MAX_LEASES as usize, "the limit was never reached: the semaphore only serialised");
    assert_eq!(count_holders(&dir), 0, "a holder left its file behind");
    let observer = new_client().await;
    assert_eq!(
        children(&observer, &format!("{path}/leases")).await.unwrap(),
        Vec::<String>::new(),
        "leases left behind"
    );
    assert_eq!(
        children(&observer, &format!("{path}/locks")).await.unwrap(),
        Vec::<String>::new(),
        "requests left behind"
    );
    let _ = std::fs::remove_dir_all(dir);
}
