//! Checks the annotated function against the arguments: an `async fn` returning `Result`,
//! and a binding for every placeholder.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, ReturnType, Signature, Type, TypeParamBound};

use crate::args::{closest, Args, Attribute, Errors};

/// Checks `item` for `args`, reporting every problem at its token; `errors` holds those
/// found in the arguments already.
pub(crate) fn check(args: &Args, item: &ItemFn, mut errors: Errors) -> syn::Result<()> {
    check_signature(args.attribute, &item.sig, &mut errors);
    let bindings = bindings(&item.sig);
    for path in &args.paths {
        for placeholder in path.template.placeholders() {
            if !bindings.contains(&placeholder.root.name) {
                let message =
                    unknown_placeholder(&item.sig.ident, &placeholder.text, &placeholder.root.name, &bindings);
                errors.at(path.literal.span(), message);
            }
        }
    }
    if let Some(unbound) = unbound_guard(item, args.guard.as_ref()) {
        let attr = args.attribute.shown();
        let message = match &args.guard {
            None => format!(
                "`{unbound}` is not bound in `{}`: to use the lock's guard in the body, add `guard = {unbound}` to {attr}",
                item.sig.ident
            ),
            Some(guard) => format!(
                "`{unbound}` is not bound in `{}`: {attr} binds the lock's guard as `{guard}` (`guard = {guard}`); \
                 write `{guard}` or change it to `guard = {unbound}`",
                item.sig.ident
            ),
        };
        errors.at(unbound.span(), message);
    }
    errors.into_result()
}

/// The methods of the guards (`zk_lock::MutexGuard` and the others) that other values seldom
/// have: a call of one on a name bound nowhere is most likely meant for the lock's guard.
const GUARD_METHODS: &[&str] = &[
    "fencing_token",
    "fencing_tokens",
    "fenced_writer",
    "node_path",
    "node_paths",
    "is_held",
    "is_revoked",
    "lost",
    "revoked",
];

/// A name the function uses as a guard (`x.fencing_token()`, `x.is_held()`, ...) but binds
/// nowhere, when `guard = ..` does not bind it: the body cannot compile, and rustc alone would only
/// say it cannot find `x`, without a word about `guard = x`.
///
/// A proc macro cannot resolve names, so the hint is kept to what cannot be valid code: every
/// occurrence of the name, anywhere in the function (its signature, its body, the tokens of the
/// macros called in it), must be such a method call's receiver. Any other occurrence may bind it
/// (a parameter, `let`, a closure's or a pattern's binding, a local item) and silences the hint.
/// What is left is a name from outside the function: a `static` or `const`, named in upper
/// case, which the hint leaves alone; `self` and paths (`a::x`, `a.x`) are never candidates.
fn unbound_guard(item: &ItemFn, bound: Option<&Ident>) -> Option<Ident> {
    let mut uses: Vec<(Ident, bool)> = Vec::new();
    scan(item.to_token_stream(), &mut uses);
    let as_receiver_only = |name: &Ident| uses.iter().all(|(other, receiver)| other != name || *receiver);
    uses.iter()
        .filter(|(name, receiver)| *receiver && Some(name) != bound)
        .map(|(name, _)| name)
        .find(|name| {
            let text = name.unraw().to_string();
            !matches!(text.as_str(), "self" | "Self" | "super" | "crate")
                && !text.starts_with(|c: char| c.is_uppercase())
                && as_receiver_only(name)
        })
        .cloned()
}

/// Records every identifier of `tokens` (in groups too), with whether it is the receiver of a
/// call of a guard method: `x . method (..)`, not after `.`, `::` or `$`. An identifier after `$`
/// is a macro's metavariable, not a name, and is skipped; a lifetime's is not recorded.
fn scan(tokens: TokenStream, uses: &mut Vec<(Ident, bool)>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (at, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Group(group) => scan(group.stream(), uses),
            TokenTree::Ident(ident) => {
                let before = at.checked_sub(1).and_then(|before| trees.get(before));
                if matches!(before, Some(TokenTree::Punct(p)) if matches!(p.as_char(), '$' | '\'')) {
                    continue;
                }
                let after_path = matches!(before, Some(TokenTree::Punct(p)) if matches!(p.as_char(), '.' | ':'));
                let receiver = !after_path
                    && matches!(trees.get(at + 1), Some(TokenTree::Punct(p)) if p.as_char() == '.')
                    && matches!(trees.get(at + 2), Some(TokenTree::Ident(method)) if GUARD_METHODS.iter().any(|m| method == m))
                    && matches!(trees.get(at + 3), Some(TokenTree::Group(args)) if args.delimiter() == Delimiter::Parenthesis);
                uses.push((ident.clone(), receiver));
            }
            TokenTree::Punct(_) | TokenTree::Literal(_) => {}
        }
    }
}

fn check_signature(attribute: Attribute, sig: &Signature, errors: &mut Errors) {
    let attr = attribute.shown();
    if sig.constness.is_some() {
        errors.at(
            sig.fn_token.span,
            format!("{attr} cannot go on a `const fn`: the lock is taken at run time; write `async fn {}`", sig.ident),
        );
    } else if sig.asyncness.is_none() {
        let message = if returns_boxed_future(&sig.output) {
            format!(
                "{attr} must see an `async fn`, but `{}` returns a boxed future: `#[async_trait]` on the `impl` \
                 expanded first and rewrote it; use a native `async fn` in the trait and its impl (Rust 1.75+) without \
                 `#[async_trait]`, or take a `zk_lock::Mutex` inside the method instead",
                sig.ident
            )
        } else {
            format!(
                "{attr} needs an `async fn`: the lock is awaited and held across the body's awaits; write `async fn {}`",
                sig.ident
            )
        };
        errors.at(sig.fn_token.span, message);
    }
    if sig.asyncness.is_none() {
        // One error per mistake: the return type of a non-async fn says nothing yet.
        return;
    }
    let requirement = format!(
        "{attr} needs `{}` to return `Result<_, E>` with `E: From<zk_lock::Error>`, so that failing to take the lock can be returned \
         (aliases whose name ends in `Result`, like `anyhow::Result<T>` or `AppResult<T>`, work too)",
        sig.ident
    );
    match &sig.output {
        ReturnType::Default => errors.at(sig.ident.span(), format!("{requirement}; it returns `()`")),
        ReturnType::Type(_, ty) if !is_result(ty) => errors.at(ty.span(), requirement),
        ReturnType::Type(..) => {}
    }
}

/// `Result`, `io::Result<T>`, `anyhow::Result<T>`, `AppResult<T>`, ...: a path whose last
/// segment is `Result` or ends in `Result`. Only names can be checked here; that the type is a
/// `Result` whose error converts from `zk_lock::Error` is checked by the compiler, at the return type.
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => {
            path.qself.is_none()
                && path.path.segments.last().is_some_and(|last| last.ident.to_string().ends_with("Result"))
        }
        Type::Paren(inner) => is_result(&inner.elem),
        Type::Group(inner) => is_result(&inner.elem),
        _ => false,
    }
}

/// `Pin<Box<dyn Future<Output = ..> + ..>>`, as `#[async_trait]` writes it.
fn returns_boxed_future(output: &ReturnType) -> bool {
    let ReturnType::Type(_, ty) = output else { return false };
    let Some(boxed) = single_generic(ty, "Pin") else { return false };
    let Some(Type::TraitObject(object)) = single_generic(boxed, "Box") else { return false };
    object.bounds.iter().any(|bound| match bound {
        TypeParamBound::Trait(bound) => bound.path.segments.last().is_some_and(|last| last.ident == "Future"),
        _ => false,
    })
}

/// `T` in `Name<T>` (any path ending in `Name`).
fn single_generic<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != name {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    args.args.iter().find_map(|arg| match arg {
        GenericArgument::Type(ty) => Some(ty),
        _ => None,
    })
}

/// The names a placeholder may start from: `self` and every binding of the parameters'
/// patterns, in order.
pub(crate) fn bindings(sig: &Signature) -> Vec<String> {
    let mut names = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(_) => names.push("self".to_owned()),
            FnArg::Typed(typed) => pattern_bindings(&typed.pat, &mut names),
        }
    }
    names
}

fn pattern_bindings(pat: &Pat, names: &mut Vec<String>) {
    match pat {
        Pat::Ident(ident) => {
            names.push(ident.ident.unraw().to_string());
            if let Some((_, sub)) = &ident.subpat {
                pattern_bindings(sub, names);
            }
        }
        Pat::Tuple(tuple) => tuple.elems.iter().for_each(|p| pattern_bindings(p, names)),
        Pat::TupleStruct(tuple) => tuple.elems.iter().for_each(|p| pattern_bindings(p, names)),
        Pat::Struct(strukt) => strukt.fields.iter().for_each(|field| pattern_bindings(&field.pat, names)),
        Pat::Slice(slice) => slice.elems.iter().for_each(|p| pattern_bindings(p, names)),
        Pat::Reference(reference) => pattern_bindings(&reference.pat, names),
        Pat::Paren(paren) => pattern_bindings(&paren.pat, names),
        Pat::Type(typed) => pattern_bindings(&typed.pat, names),
        // Every case of an or-pattern binds the same names.
        Pat::Or(or) => {
            if let Some(first) = or.cases.first() {
                pattern_bindings(first, names);
            }
        }
        _ => {}
    }
}

fn unknown_placeholder(function: &Ident, text: &str, root: &str, bindings: &[String]) -> String {
    let placeholder = format!("unknown placeholder `<{text}>`");
    let names = bindings.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
    let fields = "(or a field of one, like `<req.user_id>`)";
    if bindings.is_empty() {
        format!("{placeholder}: `{function}` has no parameters, so its lock path can only be literal text")
    } else if root == "self" {
        format!("{placeholder}: `{function}` has no `self` parameter; name one of its parameters {fields}: {names}")
    } else {
        let candidates: Vec<&str> = bindings.iter().map(String::as_str).collect();
        let hint = match closest(root, &candidates) {
            Some(near) => format!(" (did you mean `<{}>`?)", text.replacen(root, near, 1)),
            None => String::new(),
        };
        format!(
            "{placeholder}: `{root}` is not a parameter of `{function}`{hint}; name one of its parameters {fields}: {names}"
        )
    }
}

/// Where a missing `From<zk_lock::Error>` is reported: at `E` in `Result<T, E>`, or else at the
/// last segment of the return type (`Result` in `io::Result<T>`).
pub(crate) fn error_type_span(sig: &Signature) -> Span {
    let ReturnType::Type(_, ty) = &sig.output else { return sig.ident.span() };
    let Type::Path(path) = &**ty else { return ty.span() };
    let Some(last) = path.path.segments.last() else { return ty.span() };
    if let PathArguments::AngleBracketed(args) = &last.arguments {
        let types: Vec<&Type> = args
            .args
            .iter()
            .filter_map(|arg| match arg {
                GenericArgument::Type(ty) => Some(ty),
                _ => None,
            })
            .collect();
        if let [_, error] = types[..] {
            return error.span();
        }
    }
    last.ident.span()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unbound(function: &str, guard: Option<&str>) -> Option<String> {
        let item: ItemFn = syn::parse_str(function).unwrap();
        let guard = guard.map(|name| Ident::new(name, Span::call_site()));
        unbound_guard(&item, guard.as_ref()).map(|name| name.to_string())
    }

    #[test]
    fn a_name_used_only_as_a_guard_and_bound_nowhere_is_named() {
        let body = "async fn f(id: u64) -> Result<(), E> { db.write(id, g.fencing_token()).await }";
        assert_eq!(unbound(body, None).as_deref(), Some("g"));
        assert_eq!(unbound(body, Some("guard")).as_deref(), Some("g"));
        assert_eq!(unbound(body, Some("g")), None);
        let in_a_macro = "async fn f() -> Result<(), E> { tokio::select! { _ = guard.lost() => {} } Ok(()) }";
        assert_eq!(unbound(in_a_macro, None).as_deref(), Some("guard"));
    }

    #[test]
    fn any_other_occurrence_of_the_name_silences_the_hint() {
        for function in [
            "async fn f(g: &G) -> Result<bool, E> { Ok(g.is_held()) }",
            "async fn f() -> Result<bool, E> { let g = G; Ok(g.is_held()) }",
            "async fn f() -> Result<i64, E> { Ok((|g: &G| g.fencing_token())(&G)) }",
            "async fn f(o: Option<G>) -> Result<bool, E> { Ok(if let Some(g) = o { g.is_held() } else { false }) }",
            "async fn f() -> Result<bool, E> { fn g() {} Ok(g.is_held()) }",
            "async fn f() -> Result<bool, E> { Ok(self.g.is_held() && a::g.is_held()) }",
            "async fn f() -> Result<bool, E> { Ok(STATE.is_held() && self.is_held()) }",
            "async fn f() -> Result<bool, E> { macro_rules! m { ($g:expr) => { $g.is_held() } } Ok(m!(G)) }",
            "async fn f() -> Result<bool, E> { Ok(g.len() > 0) }",
        ] {
            assert_eq!(unbound(function, None), None, "{function}");
        }
    }
}
