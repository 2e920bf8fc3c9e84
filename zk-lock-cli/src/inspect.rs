//! `zk-lock inspect <path>`: the holders and waiters of one lock, in queue order, and how long
//! the server keeps their sessions.

use std::time::{Duration, Instant};

use serde_json::json;
use zk_lock::{Client, Participant};

use crate::error::CliError;
use crate::output::{
    count_roles, counts, describe, escape, human_duration, lock_kind, participant_json, seconds_left, session_hex,
    Report, Table,
};
use crate::session_expiry::{Dumps, SessionExpiry};

/// A lock's participants and their sessions' expiry, read at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// In queue order; `None` if the path does not exist.
    pub participants: Option<Vec<Participant>>,
    /// What the server said of their sessions.
    pub expiry: SessionExpiry,
}

/// Reads the participants of the lock at `path`. `None` if `path` does not exist.
pub async fn read(client: &Client, path: &str) -> Result<Option<Vec<Participant>>, CliError> {
    zk_lock::path::validate_lock_path(path).map_err(|e| CliError::from_lock(path, e))?;
    let found = zk_lock::participants_with(client, path).await.map_err(|e| CliError::from_lock(path, e))?;
    if found.is_empty() {
        // `participants` treats a missing path as an empty lock; a typo deserves exit code 1.
        let stat = client.zookeeper().check_stat(path).await.map_err(|e| CliError::zookeeper(path, &e))?;
        if stat.is_none() {
            return Ok(None);
        }
    }
    Ok(Some(found))
}

/// Reads the lock at `path`, then its sessions' expiry from `dumps` (only if it has nodes).
pub async fn snapshot(client: &Client, path: &str, dumps: &mut Dumps) -> Result<Snapshot, CliError> {
    // Before the reads, which renew this command's session: the yardstick of `dumps`.
    let renewed = Instant::now();
    let participants = read(client, path).await?;
    let expiry = match &participants {
        Some(found) if !found.is_empty() => dumps.read(client, renewed).await,
        _ => SessionExpiry::default(),
    };
    Ok(Snapshot { participants, expiry })
}

/// Runs `inspect`; `timeout` bounds each server's answer to `dump`.
pub async fn run(client: &Client, path: &str, timeout: Duration) -> Result<Report, CliError> {
    let snapshot = snapshot(client, path, &mut Dumps::new(client, timeout)).await?;
    Ok(report(path, &snapshot))
}

/// What `inspect` prints of a snapshot; also each refresh of `watch`.
pub fn report(path: &str, snapshot: &Snapshot) -> Report {
    let Some(found) = &snapshot.participants else {
        return Report {
            text: String::new(),
            json: json!({ "path": path, "exists": false, "kind": null, "participants": [] }),
            not_found: Some(format!("`{path}` does not exist; check the path (try `zk-lock tree /`)")),
            warning: None,
        };
    };
    let expiry = &snapshot.expiry;
    let (holders, waiters, others) = count_roles(found);
    let kind = lock_kind(found);
    let shown = escape(path);
    let mut text = if found.is_empty() {
        format!("{shown}: no holders or waiters\n")
    } else {
        format!("{shown}: {kind}, {}\n", counts(holders, waiters, others))
    };
    if !found.is_empty() {
        let mut table =
            Table::new(&["POS", "ROLE", "KIND", "SESSION", "EXPIRES-IN", "FENCING", "HELD/WAITING", "HOLDER"]);
        for (i, p) in found.iter().enumerate() {
            table.row(vec![
                (i + 1).to_string(),
                p.role.to_string(),
                p.kind.to_string(),
                session_hex(p.session_id),
                expiry.left(p.session_id).map_or_else(|| "-".to_owned(), seconds_left),
                p.fencing_token.to_string(),
                human_duration(p.age),
                describe(p),
            ]);
        }
        text.push_str(&table.render());
    }
    let participants: Vec<_> = found
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut participant = participant_json(i + 1, p);
            let left = expiry.left(p.session_id);
            participant["session_expires_in_ms"] = json!(left.map(|d| d.as_millis() as u64));
            participant["session_expires_in"] = json!(left.map(seconds_left));
            participant
        })
        .collect();
    let json = json!({
        "path": path,
        "exists": true,
        "kind": if found.is_empty() { None } else { Some(kind) },
        "holders": holders,
        "waiters": waiters,
        "participants": participants,
        "session_expiry_from": expiry.from,
        "session_expiry_unknown": expiry.unknown,
    });
    let warning = expiry.unknown.as_ref().map(|reason| format!("session expiry unknown (EXPIRES-IN: -): {reason}"));
    Report { text, json, not_found: None, warning }
}
