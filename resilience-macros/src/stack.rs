//! Collects the aspect attributes stacked on one item, strips them, and rejects what cannot
//! stand together: the same aspect twice, a second `fallback` or `crate`.

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

/// Puts the parsed aspects of one function together. `inherited` are those of the impl block
/// around it, which apply to it too.
pub(crate) fn build(inherited: &[AspectArgs], own: Vec<AspectArgs>) -> syn::Result<Stack> {
    let mut errors: Option<syn::Error> = None;
    let mut push = |e: syn::Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };

    let mut aspects: Vec<AspectArgs> = inherited.to_vec();
    for aspect in own {
        if inherited.iter().any(|i| i.kind == aspect.kind) {
            push(syn::Error::new(
                aspect.span,
                format!(
                    "`#[{0}]` is already applied to every method of this impl block; remove \
                     this `#[{0}]`, or the one on the impl block",
                    aspect.kind.attr_name()
                ),
            ));
        } else if aspects.iter().any(|a| a.kind == aspect.kind) {
            push(syn::Error::new(
                aspect.span,
                format!(
                    "`#[{0}]` is applied twice to this function; a call takes each aspect once, \
                     so remove one `#[{0}]`",
                    aspect.kind.attr_name()
                ),
            ));
        } else {
            aspects.push(aspect);
        }
    }

    let mut fallback: Option<(PathArg, Kind)> = None;
    let mut krate: Option<PathArg> = None;
    let mut registry: Option<PathArg> = None;
    let mut fallback_on_error = false;
    for aspect in &aspects {
        if let Some(key) = &aspect.fallback_on_error {
            if aspect.fallback.is_none() {
                push(syn::Error::new(
                    key.span(),
                    "`fallback_on_error` needs a `fallback` on the same attribute, as in \
                     `fallback = on_error, fallback_on_error = true`",
                ));
            }
            fallback_on_error = true;
        }
        if let Some(f) = &aspect.fallback {
            match &fallback {
                Some((_, first)) => push(syn::Error::new(
                    f.key.span(),
                    format!(
                        "`fallback` is already given on `#[{}]`; give it once per function",
                        first.attr_name()
                    ),
                )),
                None => fallback = Some((f.clone(), aspect.kind)),
            }
        }
        if let Some(r) = &aspect.registry {
            match &registry {
                Some(_) => push(syn::Error::new(
                    r.key.span(),
                    "`registry` is already given on another attribute of this function; a call \
                     site has one registry, so give it once",
                )),
                None => registry = Some(r.clone()),
            }
        }
        if let Some(k) = &aspect.krate {
            match &krate {
                Some(_) => push(syn::Error::new(
                    k.key.span(),
                    "`crate` is already given on another attribute of this function; give it once",
                )),
                None => krate = Some(k.clone()),
            }
        }
    }
    if let Some(e) = errors {
        return Err(e);
    }
    Ok(Stack {
        aspects,
        fallback: fallback.map(|(f, _)| f),
        fallback_on_error,
        registry: registry.map(|r| r.path),
        krate: krate.map_or_else(|| syn::parse_quote!(::resilience_runtime), |k| k.path),
    })
}
