//! Placeholders bound to parameters, to bindings inside parameter patterns (an axum-style
//! extractor, tuples, structs, references, slices), and to fields of them.

use zk_lock::zk_lock;

#[derive(Debug)]
struct AppError;

impl From<zk_lock::Error> for AppError {
    fn from(_: zk_lock::Error) -> Self {
        Self
    }
}

/// Like `axum::extract::Path`.
struct Path<T>(T);

struct Request {
    user_id: u64,
    tenant: Tenant,
}

struct Tenant {
    name: String,
}

#[zk_lock(path = "/orders/<id>")]
async fn extractor(Path(id): Path<u64>) -> Result<u64, AppError> {
    Ok(id)
}

#[zk_lock(path = "/orders/<shop>/<id>")]
async fn extractor_of_tuple(Path((shop, id)): Path<(String, u64)>) -> Result<String, AppError> {
    Ok(format!("{shop}-{id}"))
}

#[zk_lock(path = "/pairs/<a>-<b>")]
async fn tuple((a, b): (u8, u8)) -> Result<u8, AppError> {
    Ok(a + b)
}

#[zk_lock(path = "/users/<user_id>/<name>")]
async fn struct_pattern(Request { user_id, tenant: Tenant { name } }: Request) -> Result<usize, AppError> {
    Ok(usize::try_from(user_id).unwrap_or_default() + name.len())
}

#[zk_lock(path = "/refs/<x>/<first>")]
async fn reference_and_slice(&x: &u32, [first, ..]: [u8; 3]) -> Result<u32, AppError> {
    Ok(x + u32::from(first))
}

#[zk_lock(path = "/bound/<inner>")]
async fn at_binding(whole @ Path(inner): Path<u8>) -> Result<u8, AppError> {
    let Path(again) = whole;
    Ok(inner + again)
}

#[zk_lock(path = "/users/<req.user_id>/<req.tenant.name>")]
async fn field_paths(req: &Request) -> Result<u64, AppError> {
    Ok(req.user_id)
}

#[zk_lock(path = "/pairs/<pair.0>/<pair.1>")]
async fn tuple_fields(pair: (u8, &str)) -> Result<u8, AppError> {
    Ok(pair.0)
}

#[zk_lock(path = "/types/<type>")]
async fn keyword_name(r#type: &str) -> Result<usize, AppError> {
    Ok(r#type.len())
}

#[zk_lock(path = "/unsized/<name>")]
async fn unsized_value(name: &str, _: u8) -> Result<(), AppError> {
    Ok(())
}

fn main() {
    drop(extractor(Path(1)));
    drop(extractor_of_tuple(Path(("shop".into(), 1))));
    drop(tuple((1, 2)));
    drop(struct_pattern(Request { user_id: 1, tenant: Tenant { name: "t".into() } }));
    drop(reference_and_slice(&1, [1, 2, 3]));
    drop(at_binding(Path(1)));
    drop(field_paths(&Request { user_id: 1, tenant: Tenant { name: "t".into() } }));
    drop(tuple_fields((1, "a")));
    drop(keyword_name("a"));
    drop(unsized_value("a", 1));
}
