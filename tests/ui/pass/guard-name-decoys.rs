//! Names used like a guard (`x.is_held()`, `x.fencing_token()`) that the body binds itself, or
//! that the function takes: no hint about `guard = x`, which only a name bound nowhere in the
//! function gets (tests/ui/fail/guard-not-bound.rs).

use zk_lock::{zk_lock, Error, MutexGuard};

struct Lease;

impl Lease {
    fn is_held(&self) -> bool {
        true
    }
    fn fencing_token(&self) -> i64 {
        1
    }
}

#[zk_lock(path = "/decoys/local")]
async fn local() -> Result<bool, Error> {
    let g = Lease;
    Ok(g.is_held())
}

#[zk_lock(path = "/decoys/<id>")]
async fn parameter(id: u64, g: &MutexGuard) -> Result<i64, Error> {
    let _ = id;
    Ok(g.fencing_token())
}

#[zk_lock(path = "/decoys/closure")]
async fn closure() -> Result<i64, Error> {
    let token = |g: &Lease| g.fencing_token();
    Ok(token(&Lease))
}

#[zk_lock(path = "/decoys/pattern")]
async fn pattern(lease: Option<Lease>) -> Result<bool, Error> {
    Ok(match lease {
        Some(g) => g.is_held(),
        None => false,
    })
}

#[zk_lock(path = "/decoys/field")]
async fn field(pair: (u8, Lease)) -> Result<i64, Error> {
    struct Holder {
        g: Lease,
    }
    let holder = Holder { g: pair.1 };
    Ok(holder.g.fencing_token() + i64::from(pair.0))
}

#[zk_lock(path = "/decoys/macro")]
async fn in_a_macro() -> Result<bool, Error> {
    macro_rules! held {
        ($g:expr) => {
            $g.is_held()
        };
    }
    Ok(held!(Lease))
}

fn main() {
    drop((local(), closure(), pattern(None), field((1, Lease)), in_a_macro()));
    let _ = parameter;
}
