//! What `#[async_trait]` turns `async fn run(&self) -> Result<(), Error>` into, before
//! `#[zk_lock]` sees it.

use std::future::Future;
use std::pin::Pin;

use zk_lock::{zk_lock, Error};

trait Job {
    fn run<'a>(&'a self) -> Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>>;
}

struct Nightly;

impl Job for Nightly {
    #[zk_lock(path = "/jobs/nightly")]
    fn run<'a>(&'a self) -> Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>> {
        Box::pin(async move { Ok(()) })
    }
}

fn main() {}
