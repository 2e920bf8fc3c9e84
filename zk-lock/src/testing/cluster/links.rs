//! The network between the members of a [`TestingCluster`]: a [`Proxy`] for each ordered pair of
//! members and each of the two server-to-server ports, and the faults tests put on them.
//!
//! Member `a` reaches member `b` only through the proxies of the pair `(a, b)`: `a`'s `zoo.cfg`
//! names them as `b`'s quorum and election addresses (its own entry keeps its real ports, which
//! it listens on). A connection that `a` opens to `b` is carried by `(a, b)`, one that `b` opens
//! to `a` by `(b, a)`; so the bytes from `a` to `b` go *to the server* through `(a, b)` and *to
//! the client* through `(b, a)`, and holding them means holding both. Clients are not affected:
//! they reach the members' client ports directly.
//!
//! The election proxies rewrite each connection's initial message to its legacy form (see
//! `election_hello`), so that no member dials another's real election port.

use std::net::Ipv4Addr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::TestingCluster;
use crate::testing::proxy::{LinkOptions, Proxy};
use crate::testing::{Result, TestingError};

/// How long a connection between members waits for its target to listen. A member listens on
/// its quorum port only while it leads, from a moment after it was elected, and on its election
/// port from a moment after it started; a follower that dials its new leader sooner, and is
/// refused, tries again (3.8's `Learner.connectToLeader`), but one whose connection is made and
/// then fails gives up following. Through a proxy, which has accepted the connection already,
/// the connection waits instead.
const TARGET_PATIENCE: Duration = Duration::from_secs(5);

/// The two proxies that one member dials to reach another.
#[derive(Debug)]
struct Route {
    /// To the other member's quorum port (followers to their leader).
    quorum: Proxy,
    /// To the other member's election port.
    election: Proxy,
}

impl Route {
    fn hold(&self, to_server: bool, to_client: bool) {
        self.quorum.hold(to_server, to_client);
        self.election.hold(to_server, to_client);
    }

    fn delay(&self, delay: Duration) {
        self.quorum.delay(delay);
        self.election.delay(delay);
    }
}

/// The proxies between the members, and which directions are held.
#[derive(Debug)]
pub(super) struct Links {
    /// `routes[a][b]`: how member `a` reaches member `b`; `None` for `a == b`.
    routes: Vec<Vec<Option<Route>>>,
    /// `held[a][b]`: the bytes from member `a` to member `b` are held back. One lock, so that
    /// concurrent faults on pairs sharing a member apply in one order.
    held: Mutex<Vec<Vec<bool>>>,
}

impl Links {
    /// Starts the proxies between members listening on these `(quorum, election)` ports.
    pub(super) fn start(ports: &[(u16, u16)]) -> Result<Links> {
        let proxy = |port: u16, legacy_election_hello: bool| {
            let options = LinkOptions { target_patience: TARGET_PATIENCE, legacy_election_hello };
            Proxy::start_with((Ipv4Addr::LOCALHOST, port), options)
                .map_err(|err| TestingError::io("start a proxy between two cluster members", err))
        };
        let routes = (0..ports.len())
            .map(|from| {
                ports
                    .iter()
                    .enumerate()
                    .map(|(to, &(quorum, election))| {
                        if from == to {
                            return Ok(None);
                        }
                        Ok(Some(Route { quorum: proxy(quorum, false)?, election: proxy(election, true)? }))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Links { routes, held: Mutex::new(vec![vec![false; ports.len()]; ports.len()]) })
    }

    /// The `(quorum, election)` ports member `from` dials to reach member `to`.
    pub(super) fn ports(&self, from: usize, to: usize) -> (u16, u16) {
        let route = self.route(from, to);
        (route.quorum.addr().port(), route.election.addr().port())
    }

    fn route(&self, from: usize, to: usize) -> &Route {
        self.routes[from][to].as_ref().expect("a member has no route to itself")
    }

    /// Holds back (or delivers) the bytes from `from` to `to`.
    fn set_held(&self, from: usize, to: usize, held: bool) {
        let (there, back) = (self.route(from, to), self.route(to, from));
        let mut matrix = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        matrix[from][to] = held;
        // `(from, to)` carries them to its server, `(to, from)` to its client.
        there.hold(matrix[from][to], matrix[to][from]);
        back.hold(matrix[to][from], matrix[from][to]);
    }

    fn delay(&self, a: usize, b: usize, delay: Duration) {
        self.route(a, b).delay(delay);
        self.route(b, a).delay(delay);
    }

    fn heal(&self, a: usize, b: usize) {
        self.set_held(a, b, false);
        self.set_held(b, a, false);
        self.delay(a, b, Duration::ZERO);
    }
}

impl TestingCluster {
    /// Cuts members `a` and `b` apart, both ways, on their quorum and election ports: the
    /// connections between them stay open but deliver nothing, and new ones reach nobody, until
    /// [`heal`](Self::heal). Nothing is lost: the bytes are held back and delivered after the
    /// heal, in order, as TCP would after a partition (see [`Proxy`]).
    ///
    /// Clients still reach both members: only the links between members are cut.
    ///
    /// # Panics
    ///
    /// Panics if `a` or `b` is out of range (`>= self.len()`), or if they are the same member.
    pub fn cut(&self, a: usize, b: usize) {
        self.cut_one_way(a, b);
        self.cut_one_way(b, a);
    }

    /// Holds back the bytes from member `from` to member `to` until [`heal`](Self::heal), while
    /// those from `to` to `from` keep flowing (unless cut themselves), as in an asymmetric
    /// partition. The one-way cuts of different pairs, and of the two directions of one pair,
    /// add up.
    ///
    /// # Panics
    ///
    /// Panics if `from` or `to` is out of range, or if they are the same member.
    pub fn cut_one_way(&self, from: usize, to: usize) {
        self.links.set_held(from, to, true);
    }

    /// Delivers every byte between members `a` and `b`, both ways, `delay` later than it was
    /// sent, in order: a round trip between them takes twice `delay` more. `Duration::ZERO`
    /// removes the delay. A delay and a cut of the same pair add up.
    ///
    /// # Panics
    ///
    /// Panics if `a` or `b` is out of range, or if they are the same member.
    pub fn delay(&self, a: usize, b: usize, delay: Duration) {
        self.links.delay(a, b, delay);
    }

    /// Delivers what was held between members `a` and `b` and everything after it, both ways,
    /// without delay.
    ///
    /// # Panics
    ///
    /// Panics if `a` or `b` is out of range, or if they are the same member.
    pub fn heal(&self, a: usize, b: usize) {
        self.links.heal(a, b);
    }

    /// [`heal`](Self::heal)s every pair of members.
    pub fn heal_all(&self) {
        for a in 0..self.len() {
            for b in a + 1..self.len() {
                self.links.heal(a, b);
            }
        }
    }

    /// [`cut`](Self::cut)s member `i` from every other member, while its clients still reach
    /// it: a leader isolated so loses its quorum and a follower its leader, after `syncLimit`
    /// ticks ([`sync_limit`](Self::sync_limit)), and they stop serving until healed.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn isolate(&self, i: usize) {
        assert!(i < self.len(), "member {i} is out of range: the cluster has {} members", self.len());
        for other in (0..self.len()).filter(|&other| other != i) {
            self.cut(i, other);
        }
    }
}
