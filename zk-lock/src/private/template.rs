//! Rendering an annotated function's lock path from its template (`/product_<id>`): each value
//! with `Display`, and checked so that it cannot change the shape of the path.

use std::fmt::{self, Display, Write as _};
use std::ops::Range;

use crate::error::{Error, Result};
use crate::path::validate_rendered_value;

/// A value rendered into a lock path template: anything with [`Display`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be rendered into a lock path: it does not implement `Display`",
    label = "a placeholder of this path is rendered with `Display`",
    note = "implement `Display` for `{Self}`, or name a field that has it, like `<req.user_id>`"
)]
pub trait PathValue {
    /// Appends the value to `out`.
    ///
    /// # Errors
    ///
    /// When the `Display` implementation fails.
    fn render(&self, out: &mut String) -> fmt::Result;
}

impl<T: Display + ?Sized> PathValue for T {
    fn render(&self, out: &mut String) -> fmt::Result {
        write!(out, "{self}")
    }
}

/// A lock path being rendered from a template such as `/product_<id>`.
#[derive(Debug, Default)]
pub struct Template {
    path: String,
    /// Each placeholder with the bytes of `path` its value took.
    values: Vec<(&'static str, Range<usize>)>,
    /// A `Display` implementation failed: the placeholder.
    failed: Option<&'static str>,
}

impl Template {
    /// An empty path.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends literal text of the template.
    #[must_use]
    pub fn lit(mut self, text: &'static str) -> Self {
        self.path.push_str(text);
        self
    }

    /// Appends the value of the placeholder `<name>`.
    #[must_use]
    pub fn value<T: PathValue + ?Sized>(mut self, name: &'static str, value: &T) -> Self {
        let start = self.path.len();
        if value.render(&mut self.path).is_err() {
            self.failed.get_or_insert(name);
        }
        self.values.push((name, start..self.path.len()));
        self
    }

    /// The rendered path.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] if a value would change the shape of the path (empty, `.`, `..`,
    /// containing `/` or characters ZooKeeper rejects), or its `Display` failed. The whole path is
    /// checked again when the lock is taken.
    pub fn finish(self) -> Result<String> {
        if let Some(name) = self.failed {
            return Err(Error::invalid_path(
                &self.path,
                format!("the `Display` implementation of the value of `<{name}>` returned an error"),
            ));
        }
        for (name, range) in &self.values {
            validate_rendered_value(&self.path, name, &self.path[range.clone()])?;
        }
        Ok(self.path)
    }
}

/// The rendered paths of `#[zk_multi_lock]`, or the first error.
///
/// # Errors
///
/// The first error of the templates.
pub fn paths<const N: usize>(paths: [Result<String>; N]) -> Result<Vec<String>> {
    paths.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_values_with_display() {
        let path = Template::new().lit("/product_").value("id", &42).lit("/").value("name", "äpfel").finish();
        assert_eq!(path.unwrap(), "/product_42/äpfel");
    }

    #[test]
    fn values_cannot_change_the_shape_of_the_path() {
        for bad in ["", ".", "..", "a/b", "x\ny"] {
            match Template::new().lit("/p/").value("id", bad).finish() {
                Err(Error::InvalidPath { path, reason }) => {
                    assert_eq!(path, format!("/p/{bad}"));
                    assert!(reason.contains("`<id>`"), "{reason}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_failing_display_is_an_invalid_path() {
        struct Broken;
        impl Display for Broken {
            fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
                Err(fmt::Error)
            }
        }
        let error = Template::new().lit("/p/").value("b", &Broken).finish().unwrap_err();
        assert!(matches!(&error, Error::InvalidPath { reason, .. } if reason.contains("`<b>`")), "{error}");
    }

    #[test]
    fn several_paths_keep_their_order_or_fail_with_the_first_error() {
        let ok = paths([Template::new().lit("/b").finish(), Template::new().lit("/a").finish()]);
        assert_eq!(ok.unwrap(), ["/b", "/a"]);
        let bad = paths([Template::new().lit("/a/").value("x", "").finish(), Template::new().lit("/b").finish()]);
        assert!(matches!(bad, Err(Error::InvalidPath { .. })));
    }
}
