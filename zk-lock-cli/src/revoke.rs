//! `zk-lock revoke <path>`: asks the holders of a lock to let it go, and says whom it asked.

use serde_json::json;
use zk_lock::{Client, Participant, Role};

use crate::error::CliError;
use crate::inspect;
use crate::output::{describe, escape, human_duration, participant_json, session_hex, Report, Table};

/// Runs `revoke`: writes `__REVOKE__` into every holder's node with [`zk_lock::revoke_node`],
/// one node at a time so the report names exactly the nodes written to (`zk_lock::revoke_with`
/// only returns a count). Holders that released the lock meanwhile are reported as gone.
pub async fn run(client: &Client, path: &str) -> Result<Report, CliError> {
    let Some(found) = inspect::read(client, path).await? else {
        return Ok(Report {
            text: String::new(),
            json: json!({ "path": path, "exists": false, "revoked": [], "gone": [] }),
            not_found: Some(format!("`{path}` does not exist; nothing to revoke")),
            warning: None,
        });
    };
    let holders: Vec<&Participant> = found.iter().filter(|p| p.role == Role::Holder).collect();
    let mut revoked = Vec::new();
    let mut gone = Vec::new();
    for holder in holders {
        match zk_lock::revoke_node(client, &holder.node_path).await {
            Ok(()) => revoked.push(holder),
            Err(zk_lock::Error::Zookeeper(error)) if error.is_no_node() => gone.push(holder),
            Err(e) => return Err(CliError::from_lock(&holder.node_path, e)),
        }
    }

    let mut text = String::new();
    if !revoked.is_empty() {
        text.push_str(&format!(
            "{}: asked {} holder(s) to release it (wrote __REVOKE__ into their nodes)\n",
            escape(path),
            revoked.len()
        ));
        let mut table = Table::new(&["KIND", "SESSION", "NODE", "HOLDER"]);
        for p in &revoked {
            table.row(vec![p.kind.to_string(), session_hex(p.session_id), p.node_path.clone(), describe(p)]);
        }
        text.push_str(&table.render());
        text.push_str("only holders that made their lock revocable react; the lock stays held until they release it\n");
    }
    for p in &gone {
        text.push_str(&format!("{}: released before it could be asked\n", escape(&p.node_path)));
    }
    let position = |p: &Participant| found.iter().position(|q| q.node_path == p.node_path).unwrap_or(0) + 1;
    let json = json!({
        "path": path,
        "exists": true,
        "revoked": revoked.iter().map(|p| participant_json(position(p), p)).collect::<Vec<_>>(),
        "gone": gone.iter().map(|p| p.node_path.as_str()).collect::<Vec<_>>(),
    });
    let not_found = revoked.is_empty().then(|| {
        let waiters = found.iter().filter(|p| p.role == Role::Waiter).count();
        format!("`{path}` has no holder; nothing to revoke ({waiters} waiter(s) queued)")
    });
    Ok(Report { text, json, not_found, warning: None })
}

/// Runs `revoke --force`: deletes the node of the lock's one holder (or `node`) with
/// [`zk_lock::force_release_participant`], after reading who held it and for how long (one read).
pub async fn force(client: &Client, path: &str, node: Option<&str>) -> Result<Report, CliError> {
    let Some(found) = inspect::read(client, path).await? else {
        return Ok(Report {
            text: String::new(),
            json: json!({ "path": path, "exists": false, "released": null }),
            not_found: Some(format!("`{path}` does not exist; nothing to release")),
            warning: None,
        });
    };
    let holders: Vec<&Participant> = found.iter().filter(|p| p.role == Role::Holder).collect();
    let target = match (node, &holders[..]) {
        (Some(node), _) => match found.iter().find(|p| p.node_name == node || p.node_path == node) {
            Some(named) => named.clone(),
            None => {
                let names: Vec<String> = found.iter().map(|p| escape(&p.node_name).into_owned()).collect();
                let nodes = match names.is_empty() {
                    true => "it has no lock nodes".to_owned(),
                    false => format!("its nodes: {}", names.join(", ")),
                };
                return Err(CliError::usage(format!(
                    "--node: `{}` is not a node of `{}`; {nodes}",
                    escape(node),
                    escape(path)
                )));
            }
        },
        (None, [holder]) => (*holder).clone(),
        (None, []) => {
            return Ok(Report {
                text: String::new(),
                json: json!({ "path": path, "exists": true, "released": null }),
                not_found: Some(format!("`{path}` has no holder; nothing to release")),
                warning: None,
            })
        }
        (None, several) => {
            let names: Vec<String> = several.iter().map(|p| escape(&p.node_name).into_owned()).collect();
            return Err(CliError::usage(format!(
                "`{}` has {} holders ({}); name the one to release with --node NAME: {}",
                escape(path),
                several.len(),
                several[0].kind,
                names.join(", ")
            )));
        }
    };
    // The participants read above are the ones deleted from: no second read.
    let target_name = target.node_name.clone();
    match zk_lock::force_release_participant(client, target).await {
        Ok(released) => {
            let position = found.iter().position(|p| p.node_path == released.node_path).unwrap_or(0) + 1;
            let mut table = Table::new(&["ROLE", "KIND", "SESSION", "NODE", "HELD/WAITING", "HOLDER"]);
            table.row(vec![
                released.role.to_string(),
                released.kind.to_string(),
                session_hex(released.session_id),
                released.node_path.clone(),
                human_duration(released.age),
                describe(&released),
            ]);
            let text = format!(
                "{}: released by force: deleted the node below\n{}a zk-lock holder is told within its follow-up bound; \
                 Curator and kazoo holders are not: only fencing refuses their later writes\n",
                escape(path),
                table.render()
            );
            let json = json!({ "path": path, "exists": true, "released": participant_json(position, &released) });
            Ok(Report { text, json, not_found: None, warning: None })
        }
        Err(zk_lock::Error::Zookeeper(error)) if error.is_no_node() => Ok(Report {
            text: String::new(),
            json: json!({ "path": path, "exists": true, "released": null }),
            not_found: Some(format!("`{}` was released before it could be deleted", escape(&target_name))),
            warning: None,
        }),
        Err(e) => Err(CliError::from_lock(path, e)),
    }
}
