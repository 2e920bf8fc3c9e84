//! Compile-time promises of the public API: guards and futures cross threads and tasks.

use std::time::Duration;

use zk_lock::{
    Client, Error, Mutex, MutexGuard, Semaphore, SemaphoreMutex, SemaphoreMutexGuard, SemaphorePermit, SharedCount,
    VersionedCount,
};

fn send_static<T: Send + 'static>(_: &T) {}
fn send_sync_static<T: Send + Sync + 'static>() {}

#[test]
fn guards_clients_and_errors_are_send_and_static() {
    send_sync_static::<MutexGuard>();
    send_sync_static::<Mutex>();
    send_sync_static::<Client>();
    send_sync_static::<Error>();
}

#[test]
fn acquire_and_release_futures_are_send() {
    // Only built, never polled: no server is needed to check their types.
    let mutex = Mutex::new("/api/send");
    send_static(&{
        let mutex = mutex.clone();
        async move { mutex.lock().await }
    });
    send_static(&{
        let mutex = mutex.clone();
        async move { mutex.try_lock().await?.release().await }
    });
    send_static(&async move { mutex.lock_timeout(Duration::from_secs(1)).await.map(|guard| guard.lost()) });
}

#[test]
fn types_and_futures_cross_threads_and_tasks() {
    send_sync_static::<Semaphore>();
    send_sync_static::<SemaphorePermit>();
    send_sync_static::<SemaphoreMutex>();
    send_sync_static::<SemaphoreMutexGuard>();
    send_sync_static::<SharedCount>();
    send_sync_static::<VersionedCount>();
    // Only built, never polled: no server is needed to check their types.
    let semaphore = Semaphore::with_count("/api/semaphore", SharedCount::new("/api/count", 2));
    send_static(&{
        let semaphore = semaphore.clone();
        async move { semaphore.acquire_many_timeout(2, Duration::from_secs(1)).await }
    });
    send_static(&async move { semaphore.try_acquire().await?.release().await });
    let count = SharedCount::new("/api/count", 2);
    send_static(&async move { count.try_set(3, 0).await });
    let mutex = SemaphoreMutex::new("/api/semaphore-mutex");
    send_static(&async move { mutex.lock().await.map(|guard| guard.lost()) });
}

#[test]
fn errors_compare_and_explain_themselves() {
    let error = Error::Busy { path: "/a".into() };
    assert_eq!(error.clone(), error);
    assert_eq!(error.to_string(), "lock `/a` is held by another holder; try again later");
}
