//! Writes fenced by the lock node: applied while the lock is held, refused once it is lost.

use zk_lock::{LostReason, Mutex};
use zookeeper_client::{Acls, CheckWriteError, CreateMode};

use crate::support::new_client;

#[tokio::test]
async fn a_fenced_write_applies_while_held_and_is_refused_after_the_lock_is_lost() {
    let (client, other) = (new_client().await, new_client().await);
    let data_path = "/it-fenced-writes-data";
    let guard = Mutex::with_client(&client, "/it-fenced-writes/lock").lock().await.unwrap();

    let mut write = guard.fenced_writer().unwrap();
    write.add_create(data_path, b"first", &CreateMode::Persistent.with_acls(Acls::anyone_all())).unwrap();
    write.commit().await.unwrap();

    // Someone else deletes our lock node: the lock is lost, and so is the right to write.
    other.zookeeper().delete(guard.node_path(), None).await.unwrap();
    assert_eq!(guard.lost().await, LostReason::NodeDeleted);
    let mut late = guard.fenced_writer().unwrap();
    late.add_set_data(data_path, b"late", None).unwrap();
    let refused = late.commit().await.unwrap_err();
    assert!(matches!(refused, CheckWriteError::CheckFailed { .. }), "{refused:?}");

    let (data, _) = other.zookeeper().get_data(data_path).await.unwrap();
    assert_eq!(data, b"first", "the late write must not have applied");
    other.zookeeper().delete(data_path, None).await.unwrap();
}
