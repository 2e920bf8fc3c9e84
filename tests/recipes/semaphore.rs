//! `Semaphore` against a real ZooKeeper: the lease limit under contention, fairness, several
//! leases at once, single attempts, timeouts, cancellation, a limit driven by a `SharedCount`,
//! lost and vanished leases. All tests share one server; each uses its own path. The requests a
//! cycle costs are counted in `requests_per_cycle.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Barrier;
use zk_lock::testing::{children, wait_for_children};
use zk_lock::{Client, Error, LostReason, Semaphore, SemaphoreMutex, SharedCount};

use crate::scenarios::{self, Exclusive, Guard, Leases};
use crate::support::{client_with_session_timeout, new_client, node_name, rng, server, PATIENCE};

const PATH: &str = "/it-semaphore";

fn leases(path: &str) -> String {
    format!("{path}/leases")
}

fn locks(path: &str) -> String {
    format!("{path}/locks")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sessions_of_eight_tasks_never_exceed_the_limit_and_reach_it() {
    const MAX: usize = 3;
    const SESSIONS: usize = 4;
    const TASKS: usize = 8;
    const ROUNDS: usize = 15;
    let path = format!("{PATH}/limit");
    let holders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let grant = {
        let (holders, most) = (holders.clone(), most.clone());
        move || {
            let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
            assert!(now <= MAX, "{now} holders of a semaphore allowing {MAX}");
            most.fetch_max(now, Ordering::SeqCst);
        }
    };

    // The limit is reachable: MAX sessions hold a lease each at the same time.
    let all_hold = Arc::new(Barrier::new(MAX + 1));
    let checked = Arc::new(Barrier::new(MAX + 1));
    let mut full = Vec::new();
    for _ in 0..MAX {
        let client = new_client().await;
        let semaphore = Semaphore::with_client(&client, &path, MAX as u32);
        let (all_hold, checked, holders, grant) = (all_hold.clone(), checked.clone(), holders.clone(), grant.clone());
        full.push(tokio::spawn(async move {
            let permit = semaphore.acquire().await.expect("acquire");
            grant();
            all_hold.wait().await;
            checked.wait().await;
            holders.fetch_sub(1, Ordering::SeqCst);
            permit.release().await.expect("release");
        }));
    }
    tokio::time::timeout(PATIENCE, all_hold.wait()).await.expect("all MAX sessions hold a lease at once");
    assert_eq!(most.load(Ordering::SeqCst), MAX);
    let observer = new_client().await;
    assert_eq!(children(&observer, &leases(&path)).await.unwrap().len(), MAX);
    checked.wait().await;
    for task in full {
        task.await.expect("task panicked");
    }

    // And never exceeded under contention.
    let mut tasks = Vec::new();
    for _ in 0..SESSIONS {
        let client = new_client().await;
        for _ in 0..TASKS {
            let semaphore = Semaphore::with_client(&client, &path, MAX as u32);
            let (holders, grant) = (holders.clone(), grant.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = rng();
                for _ in 0..ROUNDS {
                    let permit = semaphore.acquire().await.expect("acquire");
                    grant();
                    // Work under the lease that takes longer than a grant, so that the limit, not
                    // the rate of grants, decides how many hold at once.
                    tokio::time::sleep(Duration::from_micros(1_000 + rng.u64(..4_000))).await;
                    holders.fetch_sub(1, Ordering::SeqCst);
                    permit.release().await.expect("release");
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("task panicked");
    }
    assert_eq!(most.load(Ordering::SeqCst), MAX);
    wait_for_children(&observer, &leases(&path), |c| c.is_empty()).await.unwrap();
    wait_for_children(&observer, &locks(&path), |c| c.is_empty()).await.unwrap();
}

#[tokio::test]
async fn waiters_are_served_in_queue_order() {
    const WAITERS: usize = 5;
    let path = format!("{PATH}/fifo");
    let client = new_client().await;
    let semaphore = Semaphore::with_client(&client, &path, 2);
    let first = semaphore.acquire().await.unwrap();
    let second = semaphore.acquire().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        // Separate sessions, so the order is decided by ZooKeeper alone.
        let waiter_client = new_client().await;
        let semaphore = Semaphore::with_client(&waiter_client, &path, 2);
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let permit = semaphore.acquire().await.unwrap();
            order.lock().unwrap().push(i);
            permit.release().await.unwrap();
            drop(waiter_client);
        }));
        // The first waiter holds the internal mutex, the others queue behind it.
        wait_for_children(&client, &locks(&path), |c| c.len() == i + 1).await.unwrap();
    }
    first.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
    second.release().await.unwrap();
    wait_for_children(&client, &leases(&path), |c| c.is_empty()).await.unwrap();
}

#[tokio::test]
async fn acquire_many_takes_leases_together_and_each_is_released_on_its_own() {
    let path = format!("{PATH}/many");
    let (a, b, c) = (new_client().await, new_client().await, new_client().await);
    let mut two = Semaphore::with_client(&a, &path, 3).acquire_many(2).await.unwrap();
    assert_eq!(two.len(), 2);
    assert_ne!(two[0].node_path(), two[1].node_path());
    assert!(two.iter().all(|p| p.node_path().starts_with(&format!("{path}/leases/_c_")) && p.path() == path));
    assert_eq!(children(&a, &leases(&path)).await.unwrap().len(), 2);

    let b_semaphore = Semaphore::with_client(&b, &path, 3);
    assert!(matches!(b_semaphore.try_acquire_many(2).await, Err(Error::Busy { .. })), "2 + 2 leases exceed 3");
    let b_permit = b_semaphore.try_acquire().await.expect("a third lease fits");
    let c_semaphore = Semaphore::with_client(&c, &path, 3);
    assert!(matches!(c_semaphore.try_acquire().await, Err(Error::Busy { .. })), "full");

    let waiter = {
        let c_semaphore = c_semaphore.clone();
        tokio::spawn(async move { c_semaphore.acquire_many(2).await })
    };
    // The waiter holds the internal mutex with its two leases made: 5 lease nodes.
    wait_for_children(&a, &leases(&path), |c| c.len() == 5).await.unwrap();
    let kept = two.pop().unwrap();
    two.pop().unwrap().release().await.unwrap();
    assert!(kept.is_held(), "releasing one permit keeps the other");
    wait_for_children(&a, &leases(&path), |c| c.len() == 4).await.unwrap();
    assert!(!waiter.is_finished(), "4 leases exceed 3");
    b_permit.release().await.unwrap();
    let granted = tokio::time::timeout(PATIENCE, waiter).await.expect("granted").unwrap().expect("two leases");
    assert_eq!(granted.len(), 2);
    let now = children(&a, &leases(&path)).await.unwrap();
    assert_eq!(now.len(), 3, "{now:?}");
    for permit in &granted {
        assert!(now.contains(&node_name(permit.node_path()).to_owned()));
    }
    kept.release().await.unwrap();
    for permit in granted {
        permit.release().await.unwrap();
    }
    assert!(Semaphore::with_client(&a, &path, 3).acquire_many(0).await.unwrap().is_empty());
    wait_for_children(&a, &leases(&path), |c| c.is_empty()).await.unwrap();
    wait_for_children(&a, &locks(&path), |c| c.is_empty()).await.unwrap();
}

/// A full semaphore of two leases; the timeouts wait for a lease (holding the internal mutex).
#[tokio::test]
async fn busy_and_timeouts_leave_only_the_holders_nodes() {
    scenarios::busy_and_timeouts_leave_only_the_holders_nodes::<Leases<2>>(
        &format!("{PATH}/busy"),
        Duration::from_millis(300),
    )
    .await;
}

/// With one lease, a semaphore is a mutex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sessions_of_eight_tasks_with_one_lease_never_overlap() {
    scenarios::four_sessions_of_eight_tasks_never_overlap::<Leases<1>>(&format!("{PATH}/exclusion"), 10).await;
}

/// Waiting for a lease is `busy_and_timeouts_leave_only_the_holders_nodes`; here the contender
/// waits for the internal mutex, which another waiter holds while it waits for a lease.
#[tokio::test]
async fn a_timeout_waiting_for_the_internal_mutex_removes_every_node_before_returning() {
    let path = format!("{PATH}/timeout");
    let (holder_client, waiter_client, contender_client) = (new_client().await, new_client().await, new_client().await);
    let holder = Semaphore::with_client(&holder_client, &path, 1).acquire().await.unwrap();
    let contender = Semaphore::with_client(&contender_client, &path, 1);

    // Waiting for the internal mutex, held by another waiter.
    let waiter = {
        let semaphore = Semaphore::with_client(&waiter_client, &path, 1);
        tokio::spawn(async move { semaphore.acquire().await })
    };
    wait_for_children(&holder_client, &locks(&path), |c| c.len() == 1).await.unwrap();
    let waiter_lock = children(&holder_client, &locks(&path)).await.unwrap();
    assert!(matches!(contender.acquire_many_timeout(1, Duration::from_millis(300)).await, Err(Error::Timeout { .. })));
    // A single attempt does not wait behind the waiter at all: the lease is taken.
    let single = tokio::time::timeout(Duration::from_secs(5), contender.try_acquire()).await;
    assert!(matches!(single, Ok(Err(Error::Busy { .. }))), "{single:?}");
    assert_eq!(children(&contender_client, &locks(&path)).await.unwrap(), waiter_lock, "only the waiter's lock node");
    assert_eq!(children(&contender_client, &leases(&path)).await.unwrap().len(), 2, "the holder's and the waiter's");

    holder.release().await.unwrap();
    let permit = waiter.await.unwrap().expect("the waiter gets the lease");
    permit.release().await.unwrap();
    wait_for_children(&holder_client, &leases(&path), |c| c.is_empty()).await.unwrap();
    wait_for_children(&holder_client, &locks(&path), |c| c.is_empty()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_dropped_at_random_points_leave_no_node() {
    let path = format!("{PATH}/cancel");
    let client = new_client().await;
    let contender_client = new_client().await;
    let mut rng = rng();
    for round in 0..90 {
        // A full semaphore, a half-full one (two leases asked, one free), a free one.
        let semaphore = Semaphore::with_client(&client, &path, 2);
        let held = match round % 3 {
            0 => semaphore.acquire_many(2).await.unwrap(),
            1 => semaphore.acquire_many(1).await.unwrap(),
            _ => Vec::new(),
        };
        let contender = Semaphore::with_client(&contender_client, &path, 2);
        let many = round % 2 == 0;
        let acquire = tokio::spawn(async move {
            if many {
                contender.acquire_many(2).await
            } else {
                contender.acquire_many(1).await
            }
        });
        tokio::time::sleep(Duration::from_micros(rng.u64(..4_000))).await;
        acquire.abort();
        // Whatever the abort interrupted, permits it produced are dropped too.
        let _ = acquire.await;
        drop(held);
    }
    wait_for_children(&client, &leases(&path), |c| c.is_empty()).await.unwrap();
    wait_for_children(&client, &locks(&path), |c| c.is_empty()).await.unwrap();
}

/// Three sessions try a free lock at the same instant, 30 times: exactly as many win as it has
/// leases, every time. `Busy` means the leases are taken, not that another try was under way.
async fn simultaneous_tries_win_every_free_lease<R: Exclusive>(path: &str) {
    const CONTENDERS: usize = 3;
    const ROUNDS: usize = 30;
    let mut locks = Vec::new();
    for _ in 0..CONTENDERS {
        locks.push(R::new(&new_client().await, path));
    }
    let observer = new_client().await;
    let mut winners = Vec::new();
    for _ in 0..ROUNDS {
        let (start, returned) = (Arc::new(Barrier::new(CONTENDERS)), Arc::new(Barrier::new(CONTENDERS)));
        let tries = locks.iter().cloned().map(|lock| {
            let (start, returned) = (start.clone(), returned.clone());
            tokio::spawn(async move {
                start.wait().await;
                let outcome = lock.try_acquire().await;
                // Winners hold on until every contender has its answer.
                returned.wait().await;
                match outcome {
                    Ok(guard) => guard.release().await.map(|()| 1),
                    Err(Error::Busy { .. }) => Ok(0),
                    Err(error) => Err(error),
                }
            })
        });
        let mut won = 0;
        for task in tries.collect::<Vec<_>>() {
            won += task.await.expect("task panicked").expect("a win or Busy");
        }
        winners.push(won);
        for queue in R::queues(path) {
            wait_for_children(&observer, &queue, |c| c.is_empty()).await.unwrap();
        }
    }
    let expected = R::HOLDERS.min(CONTENDERS);
    let wrong = winners.iter().filter(|&&won| won != expected).count();
    assert_eq!(wrong, 0, "{wrong} of {ROUNDS} rounds without exactly {expected} winners: {winners:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_try_locks_of_a_semaphore_mutex_have_one_winner() {
    simultaneous_tries_win_every_free_lease::<SemaphoreMutex>(&format!("{PATH}/simultaneous-mutex")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_tries_of_one_lease_have_one_winner() {
    simultaneous_tries_win_every_free_lease::<Leases<1>>(&format!("{PATH}/simultaneous-one")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_tries_of_two_leases_have_two_winners() {
    simultaneous_tries_win_every_free_lease::<Leases<2>>(&format!("{PATH}/simultaneous-two")).await;
}

#[tokio::test]
async fn raising_the_shared_count_wakes_a_waiter() {
    let path = format!("{PATH}/counted");
    let count_path = format!("{PATH}/counted-max");
    let (admin_client, holder_client, waiter_client) = (new_client().await, new_client().await, new_client().await);
    let admin = SharedCount::with_client(&admin_client, &count_path, 1);
    admin.start().await.unwrap();
    // Each process has its own SharedCount of the same node.
    let counted = |client: &Client| {
        Semaphore::with_client_and_count(client, &path, SharedCount::with_client(client, &count_path, 1))
    };
    let holder_semaphore = counted(&holder_client);
    let holder = holder_semaphore.acquire().await.unwrap();
    assert_eq!(holder_semaphore.max_leases(), 1);
    let waiter = {
        let semaphore = counted(&waiter_client);
        tokio::spawn(async move { semaphore.acquire().await })
    };
    wait_for_children(&admin_client, &leases(&path), |c| c.len() == 2).await.unwrap();
    assert!(!waiter.is_finished(), "2 leases exceed a count of 1");

    admin.set(2).await.unwrap();
    let second = tokio::time::timeout(PATIENCE, waiter).await.expect("woken by the count").unwrap().unwrap();
    assert!(holder.is_held() && second.is_held());
    assert_eq!(children(&admin_client, &leases(&path)).await.unwrap().len(), 2);

    // Lowering the count admits nobody new.
    admin.set(1).await.unwrap();
    let latecomer = counted(&admin_client);
    assert!(matches!(latecomer.try_acquire().await, Err(Error::Busy { .. })));
    holder.release().await.unwrap();
    second.release().await.unwrap();
    latecomer.try_acquire().await.expect("free again").release().await.unwrap();
}

#[tokio::test]
async fn a_lease_deleted_by_someone_else_is_lost_and_no_longer_counted() {
    let path = format!("{PATH}/deleted");
    let (holder_client, other) = (new_client().await, new_client().await);
    let permit = Semaphore::with_client(&holder_client, &path, 1).acquire().await.unwrap();
    let lost = permit.lost();
    other.zookeeper().delete(permit.node_path(), None).await.unwrap();
    let reason = tokio::time::timeout(PATIENCE, lost).await.expect("lost() resolves");
    assert_eq!(reason, LostReason::NodeDeleted);
    assert!(!permit.is_held());
    let taken = Semaphore::with_client(&other, &path, 1).try_acquire().await.expect("the deleted lease is not counted");
    assert!(matches!(permit.release().await, Err(Error::Lost { reason: LostReason::NodeDeleted, .. })));
    taken.release().await.unwrap();
}

#[tokio::test]
async fn a_waiting_lease_that_vanishes_is_made_again_and_counted_once() {
    let path = format!("{PATH}/vanished");
    let (holder_client, waiter_client) = (new_client().await, new_client().await);
    let holder = Semaphore::with_client(&holder_client, &path, 1).acquire().await.unwrap();
    let waiter = {
        let semaphore = Semaphore::with_client(&waiter_client, &path, 1);
        tokio::spawn(async move { semaphore.acquire().await })
    };
    let both = wait_for_children(&holder_client, &leases(&path), |c| c.len() == 2).await.unwrap();
    let holder_name = node_name(holder.node_path()).to_owned();
    let vanished = both.into_iter().find(|name| *name != holder_name).unwrap();
    holder_client.zookeeper().delete(&format!("{}/{vanished}", leases(&path)), None).await.unwrap();
    // The waiter notices and makes a new lease node.
    wait_for_children(&holder_client, &leases(&path), |c| c.len() == 2 && !c.contains(&vanished)).await.unwrap();
    assert!(!waiter.is_finished());

    holder.release().await.unwrap();
    let permit = tokio::time::timeout(PATIENCE, waiter).await.expect("granted").unwrap().unwrap();
    assert_ne!(node_name(permit.node_path()).to_owned(), vanished);
    assert_eq!(children(&holder_client, &leases(&path)).await.unwrap(), [node_name(permit.node_path()).to_owned()]);
    permit.release().await.unwrap();
}

#[tokio::test]
async fn a_waiter_whose_session_expires_queues_again_on_a_new_session() {
    let path = format!("{PATH}/expiry");
    let holder_client = new_client().await;
    let waiter_client = client_with_session_timeout(Duration::from_secs(4)).await;
    let holder = Semaphore::with_client(&holder_client, &path, 1).acquire().await.unwrap();
    let waiter = {
        let semaphore = Semaphore::with_client(&waiter_client, &path, 1);
        tokio::spawn(async move { semaphore.acquire().await })
    };
    let before = wait_for_children(&holder_client, &leases(&path), |c| c.len() == 2).await.unwrap();
    let old_lock = wait_for_children(&holder_client, &locks(&path), |c| c.len() == 1).await.unwrap();
    let old_lease = before.into_iter().find(|name| name != node_name(holder.node_path())).unwrap();

    server().expire_session(&waiter_client).await.expect("expire");
    // The old session's nodes are gone and the waiter is back in line on a new session.
    wait_for_children(&holder_client, &leases(&path), |c| c.len() == 2 && !c.contains(&old_lease)).await.unwrap();
    wait_for_children(&holder_client, &locks(&path), |c| c.len() == 1 && c != old_lock.as_slice()).await.unwrap();
    assert!(!waiter.is_finished());

    holder.release().await.unwrap();
    let permit = tokio::time::timeout(PATIENCE, waiter).await.expect("granted").unwrap().expect("a lease");
    assert!(permit.is_held());
    assert_eq!(children(&holder_client, &leases(&path)).await.unwrap(), [node_name(permit.node_path()).to_owned()]);
    permit.release().await.unwrap();
}

#[tokio::test]
async fn impossible_requests_are_refused_at_once_without_a_node() {
    let path = format!("{PATH}/refused");
    let client = new_client().await;
    let none = Semaphore::with_client(&client, &path, 0);
    for result in [
        tokio::time::timeout(PATIENCE, none.acquire()).await.expect("no hang"),
        tokio::time::timeout(PATIENCE, none.try_acquire()).await.expect("no hang"),
    ] {
        match result {
            Err(Error::InvalidArgument { path: p, reason }) => {
                assert_eq!(p, path);
                assert!(reason.contains("0 leases"), "{reason}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    let three = Semaphore::with_client(&client, &path, 3);
    assert!(matches!(
        tokio::time::timeout(PATIENCE, three.acquire_many(4)).await.expect("no hang"),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(client.zookeeper().check_stat(&path).await.unwrap().is_none(), "nothing was created");
    assert!(matches!(
        Semaphore::with_client(&client, "/bad//path", 1).try_acquire().await,
        Err(Error::InvalidPath { .. })
    ));
}
