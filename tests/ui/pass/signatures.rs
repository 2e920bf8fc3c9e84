//! Every kind of function the attributes go on: free functions, methods with each receiver,
//! trait-impl methods, generics and `where` clauses, `impl Trait`, lifetimes, result aliases,
//! inner attributes.

use std::fmt::Display;

use zk_lock::zk_lock;

#[derive(Debug)]
struct AppError;

impl From<zk_lock::Error> for AppError {
    fn from(_: zk_lock::Error) -> Self {
        Self
    }
}

type AppResult<T> = Result<T, AppError>;

#[zk_lock(path = "/free/<id>")]
async fn free(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

#[zk_lock(path = "/free/<id>")]
pub(crate) async unsafe fn unsafe_and_visible(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

#[zk_lock(path = "/alias")]
async fn alias() -> AppResult<()> {
    Ok(())
}

#[zk_lock(path = "/boxed")]
async fn boxed_error() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    Ok(())
}

struct Shard {
    shard: u32,
}

impl Shard {
    #[zk_lock(path = "/shards/<self.shard>")]
    async fn by_ref(&self) -> Result<u32, AppError> {
        Ok(self.shard)
    }

    #[zk_lock(path = "/shards/<self.shard>")]
    async fn by_mut(&mut self) -> Result<(), AppError> {
        self.shard += 1;
        Ok(())
    }

    #[zk_lock(path = "/shards/<self.shard>")]
    async fn by_value(self) -> Result<Self, AppError> {
        Ok(self)
    }

    #[zk_lock(path = "/shards/<self.shard>")]
    async fn boxed_self(self: Box<Self>) -> AppResult<Box<Self>> {
        Ok(self)
    }

    #[zk_lock(path = "/shards/<shard>")]
    async fn associated(shard: u32) -> Result<Self, AppError> {
        Ok(Self { shard })
    }
}

impl Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shard-{}", self.shard)
    }
}

impl Shard {
    #[zk_lock(path = "/whole/<self>")]
    async fn whole_self(&self) -> Result<(), AppError> {
        Ok(())
    }
}

trait WithDefault {
    fn id(&self) -> u64;

    #[zk_lock(path = "/defaults/<id>")]
    async fn locked_default(&self, id: u64) -> Result<u64, AppError> {
        Ok(self.id() + id)
    }
}

impl WithDefault for Shard {
    fn id(&self) -> u64 {
        u64::from(self.shard)
    }
}

trait Store {
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<usize, AppError>;
}

impl Store for Shard {
    #[zk_lock(path = "/store/<self.shard>/<key>")]
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<usize, AppError> {
        Ok(key.len() + value.len())
    }
}

#[zk_lock(path = "/generic/<key>")]
async fn generic<K: Display + ?Sized, V>(key: &K, value: V) -> Result<V, AppError>
where
    V: Clone,
{
    Ok(value.clone())
}

#[zk_lock(path = "/impl/<key>")]
async fn impl_trait(key: impl Display, items: impl IntoIterator<Item = u8>) -> Result<impl Display, AppError> {
    Ok(items.into_iter().count())
}

#[zk_lock(path = "/lifetimes/<name>")]
async fn named_lifetime<'a>(name: &'a str) -> Result<&'a str, AppError> {
    Ok(name)
}

#[zk_lock(path = "/lifetimes/<name>")]
async fn elided_lifetime(name: &str) -> Result<&str, AppError> {
    Ok(name)
}

#[zk_lock(path = "/inner/<id>")]
async fn inner_attributes(id: u64) -> Result<(), AppError> {
    #![allow(unused_variables)]
    let unused = id;
    Ok(())
}

#[zk_lock(path = "/mut/<id>")]
async fn mutable_parameter(mut id: u64) -> Result<u64, AppError> {
    id += 1;
    Ok(id)
}

#[zk_lock(path = "/r#type/<r#type>")]
async fn raw_identifier(r#type: &str) -> Result<(), AppError> {
    let _ = r#type;
    Ok(())
}

fn main() {
    let _ = (free, unsafe_and_visible, alias, boxed_error, Shard::associated);
    drop(impl_trait(1, Vec::new()));
    let _ = (generic::<str, u8>, named_lifetime, elided_lifetime, inner_attributes, mutable_parameter);
    let _ = raw_identifier;
    let shard = Shard { shard: 1 };
    drop((shard.by_ref(), shard.whole_self(), shard.put("k", Vec::new()), shard.locked_default(1)));
}
