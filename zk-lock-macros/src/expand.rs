//! Code generation: the function with its body moved into an `async move` block that runs while
//! the lock is held.
//!
//! The generated code names only `::zk_lock::__private::*` and `::core::*`; its locals are
//! `__zk_lock_*` identifiers with mixed-site hygiene, so the body cannot see them.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{AttrStyle, Ident, ItemFn, ReturnType, TraitItemFn, Type};

use crate::args::{self, Args, Attribute, OnLost, PathArg};
use crate::template::{Member, Name, Piece};
use crate::validate;

/// Expands `#[<attribute>(<args>)]` on `item`. On any error the item is emitted unchanged, followed
/// by the errors, so the caller sees them and nothing else.
pub(crate) fn attribute(attribute: Attribute, args: TokenStream, item: TokenStream) -> TokenStream {
    let function = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(_) => return with_error(item.clone(), not_a_function(attribute, item)),
    };
    let (args, errors) = args::parse(attribute, args);
    match validate::check(&args, &function, errors) {
        Ok(()) => expand(&args, function),
        Err(errors) => with_error(item, errors),
    }
}

fn with_error(mut item: TokenStream, error: syn::Error) -> TokenStream {
    item.extend(error.into_compile_error());
    item
}

fn not_a_function(attribute: Attribute, item: TokenStream) -> syn::Error {
    if let Ok(declaration) = syn::parse2::<TraitItemFn>(item) {
        if declaration.default.is_none() {
            return syn::Error::new(
                declaration.sig.fn_token.span,
                format!(
                    "{} needs a function body; put it on the `async fn` in each `impl` of the trait, not on the trait's declaration",
                    attribute.shown()
                ),
            );
        }
    }
    syn::Error::new(
        Span::call_site(),
        format!(
            "{} goes on an `async fn`, like `#[{}(path = \"/locks/orders\")] async fn work() -> Result<(), Error>`",
            attribute.shown(),
            attribute.name()
        ),
    )
}

/// Generates the function for checked `args`.
pub(crate) fn expand(args: &Args, function: ItemFn) -> TokenStream {
    let ItemFn { attrs, vis, sig, block } = function;
    let (inner, outer): (Vec<_>, Vec<_>) =
        attrs.into_iter().partition(|attr| matches!(attr.style, AttrStyle::Inner(_)));

    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let path = local("__zk_lock_path");
    let guard = local("__zk_lock_guard");
    let body = local("__zk_lock_body");
    let outcome = local("__zk_lock_outcome");
    let ret = local("__zk_lock_ret");
    let error = local("__zk_lock_error");
    let sites = local("__zk_lock_sites");

    let render = match args.attribute {
        Attribute::Multi => {
            let each = args.paths.iter().map(render_template);
            quote!(::zk_lock::__private::paths([#(#each),*]))
        }
        _ => render_template(&args.paths[0]),
    };

    let mut lock = quote!(::zk_lock::__private::Lock::declared(#sites));
    if let Some(client) = &args.client {
        lock.extend(quote!(.client(#client)));
    }
    if let Some(timeout) = args.timeout {
        let (secs, nanos) =
            (Literal::u64_unsuffixed(timeout.as_secs()), Literal::u32_unsuffixed(timeout.subsec_nanos()));
        lock.extend(quote!(.timeout(#secs, #nanos)));
    }
    if let Some(limit) = args.max_hold {
        let (secs, nanos) = (Literal::u64_unsuffixed(limit.as_secs()), Literal::u32_unsuffixed(limit.subsec_nanos()));
        lock.extend(quote!(.max_hold(#secs, #nanos)));
    }
    if let Some(report) = &args.queue_reports {
        // Located at the user's expression: a value that is not a `fn(&QueuePosition)` is
        // reported there.
        let at = Span::call_site().located_at(report.span());
        lock.extend(quote_spanned!(at=> .queue_reports(#report)));
    }
    let acquire = match args.attribute {
        Attribute::Mutex => quote!(mutex(#path)),
        Attribute::Read => quote!(read(#path)),
        Attribute::Write => quote!(write(#path)),
        Attribute::Semaphore if args.is_semaphore_mutex() => quote!(semaphore_mutex(#path)),
        Attribute::Semaphore => {
            let permits = Literal::u32_unsuffixed(args.permits.unwrap_or(1));
            quote!(semaphore(#path, #permits))
        }
        Attribute::Multi => quote!(multi(#path)),
        Attribute::Leader => quote!(leader(#path)),
    };

    let bind_guard = args.guard.as_ref().map(|name| quote!(let #name = &#guard;));
    let run = match args.on_lost {
        OnLost::Abort => quote!(::zk_lock::__private::abort_on_lost(&#guard, #body)),
        OnLost::Ignore => quote!(::zk_lock::__private::ignore_lost(&#guard, #body)),
    };

    // The body's `return` and `?` keep their meaning: the async block's output is pinned to the
    // declared return type (`impl Trait` parts left to inference).
    let anchor = match &sig.output {
        ReturnType::Type(_, ty) => erase_impl_trait(ty).into_token_stream(),
        ReturnType::Default => quote!(()),
    };
    // The one conversion of `zk_lock::Error` into the function's error type, located at the
    // return type: that is where a missing `From<zk_lock::Error>` is reported.
    let at_return = Span::call_site().located_at(validate::error_type_span(&sig));
    let error_at_return = Ident::new("__zk_lock_error", Span::mixed_site().located_at(at_return));
    let lock_error = quote_spanned!(at_return=> ::core::result::Result::Err(::zk_lock::__private::LockError::lock_error(#error_at_return)));

    let declare = declarations(args, &sig.ident);

    quote! {
        #(#outer)*
        #vis #sig {
            #(#inner)*
            let #sites = #declare;
            let #path = #render;
            let #outcome = match #lock.#acquire.await {
                ::core::result::Result::Ok(#guard) => {
                    #bind_guard
                    let #body = async move {
                        #[allow(unreachable_code)]
                        if let ::core::option::Option::Some(#ret) = ::core::option::Option::None::<#anchor> {
                            return #ret;
                        }
                        #block
                    };
                    let #outcome = #run.await;
                    ::zk_lock::__private::AnnotatedGuard::finish(#guard);
                    #outcome
                }
                ::core::result::Result::Err(#error) => ::core::result::Result::Err(#error),
            };
            match #outcome {
                ::core::result::Result::Ok(#ret) => #ret,
                ::core::result::Result::Err(#error) => #lock_error,
            }
        }
    }
}

/// The function's declarations, one per path, in a static: registered at link time for
/// `zk_lock::declared::declared()`, and passed to the acquisition as the lock's site (for lock-order
/// checking). Inside a block, the static is out of the body's reach.
fn declarations(args: &Args, function: &Ident) -> TokenStream {
    let recipe = match args.attribute {
        Attribute::Mutex | Attribute::Multi => quote!(Mutex),
        Attribute::Read => quote!(Read),
        Attribute::Write => quote!(Write),
        Attribute::Semaphore if args.is_semaphore_mutex() => quote!(SemaphoreMutex),
        Attribute::Semaphore => quote!(Semaphore),
        Attribute::Leader => quote!(Leader),
    };
    let function = function.unraw().to_string();
    let each = args.paths.iter().map(|path| {
        let template = &path.literal;
        quote! {
            ::zk_lock::__private::Declaration::new(#template, ::zk_lock::Recipe::#recipe, #function, ::core::file!(), ::core::line!())
        }
    });
    let count = Literal::usize_unsuffixed(args.paths.len());
    quote! {
        {
            static SITES: [::zk_lock::__private::Declaration; #count] = [#(#each),*];
            ::zk_lock::__private::inventory::submit! { ::zk_lock::__private::Declared(&SITES) }
            &SITES
        }
    }
}

/// `Template::new().lit("/product_").value("id", &id).finish()`, located at the path literal:
/// a value without `Display` is reported there.
fn render_template(path: &PathArg) -> TokenStream {
    let span = Span::call_site().located_at(path.literal.span());
    let mut calls = TokenStream::new();
    for piece in &path.template.pieces {
        match piece {
            Piece::Literal(text) => calls.extend(quote_spanned!(span=> .lit(#text))),
            Piece::Placeholder(placeholder) => {
                let name = &placeholder.text;
                let root = ident(&placeholder.root, span);
                let members = placeholder.members.iter().map(|member| match member {
                    Member::Named(field) => {
                        let field = ident(field, span);
                        quote_spanned!(span=> .#field)
                    }
                    Member::Index(index) => {
                        let index = syn::Index { index: *index, span };
                        quote_spanned!(span=> .#index)
                    }
                });
                calls.extend(quote_spanned!(span=> .value(#name, &#root #(#members)*)));
            }
        }
    }
    quote_spanned!(span=> ::zk_lock::__private::Template::new() #calls .finish())
}

/// `name` as an identifier; keywords other than `self` become raw (`<type>` names `r#type`).
fn ident(name: &Name, span: Span) -> Ident {
    if name.raw || (name.name != "self" && syn::parse_str::<Ident>(&name.name).is_err()) {
        Ident::new_raw(&name.name, span)
    } else {
        Ident::new(&name.name, span)
    }
}

/// The return type with every `impl Trait` replaced by `_`, usable as a type annotation.
fn erase_impl_trait(ty: &Type) -> Type {
    struct Eraser;
    impl VisitMut for Eraser {
        fn visit_type_mut(&mut self, ty: &mut Type) {
            if let Type::ImplTrait(impl_trait) = ty {
                *ty = Type::Infer(syn::TypeInfer { underscore_token: syn::Token![_](impl_trait.impl_token.span) });
            } else {
                syn::visit_mut::visit_type_mut(self, ty);
            }
        }
    }
    let mut ty = ty.clone();
    Eraser.visit_type_mut(&mut ty);
    ty
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_str(which: Attribute, args: &str, item: &str) -> String {
        attribute(which, args.parse().unwrap(), item.parse().unwrap()).to_string()
    }

    #[test]
    fn moves_the_body_into_an_anchored_async_block() {
        let out = expand_str(
            Attribute::Mutex,
            r#"path = "/product_<id>", timeout = "5s", guard = g"#,
            "async fn reduce_stock(db: &Db, id: u64) -> Result<(), AppError> { db.reduce(id, g.fencing_token()).await }",
        );
        for expected in [
            "async fn reduce_stock (db : & Db , id : u64) -> Result < () , AppError >",
            ":: zk_lock :: __private :: Template :: new () . lit (\"/product_\") . value (\"id\" , & id) . finish ()",
            "static SITES : [:: zk_lock :: __private :: Declaration ; 1] = [:: zk_lock :: __private :: Declaration :: new (\"/product_<id>\" , :: zk_lock :: Recipe :: Mutex , \"reduce_stock\" , :: core :: file ! () , :: core :: line ! ())] ;",
            ":: zk_lock :: __private :: inventory :: submit ! { :: zk_lock :: __private :: Declared (& SITES) } & SITES",
            ":: zk_lock :: __private :: Lock :: declared (__zk_lock_sites) . timeout (5 , 0) . mutex (__zk_lock_path) . await",
            "let g = & __zk_lock_guard ;",
            ":: core :: option :: Option :: None :: < Result < () , AppError > >",
            ":: zk_lock :: __private :: abort_on_lost (& __zk_lock_guard , __zk_lock_body) . await",
            ":: zk_lock :: __private :: AnnotatedGuard :: finish (__zk_lock_guard) ;",
            "Err (__zk_lock_error) => :: core :: result :: Result :: Err (:: zk_lock :: __private :: LockError :: lock_error (__zk_lock_error))",
        ] {
            assert!(out.contains(expected), "missing `{expected}` in\n{out}");
        }
        assert!(!out.contains("std ::"), "{out}");
    }

    #[test]
    fn keeps_inner_attributes_first_and_erases_impl_trait_in_the_anchor() {
        let out = expand_str(
            Attribute::Read,
            r#"path = "/a", client = "c", on_lost = "ignore""#,
            "async fn f() -> Result<impl Display, E> { #![allow(unused)] Ok(1) }",
        );
        assert!(out.contains("-> Result < impl Display , E > { # ! [allow (unused)] let __zk_lock_sites"), "{out}");
        assert!(
            out.contains(":: Declaration :: new (\"/a\" , :: zk_lock :: Recipe :: Read , \"f\" , :: core :: file ! () , :: core :: line ! ())"),
            "{out}"
        );
        assert!(out.contains("None :: < Result < _ , E > >"), "{out}");
        assert!(out.contains(". client (\"c\") . read (__zk_lock_path)"), "{out}");
        assert!(out.contains(":: zk_lock :: __private :: ignore_lost (& __zk_lock_guard , __zk_lock_body)"), "{out}");
    }

    #[test]
    fn renders_fields_tuple_indices_and_several_paths() {
        let out = expand_str(
            Attribute::Multi,
            r#"paths = ["/a/<self.shard>", "/b/<pair.0>"]"#,
            "async fn f(&self, pair: (u8, u8)) -> Result<(), E> { Ok(()) }",
        );
        assert!(out.contains(":: zk_lock :: __private :: paths (["), "{out}");
        assert!(out.contains("static SITES : [:: zk_lock :: __private :: Declaration ; 2]"), "{out}");
        assert!(
            out.contains("Recipe :: Mutex , \"f\" , :: core :: file ! () , :: core :: line ! ()) , :: zk_lock"),
            "{out}"
        );
        assert!(out.contains(". value (\"self.shard\" , & self . shard)"), "{out}");
        assert!(out.contains(". value (\"pair.0\" , & pair . 0)"), "{out}");
        assert!(out.contains(". multi (__zk_lock_path)"), "{out}");
        let out =
            expand_str(Attribute::Semaphore, r#"path = "/w", permits = 4"#, "async fn f() -> Result<(), E> { Ok(()) }");
        assert!(out.contains(". semaphore (__zk_lock_path , 4)"), "{out}");
        for args in [r#"path = "/w""#, r#"path = "/w", permits = 1"#] {
            let out = expand_str(Attribute::Semaphore, args, "async fn f() -> Result<(), E> { Ok(()) }");
            assert!(out.contains(". semaphore_mutex (__zk_lock_path)"), "{out}");
        }
    }

    #[test]
    fn on_error_emits_the_function_unchanged_then_the_errors() {
        let item = "fn f(id: u64) -> u64 { id }";
        let out = expand_str(Attribute::Mutex, r#"path = "/a/<idd>", timout = "5s""#, item);
        assert!(out.starts_with(&item.parse::<TokenStream>().unwrap().to_string()), "{out}");
        assert_eq!(out.matches("compile_error").count(), 3, "{out}");
        for message in ["unknown argument `timout`", "needs an `async fn`", "unknown placeholder `<idd>`"] {
            assert!(out.contains(message), "missing `{message}` in {out}");
        }
        let out = expand_str(Attribute::Mutex, r#"path = "/a""#, "async fn f() -> u64 { 1 }");
        assert!(out.contains("to return `Result<_, E>`"), "{out}");
    }

    #[test]
    fn queue_reports_passes_the_expression_to_the_lock_where_the_recipe_reports() {
        let item = "async fn f(id: u64) -> Result<(), E> { Ok(()) }";
        for (which, acquire) in [
            (Attribute::Mutex, "mutex"),
            (Attribute::Read, "read"),
            (Attribute::Write, "write"),
            (Attribute::Multi, "multi"),
        ] {
            let path = if which == Attribute::Multi { r#"paths = ["/a/<id>"]"# } else { r#"path = "/a/<id>""# };
            let out = expand_str(which, &format!("{path}, timeout = \"1s\", queue_reports = report_place"), item);
            let expected =
                format!(". timeout (1 , 0) . queue_reports (report_place) . {acquire} (__zk_lock_path) . await");
            assert!(out.contains(&expected), "missing `{expected}` in\n{out}");
        }
        let out = expand_str(Attribute::Mutex, r#"path = "/a", queue_reports = |p| log::info!("{p}")"#, item);
        assert!(out.contains(". queue_reports (| p | log :: info ! (\"{p}\")) . mutex"), "{out}");
        let out = expand_str(Attribute::Mutex, r#"path = "/a""#, item);
        assert!(!out.contains("queue_reports"), "{out}");
    }

    #[test]
    fn queue_reports_is_refused_on_a_semaphore_and_as_a_literal_and_suggested_when_misspelt() {
        let item = "async fn f() -> Result<(), E> { Ok(()) }";
        let out = expand_str(Attribute::Semaphore, r#"path = "/w", permits = 2, queue_reports = report_place"#, item);
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
        assert!(out.contains("`#[zk_semaphore]` does not take `queue_reports`"), "{out}");
        assert!(
            out.contains(
                "`#[zk_lock]`, `#[zk_read_lock]`, `#[zk_write_lock]`, `#[zk_multi_lock]` and `#[zk_leader]` take it"
            ),
            "{out}"
        );
        let out = expand_str(Attribute::Mutex, r#"path = "/a", queue_reports = "report_place""#, item);
        assert!(out.contains("without quotes: `queue_reports = report_place`"), "{out}");
        let out = expand_str(Attribute::Mutex, r#"path = "/a", queue_reports = 2"#, item);
        assert!(out.contains("not a literal; like `queue_reports = report_place`"), "{out}");
        let out = expand_str(Attribute::Write, r#"path = "/a", queue_report = report_place"#, item);
        assert!(
            out.contains("unknown argument `queue_report` in `#[zk_write_lock]` (did you mean `queue_reports`?)"),
            "{out}"
        );
        let out = expand_str(Attribute::Mutex, r#"path = "/a", queue_reports"#, item);
        assert!(out.contains("expected `=` after `queue_reports`, like `queue_reports = report_place`"), "{out}");
    }

    /// The expansion shown in `zk-lock`'s crate docs is the real one.
    #[test]
    fn the_crate_docs_show_the_real_expansion() {
        let docs: Vec<&str> = include_str!("../../zk-lock/src/lib.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//!"))
            .map(|line| line.strip_prefix(' ').unwrap_or(line))
            .collect();
        let intro = docs.iter().position(|line| line.starts_with("expands to this")).expect("the Expansion section");
        let shown: Vec<&str> = docs[intro..]
            .iter()
            .skip_while(|line| !line.starts_with("```"))
            .skip(1)
            .take_while(|line| !line.starts_with("```"))
            .filter(|line| !line.starts_with("# "))
            .copied()
            .collect();
        let shown: TokenStream = shown.join("\n").parse().expect("the shown expansion is Rust");
        let real = attribute(
            Attribute::Mutex,
            r#"path = "/product_<id>", timeout = "5s", guard = g"#.parse().unwrap(),
            "async fn reduce_stock(db: &Db, id: u64) -> Result<(), AppError> { db.reduce(id, g.fencing_token()).await }"
                .parse()
                .unwrap(),
        );
        assert_eq!(tokens(shown), tokens(real), "update the Expansion section of zk-lock/src/lib.rs");
    }

    /// The tokens of `stream`, without spacing.
    fn tokens(stream: TokenStream) -> Vec<String> {
        stream
            .into_iter()
            .flat_map(|tree| match tree {
                proc_macro2::TokenTree::Group(group) => {
                    let mut inner = vec![format!("{:?}", group.delimiter())];
                    inner.extend(tokens(group.stream()));
                    inner.push("end".to_owned());
                    inner
                }
                proc_macro2::TokenTree::Punct(punct) => vec![punct.as_char().to_string()],
                other => vec![other.to_string()],
            })
            .collect()
    }

    /// Prints the expansion of the example in `zk-lock`'s crate docs (`cargo test -p
    /// zk-lock-macros -- --nocapture print_expansion`), to paste there after formatting.
    #[test]
    fn print_expansion() {
        let out = attribute(
            Attribute::Mutex,
            r#"path = "/product_<id>", timeout = "5s", guard = g"#.parse().unwrap(),
            "async fn reduce_stock(db: &Db, id: u64) -> Result<(), AppError> { db.reduce(id, g.fencing_token()).await }"
                .parse()
                .unwrap(),
        );
        println!("{out}");
    }
}
