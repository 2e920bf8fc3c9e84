//! Digest credentials and ACLs through the builder: another client cannot delete, overwrite or
//! queue on a holder's locks, and the holder keeps its lock while they try.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use zk_lock::testing::wait_for_children;
use zk_lock::zookeeper::{Acl, Acls, AuthId, Permission};
use zk_lock::{Client, Error, Mutex, RwLock, Semaphore, SharedCount};
use zookeeper_client::{CreateMode, Error as ZkError};

use crate::support::{server, PATIENCE};

const OWNER: &str = "it-acl-owner:s3cret";

/// A client that authenticates as `credentials` and creates its nodes for those credentials only.
async fn owner(credentials: &str) -> Client {
    Client::builder(server().connect_string())
        .auth("digest", credentials)
        .acl(&Acls::creator_all())
        .connect()
        .await
        .expect("connect with credentials")
}

async fn anonymous() -> Client {
    Client::builder(server().connect_string()).connect().await.expect("connect")
}

/// Whether `future` is still pending when polled once.
async fn is_pending(future: impl Future) -> bool {
    let mut future = pin!(future);
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx).is_pending())).await
}

#[tokio::test]
async fn nodes_carry_the_configured_acl_from_the_parents_down() {
    let path = "/it-acl/layout/orders";
    let holder = owner(OWNER).await;
    assert_eq!(holder.acl(), &*Acls::creator_all());
    let guard = Mutex::with_client(&holder, path).lock().await.unwrap();
    let zk = holder.zookeeper();
    for node in ["/it-acl/layout", path, guard.node_path()] {
        let (acl, _) = zk.get_acl(node).await.unwrap();
        assert_eq!(acl.len(), 1, "{node}: {acl:?}");
        assert_eq!((acl[0].scheme(), acl[0].permission()), ("digest", Permission::ALL), "{node}");
        assert!(acl[0].id().starts_with("it-acl-owner:"), "{node}: {acl:?}");
    }
    guard.release().await.unwrap();

    let plain = anonymous().await;
    assert_eq!(plain.acl(), &*Acls::anyone_all(), "the default is Curator's: anyone, everything");
}

#[tokio::test]
async fn a_client_without_the_credentials_cannot_take_delete_or_overwrite_a_held_lock() {
    let path = "/it-acl/held/orders";
    let holder = owner(OWNER).await;
    let guard = Mutex::with_client(&holder, path).lock().await.unwrap();
    let node = guard.node_path().to_owned();
    let (data, _) = holder.zookeeper().get_data(&node).await.unwrap();

    let intruders = [anonymous().await, owner("it-acl-owner:wrong-password").await];
    for intruder in &intruders {
        let zk = intruder.zookeeper();
        assert_eq!(zk.delete(&node, None).await, Err(ZkError::NoAuth), "delete the lock node");
        assert_eq!(zk.set_data(&node, b"__REVOKE__", None).await.map(drop), Err(ZkError::NoAuth), "overwrite it");
        assert_eq!(zk.delete(path, None).await, Err(ZkError::NoAuth), "delete the lock path");
        let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let queued = zk.create(&format!("{path}/_c_x-lock-"), b"", &ephemeral).await;
        assert_eq!(queued.map(drop), Err(ZkError::NoAuth), "queue a node of its own");
        assert_eq!(zk.get_data(&node).await.map(drop), Err(ZkError::NoAuth), "read the holder's node");

        // Through the library: refused at once, naming the path, and nothing is left behind.
        let started = Instant::now();
        for outcome in [
            Mutex::with_client(intruder, path).try_lock().await,
            Mutex::with_client(intruder, path).lock_timeout(PATIENCE).await,
        ] {
            match outcome {
                Err(error @ Error::NoAuth { .. }) => {
                    assert!(matches!(&error, Error::NoAuth { path: p } if p == path));
                    assert!(error.to_string().contains("ClientBuilder::auth"), "{error}");
                }
                other => panic!("expected Error::NoAuth, got {other:?}"),
            }
        }
        assert!(started.elapsed() < PATIENCE, "refused, not waiting");
        let write = RwLock::with_client(intruder, path).try_write().await;
        assert!(matches!(&write, Err(Error::NoAuth { path: p }) if p == path), "{write:?}");
    }

    // The holder kept everything: its node with its data, the lock, and no loss.
    assert!(guard.is_held());
    assert!(is_pending(guard.lost()).await, "lost() has not resolved");
    assert_eq!(holder.zookeeper().get_data(&node).await.unwrap().0, data);

    // A client with the right credentials (another session) queues behind the holder.
    let friend = owner(OWNER).await;
    assert!(matches!(Mutex::with_client(&friend, path).try_lock().await, Err(Error::Busy { .. })));
    let waiter = tokio::spawn({
        let friend = friend.clone();
        async move { Mutex::with_client(&friend, path).lock_timeout(PATIENCE).await }
    });
    wait_for_children(&holder, path, |children| children.len() == 2).await.unwrap();
    assert!(!waiter.is_finished(), "the waiter waits behind the holder");
    assert!(is_pending(guard.lost()).await);
    guard.release().await.expect("the holder releases its own lock");
    let next = waiter.await.unwrap().expect("the waiter with credentials gets the lock");
    next.release().await.unwrap();
}

#[tokio::test]
async fn semaphore_leases_and_shared_counts_are_protected_too() {
    let path = "/it-acl/semaphore";
    let count_path = "/it-acl/count";
    let holder = owner(OWNER).await;
    let permit = Semaphore::with_client(&holder, path, 1).acquire().await.unwrap();
    let count = SharedCount::with_client(&holder, count_path, 3);
    count.start().await.unwrap();

    let intruder = anonymous().await;
    let zk = intruder.zookeeper();
    assert_eq!(zk.delete(permit.node_path(), None).await, Err(ZkError::NoAuth), "delete the lease");
    assert_eq!(zk.set_data(count_path, &9i32.to_be_bytes(), None).await.map(drop), Err(ZkError::NoAuth));
    let refused = Semaphore::with_client(&intruder, path, 5).try_acquire().await;
    assert!(matches!(&refused, Err(Error::NoAuth { path: p }) if p == path), "{refused:?}");
    let foreign_count = SharedCount::with_client(&intruder, count_path, 0);
    let refused = foreign_count.start().await;
    assert!(matches!(&refused, Err(Error::NoAuth { path: p }) if p == count_path), "{refused:?}");

    assert!(permit.is_held());
    assert!(is_pending(permit.lost()).await);
    assert_eq!(count.read().await.unwrap().value, 3, "the count is unchanged");
    permit.release().await.unwrap();
}

#[tokio::test]
async fn a_list_of_entries_lets_others_read_but_only_the_owner_write() {
    let path = "/it-acl/readable";
    let readers_and_owner = [Acl::new(Permission::READ, AuthId::anyone()), Acl::new(Permission::ALL, AuthId::authed())];
    let holder = Client::builder(server().connect_string())
        .auth("digest", OWNER)
        .acl(&readers_and_owner)
        .connect()
        .await
        .unwrap();
    let guard = Mutex::with_client(&holder, path).lock().await.unwrap();
    let observer = anonymous().await;
    let seen = zk_lock::participants_with(&observer, path).await.expect("anyone may read who holds the lock");
    assert_eq!(seen.iter().map(|p| p.node_path.as_str()).collect::<Vec<_>>(), [guard.node_path()]);
    assert_eq!(observer.zookeeper().delete(guard.node_path(), None).await, Err(ZkError::NoAuth));
    assert!(matches!(Mutex::with_client(&observer, path).try_lock().await, Err(Error::NoAuth { .. })));
    guard.release().await.unwrap();
}

#[tokio::test]
async fn an_acl_that_can_never_work_is_refused_before_connecting() {
    let started = Instant::now();
    let no_credentials = Client::builder(server().connect_string()).acl(&Acls::creator_all()).connect().await;
    match no_credentials {
        Err(Error::Connect { connect_string, reason }) => {
            assert_eq!(connect_string, server().connect_string());
            assert!(reason.contains("`auth`") && reason.contains(".auth(\"digest\""), "{reason}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    let empty = Client::builder(server().connect_string()).auth("digest", OWNER).acl(&[]).connect().await;
    assert!(matches!(&empty, Err(Error::Connect { reason, .. }) if reason.contains("ACL is empty")), "{empty:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "no connection was tried");
}

/// The `NoAuth` of `participants`, `revoke` and `revoke_node` is the locks' one: the path is named
/// and the message says what to do; the holder keeps its lock and its node data.
#[tokio::test]
async fn participants_and_revoke_without_the_credentials_are_refused_naming_the_path() {
    fn refused<T: std::fmt::Debug>(what: &str, outcome: zk_lock::Result<T>, expected: &str) {
        match outcome {
            Err(error @ Error::NoAuth { .. }) => {
                assert!(matches!(&error, Error::NoAuth { path } if path == expected), "{what}: {error:?}");
                let message = error.to_string();
                assert!(message.contains(&format!("not authorized for `{expected}`")), "{what}: {message}");
                assert!(message.contains("ClientBuilder::auth"), "{what}: {message}");
            }
            other => panic!("{what}: expected Error::NoAuth naming `{expected}`, got {other:?}"),
        }
    }

    // The guide's setup: nobody else may read the nodes.
    let path = "/it-acl/operators/orders";
    let holder = owner(OWNER).await;
    let guard = Mutex::with_client(&holder, path).lock().await.unwrap();
    let node = guard.node_path().to_owned();
    let (data, _) = holder.zookeeper().get_data(&node).await.unwrap();
    let stranger = anonymous().await;
    refused("participants", zk_lock::participants_with(&stranger, path).await, path);
    refused("revoke", zk_lock::revoke_with(&stranger, path).await, path);
    refused("revoke_node", zk_lock::revoke_node(&stranger, &node).await, &node);

    // Others may read, not write: the listing works, the revocation's write is refused.
    let readable = "/it-acl/operators/readable";
    let readers_and_owner = [Acl::new(Permission::READ, AuthId::anyone()), Acl::new(Permission::ALL, AuthId::authed())];
    let reading_holder = Client::builder(server().connect_string())
        .auth("digest", OWNER)
        .acl(&readers_and_owner)
        .connect()
        .await
        .unwrap();
    let read_guard = Mutex::with_client(&reading_holder, readable).lock().await.unwrap();
    let seen = zk_lock::participants_with(&stranger, readable).await.expect("anyone may read");
    assert_eq!(seen.len(), 1);
    refused("revoke of a readable lock", zk_lock::revoke_with(&stranger, readable).await, readable);
    refused(
        "revoke_node of a readable lock",
        zk_lock::revoke_node(&stranger, read_guard.node_path()).await,
        read_guard.node_path(),
    );

    // Nothing changed; with the credentials both work.
    assert_eq!(holder.zookeeper().get_data(&node).await.unwrap().0, data, "the holder's data is untouched");
    assert!(guard.is_held() && read_guard.is_held());
    let friend = owner(OWNER).await;
    let seen = zk_lock::participants_with(&friend, path).await.expect("the owner's credentials may read");
    assert_eq!(seen.iter().map(|p| p.node_path.as_str()).collect::<Vec<_>>(), [node.as_str()]);
    assert_eq!(zk_lock::revoke_with(&friend, path).await, Ok(1), "the owner's credentials may revoke");
    guard.release().await.unwrap();
    read_guard.release().await.unwrap();
}

/// Issue 24: `.acl(&Acls::anyone_read())` without credentials used to be accepted; the first lock
/// left a container parent that only allowed READ, which ZooKeeper never reaps (it never had a
/// child), and every later client of the path got `NoAuth`. It is refused before connecting.
#[tokio::test]
async fn an_acl_that_would_not_let_the_client_use_its_own_nodes_is_refused_before_anything_is_created() {
    let path = "/it-acl-own-nodes/svc/job";
    let started = Instant::now();
    let read_only = Client::builder(server().connect_string()).acl(&Acls::anyone_read()).connect().await;
    match read_only {
        Err(error @ Error::Connect { .. }) => {
            let message = error.to_string();
            assert!(message.contains("the ACL [world:anyone:READ] grants this client READ"), "{message}");
            assert!(message.contains("a lock needs READ|CREATE|DELETE"), "{message}");
            assert!(message.contains("`Acls::creator_all()` with `.auth("), "{message}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    let another_user = [Acl::new(Permission::ALL, AuthId::new("digest", "it-acl-other:aGFzaA=="))];
    let refused = Client::builder(server().connect_string()).auth("digest", OWNER).acl(&another_user).connect().await;
    assert!(
        matches!(&refused, Err(Error::Connect { reason, .. }) if reason.contains("[digest:it-acl-other:ALL] grants this client NONE")),
        "{refused:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(1), "no connection was tried");

    let plain = anonymous().await;
    assert_eq!(plain.zookeeper().check_stat("/it-acl-own-nodes").await.unwrap(), None, "nothing was created");
    let guard = Mutex::with_client(&plain, path).try_lock().await.expect("the path is free for everyone");
    guard.release().await.unwrap();
}

/// An ACL whose match only the server can tell (here an address the client does not have) is
/// accepted at connect; when it then refuses the client, the parents it just made with it are
/// removed again, and a well-configured client uses the same paths.
#[tokio::test]
async fn parents_that_refuse_their_creator_are_removed_and_the_path_stays_usable() {
    let root = "/it-acl-unusable";
    let plain = anonymous().await;
    let zk = plain.zookeeper();
    zk.create(root, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    zk.create(&format!("{root}/existing"), b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await.unwrap();
    let elsewhere = [Acl::new(Permission::ALL, AuthId::new("ip", "10.255.255.1"))];
    let misconfigured = Client::builder(server().connect_string()).acl(&elsewhere).connect().await.unwrap();

    // Refused creating a parent below one it made (`svc/job` under `svc`), creating its lock node
    // in a parent it made (`existing/job`), its lease request (`sem/locks`) and its count.
    let mutex_paths = [format!("{root}/svc/job"), format!("{root}/existing/job")];
    for path in &mutex_paths {
        let refused = Mutex::with_client(&misconfigured, path).try_lock().await;
        assert!(matches!(&refused, Err(Error::NoAuth { path: p }) if p == path), "{path}: {refused:?}");
    }
    let semaphore = format!("{root}/sem");
    let refused = Semaphore::with_client(&misconfigured, &semaphore, 2).acquire_timeout(PATIENCE).await;
    assert!(matches!(&refused, Err(Error::NoAuth { path: p }) if *p == semaphore), "{refused:?}");
    let count = format!("{root}/counts/workers");
    let refused = SharedCount::with_client(&misconfigured, &count, 2).start().await;
    assert!(matches!(&refused, Err(Error::NoAuth { path: p }) if *p == count), "{refused:?}");

    let mut left = zk.list_children(root).await.unwrap();
    left.sort();
    assert_eq!(left, ["existing"], "every parent the misconfigured client made is gone");
    assert!(zk.list_children(&format!("{root}/existing")).await.unwrap().is_empty());

    for path in &mutex_paths {
        let guard = Mutex::with_client(&plain, path).try_lock().await.expect("the path is usable");
        guard.release().await.unwrap();
    }
    let permit = Semaphore::with_client(&plain, &semaphore, 2).try_acquire().await.expect("the semaphore too");
    permit.release().await.unwrap();
    let count = SharedCount::with_client(&plain, &count, 2);
    count.start().await.expect("and the count");
    assert_eq!(count.get(), 2);
}
