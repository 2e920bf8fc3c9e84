//! Finding `java` and the ZooKeeper server classpath.

use std::env;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::{Result, TestingError};

/// Where Debian's `zookeeper` and `libslf4j-java` packages install their jars.
const DEBIAN_JAVA_DIR: &str = "/usr/share/java";

/// The `java` executable and the classpath the kit runs ZooKeeper with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaSetup {
    /// The `java` executable.
    pub java: PathBuf,
    /// The classpath holding the ZooKeeper server and its dependencies.
    pub classpath: OsString,
}

impl JavaSetup {
    /// Finds both from the environment: `PATH`, `JAVA_HOME` and `ZOOKEEPER_CLASSPATH`.
    ///
    /// # Errors
    ///
    /// [`TestingError::JavaNotFound`] or [`TestingError::ZookeeperNotFound`], naming the
    /// package to install.
    pub fn detect() -> Result<JavaSetup> {
        let java = find_java(env::var_os("PATH").as_deref(), env::var_os("JAVA_HOME").as_deref())?;
        let classpath = zookeeper_classpath(env::var_os("ZOOKEEPER_CLASSPATH").as_deref(), Path::new(DEBIAN_JAVA_DIR))?;
        Ok(JavaSetup { java, classpath })
    }
}

/// Finds the `java` executable in `path` (a `PATH`-style list), else in `java_home`/bin.
///
/// Takes the values instead of reading the environment so that tests can exercise it without
/// mutating process-global state; [`JavaSetup::detect`] passes the real variables.
///
/// # Errors
///
/// [`TestingError::JavaNotFound`] when neither holds an executable `java`.
pub fn find_java(path: Option<&OsStr>, java_home: Option<&OsStr>) -> Result<PathBuf> {
    find_jdk_tool("java", path, java_home)
}

/// Finds the JDK tool `name` (`java`, `javac`) as [`find_java`] finds `java`.
pub(super) fn find_jdk_tool(name: &str, path: Option<&OsStr>, java_home: Option<&OsStr>) -> Result<PathBuf> {
    let on_path = path.into_iter().flat_map(env::split_paths).map(|dir| dir.join(name));
    let in_home = java_home.filter(|home| !home.is_empty()).map(|home| Path::new(home).join("bin").join(name));
    on_path.chain(in_home).find(|candidate| is_executable(candidate)).ok_or(TestingError::JavaNotFound)
}

/// Resolves the ZooKeeper server classpath.
///
/// A non-empty `zookeeper_classpath` (the value of `ZOOKEEPER_CLASSPATH`) is used verbatim, after
/// checking that its entries exist (an entry `dir/*` needs `dir`). Otherwise the classpath is
/// `java_dir/zookeeper.jar`, whose manifest pulls in its dependencies, plus
/// `java_dir/slf4j-simple.jar` when present, so that server logs are not silently dropped, and
/// the Netty jars that ZooKeeper's Netty connection factory (needed for TLS) loads but Debian's
/// manifest leaves out, when present.
///
/// # Errors
///
/// [`TestingError::ZookeeperNotFound`] listing the entries that do not exist.
pub fn zookeeper_classpath(zookeeper_classpath: Option<&OsStr>, java_dir: &Path) -> Result<OsString> {
    if let Some(classpath) = zookeeper_classpath.filter(|classpath| !classpath.is_empty()) {
        let missing: Vec<PathBuf> = env::split_paths(classpath)
            .filter(|entry| !entry.as_os_str().is_empty())
            .filter(|entry| !classpath_entry_exists(entry))
            .collect();
        if !missing.is_empty() {
            return Err(missing_jars(&missing, "ZOOKEEPER_CLASSPATH"));
        }
        return Ok(classpath.to_owned());
    }
    let zookeeper = java_dir.join("zookeeper.jar");
    if !zookeeper.is_file() {
        return Err(missing_jars(&[zookeeper], "the default location"));
    }
    let mut entries = vec![zookeeper];
    let optional = ["slf4j-simple.jar", "netty-codec.jar", "netty-resolver.jar"];
    entries.extend(optional.iter().map(|jar| java_dir.join(jar)).filter(|jar| jar.is_file()));
    env::join_paths(entries).map_err(|err| TestingError::ZookeeperNotFound {
        missing: format!("{} cannot be put in a classpath: {err}", java_dir.display()),
    })
}

fn missing_jars(missing: &[PathBuf], source: &str) -> TestingError {
    let list: Vec<String> = missing.iter().map(|path| path.display().to_string()).collect();
    TestingError::ZookeeperNotFound { missing: format!("{} does not exist, from {source}", list.join(", ")) }
}

/// Java expands a trailing `*` to the jars of a directory; anything else must exist as is.
fn classpath_entry_exists(entry: &Path) -> bool {
    match entry.file_name() {
        Some(name) if name == "*" => entry.parent().is_some_and(Path::is_dir),
        _ => entry.exists(),
    }
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}
