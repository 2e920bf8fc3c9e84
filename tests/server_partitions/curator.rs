//! What Apache Curator 5.4 tells the holder of an `InterProcessMutex` in the isolated-follower
//! case (issue 33): its client is connected to one follower only, that follower is cut from the
//! leader, and a zk-lock client connected to the leader and the other follower waits for the same
//! lock. The Curator holder is `tests/java/CuratorHolderStates.java`, Curator's defaults but for
//! the session timeout (so LOST is Curator 5's simulated expiry, injected once a session timeout
//! has passed in SUSPENDED; its client never reaches another server). The times of its
//! listener's SUSPENDED and LOST and of the other client's grant, from the cut, are printed; only
//! what must hold, whatever Curator does, is asserted.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::{timeout, timeout_at, Instant};
use zk_lock::{Client, Mutex};

use super::java_peer::{JavaPeer, Program};
use super::one_lock::Recipe;
use super::{ensemble, LONG_SESSION, ONE_AT_A_TIME, PATIENCE, SHORT_SESSION, SYNC_LIMIT, TICK};

/// Milliseconds since the epoch, the Java program's clock (same machine).
fn now_millis() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("after the epoch").as_millis())
        .expect("fits in i64")
}

/// Seconds from `from` to `to`, both in milliseconds since the epoch.
fn secs(from: i64, to: i64) -> f64 {
    // Differences of a few seconds: exact in f64.
    (to - from) as f64 / 1000.0
}

fn show(at: Option<f64>) -> String {
    at.map_or_else(|| "never".to_owned(), |at| format!("{at:.3} s"))
}

/// What one run measured, in seconds from the cut.
struct Measured {
    suspended: Option<f64>,
    lost: Option<f64>,
    granted: Option<f64>,
}

/// Cuts the Curator holder's follower from the leader while the zk-lock client waits, and
/// returns when Curator's listener said SUSPENDED and LOST and when the other client was granted.
async fn curator_holder_on_a_cut_follower(session: Duration) -> Measured {
    let cluster = ensemble();
    let leader = cluster.leader().expect("a leader");
    let followers: Vec<usize> = (0..cluster.len()).filter(|&i| i != leader).collect();
    let holder_server = followers[0];
    let others: Vec<String> =
        (0..cluster.len()).filter(|&i| i != holder_server).map(|i| cluster.server_connect_string(i)).collect();
    let path = format!("/server-partitions-curator-{}", fastrand::u64(..));

    let session_ms = session.as_millis().to_string();
    let mut holder = JavaPeer::spawn_program(
        Program::HolderStates,
        &cluster.server_connect_string(holder_server),
        &[&session_ms, &path],
    );
    // Printed once connected, before it takes the mutex.
    let negotiated = holder.expect_line("SESSION ").await;
    eprintln!("curator: {negotiated}");
    let negotiated = negotiated["SESSION ".len()..].to_owned();
    eprintln!("curator: {}", holder.expect_line("HELD ").await);

    let other = Client::builder(others.join(",")).session_timeout(session).connect().await.expect("the other connects");
    let waiter = other.clone();
    let waiter_path = path.clone();
    let granted = tokio::spawn(async move {
        let guard = Mutex::with_client(&waiter, &waiter_path).lock_timeout(PATIENCE).await;
        (now_millis(), guard.expect("the other client is granted"))
    });
    Recipe::Mutex.until_someone_waits(&other, &path).await;
    // As in the zk-lock cases: the holder has held for a whole session timeout when the cut comes.
    tokio::time::sleep(session).await;

    let cut_at = now_millis();
    cluster.cut(holder_server, leader);

    let watch_for = session * 3 + TICK * SYNC_LIMIT + Duration::from_secs(10);
    let states = async {
        let mut states = Vec::new();
        let deadline = Instant::now() + watch_for;
        // The holder prints nothing but its states now, and never exits by itself (if it does,
        // `expect_line` fails with what it printed).
        while let Ok(line) = timeout_at(deadline, holder.expect_line("STATE ")).await {
            eprintln!("curator: {line}");
            let mut words = line.split_whitespace();
            if let (Some("STATE"), Some(state), Some(at)) = (words.next(), words.next(), words.next()) {
                let at: i64 = at.parse().expect("STATE <state> <millis>");
                states.push((state.to_owned(), secs(cut_at, at)));
                if state == "LOST" {
                    break;
                }
            }
        }
        states
    };
    let (grant, states) = tokio::join!(timeout(watch_for, granted), states);
    let grant = grant.ok().map(|joined| joined.expect("the grant task"));
    let first = |name: &str| states.iter().find(|(state, _)| state == name).map(|(_, at)| *at);
    let measured = Measured {
        suspended: first("SUSPENDED"),
        lost: first("LOST"),
        granted: grant.as_ref().map(|(at, _)| secs(cut_at, *at)),
    };

    let both = |told: Option<f64>| match (told, measured.granted) {
        (Some(told), Some(granted)) if told > granted => format!("{:.3} s", told - granted),
        (None, Some(_)) => "unbounded (never told)".to_owned(),
        _ => "no time (told first)".to_owned(),
    };
    eprintln!(
        "Curator 5.4 holder on a follower cut from the leader, session timeout {session:?} (negotiated {negotiated} ms), \
         syncLimit x tickTime {:?}: SUSPENDED at {}, LOST at {}, the zk-lock client granted at {} after the cut; \
         both believed they held for {} if the Curator holder gives up at SUSPENDED, {} if at LOST; every state: {states:?}",
        TICK * SYNC_LIMIT,
        show(measured.suspended),
        show(measured.lost),
        show(measured.granted),
        both(measured.suspended),
        both(measured.lost),
    );

    cluster.heal_all();
    if let Some((_, guard)) = grant {
        guard.release().await.expect("the new holder releases");
    }
    // Its stdin closed, the holder exits without releasing.
    holder.wait_success().await;
    other.close().await;
    measured
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_holder_states_when_its_follower_is_cut_from_the_leader_with_a_timeout_below_sync_limit() {
    let _one = ONE_AT_A_TIME.lock().await;
    let measured = curator_holder_on_a_cut_follower(SHORT_SESSION).await;
    assert!(measured.granted.is_some(), "the leader expires the Curator holder's session");
    assert!(measured.suspended.is_some(), "Curator says SUSPENDED once the follower gives its clients up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_holder_states_when_its_follower_is_cut_from_the_leader_with_a_timeout_above_sync_limit() {
    let _one = ONE_AT_A_TIME.lock().await;
    let measured = curator_holder_on_a_cut_follower(LONG_SESSION).await;
    assert!(measured.granted.is_some(), "the leader expires the Curator holder's session");
    assert!(measured.suspended.is_some(), "Curator says SUSPENDED once the follower gives its clients up");
}
