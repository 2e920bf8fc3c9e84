//! Reading the listings and the data of many nodes without asking the server for a reply of
//! unbounded size: what [`participants`](super::participants) reads a lock's nodes with.
//!
//! Anyone who may create nodes under a lock path may give each up to the server's packet limit
//! of data (`jute.maxbuffer`, 1 MiB by default). One multi-read of all their data is one reply of
//! their total size, which the server builds in its heap (80 such nodes: an 80 MB reply, and a
//! server of 512 MB died of it). So data is read in replies of a bounded size, by the sizes the
//! nodes' stats give, and data over [`MAX_NODE_DATA`] is never kept:
//!
//! - a listing of at most [`DIRECT_READS`] nodes (any ordinary queue) reads each node with a
//!   `getData` of its own, all sent before the first reply is awaited: one round trip, and no
//!   reply larger than one node, the bound ZooKeeper itself puts on every read (and what a
//!   waiter's read of the node ahead of it costs);
//! - a longer listing first asks every node's stat (`exists`, pipelined: about a hundred bytes a
//!   reply; ZooKeeper's multi-read carries only `getData` and `getChildren`), then reads the data
//!   of the nodes within [`MAX_NODE_DATA`] in multi-reads of at most [`MAX_BYTES_PER_READ`]
//!   each, one at a time.
//!
//! A node whose data grows between its stat and its read (one round trip) is read at its new
//! size: the bound holds against the sizes the stats gave, and what grew over [`MAX_NODE_DATA`]
//! is dropped all the same.

use std::future::Future;

use zookeeper_client::{Client as ZkClient, Error as ZkError, MultiReadResult, Stat};

use crate::zk::{broke_connection, Reconnects};

/// The most data of one node that is read and kept; a node with more is reported by its stat
/// alone ([`NodeRead::TooLarge`]). Far more than any lock's holder description or address.
pub(crate) const MAX_NODE_DATA: usize = 64 * 1024;

/// Caps one multi-read, in bytes: the paths it sends, and the data and stats its reply carries
/// (by the nodes' stats), far below ZooKeeper's default 1 MiB packet limit (`jute.maxbuffer`),
/// which would close the connection, and any size that strains the server's heap.
const MAX_BYTES_PER_READ: usize = 256 * 1024;

/// What one `getData` of a multi-read adds to its reply besides the data: the result's header
/// (type, done, error: 9 bytes), the data's length (4) and the stat (68), rounded up.
const REPLY_BYTES_PER_NODE: usize = 96;

/// Listings of at most this many nodes have their data read at once, a `getData` per node,
/// without asking their stats first: at most this many replies of one node each in flight.
pub(crate) const DIRECT_READS: usize = 8;

/// Requests sent before the first reply is awaited in a stat pass: a few hundred kilobytes of
/// replies in flight, however long the listing.
const STATS_IN_FLIGHT: usize = 1024;

/// A node's data as read, or why it was not.
#[derive(Debug)]
pub(crate) enum NodeRead {
    /// Its data (at most [`MAX_NODE_DATA`] bytes) and stat.
    Data(Vec<u8>, Stat),
    /// Its data is larger than [`MAX_NODE_DATA`] (the stat's `data_length`): not read, or
    /// dropped.
    TooLarge(Stat),
    /// Deleted since the listing.
    Gone,
}

impl NodeRead {
    fn of(data: Vec<u8>, stat: Stat) -> Self {
        if data.len() > MAX_NODE_DATA {
            Self::TooLarge(stat)
        } else {
            Self::Data(data, stat)
        }
    }
}

/// The children of each of `parents`, in order (none for a parent that does not exist), in as
/// few multi-reads as [`MAX_BYTES_PER_READ`] of paths allows, retrying after connection losses.
pub(crate) async fn list_children(zk: &ZkClient, parents: &[String]) -> Result<Vec<Vec<String>>, ZkError> {
    let mut listings = Vec::with_capacity(parents.len());
    for batch in batches(parents, |path| path.len()) {
        for listing in multi_read(zk, batch, Read::Children).await? {
            listings.push(children(listing)?);
        }
    }
    Ok(listings)
}

/// The data of each node at `paths`, in order, with no reply larger than one node's data (see
/// the module's comment), retrying after connection losses (reads are safe to repeat).
pub(crate) async fn read_nodes(zk: &ZkClient, paths: &[String]) -> Result<Vec<NodeRead>, ZkError> {
    if paths.len() <= DIRECT_READS {
        return pipelined(zk, paths, DIRECT_READS, |zk, path| {
            let read = zk.get_data(path);
            async move {
                match read.await {
                    Ok((data, stat)) => Ok(NodeRead::of(data, stat)),
                    Err(ZkError::NoNode) => Ok(NodeRead::Gone),
                    Err(error) => Err(error),
                }
            }
        })
        .await;
    }
    let stats = pipelined(zk, paths, STATS_IN_FLIGHT, ZkClient::check_stat).await?;
    let mut reads: Vec<NodeRead> = stats
        .into_iter()
        .map(|stat| match stat {
            None => NodeRead::Gone,
            Some(stat) => NodeRead::TooLarge(stat),
        })
        .collect();
    // The nodes to read: those within the cap, by their stats; the others stay `TooLarge`.
    let wanted: Vec<(usize, usize)> = reads
        .iter()
        .enumerate()
        .filter_map(|(i, read)| match read {
            NodeRead::TooLarge(stat) => Some((i, data_length(stat))).filter(|&(_, len)| len <= MAX_NODE_DATA),
            _ => None,
        })
        .collect();
    let cost = |&(i, len): &(usize, usize)| paths[i].len() + len + REPLY_BYTES_PER_NODE;
    for batch in batches(&wanted, cost) {
        let batch_paths: Vec<String> = batch.iter().map(|&(i, _)| paths[i].clone()).collect();
        let results = multi_read(zk, &batch_paths, Read::Data).await?;
        for (&(i, _), result) in batch.iter().zip(results) {
            reads[i] = match result {
                MultiReadResult::Data { data, stat } => NodeRead::of(data, stat),
                MultiReadResult::Error { err: ZkError::NoNode } => NodeRead::Gone,
                MultiReadResult::Error { err } => return Err(err),
                other => return Err(unexpected(other)),
            };
        }
    }
    Ok(reads)
}

/// The size of a node's data by its stat.
fn data_length(stat: &Stat) -> usize {
    usize::try_from(stat.data_length).unwrap_or(0)
}

/// `items` cut into consecutive batches whose `cost` adds up to at most [`MAX_BYTES_PER_READ`]
/// (an item that costs more alone makes a batch of its own).
fn batches<T>(items: &[T], cost: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut out = Vec::new();
    let mut rest = items;
    while !rest.is_empty() {
        let mut bytes = 0;
        let fits = rest.iter().take_while(|item| {
            bytes += cost(item);
            bytes <= MAX_BYTES_PER_READ
        });
        let (batch, next) = rest.split_at(fits.count().max(1));
        out.push(batch);
        rest = next;
    }
    out
}

/// `request(zk, path)` for every path, at most `in_flight` sent before the first of their
/// replies is awaited; after a broken connection, the requests whose replies were lost are sent
/// again once the session is connected. `request` must send its request before it returns (as
/// zookeeper-client's methods do) and turn `NoNode` into a value. One result per path, in order.
async fn pipelined<T, F, R>(zk: &ZkClient, paths: &[String], in_flight: usize, request: R) -> Result<Vec<T>, ZkError>
where
    R: Fn(&ZkClient, &str) -> F,
    F: Future<Output = Result<T, ZkError>>,
{
    let mut results: Vec<Option<T>> = paths.iter().map(|_| None).collect();
    let mut reconnects = Reconnects::new(zk);
    loop {
        let pending: Vec<usize> = (0..paths.len()).filter(|&i| results[i].is_none()).collect();
        if pending.is_empty() {
            break;
        }
        let mut broken = None;
        for window in pending.chunks(in_flight.max(1)) {
            let sent: Vec<F> = window.iter().map(|&i| request(zk, &paths[i])).collect();
            for (&i, reply) in window.iter().zip(sent) {
                match reply.await {
                    Ok(value) => results[i] = Some(value),
                    // The others in flight fail alike; each is sent again.
                    Err(error) if broke_connection(&error) => broken = Some(error),
                    Err(error) => return Err(error),
                }
            }
            if broken.is_some() {
                break;
            }
        }
        if let Some(error) = broken {
            reconnects.wait(error).await?;
        }
    }
    Ok(results.into_iter().flatten().collect())
}

#[derive(Clone, Copy)]
enum Read {
    Children,
    Data,
}

/// One multi-read of `paths`, retried after connection losses. One result per path, in order.
async fn multi_read(zk: &ZkClient, paths: &[String], read: Read) -> Result<Vec<MultiReadResult>, ZkError> {
    let mut reconnects = Reconnects::new(zk);
    loop {
        let mut reader = zk.new_multi_reader();
        for path in paths {
            match read {
                Read::Children => reader.add_get_children(path)?,
                Read::Data => reader.add_get_data(path)?,
            }
        }
        match reader.commit().await {
            Err(error) => reconnects.wait(error).await?,
            ok => return ok,
        }
    }
}

/// A listing's children; none if the parent does not exist.
fn children(result: MultiReadResult) -> Result<Vec<String>, ZkError> {
    match result {
        MultiReadResult::Children { children } => Ok(children),
        MultiReadResult::Error { err: ZkError::NoNode } => Ok(Vec::new()),
        MultiReadResult::Error { err } => Err(err),
        other => Err(unexpected(other)),
    }
}

fn unexpected(result: MultiReadResult) -> ZkError {
    ZkError::UnexpectedError(format!("unexpected multi-read result {result:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_stay_within_the_cap_and_keep_the_order() {
        let sizes = [100_000, 100_000, 100_000, 300_000, 1, 2, 3];
        let cut = batches(&sizes, |&n| n);
        assert_eq!(cut, [&sizes[..2], &sizes[2..3], &sizes[3..4], &sizes[4..]]);
        assert!(batches(&[] as &[usize], |&n| n).is_empty());
    }

    #[test]
    fn data_over_the_cap_is_not_kept() {
        let stat = Stat {
            czxid: 1,
            mzxid: 1,
            pzxid: 1,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        };
        assert!(matches!(NodeRead::of(vec![0; MAX_NODE_DATA], stat), NodeRead::Data(..)));
        assert!(matches!(NodeRead::of(vec![0; MAX_NODE_DATA + 1], stat), NodeRead::TooLarge(_)));
    }
}
