//! `SharedCount` against a real ZooKeeper: creation, reads, writes, compare-and-set, the watch
//! that shows other clients' changes, and data that is not a count. All tests share one server;
//! each uses its own path.

use zk_lock::{Error, SharedCount};
use zookeeper_client::{Acls, CreateMode};

use crate::support::{new_client, PATIENCE};

const PATH: &str = "/it-shared-count";

#[tokio::test]
async fn start_creates_the_node_once_and_versioned_writes_compare_and_set() {
    let path = format!("{PATH}/cas/nested/count");
    let (a, b) = (new_client().await, new_client().await);
    let count = SharedCount::with_client(&a, &path, 7);
    assert_eq!((count.get(), count.version()), (7, -1), "before start: the initial count, never read");
    count.start().await.unwrap();
    count.start().await.unwrap();
    assert_eq!((count.get(), count.version()), (7, 0));

    // A PERSISTENT node with Curator's encoding: 4 big-endian bytes.
    let (data, stat) = a.zookeeper().get_data(&path).await.unwrap();
    assert_eq!(data, 7i32.to_be_bytes());
    assert_eq!(stat.ephemeral_owner, 0, "persistent, not ephemeral");

    // The initial count only applies to a node that does not exist yet.
    let other = SharedCount::with_client(&b, &path, 99);
    other.start().await.unwrap();
    assert_eq!(other.get(), 7);

    count.set(10).await.unwrap();
    assert_eq!((count.get(), count.version()), (10, 1));
    assert!(!other.try_set(11, 0).await.unwrap(), "version 0 is stale");
    assert_eq!(other.versioned().value, 10, "a failed attempt refreshes the cached count");
    assert_eq!(other.version(), 1);
    assert!(!other.try_set(11, -1).await.unwrap(), "a never-read version is refused");
    assert!(other.try_set(11, 1).await.unwrap());
    assert_eq!((other.get(), other.version()), (11, 2));
    assert_eq!(a.zookeeper().get_data(&path).await.unwrap().0, 11i32.to_be_bytes());
    assert_eq!(count.read().await.unwrap().value, 11);
    assert!(!count.try_set(12, 1).await.unwrap());
}

#[tokio::test]
async fn another_client_sees_every_change_through_its_watch() {
    let path = format!("{PATH}/watched");
    let (a, b) = (new_client().await, new_client().await);
    let writer = SharedCount::with_client(&a, &path, 1);
    let reader = SharedCount::with_client(&b, &path, 1);
    writer.start().await.unwrap();
    reader.start().await.unwrap();
    let mut changes = reader.subscribe();

    writer.set(5).await.unwrap();
    let seen = tokio::time::timeout(PATIENCE, changes.wait_for(|c| c.value == 5)).await.expect("seen").unwrap();
    assert_eq!(seen.version, 1);
    drop(seen);
    assert_eq!(reader.get(), 5);

    // `changed()` resolves with the next count.
    let (next, ()) = tokio::join!(reader.changed(), async { writer.set(6).await.unwrap() });
    assert_eq!(next.unwrap(), 6);

    // A raw write by a non-Rust peer shows too, and so does a deleted and re-created node.
    a.zookeeper().set_data(&path, &(-3i32).to_be_bytes(), None).await.unwrap();
    tokio::time::timeout(PATIENCE, changes.wait_for(|c| c.value == -3)).await.expect("seen").unwrap();
    a.zookeeper().delete(&path, None).await.unwrap();
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    a.zookeeper().create(&path, &42i32.to_be_bytes(), &persistent).await.unwrap();
    tokio::time::timeout(PATIENCE, changes.wait_for(|c| c.value == 42)).await.expect("re-created node seen").unwrap();
    assert_eq!(reader.version(), 0);
}

#[tokio::test]
async fn data_that_is_not_a_count_is_a_clear_error() {
    let path = format!("{PATH}/not-a-count");
    let client = new_client().await;
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.zookeeper().mkdir(PATH, &persistent).await.unwrap();
    client.zookeeper().create(&path, b"abc", &persistent).await.unwrap();
    let count = SharedCount::with_client(&client, &path, 1);
    match count.start().await {
        Err(error @ Error::InvalidArgument { .. }) => {
            let message = error.to_string();
            assert!(message.contains(&path), "{message}");
            assert!(message.contains("3 bytes"), "{message}");
        }
        other => panic!("expected an error naming the path, got {other:?}"),
    }
    assert!(count.set(1).await.is_err(), "an unstarted count cannot be written");
    assert!(SharedCount::with_client(&client, "relative", 1).start().await.is_err());
}
