//! The three-server ensemble (issue 33): `zk_lock::testing::TestingCluster` on loopback, the same
//! server settings as the standalone server (`tickTime=500`, `forceSync=no`, data under the same
//! temporary directory). Started when the first row that needs it runs, stopped after a row when
//! the next row does not need it, so that the standalone rows never share the machine with three
//! more idle JVMs.
//!
//! The `-ensemble` rows run the standalone rows' code with the ensemble's connect string (all
//! three members, as users configure a client: each client library picks a member at random)
//! and its peers, and count requests at all three members ([`Servers`]: each member counts the
//! requests of the clients connected to it; the leader also counts, in its request pipeline,
//! what its followers forward to it).

use std::net::SocketAddr;
use std::time::Duration;

use zk_lock::testing::TestingCluster;

use crate::native::{self, Res};
use crate::peer::{Measured, Peer};
use crate::report::Record;
use crate::stats::{Server, Servers};
use crate::{target_dir, ClientId, Ctx};

/// Servers in the ensemble.
pub const SIZE: usize = 3;

/// Rounds of the `uncontended-ensemble` row, `--quick` or not (see [`tag_placement`]).
pub const MIN_ROUNDS: usize = 3;

/// For a measurement on one session of the ensemble (a round of `uncontended-ensemble`): copies
/// its samples, `acquire_us` and `cycle_us`, to `acquire_on_leader_us` and `cycle_on_leader_us`
/// if the session was connected to the leader (the leader received most of its requests), to
/// `..._on_follower_us` if not, and counts the round as `rounds_on_leader` or
/// `rounds_on_follower`: each client library picks a member at random, a follower forwards every
/// write to the leader, and the report shows each placement's latency apart.
pub fn tag_placement(measured: &mut Measured) {
    let Some(at) = measured.requests.at_leader else { return };
    let place = if at.received * 2 > measured.requests.packets { "leader" } else { "follower" };
    for key in ["acquire", "cycle"] {
        if let Some(samples) = measured.result.get(format!("{key}_us")).cloned() {
            measured.result[format!("{key}_on_{place}_us")] = samples;
        }
    }
    measured.result[format!("rounds_on_{place}")] = serde_json::json!(1);
}

/// The running ensemble and what the rows use of it.
pub struct Ensemble {
    cluster: TestingCluster,
    /// The index of the member that leads (found once, after the start: nothing here stops a
    /// member, so it does not change).
    pub leader: usize,
    /// Every member's client address, by index.
    pub members: Vec<SocketAddr>,
    /// All members: what the `-ensemble` rows' clients are given.
    connect: String,
    /// All members, the leader marked: where the `-ensemble` rows count requests.
    counted: Servers,
    /// The Curator and kazoo peers connected to `connect`, started by the first row that needs
    /// them.
    curator: Result<Peer, String>,
    kazoo: Result<Peer, String>,
    peers_started: bool,
}

impl Ensemble {
    /// Starts the ensemble, finds its leader, and warms every member up as the standalone server
    /// is (each member's JIT then has compiled the request paths of its own clients).
    async fn start(opts: &crate::Opts) -> Res<Ensemble> {
        eprintln!("bench: starting a {SIZE}-server ZooKeeper ensemble");
        let cluster = tokio::task::spawn_blocking(|| TestingCluster::start(SIZE))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot start the ensemble: {e}"))?;
        let leader = tokio::task::spawn_blocking(move || {
            let leader = cluster.wait_for_leader().map_err(|e| format!("no leader: {e}"));
            (cluster, leader)
        })
        .await
        .map_err(|e| e.to_string())?;
        let (cluster, leader) = (leader.0, leader.1?);
        let members = (0..cluster.len())
            .map(|i| cluster.server_connect_string(i).parse::<SocketAddr>().map_err(|e| e.to_string()))
            .collect::<Res<Vec<_>>>()?;
        for (i, member) in members.iter().enumerate() {
            let role = if i == leader { "leader" } else { "follower" };
            eprintln!("bench: ensemble member {i} ({role}): warming up ({} mixed requests)", opts.server_warmup * 5);
            if let Err(e) = native::warm_server(&member.to_string(), opts.server_warmup, Duration::from_secs(30)).await
            {
                eprintln!("bench: ensemble warm-up of member {i} failed: {e}");
            }
        }
        let counted = Servers::ensemble(&members, leader);
        let not_started = || Err("not started".to_owned());
        Ok(Ensemble {
            connect: cluster.connect_string(),
            cluster,
            leader,
            members,
            counted,
            curator: not_started(),
            kazoo: not_started(),
            peers_started: false,
        })
    }

    /// The first member that does not lead.
    pub fn follower(&self) -> usize {
        (0..self.members.len()).find(|&i| i != self.leader).unwrap_or(0)
    }

    /// Member `i`: its client address and its JVM's pid.
    pub fn member(&self, i: usize) -> Server {
        Server { addr: self.members[i], pid: self.cluster.pid(i) }
    }

    /// Quits its peers and stops its servers.
    pub async fn stop(self) {
        let Ensemble { cluster, curator, kazoo, .. } = self;
        for peer in [curator, kazoo].into_iter().flatten() {
            peer.quit().await;
        }
        eprintln!("bench: stopping the ensemble");
        // Dropping the cluster kills and waits for its JVMs: blocking.
        let _ = tokio::task::spawn_blocking(move || drop(cluster)).await;
    }
}

/// The ensemble, started if it is not running yet; why not if it cannot be.
pub async fn get<'c>(ctx: &'c mut Ctx<'_>) -> Result<&'c mut Ensemble, String> {
    if ctx.ensemble.is_none() {
        ctx.ensemble = Some(Ensemble::start(ctx.opts).await);
    }
    match ctx.ensemble.as_mut() {
        Some(Ok(ensemble)) => Ok(ensemble),
        Some(Err(e)) => Err(e.clone()),
        None => Err("no ensemble".to_owned()),
    }
}

/// Runs `row`, a standalone row's code under the name `section`, on the ensemble: while it
/// runs, `ctx`'s connect string, counted servers and peers are the ensemble's. If the ensemble
/// cannot start, every selected client's cell of `section` says why.
pub async fn on_ensemble<'a>(ctx: &mut Ctx<'a>, section: &'static str, row: impl AsyncFnOnce(&mut Ctx<'a>)) {
    if let Err(e) = get(ctx).await {
        for client in ctx.opts.clients.clone() {
            let record = Record::failed(section, "-", client.name(), format!("ensemble: {e}"));
            crate::log(&record, &[]);
            ctx.records.push(record);
        }
        return;
    }
    start_peers(ctx).await;
    swap(ctx);
    row(ctx).await;
    swap(ctx);
}

/// Starts the Curator and kazoo peers on the ensemble's connect string, once, for the selected
/// ones.
async fn start_peers(ctx: &mut Ctx<'_>) {
    let wants = |c: ClientId| ctx.opts.clients.contains(&c);
    let (curator, kazoo) = (wants(ClientId::Curator), wants(ClientId::Kazoo));
    let Some(Ok(ensemble)) = ctx.ensemble.as_mut() else { return };
    if ensemble.peers_started {
        return;
    }
    ensemble.peers_started = true;
    let work = target_dir().join("bench");
    let connect = ensemble.connect.clone();
    if curator {
        eprintln!("bench: starting a Curator peer on the ensemble");
        ensemble.curator = Peer::curator(&connect, &work).await;
    }
    if kazoo {
        eprintln!("bench: starting a kazoo peer on the ensemble");
        ensemble.kazoo = Peer::kazoo(&connect, &work).await;
    }
    for (name, peer) in [("curator", &ensemble.curator), ("kazoo", &ensemble.kazoo)] {
        if let Err(e) = peer {
            if e != "not started" {
                eprintln!("bench: the {name} peer on the ensemble is unavailable, its cells stay empty: {e}");
            }
        }
    }
}

/// Exchanges `ctx`'s connect string, counted servers and peers with the ensemble's.
fn swap(ctx: &mut Ctx<'_>) {
    let Some(Ok(ensemble)) = ctx.ensemble.as_mut() else { return };
    std::mem::swap(&mut ctx.connect, &mut ensemble.connect);
    std::mem::swap(&mut ctx.counted, &mut ensemble.counted);
    std::mem::swap(&mut ctx.curator, &mut ensemble.curator);
    std::mem::swap(&mut ctx.kazoo, &mut ensemble.kazoo);
}
