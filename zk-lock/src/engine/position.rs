//! A waiting acquisition's place in its lock's queue, as the waiter learns it without asking
//! the server for more: from the listings it makes anyway (when it joins, and each time the node
//! it watches goes), and the holder's data from the read that watches the node ahead (when that
//! node is the holder's) or from the listing after a wake-up (a multi-read that adds it).
//!
//! The report ([`QueuePosition`]), and what a waiter keeps to make it ([`Positions`]).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client::{Client as ZkClient, MultiReadResult, Stat};

use super::not_granted::NotGranted;
use crate::holder::HolderDescription;
use crate::zk::list_children;

/// Where a waiting acquisition stands in its lock's queue, reported each time it learns of a
/// change ([`Mutex::with_queue_reports`](crate::Mutex::with_queue_reports)).
///
/// `Display` reads like `3rd in line behind host=a pid=12 task=none (held 2.1 s)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuePosition {
    /// The lock path.
    pub path: String,
    /// Its place in line, the holder being 1st: `2` is next.
    pub place: usize,
    /// How many nodes must go before it is granted (the holder included): `place - 1`. By its
    /// recipe's rule, the nodes it waits for and those they wait for in turn: a reader behind a
    /// waiting writer is behind the readers holding the lock too, and readers waiting for the
    /// same writer share a place.
    pub ahead: usize,
    /// The first node of the queue, which holds the lock (with any reader sharing it), when
    /// the waiter has read it; `None` until then: further back than next in line, until a
    /// wake-up's listing read it.
    pub holder: Option<QueueHolder>,
}

/// The holder ahead of a waiting acquisition, as its node read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueHolder {
    /// Its node's name.
    pub node_name: String,
    /// Its node's data.
    pub data: Vec<u8>,
    /// `data` parsed, if it is zk-lock's holder description (`host=.. pid=.. task=..`).
    pub description: Option<HolderDescription>,
    /// How long its node had existed when read (by the server's creation time against the local
    /// clock): how long it has held the lock, and queued before that.
    pub held_for: Duration,
}

impl QueueHolder {
    pub(crate) fn read(node_name: &str, data: Vec<u8>, stat: &Stat) -> Self {
        let created = UNIX_EPOCH + Duration::from_millis(u64::try_from(stat.ctime).unwrap_or(0));
        let held_for = SystemTime::now().duration_since(created).unwrap_or_default();
        let description = HolderDescription::parse(&data);
        Self { node_name: node_name.to_owned(), data, description, held_for }
    }
}

impl fmt::Display for QueuePosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = self.place;
        let suffix = match (place % 10, place % 100) {
            (_, 11..=13) => "th",
            (1, _) => "st",
            (2, _) => "nd",
            (3, _) => "rd",
            _ => "th",
        };
        write!(f, "{place}{suffix} in line")?;
        match &self.holder {
            Some(holder) => {
                match &holder.description {
                    Some(description) => write!(f, " behind {description}")?,
                    None => write!(f, " behind {}", holder.node_name)?,
                }
                write!(f, " (held {:.1} s)", holder.held_for.as_secs_f64())
            }
            None => write!(f, " for `{}`", self.path),
        }
    }
}

/// Who is told of a waiter's place: the caller's function, if it asked.
pub(crate) type PositionReport = std::sync::Arc<dyn Fn(&QueuePosition) + Send + Sync>;

/// What a waiter knows of its place, and whom it tells. It keeps nothing of the queue but the
/// name of the node heading it, and the holder's data only until it is told.
pub(super) struct Positions<'a> {
    path: &'a str,
    report: &'a (dyn Fn(&QueuePosition) + Send + Sync),
    /// The node heading the queue in the last listing, and whether it is the node we watch.
    head: String,
    head_is_nearest: bool,
    /// The place last told behind the current head (`None` once the head changes).
    told: Option<usize>,
    /// A place not told yet: the read of the holder's node comes next.
    pending: Option<usize>,
    /// The holder's node, read for the next report.
    holder: Option<QueueHolder>,
}

impl<'a> Positions<'a> {
    pub(super) fn new(path: &'a str, report: &'a (dyn Fn(&QueuePosition) + Send + Sync)) -> Self {
        Self { path, report, head: String::new(), head_is_nearest: false, told: None, pending: None, holder: None }
    }

    /// The last listing shows `head` heading the queue (`is_nearest`: it is the node we watch).
    pub(super) fn headed_by(&mut self, head: &str, is_nearest: bool) {
        if self.head != head {
            self.head = head.to_owned();
            self.told = None;
        }
        self.head_is_nearest = is_nearest;
        if self.holder.as_ref().is_some_and(|holder| holder.node_name != head) {
            self.holder = None;
        }
    }

    /// The listing puts us at `place`.
    pub(super) fn at(&mut self, place: usize) {
        if self.told == Some(place) {
            self.holder = None;
            return;
        }
        match self.head_is_nearest && self.holder.is_none() {
            // The read that watches the holder's node comes next, and tells who holds it.
            true => self.pending = Some(place),
            false => self.tell(place),
        }
    }

    /// The node we watch was read: the holder's, when it heads the queue.
    pub(super) fn nearest_read(&mut self, nearest: &str, data: Vec<u8>, stat: &Stat) {
        if self.head_is_nearest && self.head == nearest {
            if let Some(place) = self.pending.take() {
                self.holder = Some(QueueHolder::read(nearest, data, stat));
                self.tell(place);
            }
        }
    }

    fn tell(&mut self, place: usize) {
        let holder = self.holder.take().filter(|holder| holder.node_name == self.head);
        (self.report)(&QueuePosition { path: self.path.to_owned(), place, ahead: place - 1, holder });
        self.told = Some(place);
    }

    /// Lists the queue again; while the head is not the node we watched, in one multi-read with
    /// the head's data (no more requests than the listing alone).
    pub(super) async fn list_with_holder(&mut self, zk: &ZkClient) -> std::result::Result<Vec<String>, NotGranted> {
        if self.head_is_nearest {
            // The holder went: the listing shows the next one.
            return Ok(list_children(zk, self.path).await?);
        }
        let mut reader = zk.new_multi_reader();
        let head_path = format!("{}/{}", self.path, self.head);
        let read = reader.add_get_children(self.path).and_then(|()| reader.add_get_data(&head_path));
        let results = match read {
            Ok(()) => reader.commit().await,
            Err(error) => Err(error),
        };
        let mut results = results.map(Vec::into_iter);
        match results.as_mut().map(|results| (results.next(), results.next())) {
            Ok((Some(MultiReadResult::Children { children }), holder)) => {
                if let Some(MultiReadResult::Data { data, stat }) = holder {
                    self.holder = Some(QueueHolder::read(&self.head, data, &stat));
                }
                Ok(children)
            }
            // A broken connection, or an answer of another shape: the plain listing decides.
            _ => Ok(list_children(zk, self.path).await?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_a_sentence() {
        let holder = QueueHolder {
            node_name: "_c_x-lock-0000000001".into(),
            data: b"host=a pid=12 task=none".to_vec(),
            description: HolderDescription::parse(b"host=a pid=12 task=none"),
            held_for: Duration::from_millis(2140),
        };
        let at = |place, holder| QueuePosition { path: "/p".into(), place, ahead: place - 1, holder };
        assert_eq!(at(3, Some(holder.clone())).to_string(), "3rd in line behind host=a pid=12 task=none (held 2.1 s)");
        assert_eq!(at(2, None).to_string(), "2nd in line for `/p`");
        assert_eq!(at(11, None).to_string(), "11th in line for `/p`");
        assert_eq!(at(21, None).to_string(), "21st in line for `/p`");
        let foreign = QueueHolder { description: None, ..holder };
        assert_eq!(at(4, Some(foreign)).to_string(), "4th in line behind _c_x-lock-0000000001 (held 2.1 s)");
    }
}
