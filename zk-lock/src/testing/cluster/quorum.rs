//! Waiting for an ensemble's quorum: every running member serving as leader or follower, with
//! exactly one leader.

use std::time::Instant;

use super::{answers, TestingCluster};
use crate::testing::four_letter::four_letter_word_within;
use crate::testing::probe::{
    self, StartFailure, LOG_LINES, PROBE_INTERVAL, PROBE_TIMEOUT, REBIND_ATTEMPTS, REBIND_PAUSE, START_TIMEOUT,
};
use crate::testing::process::JvmProcess;
use crate::testing::{Result, TestingError};

impl TestingCluster {
    /// The index of the server that currently leads, asked with `srvr`; the first one if a
    /// server cut off from the others still believes it leads. [Paused](Self::pause) servers
    /// are not asked.
    ///
    /// `None` during an election or without a quorum.
    pub fn leader(&self) -> Option<usize> {
        let processes = self.lock();
        self.current_leader(&processes)
    }

    pub(super) fn current_leader(&self, processes: &[Option<JvmProcess>]) -> Option<usize> {
        (0..self.members.len()).find(|&index| {
            answers(&processes[index])
                && four_letter_word_within(self.members[index].addr(), "srvr", PROBE_TIMEOUT)
                    .is_ok_and(|srvr| probe::srvr_mode(&srvr) == Some("leader"))
        })
    }

    /// Waits until every running server is leader or follower, with exactly one leader, as after
    /// [`start`](Self::start); returns the leader's index. Use it after killing servers, to
    /// wait for the election. [Paused](Self::pause) servers are not waited for; a server cut
    /// off from the others is, so heal it first.
    ///
    /// # Errors
    ///
    /// [`TestingError::NotServing`] when that does not happen within about thirty seconds (for
    /// instance because a majority is down); [`TestingError::Exited`] when a server died.
    pub fn wait_for_leader(&self) -> Result<usize> {
        let mut processes = self.lock();
        self.wait_for_quorum(&mut processes, false).map_err(|failure| failure.error)
    }

    /// Starts every stopped member and waits for the quorum; returns the leader.
    pub(super) fn launch_all(
        &self,
        processes: &mut [Option<JvmProcess>],
        rebind: bool,
    ) -> std::result::Result<usize, StartFailure> {
        for (index, slot) in processes.iter_mut().enumerate() {
            if slot.is_none() {
                *slot = Some(self.spawn(index)?);
            }
        }
        self.wait_for_quorum(processes, rebind)
    }

    /// Waits until every running member is leader or follower, with exactly one leader.
    ///
    /// A member that exits fails the wait, unless `rebind` is set and it could not bind a port:
    /// then it is started again a few times, in case its previous process's ports were still
    /// being released.
    pub(super) fn wait_for_quorum(
        &self,
        processes: &mut [Option<JvmProcess>],
        rebind: bool,
    ) -> std::result::Result<usize, StartFailure> {
        let started = Instant::now();
        let mut launches = vec![1; processes.len()];
        loop {
            let mut leaders = Vec::new();
            let mut not_ready = None;
            for (index, slot) in processes.iter_mut().enumerate() {
                let Some(process) = slot.as_mut() else {
                    continue;
                };
                let member = &self.members[index];
                if let Some(status) = process.try_wait()? {
                    let log_tail = process.log_tail(LOG_LINES);
                    let port_taken = probe::is_bind_failure(&log_tail);
                    if port_taken && rebind && launches[index] < REBIND_ATTEMPTS {
                        launches[index] += 1;
                        std::thread::sleep(REBIND_PAUSE);
                        *slot = Some(self.spawn(index)?);
                        not_ready.get_or_insert((index, "restarting after a port conflict".to_owned()));
                        continue;
                    }
                    return Err(StartFailure {
                        port_taken,
                        error: TestingError::Exited {
                            name: member.name(),
                            status: status.to_string(),
                            log: member.log.clone(),
                            log_tail,
                        },
                    });
                }
                // A paused member answers nothing; it is waited for once resumed.
                if process.is_paused() {
                    continue;
                }
                match probe::serving_mode(member.addr(), &member.data_dir) {
                    Ok(mode) if mode == "leader" => leaders.push(index),
                    Ok(mode) if mode == "follower" => {}
                    Ok(mode) => {
                        not_ready.get_or_insert((index, format!("{} is {mode}", member.name())));
                    }
                    Err(detail) => {
                        not_ready.get_or_insert((index, format!("{}: {detail}", member.name())));
                    }
                }
            }
            let problem = match (not_ready, leaders.as_slice()) {
                (None, [leader]) => return Ok(*leader),
                (Some(problem), _) => problem,
                (None, []) => (0, "no running server".to_owned()),
                (None, [first, ..]) => (*first, format!("{} servers lead", leaders.len())),
            };
            if started.elapsed() >= START_TIMEOUT {
                let (index, detail) = problem;
                let member = &self.members[index];
                let log_tail = match &processes[index] {
                    Some(process) => process.log_tail(LOG_LINES),
                    None => String::from("(stopped)"),
                };
                return Err(StartFailure::from(TestingError::NotServing {
                    name: member.name(),
                    waited: started.elapsed(),
                    detail,
                    log: member.log.clone(),
                    log_tail,
                }));
            }
            std::thread::sleep(PROBE_INTERVAL);
        }
    }
}
