//! The guarded body of one function: entering its plan, running the body, recording the
//! outcome; and its call site, registered for `Registry::call_sites`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::{AttrStyle, Attribute, Block, ExprAsync, ReturnType, Signature, Type, Visibility};

use crate::stack::Stack;

use super::fallback::{ending, Ending};
use super::names::Names;
use super::types::{async_trait_body, async_trait_body_mut, future_output, is_result, return_hint};
use super::wrapped::{wrapped_body, Body, Parts};
use crate::args::Kind;

/// Whether a method's call produces a `Result` (directly, from an `async fn`, or from the
/// future `#[async_trait]` leaves).
pub(super) fn returns_result(sig: &Signature, block: &Block) -> bool {
    let declared: Type = match &sig.output {
        ReturnType::Default => return false,
        ReturnType::Type(_, ty) => (**ty).clone(),
    };
    if sig.asyncness.is_none() && async_trait_body(block).is_some() {
        if let Some(output) = future_output(&declared) {
            return is_result(&output);
        }
    }
    is_result(&declared)
}

/// How the guarded body of a function runs.
pub(super) enum Shape {
    /// A plain function: guarded by a closure, waiting by blocking.
    Sync,
    /// An `async fn`: guarded by an async block, waiting asynchronously.
    Async,
    /// A function whose body ends in `Box::pin(async move { .. })`, as `#[async_trait]` leaves
    /// it: the inner future is guarded, not the construction of the box.
    AsyncTrait,
}

/// Generates the guarded function. `defaultness` is `default` for specializing impls.
pub(super) fn guard_fn(
    stack: &Stack,
    attrs: &[Attribute],
    vis: &Visibility,
    defaultness: TokenStream,
    sig: &Signature,
    block: &Block,
    imports: &TokenStream,
) -> syn::Result<TokenStream> {
    let attr = stack.aspects[0].kind.attr_name();
    if let Some(track_caller) = attrs.iter().find(|a| a.path().is_ident("track_caller")) {
        return Err(syn::Error::new_spanned(
            track_caller,
            format!(
                "`#[{attr}]` cannot keep `#[track_caller]`: the body runs inside the guard, so \
                 the caller's location would be lost; remove one of them"
            ),
        ));
    }
    if let Some(constness) = &sig.constness {
        return Err(syn::Error::new_spanned(
            constness,
            format!(
                "`#[{attr}]` cannot guard a `const fn`: a guard acts when the function runs; \
                 remove `const`"
            ),
        ));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(syn::Error::new_spanned(
            variadic,
            format!("`#[{attr}]` cannot guard a variadic function"),
        ));
    }

    let declared: Type = match &sig.output {
        ReturnType::Default => syn::parse_quote!(()),
        ReturnType::Type(_, ty) => (**ty).clone(),
    };
    let (shape, output) = if sig.asyncness.is_some() {
        (Shape::Async, declared.clone())
    } else if let Some(output) = future_output(&declared) {
        if async_trait_body(block).is_none() {
            return Err(syn::Error::new_spanned(
                &declared,
                format!(
                    "`#[{attr}]` on a function that returns a future would guard only the \
                     creation of the future, not the call; write it as an `async fn`"
                ),
            ));
        }
        (Shape::AsyncTrait, output)
    } else {
        (Shape::Sync, declared.clone())
    };

    if matches!(shape, Shape::Sync) && stack.of(Kind::TimeLimiter).is_some() {
        return Err(syn::Error::new_spanned(
            sig.fn_token,
            "`#[time_limiter]` bounds an `async fn`: a thread cannot be cancelled, so a sync \
             call would run to its end whatever the timeout; make the function `async`, or \
             bound it with a bulkhead's `max_wait_duration` and a timeout inside the body",
        ));
    }

    let returns_result = is_result(&output);
    if !returns_result && stack.fallback.is_none() {
        let message = format!(
            "`#[{attr}]` needs `{}` to return `Result<_, E>` with `E: From<Rejected>`, so a \
             rejection can reach the caller; change the return type (an alias is recognised \
             when it is named `Result`, as `io::Result<T>`), or name a fallback: \
             `#[{attr}(name = \"..\", fallback = on_rejected)]`",
            sig.ident
        );
        return Err(match &sig.output {
            ReturnType::Default => syn::Error::new_spanned(&sig.ident, message),
            ReturnType::Type(_, ty) => syn::Error::new_spanned(ty, message),
        });
    }
    if stack.fallback.is_some() && matches!(shape, Shape::AsyncTrait) {
        return Err(syn::Error::new(
            stack
                .fallback
                .as_ref()
                .map_or(sig.ident.span(), |f| f.key.span()),
            format!(
                "a `fallback` on a method already rewritten by `#[async_trait]` cannot receive \
                 its arguments; put `#[{attr}]` above `#[async_trait]` on the impl block, or \
                 handle `Rejected` in the caller"
            ),
        ));
    }

    let names = Names::new();
    let register = register(stack, sig);
    let classify = classify(stack, returns_result, &names);
    let is_async = !matches!(shape, Shape::Sync);
    let Ending {
        prelude,
        on_rejected,
        finish,
    } = ending(
        stack,
        sig,
        &output,
        returns_result,
        is_async,
        moves_arguments(stack),
        &names,
    )?;
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
            let mut rewritten = block.clone();
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
    Ok(quote! {
        #(#outer_attrs)*
        #vis #defaultness #sig {
            #(#inner_attrs)*
            #imports
            #body
        }
    })
}

/// Whether the body takes the function's arguments before a guard can still refuse the call:
/// a time limiter without a retry runs a future made once, which owns them (with a retry,
/// each attempt clones them and the function keeps the originals).
fn moves_arguments(stack: &Stack) -> bool {
    stack.has_wrapper() && stack.of(Kind::Retry).is_none()
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

/// How the call's output counts for the breakers: the `ignore` / `record` predicates of the
/// `#[circuit_breaker]`, every `Err` a failure by default; without a `Result`, a success.
pub(super) fn classify(stack: &Stack, returns_result: bool, names: &Names) -> TokenStream {
    let krate = &stack.krate;
    let Names { result, error, .. } = names;
    let breaker = stack.breaker();
    if !returns_result || breaker.is_none() {
        // Only a breaker reads the outcome.
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
    let record = predicate(breaker.and_then(|b| b.record.as_ref()), true);
    quote!(|#result| #krate::__private::classify(#result, #ignore, #record))
}
