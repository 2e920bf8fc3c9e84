//! Picking free loopback ports.

use std::net::{Ipv4Addr, TcpListener};

use super::{Result, TestingError};

/// Returns `n` distinct ports that were free on 127.0.0.1 a moment ago.
///
/// All listeners are held until every port is picked, so the ports are distinct. Another
/// process may still take one before the server binds it; callers detect that from the
/// server's log and retry with fresh ports.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|err| TestingError::io("bind a free port on 127.0.0.1", err))?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|addr| addr.port()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|err| TestingError::io("read the address of a free port", err))
}

/// Returns a port that was free on 127.0.0.1 a moment ago.
pub(crate) fn free_port() -> Result<u16> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|err| TestingError::io("bind a free port on 127.0.0.1", err))
}
