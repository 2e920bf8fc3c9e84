//! The watch on a held node's data, set only while someone awaits its revocation, so that a
//! `__REVOKE__` written into it is seen at once rather than when the session's own
//! watch is set, one heartbeat period into the hold.

use zookeeper_client::{Client as ZkClient, EventType};

use crate::layout::REVOKE_MESSAGE;
use crate::session::HeldStatus;
use crate::zk::Reconnects;

/// Records a revocation in `status` as soon as one is written into its node. Never returns
/// otherwise: a deleted node or a dead session is a loss, which the session's own watch and its
/// monitor report.
pub(super) async fn watch_for_revocation(zk: &ZkClient, status: &HeldStatus) {
    let mut reconnects = Reconnects::new(zk);
    loop {
        match zk.get_and_watch_data(status.node_path()).await {
            Ok((data, _, _)) if data == REVOKE_MESSAGE => return status.revoke(),
            Ok((_, _, watcher)) => {
                let event = watcher.changed().await;
                let ended = event.event_type == EventType::NodeDeleted || event.session_state.is_terminated();
                if ended {
                    break;
                }
            }
            Err(error) => {
                if reconnects.wait(error).await.is_err() {
                    break;
                }
            }
        }
    }
    std::future::pending().await
}
