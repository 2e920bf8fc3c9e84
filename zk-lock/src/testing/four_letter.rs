//! ZooKeeper's four-letter-word admin commands over plain TCP.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

/// Connecting to loopback either succeeds or is refused at once; waiting long only hides a hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Long enough for `dump` or `wchp` on a busy test server.
const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// Sends a four-letter word (`ruok`, `srvr`, `stat`, `mntr`, `conf`, `cons`, ...) to the server
/// at `addr` and returns its whole answer.
///
/// The kit's servers whitelist every command. A server that does not know or allow the command
/// closes the connection without a word, which yields an empty string.
///
/// # Errors
///
/// [`io::ErrorKind::InvalidInput`] when `cmd` is not four ASCII letters; otherwise the error of
/// connecting, writing or reading, e.g. [`io::ErrorKind::ConnectionRefused`] when nothing
/// listens on `addr`, or a timeout after a few seconds.
pub fn four_letter_word(addr: SocketAddr, cmd: &str) -> io::Result<String> {
    four_letter_word_within(addr, cmd, IO_TIMEOUT)
}

/// [`four_letter_word`] with its own read and write timeout. Readiness probes use a short one:
/// a probe that times out is simply repeated, while a long one would keep the kit from noticing
/// that the server died (e.g. when another process holds its port and accepts but never
/// answers).
pub(crate) fn four_letter_word_within(addr: SocketAddr, cmd: &str, timeout: Duration) -> io::Result<String> {
    if cmd.len() != 4 || !cmd.bytes().all(|byte| byte.is_ascii_alphabetic()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{cmd}` is not a four-letter word; use one such as `ruok`, `srvr` or `mntr`"),
        ));
    }
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(cmd.as_bytes())?;
    // The server answers and closes; half-closing tells it no more is coming.
    let _ = stream.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        // A server that rejects the command may reset the connection instead of closing it.
        Err(err) if err.kind() == io::ErrorKind::ConnectionReset && answer.is_empty() => {}
        Err(err) => return Err(err),
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}
