//! Lock path templates: `"/product_<id>"`, `"/users/<req.user_id>/<self.shard>"`.
//!
//! A template is literal path text with `<placeholder>`s, each a name (a parameter or a binding
//! in a parameter pattern, or `self`) optionally followed by fields (`.name` or `.0`). The shape
//! of the path is checked here, at compile time, with every placeholder standing for a non-empty
//! value; the values are checked again at run time (`zk_lock::path::validate_rendered_value`).

/// A parsed template: literal text and placeholders, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    pub pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Literal(String),
    Placeholder(Placeholder),
}

/// `<root.member.member>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placeholder {
    /// The text between `<` and `>`, as written.
    pub text: String,
    /// The parameter, pattern binding or `self` it starts from.
    pub root: Name,
    /// Fields read from the root, in order.
    pub members: Vec<Member>,
}

/// An identifier; `raw` if written `r#name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Name {
    pub name: String,
    pub raw: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Member {
    Named(Name),
    Index(u32),
}

impl Template {
    pub fn placeholders(&self) -> impl Iterator<Item = &Placeholder> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Placeholder(placeholder) => Some(placeholder),
            Piece::Literal(_) => None,
        })
    }
}

/// Parses and checks `template`; the error is a complete message.
pub(crate) fn parse(template: &str) -> Result<Template, String> {
    let pieces = split(template)?;
    check_shape(template, &pieces)?;
    Ok(Template { pieces })
}

fn split(template: &str) -> Result<Vec<Piece>, String> {
    let shown = template.escape_debug().to_string();
    let mut pieces = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        let open = rest.find('<');
        let close = rest.find('>');
        match (open, close) {
            (_, Some(close)) if open.is_none_or(|open| close < open) => {
                return Err(format!("unmatched `>` in lock path `{shown}`; placeholders look like `<id>`"));
            }
            (None, _) => {
                pieces.push(Piece::Literal(rest.to_owned()));
                rest = "";
            }
            (Some(open), _) => {
                if open > 0 {
                    pieces.push(Piece::Literal(rest[..open].to_owned()));
                }
                let after = &rest[open + 1..];
                let end = after.find(['>', '<']).filter(|&i| after[i..].starts_with('>')).ok_or_else(|| {
                    format!("unclosed placeholder in lock path `{shown}`; close each `<` with `>`, like `<id>`")
                })?;
                pieces.push(Piece::Placeholder(placeholder(template, &after[..end])?));
                rest = &after[end + 1..];
            }
        }
    }
    Ok(pieces)
}

fn placeholder(template: &str, text: &str) -> Result<Placeholder, String> {
    let shown = template.escape_debug().to_string();
    if text.trim().is_empty() {
        return Err(format!(
            "empty placeholder `<{text}>` in lock path `{shown}`; name a parameter inside, like `<id>`"
        ));
    }
    let not_a_placeholder = || {
        format!(
            "`<{text}>` in lock path `{shown}` is not a placeholder; write a parameter name or a field path, \
             like `<id>`, `<req.user_id>` or `<self.shard>` (no spaces, method calls or indexing)"
        )
    };
    let mut parts = text.split('.');
    let root = parts.next().and_then(identifier).ok_or_else(not_a_placeholder)?;
    let members = parts
        .map(|part| {
            if let Some(name) = identifier(part).filter(|name| name.name != "self") {
                Ok(Member::Named(name))
            } else if !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit())
                && (part == "0" || !part.starts_with('0'))
            {
                part.parse().map(Member::Index).map_err(|_| not_a_placeholder())
            } else {
                Err(not_a_placeholder())
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(Placeholder { text: text.to_owned(), root, members })
}

/// A Rust identifier (`self` included, `_` excluded), or a raw one (`r#type`).
fn identifier(text: &str) -> Option<Name> {
    let (name, raw) = match text.strip_prefix("r#") {
        Some(name) => (name, true),
        None => (text, false),
    };
    let mut chars = name.chars();
    let first = chars.next()?;
    let valid =
        (first == '_' || first.is_alphabetic()) && chars.all(|c| c == '_' || c.is_alphanumeric()) && name != "_";
    let raw_allowed = !raw || !matches!(name, "self" | "Self" | "super" | "crate");
    (valid && raw_allowed).then(|| Name { name: name.to_owned(), raw })
}

/// The path rules of `zk_lock::path::validate_lock_path`, with each placeholder standing for a
/// non-empty value that stays inside its segment.
fn check_shape(template: &str, pieces: &[Piece]) -> Result<(), String> {
    let shown = template.escape_debug().to_string();
    let path = || format!("lock path `{shown}`");
    if template.is_empty() {
        return Err("the lock path is empty; give an absolute path, like `/locks/orders`".to_owned());
    }
    if !template.starts_with('/') {
        return Err(format!("{} must start with `/`, like `/{shown}`", path()));
    }
    if template == "/" {
        return Err("the root `/` cannot be a lock path; use a node below it, like `/locks/orders`".to_owned());
    }
    if template.ends_with('/') {
        return Err(format!("{} must not end with `/`; remove the trailing `/`", path()));
    }
    for piece in pieces {
        if let Piece::Literal(text) = piece {
            if let Some(c) = text.chars().find(|&c| is_rejected_char(c)) {
                return Err(format!(
                    "{} contains {c:?} (U+{:04X}), which ZooKeeper rejects; allowed are U+0020-U+007E, \
                     U+00A0-U+D7FF and U+F900-U+FFEF",
                    path(),
                    u32::from(c)
                ));
            }
        }
    }
    // Segments as written, with each placeholder as a marker no literal can contain.
    let shape: String = pieces
        .iter()
        .map(|piece| match piece {
            Piece::Literal(text) => text.as_str(),
            Piece::Placeholder(_) => "\u{0}",
        })
        .collect();
    let segments: Vec<&str> = shape[1..].split('/').collect();
    for segment in &segments {
        match *segment {
            "" => {
                return Err(format!("{} has an empty segment (`//`); every segment needs a name", path()));
            }
            "." | ".." => {
                return Err(format!(
                    "{} has a `{segment}` segment; ZooKeeper paths have no relative parts, so name every segment",
                    path()
                ));
            }
            _ => {}
        }
    }
    if segments[0] == "zookeeper" {
        return Err(format!(
            "{} is under `/zookeeper`, which ZooKeeper reserves for itself; choose another top-level node, like `/locks`",
            path()
        ));
    }
    Ok(())
}

/// The characters ZooKeeper's `PathUtils.validatePath` rejects (as `zk_lock`'s path rules):
/// everything above U+FFFF too, since Java holds it as a surrogate pair and refuses surrogates.
fn is_rejected_char(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}' | '\u{10000}'..
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(text: &str) -> Piece {
        Piece::Literal(text.to_owned())
    }

    fn ph(text: &str, members: &[Member]) -> Piece {
        let root = identifier(text.split('.').next().unwrap()).unwrap();
        Piece::Placeholder(Placeholder { text: text.to_owned(), root, members: members.to_vec() })
    }

    fn named(name: &str) -> Member {
        Member::Named(Name { name: name.to_owned(), raw: false })
    }

    fn err(template: &str) -> String {
        match parse(template) {
            Ok(parsed) => panic!("{template:?} accepted as {parsed:?}"),
            Err(message) => message,
        }
    }

    #[test]
    fn splits_literals_and_placeholders() {
        assert_eq!(parse("/locks/orders").unwrap().pieces, [lit("/locks/orders")]);
        assert_eq!(parse("/product_<id>").unwrap().pieces, [lit("/product_"), ph("id", &[])]);
        assert_eq!(
            parse("/users/<req.user_id>/<self.shard>-x").unwrap().pieces,
            [
                lit("/users/"),
                ph("req.user_id", &[named("user_id")]),
                lit("/"),
                ph("self.shard", &[named("shard")]),
                lit("-x")
            ]
        );
        assert_eq!(parse("/<a><b>").unwrap().pieces, [lit("/"), ph("a", &[]), ph("b", &[])]);
        assert_eq!(parse("/p/<pair.0>").unwrap().pieces, [lit("/p/"), ph("pair.0", &[Member::Index(0)])]);
        assert_eq!(parse("/<self>").unwrap().pieces, [lit("/"), ph("self", &[])]);
        assert_eq!(parse("/锁/<订单>").unwrap().pieces, [lit("/锁/"), ph("订单", &[])]);
        let names: Vec<_> = parse("/<a>/<b.c>").unwrap().placeholders().map(|p| p.root.name.clone()).collect();
        assert_eq!(names, ["a", "b"]);
        let raw = Name { name: "type".to_owned(), raw: true };
        assert_eq!(parse("/<r#type.r#type>").unwrap().pieces, [lit("/"), ph("r#type.r#type", &[Member::Named(raw)])]);
    }

    #[test]
    fn placeholders_may_fill_whole_segments_and_dots_around_them() {
        for ok in ["/<a>", "/<a>/<b>", "/x/.<a>", "/x/<a>..", "/zookeeper<a>", "/<a>/zookeeper", "/..a", "/a.."] {
            parse(ok).unwrap_or_else(|e| panic!("{ok} rejected: {e}"));
        }
    }

    #[test]
    fn rejects_bad_placeholders() {
        assert!(err("/a/<id").contains("unclosed placeholder"));
        assert!(err("/a/<id/<x>").contains("unclosed placeholder"));
        assert!(err("/a/<>").contains("empty placeholder `<>`"));
        assert!(err("/a/id>").contains("unmatched `>`"));
        assert!(err("/a/<req.id()>").contains("`<req.id()>` in lock path `/a/<req.id()>` is not a placeholder"));
        for bad in [
            "/<a b>",
            "/<1a>",
            "/<a.>",
            "/<.a>",
            "/<a..b>",
            "/<a[0]>",
            "/<_>",
            "/<a.01>",
            "/<a.self>",
            "/<r#self>",
            "/<r#>",
        ] {
            assert!(err(bad).contains("is not a placeholder"), "{bad}");
        }
    }

    #[test]
    fn rejects_bad_shapes_naming_the_template() {
        assert!(err("").contains("empty"));
        assert!(err("locks/<id>").contains("lock path `locks/<id>` must start with `/`, like `/locks/<id>`"));
        assert!(err("/").contains("root"));
        assert!(err("/a/").contains("must not end with `/`"));
        assert!(err("/<a>/").contains("must not end with `/`"));
        assert!(err("/a//<b>").contains("empty segment"));
        assert!(err("/a/./<b>").contains("a `.` segment"));
        assert!(err("/<a>/..").contains("a `..` segment"));
        assert!(err("/zookeeper").contains("reserves"));
        assert!(err("/zookeeper/<id>").contains("under `/zookeeper`"));
        assert!(err("/a\u{7}b").contains("U+0007"));
        assert!(err("/a/\u{e000}").contains("U+E000"));
    }

    #[test]
    fn rejects_characters_at_the_edges_of_zookeepers_ranges() {
        for ok in ["/\u{20}", "/\u{7e}", "/\u{a0}", "/\u{d7ff}", "/\u{f900}", "/\u{ffef}<a>"] {
            parse(ok).unwrap_or_else(|e| panic!("{ok:?} rejected: {e}"));
        }
        for c in ['\u{1f}', '\u{7f}', '\u{9f}', '\u{f8ff}', '\u{fff0}', '\u{ffff}', '\u{10000}', '😀', '\u{10ffff}'] {
            let message = err(&format!("/lock_{c}/<a>"));
            assert!(message.contains(&format!("U+{:04X}", u32::from(c))), "{message}");
            assert!(message.contains("allowed are U+0020-U+007E, U+00A0-U+D7FF and U+F900-U+FFEF"), "{message}");
        }
    }
}
