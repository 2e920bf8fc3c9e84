//! The stock store both stock demos share: one SQLite file that every process opens, with the
//! seed's `product` table plus the last fencing token written for each product.
//!
//! A purchase is the seed's service: read the stock, give up if it is gone, spend a while (a real
//! service checks prices, reserves payment, logs), then `stock = stock - 1`. Without a lock around
//! all of it, buyers who read the stock before another's update sell the same unit again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

/// The error of a purchase: a database failure, or (in the locked modes) the lock's.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// How long a write waits for another process's write before giving up: the writes are short,
/// so this is only reached when something is wrong.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// What the database says about a purchase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// One unit sold: the stock went down by one.
    Sold,
    /// The check saw no stock left.
    SoldOut,
    /// The write carried a fencing token older than the last one written, and was refused.
    Fenced,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [Outcome::Sold, Outcome::SoldOut, Outcome::Fenced];

    /// The word the demos print and parse.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Sold => "sold",
            Outcome::SoldOut => "sold-out",
            Outcome::Fenced => "fenced",
        }
    }

    pub fn from_word(word: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.word() == word)
    }
}

/// The SQLite file the demo uses: the one configured, or a temporary one removed on drop.
pub struct Database {
    pub path: PathBuf,
    temporary: bool,
}

impl Database {
    /// `flag` (the `--database` value) if given, else `DATABASE_URL`, else a new file in a
    /// temporary directory.
    pub fn configured_or_temporary(flag: Option<&str>) -> Result<Database, String> {
        let configured = match flag {
            Some(url) => Some(("--database", url.to_owned())),
            None => std::env::var("DATABASE_URL").ok().map(|url| ("DATABASE_URL", url)),
        };
        if let Some((source, url)) = configured {
            return Ok(Database { path: sqlite_path(source, &url)?, temporary: false });
        }
        let dir = std::env::temp_dir().join(format!("zk-lock-stock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("create a temporary directory {}: {e}", dir.display()))?;
        Ok(Database { path: dir.join("stock.db"), temporary: true })
    }

    /// The URL to hand to worker processes (`--database`).
    pub fn url(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    /// How the demo describes it to the user.
    pub fn describe(&self) -> String {
        if self.temporary {
            format!("{} (temporary; `--database sqlite:<file>` for your own)", self.url())
        } else {
            self.url()
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let (true, Some(dir)) = (self.temporary, self.path.parent()) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The file named by a database URL from `source` (a flag or variable name, for the message).
/// Only SQLite files are supported: the processes of the demo must all open the same database.
pub fn sqlite_path(source: &str, url: &str) -> Result<PathBuf, String> {
    const ALLOWED: &str = "allowed: `sqlite:<file>` (e.g. `sqlite:/tmp/stock.db` or `sqlite://stock.db`)";
    // As the user wrote it: `--database <url>` or `DATABASE_URL=<url>`.
    let given = match source.starts_with("--") {
        true => format!("{source} {url}"),
        false => format!("{source}={url}"),
    };
    let Some(rest) = url.strip_prefix("sqlite:") else {
        // Name only the scheme: the rest of a server URL may hold a password.
        return Err(match url.split_once("://") {
            Some((scheme, _)) => {
                format!(
                    "`{source}`: `{scheme}://…` is not supported, the stock demo keeps its stock in SQLite; {ALLOWED}"
                )
            }
            None => format!("`{given}`: not a database URL, did you mean `sqlite:{url}`? {ALLOWED}"),
        });
    };
    let file = rest.strip_prefix("//").unwrap_or(rest);
    let file = file.split_once('?').map_or(file, |(file, _)| file);
    if file.is_empty() || file == ":memory:" || url.contains("mode=memory") {
        return Err(format!(
            "`{given}`: needs a file, since every process of the demo opens the same database; {ALLOWED}"
        ));
    }
    Ok(PathBuf::from(file))
}

/// The product table, shared by the processes of a demo. Clones share one pool of connections.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Pool>,
}

struct Pool {
    path: PathBuf,
    idle: StdMutex<Vec<Connection>>,
}

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    // WAL (set once, it stays with the file) lets readers run beside the one writer.
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(connection)
}

impl Store {
    /// Opens (creating if needed) the database at `path`, in WAL mode so several processes share it.
    pub fn open(path: &Path) -> rusqlite::Result<Store> {
        let connection = connect(path)?;
        let _mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        connection.execute_batch(
            "CREATE TABLE IF NOT EXISTS product (
                 id           INTEGER PRIMARY KEY,
                 product_name TEXT    NOT NULL,
                 stock        INTEGER NOT NULL,
                 last_token   INTEGER NOT NULL DEFAULT 0
             )",
        )?;
        Ok(Store { inner: Arc::new(Pool { path: path.to_owned(), idle: StdMutex::new(vec![connection]) }) })
    }

    /// Puts product `id` back to `stock` units, forgetting its last fencing token.
    pub fn reset(&self, id: u32, stock: i64) -> rusqlite::Result<()> {
        self.blocking(|c| {
            c.execute(
                "INSERT INTO product (id, product_name, stock, last_token) VALUES (?1, 'ECS:1C2048M', ?2, 0)
                 ON CONFLICT (id) DO UPDATE SET stock = excluded.stock, last_token = 0",
                (id, stock),
            )
            .map(drop)
        })
    }

    /// Product `id`'s stock.
    pub fn stock(&self, id: u32) -> rusqlite::Result<i64> {
        self.blocking(|c| c.query_row("SELECT stock FROM product WHERE id = ?1", [id], |row| row.get(0)))
    }

    /// The seed's purchase: check the stock, wait `delay` (the rest of the service's work), take
    /// one unit. With a fencing `token`, the update is refused when a newer token was written.
    pub async fn sell_one(&self, id: u32, delay: Duration, token: Option<i64>) -> Result<Outcome, Error> {
        let stock: i64 = self
            .run(move |c| c.query_row("SELECT stock FROM product WHERE id = ?1", [id], |row| row.get(0)).optional())
            .await?
            .ok_or_else(|| format!("no product {id} in the database"))?;
        if stock <= 0 {
            return Ok(Outcome::SoldOut);
        }
        tokio::time::sleep(delay).await;
        self.run(move |c| deduct(c, id, token)).await
    }

    /// Runs `f` on a pooled connection, off the async threads (SQLite calls block, and a write
    /// can wait for another process's).
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, Error> {
        let store = self.clone();
        Ok(tokio::task::spawn_blocking(move || store.blocking(f)).await??)
    }

    fn blocking<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
        let idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut connection = match idle {
            Some(connection) => connection,
            None => connect(&self.inner.path)?,
        };
        let result = f(&mut connection);
        self.inner.idle.lock().unwrap_or_else(|e| e.into_inner()).push(connection);
        result
    }
}

/// `stock = stock - 1`, as the seed's mapper does; with a token, only if no newer token was
/// written (Kleppmann's fencing), and the token is recorded.
fn deduct(connection: &mut Connection, id: u32, token: Option<i64>) -> rusqlite::Result<Outcome> {
    // IMMEDIATE takes the write lock at BEGIN, so the update and its token check see one state.
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let changed = match token {
        None => transaction.execute("UPDATE product SET stock = stock - 1 WHERE id = ?1", [id])?,
        Some(token) => transaction.execute(
            "UPDATE product SET stock = stock - 1, last_token = ?2 WHERE id = ?1 AND last_token <= ?2",
            (id, token),
        )?,
    };
    transaction.commit()?;
    match (changed, token) {
        (1, _) => Ok(Outcome::Sold),
        (_, Some(_)) => Ok(Outcome::Fenced),
        (_, None) => Err(rusqlite::Error::QueryReturnedNoRows),
    }
}
