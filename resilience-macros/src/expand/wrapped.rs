//! The guarded body of a function whose stack has a wrapper (`#[retry]`, `#[time_limiter]`):
//! the whole plan runs in the runtime as nested segments, the body made once per attempt.
//!
//! With a retry, the body is a closure the runtime calls again for each attempt: arguments
//! taken by reference are reused, arguments taken by value are cloned per attempt (a type
//! that is not `Clone` is one error at that argument), so the originals stay with the
//! function and a fallback still receives them. With a time limiter and no retry, the body's
//! future is made once and owns its arguments.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Pat, Signature, Type};

use crate::args::Kind;
use crate::stack::Stack;

use super::names::Names;

/// What the wrapped call's body is: the statements of a sync function, or the future
/// expression of an async one (an `async move` block).
pub(super) enum Body {
    Sync(TokenStream),
    Async(TokenStream),
}

/// The pieces of the guarded body that the gate-only expansion shares.
pub(super) struct Parts<'p> {
    pub(super) prelude: &'p TokenStream,
    pub(super) classify: &'p TokenStream,
    pub(super) on_rejected: &'p TokenStream,
    pub(super) finish: &'p TokenStream,
    pub(super) returns_result: bool,
}

/// The body of the guarded function (after its call-site registration).
pub(super) fn wrapped_body(
    stack: &Stack,
    sig: &Signature,
    body: Body,
    parts: &Parts<'_>,
    names: &Names,
) -> syn::Result<TokenStream> {
    let krate = &stack.krate;
    let private = quote!(#krate::__private);
    let site_plan = stack.site_plan();
    let Names {
        plan,
        rejected,
        output: value,
        result,
        error,
        ..
    } = names;
    let Parts {
        prelude,
        classify,
        on_rejected,
        finish,
        returns_result,
    } = parts;
    let retries = stack.of(Kind::Retry);
    let hedge_on = match stack.of(Kind::Hedge).and_then(|h| h.hedge_on.as_ref()) {
        Some(predicate) if *returns_result => {
            let path = &predicate.path;
            quote!(|#result| #private::retry_on(#result, |#error| #path(#error)))
        }
        None if *returns_result => quote!(#private::is_err),
        Some(_) | None => quote!(|_| false),
    };
    let (failed, retry_on, retry_after) = if *returns_result {
        let retry_on = match retries.and_then(|r| r.retry_on.as_ref()) {
            // Only the path carries the user's span, as for `ignore` / `record`.
            Some(predicate) => {
                let path = &predicate.path;
                quote!(|#result| #private::retry_on(#result, |#error| #path(#error)))
            }
            None => quote!(#private::is_err),
        };
        let retry_after = match retries.and_then(|r| r.retry_after.as_ref()) {
            Some(hint) => {
                let path = &hint.path;
                // The wait's type written out, spanned at the path: a function of another
                // return type is reported there.
                let wait = quote_spanned! {path.span()=>
                    |#error| -> ::core::option::Option<::core::time::Duration> { #path(#error) }
                };
                quote!(|#result| #private::retry_after(#result, #wait))
            }
            None => quote!(#private::no_retry_after),
        };
        (quote!(#private::is_err), retry_on, retry_after)
    } else {
        (
            quote!(|_| false),
            quote!(|_| false),
            quote!(#private::no_retry_after),
        )
    };
    let run = match (body, stack.repeats()) {
        (Body::Sync(stmts), _) => {
            let again = attempt_arguments(&private, sig, false)?;
            quote! {
                #private::run_wrapped(
                    &#plan,
                    || { #again #stmts },
                    #classify,
                    #failed,
                    #retry_on,
                    #retry_after,
                )
            }
        }
        (Body::Async(future), true) => {
            let again = attempt_arguments(&private, sig, true)?;
            quote! {
                #private::run_wrapped_async(
                    &#plan,
                    || { #again #future },
                    #classify,
                    #failed,
                    #retry_on,
                    #retry_after,
                    #hedge_on,
                )
                .await
            }
        }
        (Body::Async(future), false) => quote! {
            #private::run_wrapped_future(&#plan, #future, #classify, #failed).await
        },
    };
    Ok(quote! {
        #prelude
        // In the global registry, interned: a plain reference, held across `.await`.
        let #plan = #site_plan;
        let #value = match #run {
            ::core::result::Result::Ok(#value) => #value,
            ::core::result::Result::Err(#rejected) => #on_rejected,
        };
        #finish
    })
}

/// The statements that give one attempt its arguments: a clone of each one taken by value
/// (spanned at the argument, so a type that is not `Clone` is reported there), a reborrow of
/// each `&mut` one (sync only).
fn attempt_arguments(
    private: &TokenStream,
    sig: &Signature,
    is_async: bool,
) -> syn::Result<TokenStream> {
    let mut statements = TokenStream::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => {
                if receiver.reference.is_none() {
                    return Err(syn::Error::new_spanned(
                        receiver,
                        "`#[retry]` runs the body again, and `self` taken by value cannot be \
                         given to a second attempt; take `&self`",
                    ));
                }
                if is_async && receiver.mutability.is_some() {
                    return Err(mutable_in_async(receiver.span()));
                }
            }
            FnArg::Typed(typed) => {
                let Pat::Ident(ident) = &*typed.pat else {
                    // A pattern (`Path(id): Path<u32>`, `(a, b): (u32, String)`): the function
                    // destructured it on entry, so each attempt gets a copy of what it bound.
                    for binding in bindings(&typed.pat)? {
                        let name = &binding.ident;
                        let mutability = &binding.mutability;
                        statements.extend(quote_spanned! {name.span()=>
                            #[allow(clippy::redundant_clone)]
                            let #mutability #name = #private::again(&#name);
                        });
                    }
                    continue;
                };
                if ident.by_ref.is_some() || ident.subpat.is_some() {
                    return Err(syn::Error::new_spanned(
                        ident,
                        "`#[retry]` gives each attempt its own copy of the arguments: write \
                         `name: Type`",
                    ));
                }
                let name = &ident.ident;
                let mutability = &ident.mutability;
                let span = typed.span();
                match &*typed.ty {
                    Type::Reference(reference) if reference.mutability.is_some() => {
                        if is_async {
                            return Err(mutable_in_async(span));
                        }
                        statements.extend(quote_spanned! {span=>
                            let #name = &mut *#name;
                        });
                    }
                    // A shared reference is reused as it is.
                    Type::Reference(_) => {}
                    _ => statements.extend(quote_spanned! {span=>
                        #[allow(clippy::redundant_clone)]
                        let #mutability #name = #private::again(&#name);
                    }),
                }
            }
        }
    }
    Ok(statements)
}

/// The names a pattern argument binds by value, in order.
///
/// # Errors
///
/// A binding by reference (`ref x`): an attempt cannot be given a copy of what it borrows.
fn bindings(pat: &Pat) -> syn::Result<Vec<&syn::PatIdent>> {
    let mut found = Vec::new();
    collect_bindings(pat, &mut found)?;
    Ok(found)
}

fn collect_bindings<'p>(pat: &'p Pat, found: &mut Vec<&'p syn::PatIdent>) -> syn::Result<()> {
    match pat {
        Pat::Ident(ident) => {
            if ident.by_ref.is_some() {
                return Err(syn::Error::new_spanned(
                    ident,
                    "`#[retry]` gives each attempt its own copy of what an argument binds, and \
                     a `ref` binding borrows instead; bind it by value",
                ));
            }
            found.push(ident);
            if let Some((_, sub)) = &ident.subpat {
                collect_bindings(sub, found)?;
            }
        }
        Pat::Tuple(tuple) => {
            for elem in &tuple.elems {
                collect_bindings(elem, found)?;
            }
        }
        Pat::TupleStruct(tuple) => {
            for elem in &tuple.elems {
                collect_bindings(elem, found)?;
            }
        }
        Pat::Struct(structure) => {
            for field in &structure.fields {
                collect_bindings(&field.pat, found)?;
            }
        }
        Pat::Slice(slice) => {
            for elem in &slice.elems {
                collect_bindings(elem, found)?;
            }
        }
        Pat::Reference(reference) => collect_bindings(&reference.pat, found)?,
        Pat::Paren(paren) => collect_bindings(&paren.pat, found)?,
        Pat::Type(typed) => collect_bindings(&typed.pat, found)?,
        // The alternatives of an or-pattern bind the same names.
        Pat::Or(or) => {
            if let Some(first) = or.cases.first() {
                collect_bindings(first, found)?;
            }
        }
        // `_`, `..`, literals, ranges and paths bind nothing.
        _ => {}
    }
    Ok(())
}

fn mutable_in_async(span: proc_macro2::Span) -> syn::Error {
    syn::Error::new(
        span,
        "`#[retry]` on an `async fn` makes a new future per attempt, and a `&mut` argument \
         cannot be lent to each of them; take a shared reference (with interior mutability), \
         or retry a function that takes the `&mut` part out",
    )
}
