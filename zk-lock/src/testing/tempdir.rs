//! Unique scratch directories under the system temporary directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Duration;

use super::{Result, TestingError};

const PREFIX: &str = "zk-lock-testing-";

static SWEEP: Once = Once::new();

/// A stale directory must be at least this old: a pid that looks dead may belong to a live
/// process in another pid namespace sharing the temporary directory (a container).
const STALE_AGE: Duration = Duration::from_secs(60 * 60);

/// Creates a fresh directory `<temp>/zk-lock-testing-<kind>-<pid>-<random>`, which the caller
/// deletes (with [`remove`]; the watchdog of a server deletes it if the test process dies).
///
/// The pid in the name lets a later process sweep it if the watchdog could not.
pub(crate) fn create(kind: &str) -> Result<PathBuf> {
    let base = std::env::temp_dir();
    SWEEP.call_once(|| sweep_stale(&base));
    tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{kind}-{}-", std::process::id()))
        .tempdir_in(&base)
        .map(tempfile::TempDir::keep)
        .map_err(|err| {
            TestingError::io(
                format!("create a directory in {} (set TMPDIR to a writable directory)", base.display()),
                err,
            )
        })
}

/// Deletes a directory tree, ignoring errors: it is only called on cleanup paths.
pub(crate) fn remove(dir: &Path) {
    let _ = fs::remove_dir_all(dir);
}

/// Deletes directories left by test processes that are gone, once per process.
///
/// The watchdog of each server deletes its directory when the test process dies, but not when
/// the watchdog was killed too (it has a process group of its own, out of reach of a kill of the
/// test's group, but not of a wider one), nor when the JVM had died first. Liveness is
/// read from `/proc`; without it nothing is deleted.
fn sweep_stale(base: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(owner_pid) else {
            continue;
        };
        let old = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age >= STALE_AGE);
        if old && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            remove(&entry.path());
        }
    }
}

/// The pid in a name made by [`create`]: `zk-lock-testing-<kind>-<pid>-<random>`.
fn owner_pid(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(PREFIX)?.split('-');
    let (_kind, pid) = (parts.next()?, parts.next()?);
    pid.parse().ok()
}
