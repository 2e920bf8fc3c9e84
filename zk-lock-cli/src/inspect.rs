//! `zk-lock inspect <path>`: the holders and waiters of one lock, in queue order.

use serde_json::json;
use zk_lock::{Client, Participant, ParticipantKind, Role};

use crate::error::CliError;
use crate::output::{
    count_roles, counts, describe, human_duration, lock_kind, participant_json, session_hex, Report, Table,
};

/// Reads the participants of the lock at `path`, with semaphore roles made exact (see
/// [`mark_waiting_lease`]). `None` if `path` does not exist.
pub async fn read(client: &Client, path: &str) -> Result<Option<Vec<Participant>>, CliError> {
    zk_lock::validate_lock_path(path).map_err(|e| CliError::from_lock(path, e))?;
    let mut found = zk_lock::participants_with(client, path).await.map_err(|e| CliError::from_lock(path, e))?;
    if found.is_empty() {
        // `participants` treats a missing path as an empty lock; a typo deserves exit code 1.
        let stat = client.zookeeper().check_stat(path).await.map_err(|e| CliError::zookeeper(path, &e))?;
        if stat.is_none() {
            return Ok(None);
        }
    }
    mark_waiting_lease(&mut found);
    Ok(Some(found))
}

/// Marks the lease of the semaphore requester that is still waiting for a free lease as a
/// waiter. `participants` reports every lease node as a holder, because the lease limit is not
/// stored in ZooKeeper; but only the holder of the semaphore's internal mutex (the first request
/// in `P/locks`) ever waits with a lease node, and it lets the mutex go once its lease is
/// granted. So a lease of that requester's session created after its request is not granted yet.
/// Matching the holder description too keeps another task of the same process, whose lease was
/// granted earlier, from being mistaken for it.
pub fn mark_waiting_lease(participants: &mut [Participant]) {
    let Some(request) = participants.iter().find(|p| p.kind == ParticipantKind::LeaseRequest) else { return };
    let (session, after, data) = (request.session_id, request.fencing_token, request.data.clone());
    for lease in participants.iter_mut() {
        if lease.kind == ParticipantKind::Lease
            && lease.session_id == session
            && lease.fencing_token > after
            && lease.data == data
        {
            lease.role = Role::Waiter;
        }
    }
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
