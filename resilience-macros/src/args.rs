//! Typed attribute arguments: `#[bulkhead(name = "orders", fallback = on_rejected)]`.
//!
//! One place parses every argument and rejects unknown and repeated keys, pointing at the
//! offending token and saying what to write instead.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ExprPath, Ident, Lit, LitStr, Path, Token};

/// The aspect kinds this crate provides attributes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Bulkhead,
    RateLimiter,
    Retry,
    Hedge,
    CircuitBreaker,
    TimeLimiter,
}

/// Everything the macros know of one aspect: its row of the table.
pub(crate) struct Row {
    /// The attribute's name, which is also the runtime's `Guard` constructor.
    pub(crate) attr: &'static str,
    /// The arguments it takes.
    pub(crate) keys: &'static [Key],
}

impl Kind {
    /// Every kind, for matching attribute paths.
    const ALL: [Kind; 6] = [
        Kind::Bulkhead,
        Kind::RateLimiter,
        Kind::Retry,
        Kind::Hedge,
        Kind::CircuitBreaker,
        Kind::TimeLimiter,
    ];

    /// The aspect table: one row per aspect.
    pub(crate) const fn row(self) -> Row {
        use Key::{
            Crate, Fallback, FallbackOnError, HedgeOn, Ignore, Name, Overload, Record, Registry,
            RetryAfter, RetryOn,
        };
        match self {
            Kind::Bulkhead => Row {
                attr: "bulkhead",
                keys: &[Name, Overload, Fallback, FallbackOnError, Registry, Crate],
            },
            Kind::RateLimiter => Row {
                attr: "rate_limiter",
                keys: &[Name, Fallback, FallbackOnError, Registry, Crate],
            },
            Kind::Retry => Row {
                attr: "retry",
                keys: &[
                    Name,
                    RetryOn,
                    RetryAfter,
                    Fallback,
                    FallbackOnError,
                    Registry,
                    Crate,
                ],
            },
            Kind::Hedge => Row {
                attr: "hedge",
                keys: &[Name, HedgeOn, Fallback, FallbackOnError, Registry, Crate],
            },
            Kind::CircuitBreaker => Row {
                attr: "circuit_breaker",
                keys: &[
                    Name,
                    Ignore,
                    Record,
                    Fallback,
                    FallbackOnError,
                    Registry,
                    Crate,
                ],
            },
            Kind::TimeLimiter => Row {
                attr: "time_limiter",
                keys: &[Name, Fallback, FallbackOnError, Registry, Crate],
            },
        }
    }

    /// The kind an attribute path names, matched by its last segment.
    pub(crate) fn of_path(path: &Path) -> Option<Kind> {
        let last = path.segments.last()?;
        if !last.arguments.is_none() {
            return None;
        }
        Kind::ALL
            .into_iter()
            .find(|kind| last.ident == kind.row().attr)
    }

    /// The attribute's name.
    pub(crate) fn attr_name(self) -> &'static str {
        self.row().attr
    }

    /// Whether the aspect wraps the rest of the call (runs it again, bounds it) rather than
    /// admitting it.
    pub(crate) fn is_wrapper(self) -> bool {
        match self {
            Kind::Retry | Kind::TimeLimiter | Kind::Hedge => true,
            Kind::Bulkhead | Kind::RateLimiter | Kind::CircuitBreaker => false,
        }
    }

    fn takes(self, key: Key) -> bool {
        self.row().keys.contains(&key)
    }
}

/// An argument of an aspect attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// `name = "orders"`: the instance.
    Name,
    /// `fallback = path`: what a refused call returns.
    Fallback,
    /// `fallback_on_error = true`: the fallback also handles the function's `Err`s.
    FallbackOnError,
    /// `ignore = path`: errors a breaker records as neither success nor failure.
    Ignore,
    /// `record = path`: errors a breaker records as failures.
    Record,
    /// `overload = path`: errors that say the dependency shed the call for load.
    Overload,
    /// `retry_on = path`: errors a retry retries.
    RetryOn,
    /// `retry_after = path`: the least wait an error asks for before the next attempt.
    RetryAfter,
    /// `hedge_on = path`: errors a hedge starts its next attempt for at once.
    HedgeOn,
    /// `registry = path`: the registry the call site uses instead of the global one.
    Registry,
    /// `crate = "path"`: where `resilience_runtime` is.
    Crate,
}

impl Key {
    const ALL: [Key; 11] = [
        Key::Name,
        Key::Fallback,
        Key::FallbackOnError,
        Key::Ignore,
        Key::Record,
        Key::Overload,
        Key::RetryOn,
        Key::RetryAfter,
        Key::HedgeOn,
        Key::Registry,
        Key::Crate,
    ];

    fn parse(key: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|k| k.as_str() == key)
    }

    fn as_str(self) -> &'static str {
        match self {
            Key::Name => "name",
            Key::Fallback => "fallback",
            Key::FallbackOnError => "fallback_on_error",
            Key::Ignore => "ignore",
            Key::Record => "record",
            Key::Overload => "overload",
            Key::RetryOn => "retry_on",
            Key::RetryAfter => "retry_after",
            Key::HedgeOn => "hedge_on",
            Key::Registry => "registry",
            Key::Crate => "crate",
        }
    }

    /// The value shown in examples.
    fn example_value(self) -> &'static str {
        match self {
            Key::Name => "\"orders\"",
            Key::Fallback => "on_rejected",
            Key::FallbackOnError => "true",
            Key::Ignore => "is_client_error",
            Key::Record => "is_transient",
            Key::Overload => "is_overloaded",
            Key::RetryOn => "is_transient",
            Key::RetryAfter => "server_retry_after",
            Key::HedgeOn => "is_transient",
            Key::Registry => "crate::REGISTRY",
            Key::Crate => "\"my_resilience\"",
        }
    }

    /// Why the key is not for `kind`, when it belongs to another aspect.
    fn elsewhere(self, kind: Kind) -> String {
        let owner = Kind::ALL.into_iter().find(|other| other.takes(self));
        match (self, owner) {
            (Key::Ignore | Key::Record, Some(owner)) if owner != kind => format!(
                " (`{}` chooses what a breaker records: give it on `#[{}]`)",
                self.as_str(),
                owner.attr_name()
            ),
            (Key::Overload, Some(owner)) if owner != kind => format!(
                " (`overload` tells an adaptive bulkhead which errors are the dependency \
                 shedding load: give it on `#[{}]`)",
                owner.attr_name()
            ),
            (Key::RetryOn, Some(owner)) if owner != kind => format!(
                " (`retry_on` chooses which errors a retry retries: give it on `#[{}]`)",
                owner.attr_name()
            ),
            (Key::HedgeOn, Some(owner)) if owner != kind => format!(
                " (`hedge_on` chooses which errors start a hedge's next attempt at once: give \
                 it on `#[{}]`)",
                owner.attr_name()
            ),
            (Key::RetryAfter, Some(owner)) if owner != kind => format!(
                " (`retry_after` is how long an error asks a retry to wait: give it on `#[{}]`)",
                owner.attr_name()
            ),
            _ => String::new(),
        }
    }
}

/// A `key = value` argument whose value is a path, with the key kept for error spans.
#[derive(Clone)]
pub(crate) struct PathArg {
    pub(crate) key: Ident,
    pub(crate) path: Path,
}

/// The instance name of an aspect: a string literal, or the path of a `&str` constant.
#[derive(Clone)]
pub(crate) enum NameArg {
    Literal(LitStr),
    Const(Path),
}

impl quote::ToTokens for NameArg {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        match self {
            NameArg::Literal(lit) => lit.to_tokens(tokens),
            NameArg::Const(path) => path.to_tokens(tokens),
        }
    }
}

/// The parsed arguments of one aspect attribute.
#[derive(Clone)]
pub(crate) struct AspectArgs {
    pub(crate) kind: Kind,
    /// Where the attribute is written, for errors about the attribute as a whole.
    pub(crate) span: Span,
    pub(crate) name: NameArg,
    pub(crate) fallback: Option<PathArg>,
    /// `fallback_on_error = true`: the fallback also handles the function's `Err`s.
    pub(crate) fallback_on_error: Option<Ident>,
    pub(crate) ignore: Option<PathArg>,
    pub(crate) record: Option<PathArg>,
    pub(crate) overload: Option<PathArg>,
    pub(crate) retry_on: Option<PathArg>,
    pub(crate) retry_after: Option<PathArg>,
    pub(crate) hedge_on: Option<PathArg>,
    pub(crate) registry: Option<PathArg>,
    pub(crate) krate: Option<PathArg>,
}

impl AspectArgs {
    /// Parses the tokens inside `#[kind( .. )]`; `span` points at the attribute.
    pub(crate) fn parse(kind: Kind, span: Span, tokens: TokenStream) -> syn::Result<AspectArgs> {
        let parser = |input: ParseStream<'_>| parse_args(kind, span, input);
        parser.parse2(tokens)
    }
}

fn parse_args(kind: Kind, span: Span, input: ParseStream<'_>) -> syn::Result<AspectArgs> {
    let mut name: Option<NameArg> = None;
    let mut fallback = None;
    let mut fallback_on_error = None;
    let mut ignore = None;
    let mut record = None;
    let mut overload = None;
    let mut hedge_on = None;
    let mut retry_on = None;
    let mut retry_after = None;
    let mut registry = None;
    let mut krate = None;
    let mut seen: Vec<Ident> = Vec::new();

    while !input.is_empty() {
        let key = Ident::parse_any(input)?;
        let key_str = key.to_string();
        let Some(which) = Key::parse(&key_str).filter(|k| kind.takes(*k)) else {
            let elsewhere = Key::parse(&key_str).map_or_else(String::new, |k| k.elsewhere(kind));
            return Err(syn::Error::new(
                key.span(),
                format!(
                    "unknown argument `{key_str}` for `#[{}]`; valid arguments are {}{elsewhere}",
                    kind.attr_name(),
                    list(kind.row().keys)
                ),
            ));
        };
        if seen.contains(&key) {
            return Err(syn::Error::new(
                key.span(),
                format!("`{key_str}` is given twice; give each argument once"),
            ));
        }
        if !input.peek(Token![=]) {
            return Err(syn::Error::new(
                key.span(),
                format!("expected `{key_str} = ..`, {}", example(kind, which)),
            ));
        }
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        match which {
            Key::Name => {
                if let Expr::Path(ExprPath {
                    path, qself: None, ..
                }) = &value
                {
                    // A constant (`const ORDERS: &str = "orders"`): its type is checked by the
                    // compiler where the guard list uses it.
                    name = Some(NameArg::Const(path.clone()));
                } else {
                    let lit = string_literal(&value).ok_or_else(|| {
                        syn::Error::new(
                            value.span(),
                            format!(
                                "`name` must be a string literal or a `&str` constant, as in \
                                 `#[{0}(name = \"orders\")]` or `#[{0}(name = ORDERS)]`",
                                kind.attr_name()
                            ),
                        )
                    })?;
                    if lit.value().trim().is_empty() {
                        return Err(syn::Error::new(
                            lit.span(),
                            "`name` must not be empty: name the instance, as in `name = \"orders\"`",
                        ));
                    }
                    name = Some(NameArg::Literal(lit));
                }
            }
            Key::Crate => {
                let path = match &value {
                    Expr::Path(ExprPath { path, .. }) => Some(path.clone()),
                    _ => string_literal(&value).and_then(|lit| lit.parse::<Path>().ok()),
                }
                .ok_or_else(|| {
                    syn::Error::new(
                        value.span(),
                        "`crate` must be the path of the renamed dependency, as in \
                         `crate = \"my_resilience\"`",
                    )
                })?;
                krate = Some(PathArg {
                    key: key.clone(),
                    path,
                });
            }
            Key::FallbackOnError => {
                let Expr::Lit(ExprLit {
                    lit: Lit::Bool(flag),
                    ..
                }) = &value
                else {
                    return Err(syn::Error::new(
                        value.span(),
                        "`fallback_on_error` is `true` or `false`, as in \
                         `fallback = on_error, fallback_on_error = true`",
                    ));
                };
                if flag.value {
                    fallback_on_error = Some(key.clone());
                }
            }
            Key::Fallback => fallback = Some(path_arg(kind, which, &key, &value)?),
            Key::Ignore => ignore = Some(path_arg(kind, which, &key, &value)?),
            Key::Record => record = Some(path_arg(kind, which, &key, &value)?),
            Key::Overload => overload = Some(path_arg(kind, which, &key, &value)?),
            Key::RetryOn => retry_on = Some(path_arg(kind, which, &key, &value)?),
            Key::RetryAfter => retry_after = Some(path_arg(kind, which, &key, &value)?),
            Key::HedgeOn => hedge_on = Some(path_arg(kind, which, &key, &value)?),
            Key::Registry => {
                let Expr::Path(ExprPath {
                    path, qself: None, ..
                }) = &value
                else {
                    return Err(syn::Error::new(
                        value.span(),
                        format!(
                            "`registry` must be the path of a `static` registry (such as a \
                             `LazyLock<Registry>`), {}",
                            example(kind, which)
                        ),
                    ));
                };
                registry = Some(PathArg {
                    key: key.clone(),
                    path: path.clone(),
                });
            }
        }
        seen.push(key);
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }

    let name = name.ok_or_else(|| {
        syn::Error::new(
            span,
            format!(
                "missing `name`: name the instance, as in `#[{}(name = \"orders\")]`",
                kind.attr_name()
            ),
        )
    })?;
    Ok(AspectArgs {
        kind,
        span,
        name,
        fallback,
        fallback_on_error,
        ignore,
        record,
        overload,
        retry_on,
        retry_after,
        hedge_on,
        registry,
        krate,
    })
}

/// The value of a key that names a function (`fallback`, `ignore`, `record`).
fn path_arg(kind: Kind, which: Key, key: &Ident, value: &Expr) -> syn::Result<PathArg> {
    match value {
        Expr::Path(ExprPath {
            path, qself: None, ..
        }) => Ok(PathArg {
            key: key.clone(),
            path: path.clone(),
        }),
        _ => Err(syn::Error::new(
            value.span(),
            format!(
                "`{}` must name a function, {}",
                which.as_str(),
                example(kind, which)
            ),
        )),
    }
}

fn string_literal(expr: &Expr) -> Option<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit.clone()),
        _ => None,
    }
}

fn list(keys: &[Key]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{}`", k.as_str())).collect();
    quoted.join(", ")
}

fn example(kind: Kind, key: Key) -> String {
    format!(
        "as in `#[{}({} = {})]`",
        kind.attr_name(),
        key.as_str(),
        key.example_value()
    )
}
