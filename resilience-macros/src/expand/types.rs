//! Reading the user's types and shapes: `Result`s, futures, `impl Trait`, the body
//! `#[async_trait]` leaves behind.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use syn::{
    Block, Expr, ExprAsync, GenericArgument, Ident, PathArguments, Stmt, Type, TypeParamBound,
};

/// A statement that tells the compiler the body's type before the body runs, so `?` and
/// `return` inside a closure or async block convert to the function's return type. Omitted
/// when the type cannot be written in a `let` (it contains `impl Trait`).
pub(super) fn return_hint(output: &Type) -> TokenStream {
    if mentions_impl_trait(output.to_token_stream()) {
        return TokenStream::new();
    }
    let hint = Ident::new("__resilience_return_type", Span::mixed_site());
    quote! {
        #[allow(
            unknown_lints,
            unreachable_code,
            clippy::diverging_sub_expression,
            clippy::empty_loop,
            clippy::let_unit_value,
            clippy::needless_return,
            clippy::unreachable
        )]
        if false {
            let #hint: #output = loop {};
            return #hint;
        }
    }
}

pub(super) fn mentions_impl_trait(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == "impl",
        TokenTree::Group(g) => mentions_impl_trait(g.stream()),
        _ => false,
    })
}

/// Whether `tokens` (a type) borrow: a reference or a lifetime, which a `fn` pointer type
/// cannot always write as the function's signature does (elided through `&self`).
pub(super) fn borrows(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Punct(p) => p.as_char() == '&' || p.as_char() == '\'',
        TokenTree::Group(g) => borrows(g.stream()),
        _ => false,
    })
}

/// The `E` of `Result<T, E>`; `None` for an alias such as `io::Result<T>`.
pub(super) fn result_error_type(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Path(p) => match &p.path.segments.last()?.arguments {
            PathArguments::AngleBracketed(args) => args
                .args
                .iter()
                .filter_map(|arg| match arg {
                    GenericArgument::Type(ty) => Some(ty),
                    _ => None,
                })
                .nth(1),
            _ => None,
        },
        Type::Paren(p) => result_error_type(&p.elem),
        Type::Group(g) => result_error_type(&g.elem),
        _ => None,
    }
}

/// `tokens` with every span set to `span`, for a diagnostic that should point at one place.
pub(super) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                token = TokenTree::Group(inner);
            } else {
                token.set_span(span);
            }
            token
        })
        .collect()
}

/// Whether `ty` is a `Result` (matched by the last path segment, so `io::Result<T>` and
/// `anyhow::Result<T>` count).
pub(crate) fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => {
            p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Result")
        }
        Type::Paren(p) => is_result(&p.elem),
        Type::Group(g) => is_result(&g.elem),
        _ => false,
    }
}

/// The `Output` of a future type: `impl Future<Output = T>` or
/// `Pin<Box<dyn Future<Output = T> + ..>>`; `()` when `Output` is not named.
pub(crate) fn future_output(ty: &Type) -> Option<Type> {
    let bounds = match ty {
        Type::ImplTrait(t) => &t.bounds,
        Type::TraitObject(t) => &t.bounds,
        Type::Paren(p) => return future_output(&p.elem),
        Type::Group(g) => return future_output(&g.elem),
        Type::Path(p) => {
            let last = p.path.segments.last()?;
            if last.ident != "Pin" && last.ident != "Box" {
                return None;
            }
            let PathArguments::AngleBracketed(args) = &last.arguments else {
                return None;
            };
            return args.args.iter().find_map(|arg| match arg {
                GenericArgument::Type(inner) => future_output(inner),
                _ => None,
            });
        }
        _ => return None,
    };
    bounds.iter().find_map(|bound| {
        let TypeParamBound::Trait(trait_bound) = bound else {
            return None;
        };
        let last = trait_bound.path.segments.last()?;
        if last.ident != "Future" {
            return None;
        }
        let output = match &last.arguments {
            PathArguments::AngleBracketed(args) => args.args.iter().find_map(|arg| match arg {
                GenericArgument::AssocType(assoc) if assoc.ident == "Output" => {
                    Some(assoc.ty.clone())
                }
                _ => None,
            }),
            _ => None,
        };
        Some(output.unwrap_or_else(|| syn::parse_quote!(())))
    })
}

/// The `async move { .. }` of a body ending in `Box::pin(async move { .. })`.
pub(crate) fn async_trait_body(block: &Block) -> Option<&ExprAsync> {
    let Some(Stmt::Expr(Expr::Call(call), None)) = block.stmts.last() else {
        return None;
    };
    if !is_box_pin(&call.func) || call.args.len() != 1 {
        return None;
    }
    match call.args.first() {
        Some(Expr::Async(inner)) => Some(inner),
        _ => None,
    }
}

pub(super) fn async_trait_body_mut(block: &mut Block) -> Option<&mut ExprAsync> {
    let Some(Stmt::Expr(Expr::Call(call), None)) = block.stmts.last_mut() else {
        return None;
    };
    match call.args.first_mut() {
        Some(Expr::Async(inner)) => Some(inner),
        _ => None,
    }
}

pub(super) fn is_box_pin(func: &Expr) -> bool {
    let Expr::Path(path) = func else {
        return false;
    };
    let segments: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    segments.ends_with(&["Box".to_owned(), "pin".to_owned()])
}
