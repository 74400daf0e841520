//! How a guarded function ends when a guard refuses it (or, with `fallback_on_error`, when
//! it fails): the rejection as its error, or its fallback's value.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Type};

use crate::model::{argument, rebuild, Guarded};

use super::names::Names;
use super::types::{borrows, mentions_impl_trait, respan, result_error_type};

/// How a guarded function ends when it is refused, or (with `fallback_on_error`) fails.
pub(super) struct Ending {
    /// Statements before the call: clones of the arguments a fallback on error needs.
    pub(super) prelude: TokenStream,
    /// The value of a refused call.
    pub(super) on_rejected: TokenStream,
    /// What becomes of the call's value: itself, or an `Err` handed to the fallback.
    pub(super) finish: TokenStream,
}

/// What a refused call returns: the rejection as the function's error, or the fallback's
/// value (the fallback receives the same arguments, then the rejection). With
/// `fallback_on_error`, the fallback receives the function's error `E` instead, for a
/// rejection (converted with `From<Rejected>`) and for an `Err` alike.
pub(super) fn ending(guarded: &Guarded<'_>, is_async: bool, names: &Names) -> Ending {
    let Guarded {
        stack, sig, output, ..
    } = guarded;
    let krate = &stack.krate;
    let Names {
        rejected,
        output: value,
        ..
    } = names;
    let into_error = || {
        // Every token of the callee at `E`, so an `E` without `From<Rejected>` is reported
        // at `E` in the signature, not at the attribute.
        let span = result_error_type(output).map_or_else(|| output.span(), Spanned::span);
        let krate = respan(krate.to_token_stream(), span);
        quote_spanned! {span=>
            ::core::result::Result::Err(#krate::__private::rejection_into(#rejected))
        }
    };
    let Some(fallback) = &stack.fallback else {
        return Ending {
            prelude: TokenStream::new(),
            on_rejected: into_error(),
            finish: quote!(#value),
        };
    };
    let on_error = stack.fallback_on_error;

    // The arguments the fallback receives: as they are on a rejection (the call never took
    // them); cloned before the call when the fallback also handles errors, or when the call
    // takes them before a guard can still refuse it (a time limiter's body future owns its
    // arguments, and the time-out comes after).
    let clone_arguments = guarded.clones_fallback_arguments();
    let mut args: Vec<TokenStream> = Vec::new();
    let mut prelude = TokenStream::new();
    let mut has_receiver = false;
    let mut types: Vec<&Type> = Vec::new();
    for (index, input) in sig.inputs.iter().enumerate() {
        types.push(match input {
            FnArg::Receiver(receiver) => &receiver.ty,
            FnArg::Typed(typed) => &typed.ty,
        });
        has_receiver |= matches!(input, FnArg::Receiver(_));
        // Every argument has a name or a pattern that can be rebuilt, and no `&mut self` is
        // cloned: `valid.rs` saw to it.
        let Some((name, by_reference)) = argument(input) else {
            let FnArg::Typed(typed) = input else {
                continue;
            };
            // A pattern argument (`Path(id): Path<u32>`): its value rebuilt from what it bound,
            // from clones of them when the call may take them first.
            let Some(value) = rebuild(&typed.pat, clone_arguments) else {
                continue;
            };
            if clone_arguments {
                let copy = Ident::new(&format!("__fallback_arg{index}"), Span::mixed_site());
                let span = input.span();
                prelude.extend(quote_spanned! {span=>
                    let #copy = #value;
                });
                args.push(quote!(#copy));
            } else {
                args.push(value);
            }
            continue;
        };
        if clone_arguments && !by_reference {
            let copy = Ident::new(&format!("__fallback_arg{index}"), Span::mixed_site());
            let span = input.span();
            prelude.extend(quote_spanned! {span=>
                let #copy = ::core::clone::Clone::clone(&#name);
            });
            args.push(quote!(#copy));
        } else {
            args.push(name);
        }
    }
    let path = &fallback.path;
    // In a method, a bare name is a function of the same type (`Self::name`), as a
    // Resilience4j fallback method is one of the same class.
    let callee = if has_receiver && path.get_ident().is_some() {
        quote_spanned!(path.span()=> Self::#path)
    } else {
        quote!(#path)
    };
    // A sync fallback is first coerced to the `fn` pointer type it must have, spanned on its
    // path: a wrong argument or return type is then reported as "expected fn pointer
    // `fn(u32, Rejected) -> Result<u32, E>`", the signature to write, instead of rustc's
    // suggestions for the expanded call (`Ok(fallback)`, `qty.into()`), which point into the
    // attribute and the signature and cannot be followed. Not for an async fallback (its future
    // has no name), nor where a pointer type cannot be written for the function's types
    // (`impl Trait`, or a return type borrowing through elided lifetimes).
    // An async fallback's argument types can be written out: none is `impl Trait`, and the
    // trait that calls it has an impl for as many (`__private::AsyncFallback`, up to 12).
    let typed_arguments = types.len() < 12
        && !types
            .iter()
            .any(|ty| mentions_impl_trait(ty.to_token_stream()));
    let nameable = !is_async
        && !mentions_impl_trait(output.to_token_stream())
        && !borrows(output.to_token_stream())
        && !types
            .iter()
            .any(|ty| mentions_impl_trait(ty.to_token_stream()));
    let error_type = if on_error {
        result_error_type(output).map(ToTokens::to_token_stream)
    } else {
        Some(quote!(#krate::__private::Rejected))
    };
    let callee = match &error_type {
        Some(last) if nameable => {
            let pointer = Ident::new("__fallback_fn", Span::mixed_site());
            quote_spanned! {path.span()=>
                ({
                    let #pointer: fn(#(#types,)* #last) -> #output = #callee;
                    #pointer
                })
            }
        }
        _ => callee,
    };
    let call = |last: &Ident| {
        let call = if let (true, Some(last_type)) = (is_async && typed_arguments, &error_type) {
            // An async function's fallback is async too: its future is awaited here. Called
            // through a trait of the argument tuple it must take, written out, so that a
            // fallback taking others is reported at the fallback, as the signature it must
            // have ("expected function signature `fn(Path<u32>, Rejected) -> _`").
            let private = respan(quote!(#krate::__private), path.span());
            quote_spanned! {path.span()=>
                <_ as #private::AsyncFallback<(#(#types,)* #last_type,)>>::call_fallback(
                    #callee,
                    (#(#args,)* #last,),
                )
                .await
            }
        } else if is_async {
            quote_spanned!(path.span()=> #callee(#(#args,)* #last).await)
        } else {
            quote_spanned!(path.span()=> #callee(#(#args,)* #last))
        };
        if mentions_impl_trait(output.to_token_stream()) {
            return call;
        }
        // Typed as the function's return type, so a fallback returning something else is
        // reported as "expected `T`, found `U`" at the fallback, not as mismatched arms.
        let fallback_value = Ident::new("__fallback", Span::mixed_site());
        quote! {{
            let #fallback_value: #output = #call;
            #fallback_value
        }}
    };
    if !on_error {
        return Ending {
            prelude,
            on_rejected: call(rejected),
            finish: quote!(#value),
        };
    }
    let error = &names.error;
    let handle = call(error);
    Ending {
        prelude,
        on_rejected: into_error(),
        finish: quote! {
            match #value {
                ::core::result::Result::Ok(#value) => ::core::result::Result::Ok(#value),
                ::core::result::Result::Err(#error) => #handle,
            }
        },
    }
}
