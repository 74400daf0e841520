//! The guarded body of one function: entering its plan, running the body, recording the
//! outcome; and its call site, registered for `Registry::call_sites`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::visit_mut::{self, VisitMut};
use syn::{AttrStyle, Attribute, ExprAsync, FnArg, Signature};

use crate::args::Kind;
use crate::model::{Guarded, Shape};
use crate::stack::Stack;

use super::fallback::{ending, Ending};
use super::names::Names;
use super::types::{async_trait_body_mut, return_hint};
use super::wrapped::{wrapped_body, Body, Parts};

/// Generates the guarded function.
pub(super) fn guard_fn(guarded: &Guarded<'_>, imports: &TokenStream) -> syn::Result<TokenStream> {
    let Guarded {
        stack,
        attrs,
        vis,
        defaultness,
        sig,
        block,
        shape,
        output,
        returns_result,
    } = guarded;
    let (stack, output, returns_result) = (*stack, output.clone(), *returns_result);
    let names = Names::new();
    let register = register(stack, sig);
    let classify = classify(stack, returns_result, &names);
    let is_async = !matches!(shape, Shape::Sync);
    let Ending {
        prelude,
        on_rejected,
        finish,
    } = ending(guarded, is_async, &names);
    let krate = &stack.krate;
    let private = quote!(#krate::__private);
    let site_plan = stack.site_plan();
    let Names {
        plan,
        call,
        rejected,
        output: value,
        entry,
        admission,
        ..
    } = &names;
    // Inner attributes of the body (`#![allow(..)]`) stay first in the body.
    let (inner_attrs, outer_attrs): (Vec<&Attribute>, Vec<&Attribute>) = attrs
        .iter()
        .partition(|a| matches!(a.style, AttrStyle::Inner(_)));
    // The body's statements, not its block: braces around a one-expression body would
    // trigger `unused_braces` in the user's code.
    let stmts = &block.stmts;

    // The body of an async function: the guards entered and `future` run in a block of its
    // own, left by `return` once the call ran. The block ends only with a rejection, after the
    // plan and the permits are gone: a fallback's future never sits beside them in this one.
    let parts = Parts {
        prelude: &prelude,
        classify: &classify,
        on_rejected: &on_rejected,
        finish: &finish,
        returns_result,
    };
    // A stack with a wrapper runs its whole plan in the runtime, the body made per attempt.
    let wrapped = stack.has_wrapper();
    let async_body = |future: TokenStream| -> syn::Result<TokenStream> {
        if wrapped {
            return wrapped_body(stack, sig, Body::Async(future), &parts, &names);
        }
        Ok(quote! {
            #prelude
            let #rejected = #entry: {
                // In the global registry, interned: a plain reference, held across `.await`.
                let #plan = #site_plan;
                // The call's permits, written in place as the guards admit it.
                let mut #call = #private::GuardedCall::new();
                // A statement, not a `match` around the call: the entry's `Result` is not kept
                // in the future while the call runs.
                if let ::core::result::Result::Err(#rejected) =
                    #private::GuardedCall::enter_async(&mut #call, &#plan).await
                {
                    break #entry #rejected;
                }
                let #value = #private::GuardedCall::run_async(&mut #call, #future, #classify).await;
                #private::GuardedCall::ran(#call);
                return #finish;
            };
            let #value = #on_rejected;
            #finish
        })
    };

    // Associated functions are called by their full path, so no trait in the user's scope can
    // stand in for them.
    let body = match shape {
        Shape::Sync if wrapped => {
            let hint = return_hint(&output);
            let body = wrapped_body(
                stack,
                sig,
                Body::Sync(quote!(#hint #(#stmts)*)),
                &parts,
                &names,
            )?;
            quote!(#register #body)
        }
        Shape::Sync => {
            let hint = return_hint(&output);
            quote! {
                #register
                #prelude
                let #plan = #site_plan;
                // One closure for the body and the refusal's answer, told apart by its
                // argument: each may take the arguments by value. The runtime runs it on the
                // plan's own path (for a lone gate on an idle chain, its permit in a local).
                // Bound to a local: the temporaries of a tail expression outlive `#plan`.
                let #value = #private::run_guarded(
                    &#plan,
                    // The hint first, outside the `match`: the arms are then checked against
                    // the function's return type (inside the first arm, the first arm's type
                    // was taken for the `match`'s, and a body of the wrong type was reported
                    // as arms of incompatible types, at the signature).
                    move |#admission| {
                        #hint
                        match #admission {
                            ::core::result::Result::Ok(()) => { #(#stmts)* }
                            ::core::result::Result::Err(#rejected) => #on_rejected,
                        }
                    },
                    #classify,
                );
                #finish
            }
        }
        Shape::Async => {
            let hint = return_hint(&output);
            let body = async_body(quote!(async move { #hint #(#stmts)* }))?;
            quote! {
                #register
                #body
            }
        }
        Shape::AsyncTrait => {
            let mut rewritten = (*block).clone();
            let Some(inner) = async_trait_body_mut(&mut rewritten) else {
                return Err(syn::Error::new_spanned(
                    block,
                    "expected `Box::pin(async move { .. })`",
                ));
            };
            let original = inner.clone();
            let body = async_body(original.to_token_stream())?;
            *inner = ExprAsync {
                attrs: Vec::new(),
                async_token: original.async_token,
                capture: original.capture,
                block: syn::parse_quote! {{ #body }},
            };
            let stmts = &rewritten.stmts;
            quote! {
                #register
                #(#stmts)*
            }
        }
    };
    // Under a retry every attempt binds its own copy of each argument, with the mutability
    // written (`let mut x = again(&x)`); the function's own bindings are only read, and keep
    // no `mut` (it would be reported unused).
    let sig = if stack.repeats() {
        &without_binding_mut(sig)
    } else {
        sig
    };
    Ok(quote! {
        #(#outer_attrs)*
        #vis #defaultness #sig {
            #(#inner_attrs)*
            #imports
            #body
        }
    })
}

/// The function's call site: a `static`, registered with `inventory` for
/// `Registry::call_sites` and `Registry::validate`.
pub(super) fn register(stack: &Stack, sig: &Signature) -> TokenStream {
    let krate = &stack.krate;
    let guards = stack.aspects.iter().map(|aspect| {
        let name = &aspect.name;
        // The attribute's name is the runtime's `Guard` constructor.
        let constructor = syn::Ident::new(aspect.kind.attr_name(), Span::call_site());
        quote!(#krate::__private::Guard::#constructor(#name))
    });
    let function = sig.ident.to_string();
    let line = quote_spanned!(sig.ident.span()=> ::core::line!());
    let fixed = stack.fixed_registry();
    quote! {
        static __RESILIENCE_CALL_SITE: #krate::__private::CallSite =
            #krate::__private::CallSite::new(
                ::core::module_path!(),
                #function,
                ::core::file!(),
                #line,
                &[#(#guards),*],
            )#fixed;
        #krate::__private::inventory::submit! {
            #krate::__private::CallSiteEntry(&__RESILIENCE_CALL_SITE)
        }
    }
}

/// How the call's output counts for the guards: the `ignore` / `record` predicates of the
/// `#[circuit_breaker]` and the `overload` predicate of the `#[bulkhead]`, every `Err` a
/// failure by default; without a `Result`, a success.
pub(super) fn classify(stack: &Stack, returns_result: bool, names: &Names) -> TokenStream {
    let krate = &stack.krate;
    let Names { result, error, .. } = names;
    let breaker = stack.breaker();
    let overload = stack.of(Kind::Bulkhead).and_then(|b| b.overload.as_ref());
    if !returns_result || (breaker.is_none() && overload.is_none()) {
        // Only a breaker, and a bulkhead told what overload is, read the outcome.
        return quote!(|_| #krate::__private::CallOutcome::Success);
    }
    // Only the path carries the user's span: a closure at the user's span would be linted as
    // the user's (`clippy::redundant_closure`).
    let predicate = |arg: Option<&crate::args::PathArg>, default: bool| match arg {
        Some(p) => {
            let path = &p.path;
            quote!(|#error| #path(#error))
        }
        None => quote!(|_| #default),
    };
    let ignore = predicate(breaker.and_then(|b| b.ignore.as_ref()), false);
    let overload = predicate(overload, false);
    let record = predicate(breaker.and_then(|b| b.record.as_ref()), true);
    quote!(|#result| #krate::__private::classify(#result, #ignore, #overload, #record))
}

/// `sig` with no `mut` on the bindings of its typed arguments (`mut x: T`, `(a, mut b): (A, B)`).
fn without_binding_mut(sig: &Signature) -> Signature {
    struct Immutable;
    impl VisitMut for Immutable {
        fn visit_pat_ident_mut(&mut self, ident: &mut syn::PatIdent) {
            ident.mutability = None;
            visit_mut::visit_pat_ident_mut(self, ident);
        }
    }
    let mut sig = sig.clone();
    for input in &mut sig.inputs {
        if let FnArg::Typed(typed) = input {
            Immutable.visit_pat_mut(&mut typed.pat);
        }
    }
    sig
}
