//! Digest credentials for every command, from the environment or from a file: never from the
//! command line, which `ps` shows to every user of the machine.

use std::ffi::OsString;
use std::fmt;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::error::CliError;

/// The environment variable that holds `user:password`.
pub const DIGEST_ENV: &str = "ZK_LOCK_DIGEST";

/// The most bytes read from `--auth-file`: one line of credentials is far shorter.
const MAX_FILE_BYTES: u64 = 4096;

/// Where credentials came from, to say so when the server refuses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `$ZK_LOCK_DIGEST`.
    Environment,
    /// `--auth-file`.
    File,
}

/// `user:password` for ZooKeeper's `digest` scheme, as `zkCli.sh addauth digest` takes it. Its
/// `Debug` shows the user, never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Digest {
    credentials: String,
    /// Where the user ends: at the first `:`.
    user_len: usize,
    source: Source,
}

impl Digest {
    /// Parses `user:password` (the user is what precedes the first `:`; it may not be empty).
    /// The error never quotes `text`.
    fn parse(text: String, source: Source, origin: &str) -> Result<Self, CliError> {
        let Some(user_len) = text.find(':').filter(|&at| at > 0) else {
            return Err(CliError::usage(format!(
                "{origin}: expected digest credentials `user:password` (the value is not shown)"
            )));
        };
        if text.contains(['\n', '\r']) {
            return Err(CliError::usage(format!(
                "{origin}: expected one line, `user:password` (the value is not shown)"
            )));
        }
        Ok(Self { credentials: text, user_len, source })
    }

    /// The user name: what the digest ACL names (`digest:<user>:<hash>`), not a secret.
    pub fn user(&self) -> &str {
        &self.credentials[..self.user_len]
    }

    /// `user:password`, for the server.
    pub fn as_bytes(&self) -> &[u8] {
        self.credentials.as_bytes()
    }

    /// `digest user `ops` (from $ZK_LOCK_DIGEST)`, for messages.
    pub fn describe(&self) -> String {
        let from = match self.source {
            Source::Environment => format!("${DIGEST_ENV}"),
            Source::File => "--auth-file".to_owned(),
        };
        format!("digest user `{}` (from {from})", self.user())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Digest")
            .field("user", &self.user())
            .field("password", &"<redacted>")
            .field("source", &self.source)
            .finish()
    }
}

/// The credentials to connect with: from `auth_file` if given, else from `env` (the value of
/// `$ZK_LOCK_DIGEST`) unless it is empty, else none.
///
/// # Errors
///
/// A usage error (exit code 2) naming the file or the variable, never the credentials: the file
/// cannot be read, can be read or written by every user of the machine, or does not hold one line
/// `user:password`; the variable is not `user:password`.
pub fn load(auth_file: Option<&Path>, env: Option<OsString>) -> Result<Option<Digest>, CliError> {
    if let Some(path) = auth_file {
        return read_file(path).map(Some);
    }
    let Some(value) = env.filter(|value| !value.is_empty()) else { return Ok(None) };
    let origin = format!("${DIGEST_ENV}");
    let text = value.into_string().map_err(|_| CliError::usage(format!("{origin}: not UTF-8")))?;
    Digest::parse(text, Source::Environment, &origin).map(Some)
}

/// Reads `user:password` from the file at `path`: one line, its line feed optional. Refuses a
/// file that other users may read or write (its mode has any of 0o007), as ssh refuses such a
/// private key; the group may read it.
fn read_file(path: &Path) -> Result<Digest, CliError> {
    let origin = format!("--auth-file {}", path.display());
    let cannot = |e: std::io::Error| CliError::usage(format!("cannot read `{origin}`: {e}"));
    let file = std::fs::File::open(path).map_err(cannot)?;
    // The mode of the file opened, not of whatever the path names a moment later.
    let mode = file.metadata().map_err(cannot)?.permissions().mode();
    if mode & 0o007 != 0 {
        return Err(CliError::usage(format!(
            "`{origin}`: other users of this machine may read or write it (mode {:o}); make it private with \
             `chmod o-rwx {}` (or 600)",
            mode & 0o777,
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(CliError::usage(format!("`{origin}`: longer than {MAX_FILE_BYTES} bytes; expected one line")));
    }
    let mut text = String::from_utf8(bytes).map_err(|_| CliError::usage(format!("`{origin}`: not UTF-8")))?;
    let line_end = text.strip_suffix("\r\n").or_else(|| text.strip_suffix('\n')).map(str::len);
    if let Some(len) = line_end {
        text.truncate(len);
    }
    Digest::parse(text, Source::File, &format!("`{origin}`"))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const SECRET: &str = "s3cret:with:colons";

    fn private_file(name: &str, content: &str, mode: u32) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("zk-lock-cli-{}-{name}", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(content.as_bytes()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn the_environment_gives_user_and_password_and_debug_hides_the_password() {
        let digest = load(None, Some(format!("ops:{SECRET}").into())).unwrap().unwrap();
        assert_eq!((digest.user(), digest.as_bytes()), ("ops", format!("ops:{SECRET}").as_bytes()));
        let debug = format!("{digest:?}");
        assert!(debug.contains("\"ops\"") && !debug.contains("s3cret"), "{debug}");
        assert_eq!(digest.describe(), "digest user `ops` (from $ZK_LOCK_DIGEST)");
        assert_eq!(load(None, Some("".into())).unwrap(), None, "empty is unset");
        assert_eq!(load(None, None).unwrap(), None);
    }

    #[test]
    fn a_bad_value_is_a_usage_error_that_does_not_show_it() {
        for bad in ["s3cret", ":s3cret", "ops:s3cret\nother"] {
            let error = load(None, Some(bad.into())).unwrap_err();
            assert_eq!(error.code, crate::error::USAGE, "{bad:?}");
            assert!(error.message.starts_with("$ZK_LOCK_DIGEST: expected"), "{}", error.message);
            assert!(!error.message.contains("s3cret"), "{}", error.message);
        }
    }

    #[test]
    fn the_file_holds_one_line_and_wins_over_the_environment() {
        let path = private_file("one-line", &format!("file-user:{SECRET}\n"), 0o600);
        let digest = load(Some(&path), Some("env-user:x".into())).unwrap().unwrap();
        assert_eq!(digest.as_bytes(), format!("file-user:{SECRET}").as_bytes());
        assert_eq!(digest.describe(), "digest user `file-user` (from --auth-file)");
        let crlf = private_file("crlf", "u:p\r\n", 0o640);
        assert_eq!(load(Some(&crlf), None).unwrap().unwrap().as_bytes(), b"u:p", "the group may read it");
        let two = private_file("two-lines", &format!("u:{SECRET}\nmore\n"), 0o400);
        let error = load(Some(&two), None).unwrap_err();
        assert!(error.message.contains("expected one line") && !error.message.contains("s3cret"), "{}", error.message);
        for path in [path, crlf, two] {
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn a_file_other_users_may_read_or_write_is_refused() {
        for mode in [0o644, 0o602, 0o601] {
            let path = private_file(&format!("mode-{mode:o}"), &format!("u:{SECRET}"), mode);
            let error = load(Some(&path), None).unwrap_err();
            assert_eq!(error.code, crate::error::USAGE);
            let expected = format!("other users of this machine may read or write it (mode {mode:o})");
            assert!(error.message.contains(&expected) && error.message.contains("chmod o-rwx"), "{}", error.message);
            assert!(!error.message.contains("s3cret"), "{}", error.message);
            std::fs::remove_file(path).unwrap();
        }
        let missing = std::path::Path::new("/nonexistent/zk-lock-credentials");
        let error = load(Some(missing), None).unwrap_err();
        assert!(
            error.message.starts_with("cannot read `--auth-file /nonexistent/zk-lock-credentials`: "),
            "{}",
            error.message
        );
    }
}
