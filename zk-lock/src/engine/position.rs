//! A waiting acquisition's place in its lock's queue, as the waiter learns it without asking
//! the server for more: from the listings it makes anyway (when it joins, and each time the node
//! it watches goes), and the holder's data from the read that watches the node ahead (when that
//! node is the holder's) or from the listing after a wake-up (a multi-read that adds it).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client::Stat;

use crate::holder::HolderDescription;

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
