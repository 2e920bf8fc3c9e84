//! What every queue-based recipe holds: a client (or the default one), a lock path and node
//! data, and the re-entrant acquisition they share.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::engine::{acquire, node_name::QueueRules, LockSpec, Wait};
use crate::error::Result;
use crate::hold::Hold;
use crate::holder::describe_current_holder;
use crate::path::validate_lock_path;
use crate::registry;
use crate::trace;

/// How long an acquisition may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    /// The client's default timeout (none unless configured: wait forever).
    Default,
    /// At most this long; zero means one attempt.
    Timeout(Duration),
    /// One attempt.
    Once,
}

impl Patience {
    /// The engine's deadline for an acquisition on `client` starting now.
    pub(crate) fn wait(self, client: &Client) -> Wait {
        match self {
            Self::Default => Wait::timeout(client.default_timeout()),
            Self::Timeout(timeout) => Wait::timeout(Some(timeout)),
            Self::Once => Wait::Once,
        }
    }
}

/// A lock path on a client, with the data its nodes carry.
#[derive(Clone)]
pub(crate) struct LockTarget {
    client: Option<Client>,
    pub path: String,
    data: Option<Vec<u8>>,
}

impl LockTarget {
    pub(crate) fn new(client: Option<&Client>, path: String) -> Self {
        Self { client: client.cloned(), path, data: None }
    }

    pub(crate) fn set_data(&mut self, data: Vec<u8>) {
        self.data = Some(data);
    }

    /// The client given at construction, or the registry's default. The path is checked first,
    /// so a bad path is reported before the default client is connected.
    pub(crate) async fn client(&self) -> Result<Client> {
        validate_lock_path(&self.path)?;
        match &self.client {
            Some(client) => Ok(client.clone()),
            None => registry::default_client().await,
        }
    }

    /// The key of this lock in the client's re-entrancy table, for a recipe's node kind.
    pub(crate) fn key(&self, kind: &str) -> String {
        format!("{kind} {}", self.path)
    }

    /// Acquires a node named `lock_name` in the queue `rules`, re-entering a hold the current
    /// task already has under `kind`.
    pub(crate) async fn acquire(
        &self,
        client: &Client,
        kind: &'static str,
        rules: &'static QueueRules,
        lock_name: &'static str,
        patience: Patience,
    ) -> Result<Arc<Hold>> {
        validate_lock_path(&self.path)?;
        let key = self.key(kind);
        if let Some(hold) = Hold::held_by_current_task(client, &key) {
            return hold.reenter();
        }
        let wait = patience.wait(client);
        let data = self.node_data();
        let spec = LockSpec { path: &self.path, rules, lock_name, data: &data };
        trace::acquisition(kind, &self.path, async {
            let granted = acquire(client, &spec, wait).await?;
            Ok(Hold::new(client, kind, key, &self.path, granted))
        })
        .await
    }

    /// The data for a new node: the caller's, or a description of the current holder.
    pub(crate) fn node_data(&self) -> Vec<u8> {
        self.data.clone().unwrap_or_else(describe_current_holder)
    }
}
