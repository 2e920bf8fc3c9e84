//! The suite's own reports from worker processes, besides their history records: failed
//! acquisitions, events, counters, audits and sessions, one line each on the worker's stdout
//! (`@faults <tag> k=v ...`). Grants and fenced writes travel as `zk_lock::testing::Record`
//! lines.

use std::collections::BTreeMap;
use std::fmt;

/// The prefix of every line of ours; the rest of a worker's stdout is libtest's chatter and the
/// history's records.
pub const LINE_PREFIX: &str = "@faults ";

/// One reported line: its tag and fields. A `msg=` field takes the rest of the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub tag: String,
    pub fields: BTreeMap<String, String>,
}

impl Line {
    pub fn new(tag: &str) -> Self {
        Self { tag: tag.to_owned(), fields: BTreeMap::new() }
    }

    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Self {
        self.fields.insert(key.to_owned(), value.to_string());
        self
    }

    /// Parses a line of a worker's stdout; `None` for lines that are not ours. Our report may
    /// follow libtest's `test fault_worker ... ` on the worker's first line.
    pub fn parse(text: &str) -> Option<Line> {
        let rest = &text[text.find(LINE_PREFIX)? + LINE_PREFIX.len()..];
        let (tag, mut rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let mut line = Line::new(tag);
        while !rest.is_empty() {
            if let Some(msg) = rest.strip_prefix("msg=") {
                line.fields.insert("msg".to_owned(), msg.to_owned());
                break;
            }
            let (field, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let (key, value) = field.split_once('=')?;
            line.fields.insert(key.to_owned(), value.to_owned());
            rest = tail;
        }
        Some(line)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }
}

impl fmt::Display for Line {
    /// The wire form, `@faults <tag> k=v ... [msg=...]`; values must not contain spaces, except
    /// `msg`, which is written last.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{LINE_PREFIX}{}", self.tag)?;
        for (key, value) in self.fields.iter().filter(|(key, _)| *key != "msg") {
            write!(f, " {key}={value}")?;
        }
        if let Some(msg) = self.fields.get("msg") {
            write!(f, " msg={}", msg.replace('\n', " | "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let fail = Line::new("fail").with("proc", "w2").with("msg", "timed out after 1s waiting for lock `/x`");
        let parsed = Line::parse(&fail.to_string()).unwrap();
        assert_eq!(parsed, fail);
        assert_eq!(Line::parse("test fault_worker ... ok"), None);
        let first = Line::parse(&format!("test fault_worker ... {fail}")).unwrap();
        assert_eq!(first.get("proc"), Some("w2"));
    }
}
