//! kazoo (Python) next to the code under test: a python3 that can import it.

use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::{Result, TestingError};

/// A python3 that can import kazoo: `$KAZOO_PYTHON`, else Debian's `/usr/bin/python3` (where
/// `python3-kazoo` installs it, even when another python3 comes first in `PATH`), else `python3`.
/// Looked for once per process.
///
/// # Errors
///
/// [`TestingError::KazooNotFound`] when none of them can import kazoo.
pub fn python_with_kazoo() -> Result<&'static str> {
    static PYTHON: OnceLock<Option<String>> = OnceLock::new();
    let found = PYTHON.get_or_init(|| {
        let candidates = std::env::var("KAZOO_PYTHON").into_iter().chain(["/usr/bin/python3".into(), "python3".into()]);
        candidates.into_iter().find(|python| {
            Command::new(python)
                .args(["-c", "import kazoo"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        })
    });
    found.as_deref().ok_or(TestingError::KazooNotFound)
}
