//! `zk-lock tree <path>`: every lock in a subtree, with its recipe and how many hold and wait.

mod not_shown;

use std::collections::{BTreeSet, HashSet};

use serde_json::json;
use zk_lock::path::MAX_PATH_LEN;
use zk_lock::Client;
use zookeeper_client::Error as ZkError;

use self::not_shown::NotShown;
use crate::error::{credentials_hint, CliError};
use crate::inspect;
use crate::output::{count_roles, escape, lock_kind, Report, Table};

/// Listings sent before the first reply is awaited: a level of the tree costs about one round
/// trip, without flooding the server's queue on a huge level.
const LISTINGS_IN_FLIGHT: usize = 256;

/// A lock found in the subtree and what its participants look like.
struct Lock {
    path: String,
    kind: String,
    holders: usize,
    waiters: usize,
    others: usize,
}

/// What the walk of a subtree found.
#[derive(Default)]
struct Walk {
    /// The locks, sorted.
    locks: BTreeSet<String>,
    /// The nodes below the root that this client may not list or read (ZooKeeper's NoAuth).
    unreadable: BTreeSet<String>,
    /// The nodes over [`MAX_PATH_LEN`] bytes that have children, which were not walked; the
    /// locks that are no valid lock path join them.
    not_shown: NotShown,
}

/// Runs `tree`. Nodes below `root` that the client may not read (another application's, with an
/// ACL) are skipped and reported; only an unreadable `root` fails. So are locks whose path is no
/// valid lock path (too long: anyone who may create nodes can make one) and nodes whose path is
/// too long already to walk below.
pub async fn run(client: &Client, root: &str) -> Result<Report, CliError> {
    if root != "/" {
        zk_lock::path::validate_lock_path(root).map_err(|e| CliError::from_lock(root, e))?;
    }
    let Some(Walk { locks: candidates, mut unreadable, mut not_shown }) = find_locks(client, root).await? else {
        return Ok(Report {
            text: String::new(),
            json: json!({ "path": root, "exists": false, "locks": [], "unreadable": [], "not_shown": [] }),
            not_found: Some(format!("`{root}` does not exist; check the path (try `zk-lock tree /`)")),
            warning: None,
        });
    };
    let mut locks = Vec::new();
    for path in candidates {
        // `inspect` refuses such a path as a usage error; here it is one node among many.
        if let Some(rule) = broken_rule(&path) {
            not_shown.lock(path, rule);
            continue;
        }
        // A lock released since the walk has vanished or is empty: not a lock any more.
        let found = match inspect::read(client, &path).await {
            Ok(Some(found)) if !found.is_empty() => found,
            Ok(_) => continue,
            // Listable, but its nodes are not readable.
            Err(e) if e.is_no_auth() => {
                unreadable.insert(path);
                continue;
            }
            Err(e) => return Err(e),
        };
        let (holders, waiters, others) = count_roles(&found);
        locks.push(Lock { kind: lock_kind(&found), path, holders, waiters, others });
    }
    Ok(report(root, &locks, &unreadable, &not_shown))
}

/// Walks the subtree breadth first and returns the lock paths in it, sorted, and the nodes it
/// may not list; `None` if `root` does not exist. A lock is a node with lock nodes as children (a
/// child whose name ends in a server sequence number), or a semaphore: a node whose `leases`
/// child has lease nodes, or whose `locks` child has lock nodes next to a `leases` child. Lock
/// nodes themselves are not listed, nor the children of a node whose path is over
/// [`MAX_PATH_LEN`] bytes: that bounds the walk's depth.
async fn find_locks(client: &Client, root: &str) -> Result<Option<Walk>, CliError> {
    let zk = client.zookeeper();
    let mut walk = Walk::default();
    let locks = &mut walk.locks;
    // Nodes with a `leases` child: their `locks` child is a semaphore's internal mutex.
    let mut with_leases = HashSet::new();
    let mut level = vec![root.to_owned()];
    while !level.is_empty() {
        let mut next = Vec::new();
        for batch in level.chunks(LISTINGS_IN_FLIGHT) {
            let listings: Vec<_> = batch.iter().map(|path| zk.list_children(path)).collect();
            for (path, listing) in batch.iter().zip(listings) {
                let children = match listing.await {
                    Ok(children) => children,
                    Err(ZkError::NoNode) if path == root => return Ok(None),
                    // Deleted since its parent was listed (a container reaped, a lock released).
                    Err(ZkError::NoNode) => continue,
                    // Another application's: skipped, and reported.
                    Err(ZkError::NoAuth) if path != root => {
                        walk.unreadable.insert(path.clone());
                        continue;
                    }
                    Err(e) => return Err(CliError::zookeeper(path, &e)),
                };
                if children.iter().any(|name| name == "leases") {
                    with_leases.insert(path.clone());
                }
                if children.iter().any(|name| has_sequence(name)) {
                    // Inspecting `P/leases` itself shows its nodes; its semaphore is out of scope.
                    locks.insert(if path == root { path.clone() } else { lock_of(path, &with_leases) });
                }
                // Every path below one too long for a lock is longer still: no lock there can be
                // shown, and a chain of any depth costs this one listing (the walk used to go
                // down it all, then fail for its lock's path).
                if path.len() > MAX_PATH_LEN {
                    if children.iter().any(|name| !has_sequence(name)) {
                        if let Some(rule) = broken_rule(path) {
                            walk.not_shown.below(path.clone(), rule);
                        }
                    }
                    continue;
                }
                for name in children.into_iter().filter(|name| !has_sequence(name)) {
                    if path == "/" && name == "zookeeper" {
                        continue; // ZooKeeper's own quota and config nodes.
                    }
                    next.push(child_path(path, &name));
                }
            }
        }
        level = next;
    }
    Ok(Some(walk))
}

/// The rule of lock paths that `path` breaks, in zk-lock's words (those of
/// [`zk_lock::path::validate_lock_path`]), or `None` if it is a valid lock path. For a node of
/// the walk over [`MAX_PATH_LEN`] bytes, the rule is its length (checked before its segments).
fn broken_rule(path: &str) -> Option<String> {
    match zk_lock::path::validate_lock_path(path) {
        Err(zk_lock::Error::InvalidPath { reason, .. }) => Some(reason),
        Err(other) => Some(other.to_string()),
        Ok(()) => None,
    }
}

/// The lock that a node with lock-node children belongs to: the semaphore above it for
/// `P/leases`, and for `P/locks` when `P` has leases; otherwise the node itself.
fn lock_of(path: &str, with_leases: &HashSet<String>) -> String {
    if let Some((parent, name)) = path.rsplit_once('/') {
        let parent = if parent.is_empty() { "/" } else { parent };
        if parent != "/" && (name == "leases" || (name == "locks" && with_leases.contains(parent))) {
            return parent.to_owned();
        }
    }
    path.to_owned()
}

fn child_path(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Whether `name` ends in a server sequence number, as every lock node does: a run of exactly ten
/// digits, the only length ZooKeeper writes (zk-lock's recipes ignore other lengths too).
fn has_sequence(name: &str) -> bool {
    name.bytes().rev().take_while(u8::is_ascii_digit).count() == 10
}

/// An indented outline of the subtree: directories end in `/`, locks carry their columns; then
/// the nodes that could not be read and those not shown, one a line, and a count of each.
fn report(root: &str, locks: &[Lock], unreadable: &BTreeSet<String>, not_shown: &NotShown) -> Report {
    let mut table = Table::new(&["LOCK", "KIND", "HOLDERS", "WAITERS"]);
    let root_is_lock = locks.first().is_some_and(|lock| lock.path == root);
    if !root_is_lock {
        table.row(vec![if root == "/" { "/".to_owned() } else { format!("{root}/") }]);
    }
    let mut printed: BTreeSet<String> = BTreeSet::new();
    for lock in locks {
        let relative = lock.path.strip_prefix(root).unwrap_or(&lock.path).trim_start_matches('/');
        let segments: Vec<&str> = if relative.is_empty() { Vec::new() } else { relative.split('/').collect() };
        // Directories between the root and the lock, each printed once; each a slice of
        // `relative`, not a join of its segments, which would cost a deep lock its depth squared.
        let mut end = 0;
        for (depth, segment) in segments.iter().enumerate().take(segments.len().saturating_sub(1)) {
            end += segment.len() + usize::from(depth > 0);
            let dir = &relative[..end];
            if !printed.contains(dir) {
                printed.insert(dir.to_owned());
                table.row(vec![format!("{}{segment}/", "  ".repeat(depth + 1))]);
            }
        }
        let name = match segments.last() {
            Some(last) => format!("{}{last}", "  ".repeat(segments.len())),
            None => root.to_owned(),
        };
        let mut waiters = lock.waiters.to_string();
        if lock.others > 0 {
            waiters.push_str(&format!(" (+{} unknown)", lock.others));
        }
        table.row(vec![name, lock.kind.clone(), lock.holders.to_string(), waiters]);
    }
    let mut text = table.render();
    for path in unreadable {
        text.push_str(&format!("{}: not readable (no permission), skipped\n", escape(path)));
    }
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    text.push_str(&not_shown.lines());
    text.push_str(&format!("{} under {}", plural(locks.len(), "lock"), escape(root)));
    let mut warnings = Vec::new();
    if !unreadable.is_empty() {
        text.push_str(&format!("; {} not readable (no permission)", plural(unreadable.len(), "node")));
        warnings.push(format!(
            "{} under {root} not readable (no permission), skipped: locks below them are not listed; {}",
            plural(unreadable.len(), "node"),
            credentials_hint()
        ));
    }
    if !not_shown.is_empty() {
        let nodes = plural(not_shown.len(), "node");
        text.push_str(&format!("; {nodes} {}", not_shown.summary()));
        // The rule each breaks is on its line, in zk-lock's words: not restated here.
        warnings.push(format!(
            "{nodes} under {root} {}: they are listed after the table with the rule each path breaks \
             (`not_shown` with --json)",
            not_shown.summary()
        ));
    }
    let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
    text.push('\n');
    let json = json!({
        "path": root,
        "exists": true,
        "locks": locks.iter().map(|lock| json!({
            "path": lock.path,
            "kind": lock.kind,
            "holders": lock.holders,
            "waiters": lock.waiters,
            "unknown": lock.others,
        })).collect::<Vec<_>>(),
        "unreadable": unreadable,
        "not_shown": not_shown.json(),
    });
    Report { text, json, not_found: None, warning }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semaphore_parts_belong_to_the_semaphore() {
        let with_leases: HashSet<String> = ["/a/sem".to_owned()].into();
        assert_eq!(lock_of("/a/sem/leases", &with_leases), "/a/sem");
        assert_eq!(lock_of("/a/sem/locks", &with_leases), "/a/sem");
        assert_eq!(lock_of("/a/other/locks", &with_leases), "/a/other/locks", "a mutex named `locks`");
        assert_eq!(lock_of("/a/mutex", &with_leases), "/a/mutex");
        assert_eq!(lock_of("/locks", &with_leases), "/locks");
    }

    #[test]
    fn sequences_need_ten_digits() {
        assert!(has_sequence("_c_x-lock-0000000001"));
        assert!(!has_sequence("product_42"));
        assert!(!has_sequence("x-000000001"));
        assert!(!has_sequence("_c_x-lock-00000000001"), "eleven digits: not a server sequence");
    }

    #[test]
    fn outline_indents_directories_once() {
        let lock = |path: &str| Lock { path: path.into(), kind: "mutex".into(), holders: 1, waiters: 0, others: 0 };
        let text =
            report("/r", &[lock("/r/a/x"), lock("/r/a/y"), lock("/r/b")], &BTreeSet::new(), &NotShown::default()).text;
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1].trim_end(), "/r/");
        assert_eq!(lines[2].trim_end(), "  a/");
        assert!(lines[3].starts_with("    x ") && lines[4].starts_with("    y "), "{text}");
        assert!(lines[5].starts_with("  b "), "{text}");
        assert_eq!(lines[6], "3 locks under /r");
    }

    #[test]
    fn unreadable_nodes_are_listed_and_counted() {
        let lock = Lock { path: "/r/open".into(), kind: "mutex".into(), holders: 1, waiters: 0, others: 0 };
        let unreadable: BTreeSet<String> = ["/r/owned".to_owned(), "/r/x/y".to_owned()].into();
        let report = report("/r", &[lock], &unreadable, &NotShown::default());
        let lines: Vec<&str> = report.text.lines().collect();
        assert_eq!(
            lines[3..],
            [
                "/r/owned: not readable (no permission), skipped",
                "/r/x/y: not readable (no permission), skipped",
                "1 lock under /r; 2 nodes not readable (no permission)"
            ],
            "{}",
            report.text
        );
        assert_eq!(report.json["unreadable"], json!(["/r/owned", "/r/x/y"]));
        let warning = report.warning.unwrap();
        assert!(warning.starts_with("2 nodes under /r not readable (no permission), skipped"), "{warning}");
        assert!(report.not_found.is_none());
    }
}
