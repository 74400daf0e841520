//! Collects the aspect attributes stacked on one item and strips them; what the stack holds
//! once `valid.rs` has put it together.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Meta, Path};

use crate::args::{AspectArgs, Kind, PathArg};

/// The aspects of one guarded function, in the order written, and the item-level arguments.
pub(crate) struct Stack {
    pub(crate) aspects: Vec<AspectArgs>,
    pub(crate) fallback: Option<PathArg>,
    /// The fallback also handles the function's `Err`s (`fallback_on_error = true`).
    pub(crate) fallback_on_error: bool,
    /// `registry = path`: the call site's registry, instead of the scoped or global one.
    pub(crate) registry: Option<Path>,
    pub(crate) krate: Path,
}

impl Stack {
    /// The `ignore` / `record` predicates (only a circuit breaker takes them).
    pub(crate) fn breaker(&self) -> Option<&AspectArgs> {
        self.of(Kind::CircuitBreaker)
    }

    /// The aspect of `kind`, if it is in the stack.
    pub(crate) fn of(&self, kind: Kind) -> Option<&AspectArgs> {
        self.aspects.iter().find(|a| a.kind == kind)
    }

    /// Whether the stack makes its call more than once (a retry, a hedge): the body is then a
    /// closure made again per attempt, each attempt cloning the arguments taken by value.
    pub(crate) fn repeats(&self) -> bool {
        self.of(Kind::Retry).is_some() || self.of(Kind::Hedge).is_some()
    }

    /// The expression of the call site's plan: in the `registry = path` given, else in the
    /// registry in scope or the global one.
    pub(crate) fn site_plan(&self) -> proc_macro2::TokenStream {
        let krate = &self.krate;
        match &self.registry {
            None => quote::quote!(#krate::__private::CallSite::plan(&__RESILIENCE_CALL_SITE)),
            Some(_) => {
                quote::quote!(#krate::__private::CallSite::plan_fixed(&__RESILIENCE_CALL_SITE))
            }
        }
    }

    /// What fixes the call site's registry (`.with_registry(..)` on its `CallSite::new`), if
    /// `registry = path` is given.
    pub(crate) fn fixed_registry(&self) -> proc_macro2::TokenStream {
        let krate = &self.krate;
        match &self.registry {
            None => proc_macro2::TokenStream::new(),
            // Spanned on the path: a value that is not a `static` registry is an error there.
            Some(path) => quote::quote_spanned! {path.span()=>
                .with_registry(|| -> &'static #krate::__private::Registry { &#path })
            },
        }
    }

    /// Whether an aspect wraps the rest of the call (a retry, a time limiter): then the call
    /// runs as nested segments.
    pub(crate) fn has_wrapper(&self) -> bool {
        self.aspects.iter().any(|a| a.kind.is_wrapper())
    }
}

/// Removes every aspect attribute of this crate from `attrs` (matched by the last segment of
/// its path) and parses each.
pub(crate) fn strip(attrs: &mut Vec<Attribute>) -> Vec<syn::Result<AspectArgs>> {
    let mut found = Vec::new();
    attrs.retain(|attr| match Kind::of_path(attr.path()) {
        Some(kind) => {
            found.push(parse_attr(kind, attr));
            false
        }
        None => true,
    });
    found
}

/// The paths of this crate's attributes in `attrs` that name an import (a single segment,
/// such as `bulkhead` after `use resilience_runtime::bulkhead`).
pub(crate) fn imports(attrs: &[Attribute]) -> Vec<Path> {
    attrs
        .iter()
        .filter(|attr| Kind::of_path(attr.path()).is_some() && attr.path().segments.len() == 1)
        .map(|attr| attr.path().clone())
        .collect()
}

fn parse_attr(kind: Kind, attr: &Attribute) -> syn::Result<AspectArgs> {
    let span = attr_span(attr);
    match &attr.meta {
        Meta::List(list) => AspectArgs::parse(kind, span, list.tokens.clone()),
        _ => Err(syn::Error::new(
            span,
            format!(
                "missing `name`: name the instance, as in `#[{}(name = \"orders\")]`",
                kind.attr_name()
            ),
        )),
    }
}

/// The span errors about a whole attribute point at: the last segment of its path.
fn attr_span(attr: &Attribute) -> Span {
    attr.path()
        .segments
        .last()
        .map_or_else(|| attr.span(), |s| s.ident.span())
}
