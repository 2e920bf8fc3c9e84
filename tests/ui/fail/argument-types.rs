use zk_lock::{zk_lock, zk_multi_lock, zk_semaphore, Error};

const PATH: &str = "/orders";

#[zk_lock(path = PATH, timeout = 5, client = orders, guard = "g")]
async fn wrong_kinds() -> Result<(), Error> {
    Ok(())
}

#[zk_lock(path = "/orders", client = "", guard = g.h)]
async fn empty_client_and_path_guard() -> Result<(), Error> {
    Ok(())
}

#[zk_multi_lock(paths = "/a")]
async fn paths_not_a_list() -> Result<(), Error> {
    Ok(())
}

#[zk_multi_lock(paths = [])]
async fn paths_empty() -> Result<(), Error> {
    Ok(())
}

#[zk_multi_lock(paths = ["/a", 1])]
async fn paths_with_a_number() -> Result<(), Error> {
    Ok(())
}

#[zk_semaphore(path = "/w", permits = "4")]
async fn permits_as_string() -> Result<(), Error> {
    Ok(())
}

fn main() {}
