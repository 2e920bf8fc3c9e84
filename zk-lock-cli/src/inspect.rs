//! `zk-lock inspect <path>`: the holders and waiters of one lock, in queue order.

use serde_json::json;
use zk_lock::{Client, Participant};

use crate::error::CliError;
use crate::output::{
    count_roles, counts, describe, human_duration, lock_kind, participant_json, session_hex, Report, Table,
};

/// Reads the participants of the lock at `path`. `None` if `path` does not exist.
pub async fn read(client: &Client, path: &str) -> Result<Option<Vec<Participant>>, CliError> {
    zk_lock::validate_lock_path(path).map_err(|e| CliError::from_lock(path, e))?;
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

/// Runs `inspect`.
pub async fn run(client: &Client, path: &str) -> Result<Report, CliError> {
    let Some(found) = read(client, path).await? else {
        return Ok(Report {
            text: String::new(),
            json: json!({ "path": path, "exists": false, "kind": null, "participants": [] }),
            not_found: Some(format!("`{path}` does not exist; check the path (try `zk-lock tree /`)")),
        });
    };
    Ok(report(path, &found))
}

fn report(path: &str, found: &[Participant]) -> Report {
    let (holders, waiters, others) = count_roles(found);
    let kind = lock_kind(found);
    let mut text = if found.is_empty() {
        format!("{path}: no holders or waiters\n")
    } else {
        format!("{path}: {kind}, {}\n", counts(holders, waiters, others))
    };
    if !found.is_empty() {
        let mut table = Table::new(&["POS", "ROLE", "KIND", "SESSION", "FENCING", "HELD/WAITING", "HOLDER"]);
        for (i, p) in found.iter().enumerate() {
            table.row(vec![
                (i + 1).to_string(),
                p.role.to_string(),
                p.kind.to_string(),
                session_hex(p.session_id),
                p.fencing_token.to_string(),
                human_duration(p.age),
                describe(p),
            ]);
        }
        text.push_str(&table.render());
    }
    let participants: Vec<_> = found.iter().enumerate().map(|(i, p)| participant_json(i + 1, p)).collect();
    let json = json!({
        "path": path,
        "exists": true,
        "kind": if found.is_empty() { None } else { Some(kind) },
        "holders": holders,
        "waiters": waiters,
        "participants": participants,
    });
    Report { text, json, not_found: None }
}
