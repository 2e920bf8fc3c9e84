//! The first message of a ZooKeeper election connection, rewritten so that the receiver cannot
//! dial around the kit's proxies.
//!
//! A server opening an election connection (`QuorumCnxManager.startConnection` in 3.8) first
//! sends its *initial message*: a negative protocol version (`-65536` or `-65535`), its server id,
//! then the length and bytes of its own election address, `host:port[|host:port...]`. A receiver
//! with a higher id closes that connection and dials back (`handleConnection`, "sid <
//! self.getMyId()"), to the address the sender *advertised* when there is one: its real election
//! port, which bypasses the proxy that the receiver's `zoo.cfg` names for the sender, so a cut
//! between the two would not cut their election. 3.8 still accepts the legacy initial message,
//! the server id alone ("if (protocolVersion >= 0) sid = protocolVersion"), and then dials back
//! with `connectOne(sid)`, to the address in its own configuration: its proxy. So the kit's
//! election proxies forward the legacy form.

/// `QuorumCnxManager.PROTOCOL_VERSION_V1`: one advertised address.
const PROTOCOL_VERSION_V1: i64 = -65536;
/// `QuorumCnxManager.PROTOCOL_VERSION_V2`: several addresses, separated by `|`.
const PROTOCOL_VERSION_V2: i64 = -65535;
/// Protocol version, server id and address length.
const HEADER: usize = 8 + 8 + 4;
/// ZooKeeper refuses longer addresses anyway (`maxBuffer`); a length beyond it is not an initial
/// message we know, so it is passed on unchanged.
const MAX_ADDRESSES: usize = 512 * 1024;

/// Rewrites the initial message at the start of the bytes a connecting server sends; everything
/// after it passes unchanged.
#[derive(Debug, Default)]
pub(crate) struct LegacyHello {
    /// The start of the stream, until it holds a whole initial message.
    pending: Vec<u8>,
}

/// What the start of a stream is.
#[derive(Debug, PartialEq, Eq)]
enum Start {
    /// Too short to tell yet.
    Incomplete,
    /// An initial message of `len` bytes from the server with this id (big-endian, as sent).
    Hello { sid: [u8; 8], len: usize },
    /// Not an initial message of the new protocol: nothing to rewrite.
    Other,
}

fn parse(bytes: &[u8]) -> Start {
    let Some(version) = bytes.get(..8) else { return Start::Incomplete };
    let version = i64::from_be_bytes(version.try_into().expect("8 bytes"));
    if version != PROTOCOL_VERSION_V1 && version != PROTOCOL_VERSION_V2 {
        return Start::Other;
    }
    let Some(header) = bytes.get(..HEADER) else { return Start::Incomplete };
    let addresses = i32::from_be_bytes(header[16..].try_into().expect("4 bytes"));
    let Ok(addresses @ 1..=MAX_ADDRESSES) = usize::try_from(addresses) else { return Start::Other };
    if bytes.len() < HEADER + addresses {
        return Start::Incomplete;
    }
    Start::Hello { sid: header[8..16].try_into().expect("8 bytes"), len: HEADER + addresses }
}

impl LegacyHello {
    /// Takes the next bytes read; returns what to forward now (possibly nothing), and whether
    /// the rewrite is over, after which the caller forwards the stream as it is.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> (Vec<u8>, bool) {
        self.pending.extend_from_slice(bytes);
        match parse(&self.pending) {
            Start::Incomplete => (Vec::new(), false),
            Start::Hello { sid, len } => {
                let mut out = sid.to_vec();
                out.extend_from_slice(&self.pending[len..]);
                (out, true)
            }
            Start::Other => (std::mem::take(&mut self.pending), true),
        }
    }

    /// The bytes held back when the stream ends before a whole initial message: passed on as
    /// they are, so that nothing is lost.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An initial message as `startConnection` writes it.
    fn hello(version: i64, sid: i64, addresses: &str) -> Vec<u8> {
        let mut bytes = version.to_be_bytes().to_vec();
        bytes.extend_from_slice(&sid.to_be_bytes());
        bytes.extend_from_slice(&i32::try_from(addresses.len()).unwrap().to_be_bytes());
        bytes.extend_from_slice(addresses.as_bytes());
        bytes
    }

    /// Feeds `bytes` in chunks of `size`; returns what is forwarded, and whether it was done.
    fn rewrite(bytes: &[u8], size: usize) -> (Vec<u8>, bool) {
        let mut hello = LegacyHello::default();
        let mut out = Vec::new();
        let mut chunks = bytes.chunks(size);
        for chunk in chunks.by_ref() {
            let (forward, done) = hello.feed(chunk);
            out.extend(forward);
            if done {
                // The caller forwards the rest unchanged.
                chunks.for_each(|chunk| out.extend_from_slice(chunk));
                return (out, true);
            }
        }
        out.extend(hello.finish());
        (out, false)
    }

    #[test]
    fn a_v1_initial_message_becomes_the_server_id_alone() {
        let mut stream = hello(PROTOCOL_VERSION_V1, 2, "127.0.0.1:41234");
        let notification = [0, 0, 0, 4, 1, 2, 3, 4];
        stream.extend_from_slice(&notification);
        let mut expected = 2i64.to_be_bytes().to_vec();
        expected.extend_from_slice(&notification);
        for size in [1, 3, 8, 19, 20, 21, stream.len()] {
            assert_eq!(rewrite(&stream, size), (expected.clone(), true), "chunks of {size}");
        }
    }

    #[test]
    fn a_v2_initial_message_with_several_addresses_becomes_the_server_id_alone() {
        let stream = hello(PROTOCOL_VERSION_V2, 3, "127.0.0.1:41234|[::1]:41235");
        assert_eq!(rewrite(&stream, 5), (3i64.to_be_bytes().to_vec(), true));
    }

    #[test]
    fn a_legacy_or_unknown_start_passes_unchanged() {
        let legacy = [&7i64.to_be_bytes()[..], &[0, 0, 0, 1, 9]].concat();
        assert_eq!(rewrite(&legacy, 3), (legacy.clone(), true));
        let unknown = hello(-1, 2, "127.0.0.1:1");
        assert_eq!(rewrite(&unknown, 4), (unknown.clone(), true));
        let bad_length = hello(PROTOCOL_VERSION_V1, 2, "");
        assert_eq!(rewrite(&bad_length, 4), (bad_length.clone(), true));
    }

    #[test]
    fn a_stream_that_ends_inside_the_initial_message_is_passed_on_as_it_is() {
        let stream = hello(PROTOCOL_VERSION_V1, 2, "127.0.0.1:41234");
        let cut_short = &stream[..stream.len() - 1];
        assert_eq!(rewrite(cut_short, 4), (cut_short.to_vec(), false));
    }
}
