//! Apache Curator (Java) next to the code under test: its classpath, and a Java program compiled
//! against it (the interop tests' peer, the benchmark's peer).

use std::env;
use std::ffi::OsString;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::java::find_jdk_tool;
use super::{Result, TestingError};

/// Where Debian's `libcurator-recipes-java` and `zookeeper` packages install their jars.
const DEBIAN_JAVA_DIR: &str = "/usr/share/java";

/// The jars Curator 5.4 needs from [`DEBIAN_JAVA_DIR`]; their manifests pull in the rest.
const CURATOR_JARS: &[&str] = &[
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "guava.jar",
    "slf4j-api.jar",
];

/// A Java program compiled against Curator, ready to run as `java -cp <classpath> <main_class>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaProgram {
    /// The `java` executable.
    pub java: PathBuf,
    /// The program's classes, then Curator's classpath.
    pub classpath: OsString,
    /// The class to run: the source file's name.
    pub main_class: String,
}

/// The classpath holding Curator 5.4, ZooKeeper 3.8 and their dependencies: a non-empty
/// `CURATOR_CLASSPATH` verbatim, else the Debian jars (with `slf4j-nop` when present, so that
/// Curator stays quiet).
///
/// # Errors
///
/// [`TestingError::CuratorNotFound`] naming the missing jars.
pub fn curator_classpath() -> Result<OsString> {
    if let Some(classpath) = env::var_os("CURATOR_CLASSPATH").filter(|classpath| !classpath.is_empty()) {
        return Ok(classpath);
    }
    let dir = Path::new(DEBIAN_JAVA_DIR);
    let missing: Vec<&str> = CURATOR_JARS.iter().copied().filter(|jar| !dir.join(jar).is_file()).collect();
    if !missing.is_empty() {
        return Err(TestingError::CuratorNotFound { missing: format!("{} in {}", missing.join(", "), dir.display()) });
    }
    let mut jars: Vec<PathBuf> = CURATOR_JARS.iter().map(|jar| dir.join(jar)).collect();
    jars.extend(Some(dir.join("slf4j-nop.jar")).filter(|jar| jar.is_file()));
    env::join_paths(jars).map_err(|err| TestingError::CuratorNotFound { missing: err.to_string() })
}

/// Compiles the Java `source` against Curator into `out_root/<hash of source and classpath>`,
/// unless it is there already.
///
/// The hash means an unchanged program is never compiled again and an edited one always is
/// (modification times are unreliable after a checkout). The classes are compiled into a staging
/// directory and renamed into place, so callers compiling at the same time never see a
/// half-written directory.
///
/// # Errors
///
/// [`TestingError::CuratorNotFound`], [`TestingError::Io`] (reading the source, running
/// `javac`: install a JDK), or [`TestingError::JavaCompile`] with what `javac` printed.
pub fn compile_curator_program(source: &Path, out_root: &Path) -> Result<JavaProgram> {
    let io = |action: String| move |source| TestingError::Io { action, source };
    let text = std::fs::read(source).map_err(io(format!("read {}", source.display())))?;
    let curator = curator_classpath()?;
    let main_class = source.file_stem().unwrap_or_default().to_string_lossy().into_owned();
    let mut hasher = DefaultHasher::new();
    (&text, &curator).hash(&mut hasher);
    let classes = out_root.join(format!("{:016x}", hasher.finish()));
    let class_file = classes.join(format!("{main_class}.class"));
    if !class_file.is_file() {
        // One staging directory per call: other processes, and other threads, may compile too.
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let staging = out_root.join(format!("staging-{}-{call}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).map_err(io(format!("create {}", staging.display())))?;
        let javac = find_jdk_tool("javac", env::var_os("PATH").as_deref(), env::var_os("JAVA_HOME").as_deref())
            .unwrap_or_else(|_| "javac".into());
        let output = std::process::Command::new(javac)
            // `-path`: the Debian manifests name optional jars that may not be installed.
            .args(["-Xlint:all,-path", "-encoding", "UTF-8", "-d"])
            .arg(&staging)
            .arg("-cp")
            .arg(&curator)
            .arg(source)
            .output()
            .map_err(io("run javac (install a JDK, see scripts/install-deps)".to_owned()))?;
        if !output.status.success() {
            let printed =
                format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
            return Err(TestingError::JavaCompile { file: source.to_owned(), output: printed });
        }
        // Losing the race to another process leaves identical classes in place.
        if std::fs::rename(&staging, &classes).is_err() {
            let _ = std::fs::remove_dir_all(&staging);
            if !class_file.is_file() {
                return Err(io(format!("move the compiled classes into {}", classes.display()))(
                    std::io::Error::other("rename failed and no other process left them there"),
                ));
            }
        }
    }
    let java = find_jdk_tool("java", env::var_os("PATH").as_deref(), env::var_os("JAVA_HOME").as_deref())?;
    let classpath = env::join_paths(
        std::iter::once(classes.into_os_string()).chain(env::split_paths(&curator).map(PathBuf::into_os_string)),
    )
    .map_err(|err| TestingError::CuratorNotFound { missing: err.to_string() })?;
    Ok(JavaProgram { java, classpath, main_class })
}
