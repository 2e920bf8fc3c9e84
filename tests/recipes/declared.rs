//! The link-time registry of annotated templates: `declared()` and `check_declared()`.
//! The functions here are never called: declaring them is enough. The registry holds the
//! annotated functions of the whole binary; these tests look at the ones of this file.

use zk_lock::declared::{check_declared, declared, Conflict, Declaration};
use zk_lock::{zk_lock, zk_read_lock, zk_semaphore, zk_write_lock};

/// Declared in this file, not in the other modules of the binary.
fn ours(declaration: &Declaration) -> bool {
    declaration.file.ends_with("declared.rs")
}

#[zk_lock(path = "/declared/orders/<id>")]
async fn ship(id: u64) -> zk_lock::Result<()> {
    let _ = id;
    Ok(())
}

#[zk_read_lock(path = "/declared/catalog/<sku>")]
async fn price(sku: &str) -> zk_lock::Result<()> {
    let _ = sku;
    Ok(())
}

#[zk_write_lock(path = "/declared/catalog/<sku>")]
async fn reprice(sku: &str) -> zk_lock::Result<()> {
    let _ = sku;
    Ok(())
}

// Conflicts: the same template as a mutex, and a semaphore on the parent of the orders.
#[zk_lock(path = "/declared/catalog/<sku>")]
async fn audit(sku: &str) -> zk_lock::Result<()> {
    let _ = sku;
    Ok(())
}

#[zk_semaphore(path = "/declared/orders", permits = 3)]
async fn batch() -> zk_lock::Result<()> {
    Ok(())
}

// Never called, only named so that they count as used: declaring them is what is tested.
const _: () = {
    let _ = (ship, price, reprice, audit, batch);
};

#[test]
fn every_annotated_template_is_listed_with_its_recipe_and_place() {
    let ours: Vec<_> = declared().into_iter().filter(ours).collect();
    let listed: Vec<(&str, &str)> = ours.iter().map(|d| (d.template, d.recipe.as_str())).collect();
    assert_eq!(
        listed,
        [
            ("/declared/catalog/<sku>", "read"),
            ("/declared/catalog/<sku>", "write"),
            ("/declared/catalog/<sku>", "mutex"),
            ("/declared/orders", "semaphore"),
            ("/declared/orders/<id>", "mutex"),
        ]
    );
    assert!(ours.iter().all(|d| d.line > 0));
}

#[test]
fn conflicting_templates_are_reported() {
    let mut conflicts = check_declared().expect_err("this file declares conflicting templates");
    conflicts.retain(|conflict| match conflict {
        Conflict::RecipeMismatch(a, b) => ours(a) || ours(b),
        Conflict::Nested { outer, inner } => ours(outer) || ours(inner),
        _ => true,
    });
    assert_eq!(conflicts.len(), 3, "{conflicts:#?}");
    let mismatches = conflicts.iter().filter(|c| matches!(c, Conflict::RecipeMismatch(..))).count();
    assert_eq!(mismatches, 2, "the mutex clashes with both sides of the read/write lock");
    let nested: Vec<_> = conflicts
        .iter()
        .filter_map(|c| match c {
            Conflict::Nested { outer, inner } => Some((outer.template, inner.template)),
            _ => None,
        })
        .collect();
    assert_eq!(nested, [("/declared/orders", "/declared/orders/<id>")]);
    assert!(conflicts.iter().all(|c| !c.to_string().is_empty()));
}
