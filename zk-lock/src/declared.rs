//! The lock templates of every annotated function in the program, collected at link time
//! ([`declared()`]), and the conflicts between them that no single function can see
//! ([`check_declared()`]).
//!
//! Each annotated function has one static list of its declarations; the link-time registry
//! points at it, and the function's acquisition carries the same declaration as the lock's site,
//! which lock-order checking ([`lock_order`](crate::lock_order)) reports.

// A foundation: it uses `layout` only.

use std::fmt;

use crate::layout::Recipe;

/// One lock template used by an annotated function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Declaration {
    /// The path template, as written: `/product_<id>`.
    pub template: &'static str,
    /// The recipe.
    pub recipe: Recipe,
    /// The annotated function's name (without its module or type).
    pub function: &'static str,
    /// The source file of the attribute.
    pub file: &'static str,
    /// The line of the attribute.
    pub line: u32,
}

impl Declaration {
    #[doc(hidden)]
    pub const fn new(
        template: &'static str,
        recipe: Recipe,
        function: &'static str,
        file: &'static str,
        line: u32,
    ) -> Self {
        Self { template, recipe, function, file, line }
    }
}

impl fmt::Display for Declaration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}` in `{}` at {}:{}", self.recipe, self.template, self.function, self.file, self.line)
    }
}

/// The declarations of one annotated function (one per path), as its expansion registers them.
#[doc(hidden)]
pub struct Declared(pub &'static [Declaration]);

inventory::collect!(Declared);

/// Every lock template of the annotated functions linked into this program, sorted by template.
pub fn declared() -> Vec<Declaration> {
    let mut all: Vec<Declaration> =
        inventory::iter::<Declared>.into_iter().flat_map(|declared| declared.0).copied().collect();
    all.sort_by(|a, b| (a.template, a.file, a.line).cmp(&(b.template, b.file, b.line)));
    all.dedup();
    all
}

/// A problem between two declarations.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conflict {
    /// The same template is used by two different recipes, whose nodes would mix in one queue.
    RecipeMismatch(Declaration, Declaration),
    /// One template lies under another: the outer lock's queue would contain the inner lock's
    /// parent node (Curator Tech Note 7).
    Nested {
        /// The template that is a prefix of the other.
        outer: Declaration,
        /// The template below it.
        inner: Declaration,
    },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RecipeMismatch(a, b) => {
                // A mutex and a leader election share a family (one queue): named by recipe.
                let same_family = a.recipe.family() == b.recipe.family();
                let named = |recipe: Recipe| if same_family { recipe.as_str() } else { recipe.family() };
                write!(
                    f,
                    "`{}` is used as a {} and as a {} ({a}; {b}); use one recipe per path",
                    a.template,
                    named(a.recipe),
                    named(b.recipe)
                )
            }
            Self::Nested { outer, inner } => write!(
                f,
                "`{}` may lie under `{}` ({inner}; {outer}); lock paths must not be nested, give them separate parents",
                inner.template, outer.template
            ),
        }
    }
}

/// Checks the templates of [`declared`] against each other: the same template with different
/// recipes, and a template that can render to a path under another's.
///
/// # Errors
///
/// Every conflict found.
pub fn check_declared() -> Result<(), Vec<Conflict>> {
    let conflicts = conflicts(&declared());
    if conflicts.is_empty() {
        Ok(())
    } else {
        Err(conflicts)
    }
}

fn conflicts(all: &[Declaration]) -> Vec<Conflict> {
    let mut found = Vec::new();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            if a.template == b.template {
                // One template, one recipe; but the two sides of a read/write lock.
                let sides_of_one_rwlock =
                    a.recipe.family() == Recipe::Read.family() && b.recipe.family() == Recipe::Read.family();
                if a.recipe != b.recipe && !sides_of_one_rwlock {
                    found.push(Conflict::RecipeMismatch(*a, *b));
                }
            } else if may_contain(a.template, b.template) {
                found.push(Conflict::Nested { outer: *a, inner: *b });
            } else if may_contain(b.template, a.template) {
                found.push(Conflict::Nested { outer: *b, inner: *a });
            }
        }
    }
    found
}

/// Whether some rendering of `outer` is a proper ancestor of some rendering of `inner`. A
/// placeholder renders to exactly one segment's worth of text, so segments are compared one by
/// one, and a segment with a placeholder may match anything.
fn may_contain(outer: &str, inner: &str) -> bool {
    let outer: Vec<&str> = outer.split('/').collect();
    let inner: Vec<&str> = inner.split('/').collect();
    outer.len() < inner.len() && outer.iter().zip(&inner).all(|(a, b)| a == b || a.contains('<') || b.contains('<'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(template: &'static str, recipe: Recipe) -> Declaration {
        Declaration::new(template, recipe, "f", "src/lib.rs", 1)
    }

    #[test]
    fn the_same_template_needs_the_same_recipe() {
        let ok = [at("/a", Recipe::Read), at("/a", Recipe::Write)];
        assert!(conflicts(&ok).is_empty(), "both sides of one read/write lock");
        let bad = [at("/a", Recipe::Mutex), at("/a", Recipe::Write)];
        assert!(matches!(&conflicts(&bad)[..], [Conflict::RecipeMismatch(..)]));
        assert!(conflicts(&bad)[0].to_string().contains("use one recipe per path"));
        // One queue, but a call of one inside the other would wait for itself.
        let mixed = conflicts(&[at("/jobs", Recipe::Mutex), at("/jobs", Recipe::Leader)]);
        assert!(mixed[0].to_string().contains("used as a mutex and as a leader"), "{}", mixed[0]);
    }

    #[test]
    fn nested_templates_are_reported_with_placeholders_as_wildcards() {
        assert!(conflicts(&[at("/orders", Recipe::Mutex), at("/orders/<id>", Recipe::Mutex)]).len() == 1);
        assert!(conflicts(&[at("/orders/<id>", Recipe::Mutex), at("/orders/42/items", Recipe::Mutex)]).len() == 1);
        assert!(conflicts(&[at("/orders/<id>", Recipe::Mutex), at("/accounts/<id>", Recipe::Mutex)]).is_empty());
        assert!(
            conflicts(&[at("/orders_<id>", Recipe::Mutex), at("/orders", Recipe::Mutex)]).is_empty(),
            "a prefix of a name is not a parent"
        );
        match &conflicts(&[at("/a/<x>/b", Recipe::Mutex), at("/a", Recipe::Semaphore)])[..] {
            [Conflict::Nested { outer, inner }] => assert_eq!((outer.template, inner.template), ("/a", "/a/<x>/b")),
            other => panic!("{other:?}"),
        }
    }
}
