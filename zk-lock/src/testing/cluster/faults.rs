//! Faults injected into a [`TestingCluster`]'s processes: killing, stopping, pausing and
//! restarting its servers. The faults of the network between them are in `links`.

use super::TestingCluster;
use crate::testing::probe::{self, REBIND_ATTEMPTS, REBIND_PAUSE, STOP_GRACE};
use crate::testing::process::JvmProcess;
use crate::testing::{Result, TestingError};

impl TestingCluster {
    /// Kills server `i` (`SIGKILL`), as a crash would, and waits until it has exited.
    ///
    /// Does nothing if it is not running.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when the process cannot be signalled or waited for.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn kill(&self, i: usize) -> Result<()> {
        let mut processes = self.lock();
        if let Some(process) = processes[i].as_mut() {
            process.kill()?;
        }
        processes[i] = None;
        Ok(())
    }

    /// Stops server `i` gracefully (`SIGTERM`) and waits until it has exited.
    ///
    /// Does nothing if it is not running.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when the process cannot be signalled or waited for.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn stop(&self, i: usize) -> Result<()> {
        let mut processes = self.lock();
        if let Some(process) = processes[i].as_mut() {
            process.terminate(STOP_GRACE)?;
        }
        processes[i] = None;
        Ok(())
    }

    /// Freezes server `i` with `SIGSTOP`, as a long garbage collection or a frozen VM would: its
    /// sockets stay open and its JVM answers nothing (clients, the other servers,
    /// [`four_letter`](Self::four_letter)) until [`resume`](Self::resume). Meanwhile
    /// [`leader`](Self::leader) and [`wait_for_leader`](Self::wait_for_leader) leave it out, and
    /// [`pid`](Self::pid) still gives its pid. [`stop`](Self::stop), [`kill`](Self::kill),
    /// [`restart`](Self::restart) and dropping the cluster end it as they would a running one.
    ///
    /// Does nothing if it is not running.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when the process cannot be signalled.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn pause(&self, i: usize) -> Result<()> {
        match self.lock()[i].as_mut() {
            Some(process) => process.pause(),
            None => Ok(()),
        }
    }

    /// Lets a [paused](Self::pause) server `i` run again (`SIGCONT`). It finds out for itself
    /// what happened meanwhile: a leader that lost its quorum, or a follower its leader, stops
    /// serving and joins the ensemble again.
    ///
    /// Does nothing if it is not running.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when the process cannot be signalled.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn resume(&self, i: usize) -> Result<()> {
        match self.lock()[i].as_mut() {
            Some(process) => process.resume(),
            None => Ok(()),
        }
    }

    /// Starts server `i` again on the same ports and data, and waits until it has rejoined
    /// the ensemble as leader or follower. A running server is stopped first.
    ///
    /// # Errors
    ///
    /// [`TestingError::Exited`] or [`TestingError::NotServing`], quoting its log, when it does
    /// not rejoin, e.g. because the rest of the ensemble has no quorum.
    ///
    /// # Panics
    ///
    /// Panics if `i >= self.len()`.
    pub fn restart(&self, i: usize) -> Result<()> {
        let mut processes = self.lock();
        if let Some(process) = processes[i].as_mut() {
            process.terminate(STOP_GRACE)?;
        }
        processes[i] = None;
        let member = &self.members[i];
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut process = self.spawn(i)?;
            let joined = probe::wait_serving(&member.name(), &mut process, member.addr(), &member.data_dir, |mode| {
                mode == "leader" || mode == "follower"
            });
            match joined {
                Ok(()) => {
                    processes[i] = Some(process);
                    return Ok(());
                }
                Err(failure) if failure.port_taken && attempt < REBIND_ATTEMPTS => {
                    std::thread::sleep(REBIND_PAUSE);
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }

    /// Kills the current leader (`SIGKILL`) and returns its index. The others elect a new
    /// leader if they keep a quorum; [`wait_for_leader`](Self::wait_for_leader) waits for it.
    ///
    /// # Errors
    ///
    /// [`TestingError::NoLeader`] when no running server leads right now;
    /// [`TestingError::Io`] when the process cannot be killed.
    pub fn kill_leader(&self) -> Result<usize> {
        let mut processes = self.lock();
        let leader = self.current_leader(&processes).ok_or(TestingError::NoLeader)?;
        if let Some(process) = processes[leader].as_mut() {
            process.kill()?;
        }
        processes[leader] = None;
        Ok(leader)
    }

    /// Stops every server gracefully (`SIGTERM`) and waits until all have exited.
    ///
    /// # Errors
    ///
    /// [`TestingError::Io`] when a process cannot be signalled or waited for.
    pub fn stop_all(&self) -> Result<()> {
        let mut processes = self.lock();
        Self::stop_processes(&mut processes)
    }

    fn stop_processes(processes: &mut [Option<JvmProcess>]) -> Result<()> {
        // All are signalled first, so that they shut down in parallel.
        for process in processes.iter_mut().flatten() {
            process.request_stop()?;
        }
        for slot in processes.iter_mut() {
            if let Some(process) = slot.as_mut() {
                process.terminate(STOP_GRACE)?;
            }
            *slot = None;
        }
        Ok(())
    }

    /// Stops the whole ensemble, starts it again on the same ports and data, and waits until it
    /// has a quorum with one leader.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn restart_all(&self) -> Result<()> {
        let mut processes = self.lock();
        Self::stop_processes(&mut processes)?;
        self.launch_all(&mut processes, true).map(drop).map_err(|failure| failure.error)
    }
}
