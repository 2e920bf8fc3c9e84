//! The body keeps the meaning of `?` and `return`: they leave the body with the function's own
//! return type, converting errors as the function would.

use zk_lock::zk_lock;

#[derive(Debug)]
enum AppError {
    Lock(zk_lock::Error),
    Parse(std::num::ParseIntError),
}

impl From<zk_lock::Error> for AppError {
    fn from(error: zk_lock::Error) -> Self {
        Self::Lock(error)
    }
}

impl From<std::num::ParseIntError> for AppError {
    fn from(error: std::num::ParseIntError) -> Self {
        Self::Parse(error)
    }
}

#[zk_lock(path = "/parse/<text>")]
async fn parse(text: &str) -> Result<u64, AppError> {
    if text.is_empty() {
        return Ok(0);
    }
    let value: u64 = text.parse()?;
    if value == 13 {
        return Err(AppError::Lock(zk_lock::Error::Busy { path: "/unlucky".into() }));
    }
    Ok(value)
}

#[zk_lock(path = "/diverges")]
async fn diverges() -> Result<(), AppError> {
    loop {
        tokio::task::yield_now().await;
    }
}

#[zk_lock(path = "/anyhow-like")]
async fn boxed_errors() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let _: u8 = "1".parse()?;
    Err("plain strings convert too")?;
    Ok(())
}

fn main() {
    drop((parse("1"), diverges(), boxed_errors()));
    let _ = AppError::Parse("x".parse::<u8>().unwrap_err());
}
