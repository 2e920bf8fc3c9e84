//! What `tree` finds but cannot show: locks whose path is no valid lock path (over
//! [`MAX_PATH_LEN`] bytes: anyone who may create nodes can make one), and nodes it does not walk
//! below, since every path there is longer still. They are listed, not fatal: one such node must
//! not hide every other lock.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{json, Value};
use zk_lock::path::MAX_PATH_LEN;

use crate::output::escape;

/// The most characters of a path that a line of text shows; a longer one is cut in the middle.
const TEXT_PATH_MAX: usize = 120;

/// The most characters of a path that the JSON document carries (`path_length` tells the whole
/// length): a node name may be as long as a ZooKeeper packet, about 1 MB.
const JSON_PATH_MAX: usize = 4096;

/// Why one node is not shown.
#[derive(Debug, Default)]
struct Why {
    /// The node is a lock, and this is the rule its path breaks.
    lock: Option<String>,
    /// The nodes below it were not walked: its path is too long already.
    below: bool,
}

/// The nodes below `tree`'s root that it does not show, by path.
#[derive(Debug, Default)]
pub struct NotShown(BTreeMap<String, Why>);

/// Why `path` cannot be a lock path because of its length, in plain words; `None` if it is
/// short enough.
pub fn too_long(path: &str) -> Option<String> {
    (path.len() > MAX_PATH_LEN)
        .then(|| format!("its path is {} bytes long, over the {MAX_PATH_LEN} bytes a lock path may have", path.len()))
}

impl NotShown {
    /// `path` is a lock whose path breaks `rule` of lock paths: zk-lock cannot inspect it.
    pub fn lock(&mut self, path: String, rule: String) {
        self.0.entry(path).or_default().lock = Some(rule);
    }

    /// The nodes below `path`, whose path is over [`MAX_PATH_LEN`] bytes, were not walked.
    pub fn below(&mut self, path: String) {
        self.0.entry(path).or_default().below = true;
    }

    /// How many nodes are not shown.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether every node was shown.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(path too long)`, or a broader note if some lock breaks another rule of lock paths.
    pub fn summary(&self) -> &'static str {
        match self.0.iter().all(|(path, _)| path.len() > MAX_PATH_LEN) {
            true => "not shown (path too long)",
            false => "not shown (not a valid lock path)",
        }
    }

    /// One line per node: its path ([`escape`]d, cut in the middle if long) and why.
    pub fn lines(&self) -> String {
        let mut text = String::new();
        for (path, why) in &self.0 {
            text.push_str(&format!("{}: {}\n", escape(&shorten(path, TEXT_PATH_MAX)), reason(path, why)));
        }
        text
    }

    /// `[{"path", "path_length", "lock", "reason"}]`: `path` cut in the middle (`...`) if it
    /// is over [`JSON_PATH_MAX`] characters, `path_length` its whole length in bytes, `lock`
    /// whether the node itself is a lock.
    pub fn json(&self) -> Value {
        let entries = self.0.iter().map(|(path, why)| {
            json!({
                "path": shorten(path, JSON_PATH_MAX),
                "path_length": path.len(),
                "lock": why.lock.is_some(),
                "reason": reason(path, why),
            })
        });
        Value::Array(entries.collect())
    }
}

/// Why the node at `path` is not shown, in plain words.
fn reason(path: &str, why: &Why) -> String {
    let too_long = || too_long(path).unwrap_or_else(|| "its path is too long for a lock path".to_owned());
    match (&why.lock, why.below) {
        (Some(rule), false) => format!("lock not shown: {rule}"),
        (Some(rule), true) => format!("lock not shown, nor the nodes below it: {rule}"),
        (None, _) => format!("not walked: {}; no lock below it can be shown", too_long()),
    }
}

/// `path` if it has at most `max` characters (`max` at least 10); otherwise its start and its
/// end joined by `...`, `max` characters in all: the start names where it is, the end which
/// node it is.
fn shorten(path: &str, max: usize) -> Cow<'_, str> {
    let count = path.chars().count();
    if count <= max {
        return Cow::Borrowed(path);
    }
    let tail = max / 3;
    let head = max - tail - 3;
    let at = |n: usize| path.char_indices().nth(n).map_or(path.len(), |(i, _)| i);
    Cow::Owned(format!("{}...{}", &path[..at(head)], &path[at(count - tail)..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_paths_are_cut_in_the_middle_on_character_boundaries() {
        assert_eq!(shorten("/a/b", 10), "/a/b");
        let long = format!("/{}", "é".repeat(40));
        let cut = shorten(&long, 12);
        assert_eq!(cut, "/éééé...éééé");
        assert_eq!(cut.chars().count(), 12);
    }

    #[test]
    fn each_node_says_why_in_plain_words_with_its_length() {
        let mut skipped = NotShown::default();
        let lock = format!("/r/{}", "x".repeat(1100));
        let deep = format!("/r/{}", "c/".repeat(600).trim_end_matches('/'));
        skipped.lock(lock.clone(), too_long(&lock).unwrap());
        skipped.below(deep.clone());
        assert_eq!(skipped.len(), 2);
        assert_eq!(skipped.summary(), "not shown (path too long)");
        let text = skipped.lines();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "{}...{}: not walked: its path is 1202 bytes long, over the 1024 bytes a lock path may have; no lock \
                 below it can be shown",
                &deep[..77],
                &deep[deep.len() - 40..]
            )
        );
        assert!(lines[1]
            .ends_with(": lock not shown: its path is 1103 bytes long, over the 1024 bytes a lock path may have"));
        let json = skipped.json();
        assert_eq!(json[1]["path"], lock);
        assert_eq!((&json[1]["path_length"], &json[1]["lock"]), (&1103.into(), &true.into()));
        assert_eq!((&json[0]["path"], &json[0]["lock"]), (&deep.into(), &false.into()));
        skipped.lock(format!("/r/{}", "x".repeat(5000)), "a rule".into());
        assert_eq!(skipped.json()[2]["path"].as_str().unwrap().chars().count(), JSON_PATH_MAX);
        skipped.lock("/r/short".into(), "another rule".into());
        assert_eq!(skipped.summary(), "not shown (not a valid lock path)");
    }
}
