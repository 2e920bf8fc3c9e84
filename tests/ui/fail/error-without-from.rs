use zk_lock::zk_lock;

#[derive(Debug)]
struct AppError;

#[zk_lock(path = "/orders/<id>", guard = g)]
async fn no_conversion(id: u64) -> Result<(), AppError> {
    let _ = g.fencing_token();
    Ok(())
}

type AppResult<T> = Result<T, AppError>;

#[zk_lock(path = "/orders/<id>")]
async fn through_an_alias(id: u64) -> AppResult<()> {
    let _ = id;
    Ok(())
}

fn main() {}
