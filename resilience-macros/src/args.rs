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
    CircuitBreaker,
}

impl Kind {
    /// The kind an attribute path names, matched by its last segment.
    pub(crate) fn of_path(path: &Path) -> Option<Kind> {
        let last = path.segments.last()?;
        if !last.arguments.is_none() {
            return None;
        }
        match last.ident.to_string().as_str() {
            "bulkhead" => Some(Kind::Bulkhead),
            "circuit_breaker" => Some(Kind::CircuitBreaker),
            _ => None,
        }
    }

    /// The attribute's name.
    pub(crate) fn attr_name(self) -> &'static str {
        match self {
            Kind::Bulkhead => "bulkhead",
            Kind::CircuitBreaker => "circuit_breaker",
        }
    }

    fn valid_keys(self) -> &'static [&'static str] {
        match self {
            Kind::Bulkhead => &["name", "fallback", "fallback_on_error", "crate"],
            Kind::CircuitBreaker => &[
                "name",
                "ignore",
                "record",
                "fallback",
                "fallback_on_error",
                "crate",
            ],
        }
    }
}

/// A `key = value` argument whose value is a path, with the key kept for error spans.
#[derive(Clone)]
pub(crate) struct PathArg {
    pub(crate) key: Ident,
    pub(crate) path: Path,
}

/// The parsed arguments of one aspect attribute.
#[derive(Clone)]
pub(crate) struct AspectArgs {
    pub(crate) kind: Kind,
    /// Where the attribute is written, for errors about the attribute as a whole.
    pub(crate) span: Span,
    pub(crate) name: LitStr,
    pub(crate) fallback: Option<PathArg>,
    /// `fallback_on_error = true`: the fallback also handles the function's `Err`s.
    pub(crate) fallback_on_error: Option<Ident>,
    pub(crate) ignore: Option<PathArg>,
    pub(crate) record: Option<PathArg>,
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
    let mut name: Option<LitStr> = None;
    let mut fallback = None;
    let mut fallback_on_error = None;
    let mut ignore = None;
    let mut record = None;
    let mut krate = None;
    let mut seen: Vec<Ident> = Vec::new();

    while !input.is_empty() {
        let key = Ident::parse_any(input)?;
        let key_str = key.to_string();
        if !kind.valid_keys().contains(&key_str.as_str()) {
            let elsewhere = if kind == Kind::Bulkhead
                && matches!(key_str.as_str(), "ignore" | "record")
            {
                format!(" (`{key_str}` chooses what a breaker records: give it on `#[circuit_breaker]`)")
            } else {
                String::new()
            };
            return Err(syn::Error::new(
                key.span(),
                format!(
                    "unknown argument `{key_str}` for `#[{}]`; valid arguments are {}{elsewhere}",
                    kind.attr_name(),
                    list(kind.valid_keys())
                ),
            ));
        }
        if seen.contains(&key) {
            return Err(syn::Error::new(
                key.span(),
                format!("`{key_str}` is given twice; give each argument once"),
            ));
        }
        if !input.peek(Token![=]) {
            return Err(syn::Error::new(
                key.span(),
                format!("expected `{key_str} = ..`, {}", example(kind, &key_str)),
            ));
        }
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        match key_str.as_str() {
            "name" => {
                let lit = string_literal(&value).ok_or_else(|| {
                    syn::Error::new(
                        value.span(),
                        format!(
                            "`name` must be a string literal, as in `#[{}(name = \"orders\")]`",
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
                name = Some(lit);
            }
            "crate" => {
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
            "fallback_on_error" => {
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
            _ => {
                let Expr::Path(ExprPath {
                    path, qself: None, ..
                }) = &value
                else {
                    return Err(syn::Error::new(
                        value.span(),
                        format!(
                            "`{key_str}` must name a function, {}",
                            example(kind, &key_str)
                        ),
                    ));
                };
                let arg = Some(PathArg {
                    key: key.clone(),
                    path: path.clone(),
                });
                match key_str.as_str() {
                    "fallback" => fallback = arg,
                    "ignore" => ignore = arg,
                    _ => record = arg,
                }
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
        krate,
    })
}

fn string_literal(expr: &Expr) -> Option<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit.clone()),
        _ => None,
    }
}

fn list(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    quoted.join(", ")
}

fn example(kind: Kind, key: &str) -> String {
    let value = match key {
        "name" => "\"orders\"",
        "crate" => "\"my_resilience\"",
        "fallback" => "on_rejected",
        "fallback_on_error" => "true",
        "ignore" => "is_client_error",
        _ => "is_transient",
    };
    format!("as in `#[{}({key} = {value})]`", kind.attr_name())
}
