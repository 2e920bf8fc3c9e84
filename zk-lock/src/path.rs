//! Lock path rules: what ZooKeeper accepts, minus what would make a lock ambiguous.

use std::sync::Arc;

use crate::error::{Error, Result};

/// The longest lock path accepted, in bytes. ZooKeeper itself only limits whole packets
/// (`jute.maxbuffer`); lock nodes add about 50 bytes to the path, and a bound keeps a
/// runaway rendered value from turning into a megabyte-long request.
pub const MAX_PATH_LEN: usize = 1024;

/// Checks that `path` can be used as a lock path.
///
/// # Errors
///
/// [`Error::InvalidPath`] naming the path and the rule it breaks: it must be absolute, must not
/// be `/` itself, must not end with `/`, contain an empty, `.` or `..` segment, lie under
/// `/zookeeper`, contain characters ZooKeeper rejects (controls, private use, U+FFF0-U+FFFF, and
/// anything above U+FFFF, like emoji), or be longer than [`MAX_PATH_LEN`] bytes.
pub fn validate_lock_path(path: &str) -> Result<()> {
    let fail = |reason: &str| Err(Error::invalid_path(path, reason));
    if path.is_empty() {
        return fail("the path is empty; lock paths are absolute, like `/locks/orders`");
    }
    if !path.starts_with('/') {
        return fail("lock paths must start with `/`, like `/locks/orders`");
    }
    if path == "/" {
        return fail("the root `/` cannot be a lock path; use a node below it, like `/locks/orders`");
    }
    if path.len() > MAX_PATH_LEN {
        return fail(&format!("the path is {} bytes long; at most {MAX_PATH_LEN} are allowed", path.len()));
    }
    if path.ends_with('/') {
        return fail("lock paths must not end with `/`");
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return fail("`/zookeeper` is reserved by ZooKeeper; choose another top-level node");
    }
    for segment in path[1..].split('/') {
        if let Err(reason) = check_segment(segment) {
            return fail(&reason);
        }
    }
    Ok(())
}

/// Checks a value rendered into one segment of a path template (`/product_<id>`), so that a
/// value can never change the shape of the path and select a different lock.
///
/// # Errors
///
/// [`Error::InvalidPath`] naming the rendered `path` when the value is empty, `.` or `..`,
/// contains `/`, or contains characters ZooKeeper rejects.
pub fn validate_rendered_value(path: &str, placeholder: &str, value: &str) -> Result<()> {
    let rule = if value.is_empty() {
        Some(empty_value(path, placeholder))
    } else if value.contains('/') {
        Some(format!("the value of `<{placeholder}>` is `{value}`, which contains `/`; rendered values must stay inside one path segment"))
    } else {
        check_segment(value).err().map(|reason| format!("the value of `<{placeholder}>` breaks a path rule: {reason}"))
    };
    match rule {
        Some(reason) => Err(Error::invalid_path(path, reason)),
        None => Ok(()),
    }
}

/// Why an empty value of `<placeholder>` is refused in the rendered `path`. Templates never
/// hold an empty segment themselves (the attributes refuse `//` and a trailing `/` at compile
/// time), so one in `path` is left by an empty value: the empty segment is named only then, and a
/// value inside a segment (`sku_<id>`) is named as the placeholder that rendered empty.
fn empty_value(path: &str, placeholder: &str) -> String {
    let left = if path.contains("//") {
        ", which leaves an empty segment (`//`)"
    } else if path.ends_with('/') {
        ", which leaves the path ending in `/`"
    } else {
        ""
    };
    format!(
        "`<{placeholder}>` rendered empty (its `Display` wrote nothing){left}; a rendered value needs at least one \
         character, without `/`, not `.` or `..`; {ALLOWED_CHARS}"
    )
}

fn check_segment(segment: &str) -> std::result::Result<(), String> {
    match segment {
        "" => Err("empty segment (`//` or an empty value); every segment needs a name".into()),
        "." | ".." => Err(format!("`{segment}` segments are not allowed; ZooKeeper paths have no relative parts")),
        _ => match segment.chars().find_map(|c| rejected_char(c).map(|kind| (c, kind))) {
            Some((c, kind)) => Err(format!(
                "character {c:?} (U+{:04X}) is {kind}, which ZooKeeper rejects; {ALLOWED_CHARS}",
                u32::from(c)
            )),
            None => Ok(()),
        },
    }
}

/// What [`rejected_char`] leaves, for the error message.
const ALLOWED_CHARS: &str = "allowed are U+0020-U+007E, U+00A0-U+D7FF and U+F900-U+FFEF";

/// What kind of character `c` is when ZooKeeper rejects it in a path, or `None`.
///
/// ZooKeeper's `PathUtils.validatePath` refuses the UTF-16 units U+0000-U+001F, U+007F-U+009F,
/// U+D800-U+F8FF and U+FFF0-U+FFFF (the server answers "bad arguments"). A `char` is never a
/// surrogate, but every character above U+FFFF reaches Java as a surrogate pair, so the server
/// refuses all of them.
fn rejected_char(c: char) -> Option<&'static str> {
    match c {
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => Some("a control character"),
        '\u{e000}'..='\u{f8ff}' => Some("a private-use character"),
        '\u{fff0}'..='\u{ffff}' => Some("in the Specials block (U+FFF0-U+FFFF)"),
        '\u{10000}'.. => Some("outside the Basic Multilingual Plane (Java holds it as a surrogate pair)"),
        _ => None,
    }
}

/// The parent of the absolute `path`, or `None` when `path` is top-level (its parent is the
/// root, or the client's chroot).
pub(crate) fn parent_path(path: &str) -> Option<&str> {
    path.rfind('/').filter(|&end| end > 0).map(|end| &path[..end])
}

/// A child node's path in one shared string, split where the child's part starts:
/// `parent/name`, or `parent/_c_<uuid>-` (the protected prefix) before the node's name is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildPath {
    path: Arc<str>,
    /// Where the child's part starts in `path`.
    child_at: usize,
}

impl ChildPath {
    pub(crate) fn new(parent: &str, child: &str) -> Self {
        Self { path: format!("{parent}/{child}").into(), child_at: parent.len() + 1 }
    }

    /// The node at `path` (`parent/child`), sharing its string.
    pub(crate) fn of(path: &Arc<str>) -> Self {
        let slash = path.rfind('/').expect("a node path has a parent");
        Self { path: path.clone(), child_at: slash + 1 }
    }

    pub(crate) fn as_arc(&self) -> &Arc<str> {
        &self.path
    }

    pub(crate) fn parent(&self) -> &str {
        &self.path[..self.child_at - 1]
    }

    pub(crate) fn child(&self) -> &str {
        &self.path[self.child_at..]
    }

    /// The path of `child` under the same parent.
    pub(crate) fn sibling(&self, child: &str) -> Self {
        Self::new(self.parent(), child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(path: &str) -> String {
        match validate_lock_path(path) {
            Err(Error::InvalidPath { path: p, reason }) => {
                assert_eq!(p, path, "the error names the path");
                reason
            }
            other => panic!("expected InvalidPath for {path:?}, got {other:?}"),
        }
    }

    #[test]
    fn a_parent_path_is_none_at_the_top() {
        assert_eq!(parent_path("/a/b/c"), Some("/a/b"));
        assert_eq!(parent_path("/a/b"), Some("/a"));
        assert_eq!(parent_path("/a"), None);
    }

    #[test]
    fn accepts_ordinary_paths() {
        for path in ["/a", "/locks/orders", "/product_42", "/a/b-c/d.e/_f", "/锁/订单", "/..a", "/a.."] {
            validate_lock_path(path).unwrap_or_else(|e| panic!("{path} rejected: {e}"));
        }
    }

    #[test]
    fn rejects_each_rule_with_its_reason() {
        assert!(reason("").contains("empty"));
        assert!(reason("locks/a").contains("must start with `/`"));
        assert!(reason("/").contains("root"));
        assert!(reason("/a/").contains("must not end with `/`"));
        assert!(reason("/a//b").contains("empty segment"));
        assert!(reason("/a/./b").contains("`.`"));
        assert!(reason("/a/..").contains("`..`"));
        assert!(reason("/zookeeper").contains("reserved"));
        assert!(reason("/zookeeper/quota").contains("reserved"));
        assert!(reason("/a\u{0}b").contains("U+0000"));
        assert!(reason("/a\u{1b}b").contains("U+001B"));
        assert!(reason("/a\u{e000}").contains("U+E000"));
        assert!(reason(&format!("/{}", "x".repeat(MAX_PATH_LEN))).contains("at most"));
    }

    /// The last allowed and first refused character at each edge of ZooKeeper's ranges.
    #[test]
    fn characters_match_zookeepers_ranges_at_every_edge() {
        let allowed = ['\u{20}', '\u{7e}', '\u{a0}', '\u{d7ff}', '\u{f900}', '\u{ffef}'];
        let refused = [
            ('\u{0}', "control"),
            ('\u{1f}', "control"),
            ('\u{7f}', "control"),
            ('\u{9f}', "control"),
            ('\u{e000}', "private-use"),
            ('\u{f8ff}', "private-use"),
            ('\u{fff0}', "Specials"),
            ('\u{ffff}', "Specials"),
            ('\u{10000}', "Basic Multilingual Plane"),
            ('😀', "Basic Multilingual Plane"),
            ('\u{10ffff}', "Basic Multilingual Plane"),
        ];
        for c in allowed {
            validate_lock_path(&format!("/lock_{c}"))
                .unwrap_or_else(|e| panic!("U+{:04X} rejected: {e}", u32::from(c)));
            validate_rendered_value(&format!("/lock_{c}"), "id", &c.to_string()).unwrap();
        }
        for (c, kind) in refused {
            let code = format!("U+{:04X}", u32::from(c));
            let why = reason(&format!("/lock_{c}"));
            assert!(why.contains(&code) && why.contains(kind), "{code}: {why}");
            assert!(why.contains("allowed are U+0020-U+007E, U+00A0-U+D7FF and U+F900-U+FFEF"), "{why}");
            let err = validate_rendered_value(&format!("/lock_{c}"), "id", &c.to_string()).unwrap_err();
            assert!(matches!(&err, Error::InvalidPath { reason, .. } if reason.contains(&code)), "{err}");
        }
    }

    #[test]
    fn zookeeper_prefix_is_only_reserved_as_a_whole_segment() {
        validate_lock_path("/zookeeperish").unwrap();
    }

    #[test]
    fn rendered_values_cannot_change_the_path_shape() {
        validate_rendered_value("/p_42", "id", "42").unwrap();
        for bad in ["", ".", "..", "a/b", "/", "a\nb", "\u{0}"] {
            let err = validate_rendered_value("/p", "id", bad).unwrap_err();
            assert!(matches!(&err, Error::InvalidPath { reason, .. } if reason.contains("`<id>`")), "{bad:?}: {err}");
        }
    }

    #[test]
    fn an_empty_value_names_an_empty_segment_only_where_it_left_one() {
        let reason = |path: &str| match validate_rendered_value(path, "id", "") {
            Err(Error::InvalidPath { reason, .. }) => reason,
            other => panic!("{path}: {other:?}"),
        };
        for path in ["/shop/sku_", "/shop//x", "/shop/"] {
            let why = reason(path);
            assert!(why.starts_with("`<id>` rendered empty") && why.contains("at least one character"), "{why}");
        }
        assert!(!reason("/shop/sku_").contains("segment"), "{}", reason("/shop/sku_"));
        assert!(reason("/shop//x").contains("empty segment (`//`)"));
        assert!(reason("/shop/").contains("ending in `/`"));
    }
}
