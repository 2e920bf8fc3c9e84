//! The arguments of an attribute, parsed into a typed configuration.
//!
//! Every problem is reported at the token that causes it; problems with different arguments
//! are all collected, so one compile shows them together.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Token};

use crate::duration;
use crate::template::{self, Template};

/// Which attribute is expanded: one per recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attribute {
    Mutex,
    Read,
    Write,
    Semaphore,
    Multi,
    Leader,
}

impl Attribute {
    /// The attribute's name, as written by users.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mutex => "zk_lock",
            Self::Read => "zk_read_lock",
            Self::Write => "zk_write_lock",
            Self::Semaphore => "zk_semaphore",
            Self::Multi => "zk_multi_lock",
            Self::Leader => "zk_leader",
        }
    }

    /// `#[zk_lock]`, for messages.
    pub fn shown(self) -> String {
        format!("`#[{}]`", self.name())
    }

    /// The arguments this attribute accepts, in the order the documentation gives them.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Self::Mutex | Self::Read | Self::Write | Self::Leader => {
                &["path", "timeout", "max_hold", "client", "guard", "on_lost", "queue_reports"]
            }
            Self::Semaphore => &["path", "permits", "timeout", "max_hold", "client", "guard", "on_lost"],
            Self::Multi => &["paths", "timeout", "max_hold", "client", "guard", "on_lost", "queue_reports"],
        }
    }

    /// Why this attribute refuses `key`, a key other attributes take, when a plain "unknown
    /// argument" would not say what to do instead.
    fn refuses(self, key: &str) -> Option<String> {
        match (self, key) {
            (Self::Semaphore, "queue_reports") => Some(format!(
                "{} does not take `queue_reports`: a semaphore reports no place in line (a request waits in its \
                 internal lock's queue, then for any of the permits to free, not behind one holder; `zk_lock::Semaphore` \
                 has no `with_queue_reports`); `#[zk_lock]`, `#[zk_read_lock]`, `#[zk_write_lock]`, \
                 `#[zk_multi_lock]` and `#[zk_leader]` take it",
                self.shown()
            )),
            _ => None,
        }
    }

    fn path_key(self) -> &'static str {
        match self {
            Self::Multi => "paths",
            _ => "path",
        }
    }

    fn example(self) -> &'static str {
        match self {
            Self::Multi => "paths = [\"/accounts/<from>\", \"/accounts/<to>\"]",
            Self::Semaphore => "path = \"/workers/transcode\", permits = 4",
            Self::Leader => "path = \"/jobs/billing\"",
            _ => "path = \"/locks/orders\"",
        }
    }
}

/// What to do when the lock is lost while the body runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum OnLost {
    /// Drop the body and return `Error::Lost`.
    #[default]
    Abort,
    /// Let the body finish.
    Ignore,
}

/// A lock path template with the literal it was written as (errors about it point there).
pub(crate) struct PathArg {
    pub literal: LitStr,
    pub template: Template,
}

/// The typed arguments of one attribute.
pub(crate) struct Args {
    pub attribute: Attribute,
    /// One template, or several for `#[zk_multi_lock]`.
    pub paths: Vec<PathArg>,
    pub timeout: Option<Duration>,
    /// `max_hold = ".."`: more than zero.
    pub max_hold: Option<Duration>,
    pub client: Option<LitStr>,
    pub guard: Option<Ident>,
    pub on_lost: OnLost,
    /// `#[zk_semaphore]` only: at least 1.
    pub permits: Option<u32>,
    /// `queue_reports = <expr>`: a `fn(&zk_lock::QueuePosition)` (a function's path, a closure
    /// that captures nothing), type-checked where the generated code passes it to `Lock`. Not on
    /// `#[zk_semaphore]`.
    pub queue_reports: Option<Expr>,
}

impl Args {
    /// `#[zk_semaphore]` with one permit takes a semaphore mutex: a call nested in its body fails
    /// at once instead of waiting for itself.
    pub fn is_semaphore_mutex(&self) -> bool {
        self.attribute == Attribute::Semaphore && matches!(self.permits, None | Some(1))
    }

    fn empty(attribute: Attribute) -> Self {
        Self {
            attribute,
            paths: Vec::new(),
            timeout: None,
            max_hold: None,
            client: None,
            guard: None,
            on_lost: OnLost::Abort,
            permits: None,
            queue_reports: None,
        }
    }
}

/// Collects errors, combining them into one `syn::Error`.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    pub fn into_result(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Parses the arguments of `attribute`'s attribute. Problems with values are collected, so every
/// argument is checked; a syntax error stops the parse. The arguments that were understood are
/// returned along with the errors, so the function can still be checked against them.
pub(crate) fn parse(attribute: Attribute, tokens: TokenStream) -> (Args, Errors) {
    let mut errors = Errors::default();
    let mut args = Args::empty(attribute);
    let parsed = (|input: ParseStream| parse_pairs(&mut args, input, &mut errors)).parse2(tokens);
    if let Err(syntax) = parsed {
        errors.push(syntax);
    }
    (args, errors)
}

fn parse_pairs(args: &mut Args, input: ParseStream, errors: &mut Errors) -> syn::Result<()> {
    let attribute = args.attribute;
    // A misspelt path argument is reported once, as unknown, not also as missing.
    let mut unknown = false;
    let mut seen: Vec<String> = Vec::new();
    while !input.is_empty() {
        if input.peek(LitStr) {
            let literal: LitStr = input.parse()?;
            return Err(syn::Error::new(
                literal.span(),
                format!(
                    "arguments of {} are `name = value` pairs; write `{} = {:?}`",
                    attribute.shown(),
                    attribute.path_key(),
                    literal.value()
                ),
            ));
        }
        let key = input.call(Ident::parse_any)?;
        let name = key.unraw().to_string();
        if !input.peek(Token![=]) {
            let example = match name.as_str() {
                "timeout" => "timeout = \"5s\"".to_owned(),
                "max_hold" => "max_hold = \"30s\"".to_owned(),
                "client" => "client = \"orders\"".to_owned(),
                "guard" => "guard = g".to_owned(),
                "on_lost" => "on_lost = \"ignore\"".to_owned(),
                "permits" => "permits = 4".to_owned(),
                "queue_reports" => "queue_reports = report_place".to_owned(),
                _ => attribute.example().to_owned(),
            };
            return Err(syn::Error::new(key.span(), format!("expected `=` after `{name}`, like `{example}`")));
        }
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        if !input.is_empty() {
            input.parse::<Token![,]>()?;
        }

        if let Some(refused) = attribute.refuses(&name) {
            errors.at(key.span(), refused);
            continue;
        }
        if !attribute.keys().contains(&name.as_str()) {
            let expected = attribute.keys().iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
            let hint = closest(&name, attribute.keys()).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
            errors.at(
                key.span(),
                format!("unknown argument `{name}` in {}{hint}; expected one of {expected}", attribute.shown()),
            );
            unknown = true;
            continue;
        }
        if seen.contains(&name) {
            errors.at(
                key.span(),
                format!("duplicate argument `{name}` in {}; give each argument once", attribute.shown()),
            );
            continue;
        }
        seen.push(name.clone());
        if let Err(error) = set(args, &name, &value) {
            errors.push(error);
        }
    }
    if !unknown && !seen.iter().any(|key| key == attribute.path_key()) {
        let what = if attribute == Attribute::Multi { "the lock paths" } else { "the lock path" };
        errors.at(
            Span::call_site(),
            format!(
                "missing `{}` in {}; give {what}, like `#[{}({})]`",
                attribute.path_key(),
                attribute.shown(),
                attribute.name(),
                attribute.example()
            ),
        );
    }
    Ok(())
}

/// Interprets the value of one (known, first-seen) argument.
fn set(args: &mut Args, name: &str, value: &Expr) -> syn::Result<()> {
    let err = |message: String| Err(syn::Error::new_spanned(value, message));
    match name {
        "path" => {
            let Some(literal) = string(value) else {
                return err(
                    "`path` takes a string literal, like `path = \"/locks/orders\"` or `path = \"/product_<id>\"`"
                        .into(),
                );
            };
            args.paths.push(path_arg(literal)?);
        }
        "paths" => {
            let message =
                "`paths` takes a list of string literals, like `paths = [\"/accounts/<from>\", \"/accounts/<to>\"]`";
            let Expr::Array(array) = value else { return err(message.into()) };
            if array.elems.is_empty() {
                return err("`paths` is empty; list the lock paths to take together, like `paths = [\"/accounts/<from>\", \"/accounts/<to>\"]`".into());
            }
            let mut errors = Errors::default();
            for element in &array.elems {
                match string(element) {
                    Some(literal) => match path_arg(literal) {
                        Ok(path) => args.paths.push(path),
                        Err(error) => errors.push(error),
                    },
                    None => errors.push(syn::Error::new_spanned(element, message)),
                }
            }
            errors.into_result()?;
        }
        "timeout" => {
            let Some(literal) = string(value) else {
                return err(
                    "`timeout` takes a string with a unit, like `timeout = \"5s\"`, `\"250ms\"` or `\"1m30s\"`".into(),
                );
            };
            let parsed = duration::parse("timeout", &literal.value())
                .map_err(|message| syn::Error::new(literal.span(), message))?;
            args.timeout = Some(parsed);
        }
        "max_hold" => {
            let Some(literal) = string(value) else {
                return err(
                    "`max_hold` takes a string with a unit, like `max_hold = \"30s\"`, `\"500ms\"` or `\"2m\"`".into(),
                );
            };
            let parsed = duration::parse("max_hold", &literal.value())
                .map_err(|message| syn::Error::new(literal.span(), message))?;
            if parsed.is_zero() {
                return Err(syn::Error::new(
                    literal.span(),
                    "`max_hold` is zero: every hold would end as it is granted; give the longest time the body may hold the lock, like `max_hold = \"30s\"`",
                ));
            }
            args.max_hold = Some(parsed);
        }
        "client" => {
            let Some(literal) = string(value) else {
                return err(
                    "`client` takes the name of an installed client as a string, like `client = \"orders\"`".into()
                );
            };
            if literal.value().is_empty() {
                return err("`client` is empty; name a client installed with `ClientBuilder::install_as`, like `client = \"orders\"`, or leave `client` out to use the default client".into());
            }
            args.client = Some(literal.clone());
        }
        "guard" => {
            let ident = match value {
                Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => path.path.get_ident(),
                _ => None,
            };
            let Some(ident) = ident else {
                return err("`guard` takes a name to bind the guard to in the body, like `guard = g`".into());
            };
            args.guard = Some(ident.clone());
        }
        "on_lost" => {
            let Some(literal) = string(value) else {
                return err("`on_lost` takes `\"abort\"` or `\"ignore\"`, like `on_lost = \"ignore\"`".into());
            };
            args.on_lost = match literal.value().as_str() {
                "abort" => OnLost::Abort,
                "ignore" => OnLost::Ignore,
                other => {
                    return err(format!(
                        "unknown value {other:?} for `on_lost`; expected \"abort\" (the default: stop the body when the lock is lost) or \"ignore\" (let the body finish)"
                    ))
                }
            };
        }
        "permits" => {
            let message = "`permits` takes the number of holders allowed at once, like `permits = 4`";
            let Expr::Lit(ExprLit { lit: Lit::Int(int), .. }) = value else { return err(message.into()) };
            let permits: u32 = int.base10_parse().map_err(|_| syn::Error::new(int.span(), message))?;
            if permits == 0 {
                return err("`permits = 0` would let nobody in; give at least 1".into());
            }
            args.permits = Some(permits);
        }
        "queue_reports" => {
            if let Expr::Lit(ExprLit { lit, .. }) = value {
                let named = match lit {
                    Lit::Str(literal) if syn::parse_str::<syn::Path>(&literal.value()).is_ok() => Some(literal.value()),
                    _ => None,
                };
                let instead = match named {
                    Some(function) => {
                        format!("write the function without quotes: `queue_reports = {}`", function.trim())
                    }
                    None => {
                        "like `queue_reports = report_place` with `fn report_place(position: &zk_lock::QueuePosition)`"
                            .to_owned()
                    }
                };
                return err(format!(
                    "`queue_reports` takes the function to call with each `&zk_lock::QueuePosition` of a waiting call \
                     (a `fn(&QueuePosition)`, or a closure that captures nothing), not a literal; {instead}"
                ));
            }
            args.queue_reports = Some(value.clone());
        }
        _ => unreachable!("`{name}` is listed in `Attribute::keys`"),
    }
    Ok(())
}

fn string(value: &Expr) -> Option<&LitStr> {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Str(literal), attrs }) if attrs.is_empty() => Some(literal),
        _ => None,
    }
}

fn path_arg(literal: &LitStr) -> syn::Result<PathArg> {
    let template = template::parse(&literal.value()).map_err(|message| syn::Error::new(literal.span(), message))?;
    Ok(PathArg { literal: literal.clone(), template })
}

/// The valid key a misspelt `name` most likely meant: at most two edits away.
pub(crate) fn closest<'a>(name: &str, keys: &[&'a str]) -> Option<&'a str> {
    keys.iter().map(|key| (edit_distance(name, key), *key)).filter(|(d, _)| *d <= 2).min().map(|(_, key)| key)
}

/// Levenshtein distance, over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod suggestion_tests {
    #[test]
    fn suggests_the_nearest_key_only_when_close() {
        let keys = ["path", "timeout", "client", "guard", "on_lost"];
        assert_eq!(super::closest("timout", &keys), Some("timeout"));
        assert_eq!(super::closest("onlost", &keys), Some("on_lost"));
        assert_eq!(super::closest("paths", &keys), Some("path"));
        assert_eq!(super::closest("permits", &keys), None);
        assert_eq!(super::edit_distance("kitten", "sitting"), 3);
    }
}
