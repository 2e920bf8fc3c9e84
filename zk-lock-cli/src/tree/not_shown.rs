//! What `tree` finds but cannot show: locks whose path is no valid lock path (over
//! [`MAX_PATH_LEN`] bytes: anyone who may create nodes can make one), and nodes it does not walk
//! below, since every path there is longer still. They are listed, not fatal: one such node must
//! not hide every other lock. Why is said in zk-lock's own words: the rule that
//! [`zk_lock::path::validate_lock_path`] names.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use zk_lock::path::MAX_PATH_LEN;

use crate::output::{shorten, Cut, Shown};

/// The most characters of a path that a line of text shows, escapes included; a longer one is
/// cut in the middle.
const TEXT_PATH_MAX: usize = 120;

/// The most characters of a path that the JSON document carries (`path_length` tells the whole
/// length): a node name may be as long as a ZooKeeper packet, about 1 MB.
const JSON_PATH_MAX: usize = 4096;

/// Why one node is not shown.
#[derive(Debug, Default)]
struct Why {
    /// The rule of lock paths that the node's path breaks, in zk-lock's words.
    rule: String,
    /// The node is a lock, which zk-lock cannot inspect.
    lock: bool,
    /// The nodes below it were not walked: its path is too long already.
    below: bool,
}

/// The nodes below `tree`'s root that it does not show, by path.
#[derive(Debug, Default)]
pub struct NotShown(BTreeMap<String, Why>);

impl NotShown {
    /// `path` is a lock whose path breaks `rule` of lock paths: zk-lock cannot inspect it.
    pub fn lock(&mut self, path: String, rule: String) {
        let why = self.0.entry(path).or_default();
        (why.rule, why.lock) = (rule, true);
    }

    /// The nodes below `path`, whose path is over [`MAX_PATH_LEN`] bytes (the `rule` it breaks),
    /// were not walked.
    pub fn below(&mut self, path: String, rule: String) {
        let why = self.0.entry(path).or_default();
        (why.rule, why.below) = (rule, true);
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

    /// One line per node: its path (escaped, then cut in the middle if long) and why.
    pub fn lines(&self) -> String {
        let mut text = String::new();
        for (path, why) in &self.0 {
            let path = shorten(path, TEXT_PATH_MAX, Cut::Middle, Shown::Escaped);
            text.push_str(&format!("{path}: {}\n", reason(why)));
        }
        text
    }

    /// `[{"path", "path_length", "lock", "reason"}]`: `path` cut in the middle (`...`) if it
    /// is over [`JSON_PATH_MAX`] characters, `path_length` its whole length in bytes, `lock`
    /// whether the node itself is a lock.
    pub fn json(&self) -> Value {
        let entries = self.0.iter().map(|(path, why)| {
            json!({
                "path": shorten(path, JSON_PATH_MAX, Cut::Middle, Shown::Exact),
                "path_length": path.len(),
                "lock": why.lock,
                "reason": reason(why),
            })
        });
        Value::Array(entries.collect())
    }
}

/// Why a node is not shown, in plain words.
fn reason(why: &Why) -> String {
    let rule = &why.rule;
    match (why.lock, why.below) {
        (true, false) => format!("lock not shown: {rule}"),
        (true, true) => format!("lock not shown, nor the nodes below it: {rule}"),
        (false, _) => format!("not walked, no lock below it can be shown: {rule}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What zk-lock says of `path`, which it refuses.
    fn rule(path: &str) -> String {
        match zk_lock::path::validate_lock_path(path) {
            Err(zk_lock::Error::InvalidPath { reason, .. }) => reason,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_node_says_why_in_zk_locks_words_with_its_length() {
        let mut skipped = NotShown::default();
        let lock = format!("/r/{}", "x".repeat(1100));
        let deep = format!("/r/{}", "c/".repeat(600).trim_end_matches('/'));
        skipped.lock(lock.clone(), rule(&lock));
        skipped.below(deep.clone(), rule(&deep));
        assert_eq!(skipped.len(), 2);
        assert_eq!(skipped.summary(), "not shown (path too long)");
        let text = skipped.lines();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "{}...{}: not walked, no lock below it can be shown: the path is 1202 bytes long; at most \
                 {MAX_PATH_LEN} are allowed",
                &deep[..77],
                &deep[deep.len() - 40..]
            )
        );
        assert!(
            lines[1].ends_with(&format!(
                ": lock not shown: the path is 1103 bytes long; at most {MAX_PATH_LEN} are allowed"
            )),
            "{}",
            lines[1]
        );
        let json = skipped.json();
        assert_eq!(json[1]["path"], lock);
        assert_eq!((&json[1]["path_length"], &json[1]["lock"]), (&1103.into(), &true.into()));
        assert_eq!((&json[0]["path"], &json[0]["lock"]), (&deep.into(), &false.into()));
        skipped.lock(format!("/r/{}", "x".repeat(5000)), "a rule".into());
        assert_eq!(skipped.json()[2]["path"].as_str().unwrap().chars().count(), JSON_PATH_MAX);
        skipped.lock("/r/short".into(), "another rule".into());
        assert_eq!(skipped.summary(), "not shown (not a valid lock path)");
    }

    /// A path the server would refuse, as a hostile peer might plant to forge a line: escaped,
    /// and the escapes count toward the limit, so the line keeps its width; `--json` keeps the
    /// exact path.
    #[test]
    fn a_path_is_escaped_then_cut_to_its_width() {
        let path = format!("/r/{}", "\x1b".repeat(60));
        let mut skipped = NotShown::default();
        skipped.lock(path.clone(), "a rule".into());
        let text = skipped.lines();
        let (shown, why) = text.trim_end().split_once(": ").unwrap();
        assert_eq!(why, "lock not shown: a rule");
        assert_eq!(shown, format!("/r/{}...{}", "\\x1b".repeat(18), "\\x1b".repeat(10)));
        assert!(shown.chars().count() <= TEXT_PATH_MAX, "{shown}");
        assert_eq!(skipped.json()[0]["path"], path);
    }
}
