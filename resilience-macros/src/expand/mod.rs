//! Code generation: one guarded body per function, for sync fns, `async fn`s and the shape
//! `#[async_trait]` leaves behind. Nothing outside this module calls `quote!`.
//!
//! This file takes the item apart (a fn, an impl block, or something that cannot be guarded)
//! and has `valid.rs` check it into its model (`model.rs`); [`guard`] writes
//! the guarded body and the call site, [`fallback`] what a refused call returns, and [`types`]
//! reads the user's types and shapes.

mod fallback;
mod guard;
mod names;
pub(crate) mod types;
mod wrapped;

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::{Block, ImplItem, Item, ItemFn, ItemImpl, TraitItemFn};

use crate::args::{AspectArgs, Kind};
use crate::errors::Errors;
use crate::model::returns_result;
use crate::{stack, valid};
use guard::guard_fn;
/// Entry point of both attributes: `kind` is the attribute invoked, `args` its arguments.
pub(crate) fn attribute(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    let first = AspectArgs::parse(kind, Span::call_site(), args);
    match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Fn(function)) => expand_item_fn(first, function),
        Ok(Item::Impl(block)) => expand_impl(first, block),
        Ok(Item::Verbatim(tokens)) => match syn::parse2::<TraitItemFn>(tokens.clone()) {
            Ok(mut declaration) => {
                let _ = stack::strip(&mut declaration.attrs);
                with_item(
                    syn::Error::new_spanned(
                        &declaration.sig,
                        format!(
                            "`#[{}]` needs a function body to guard; put it on the method of \
                             the impl block instead of the trait's declaration",
                            kind.attr_name()
                        ),
                    ),
                    declaration.into_token_stream(),
                )
            }
            Err(_) => with_item(not_a_function(kind, "this item"), tokens),
        },
        Ok(mut other) => {
            let what = strip_item(&mut other);
            with_item(not_a_function(kind, what), other.into_token_stream())
        }
        Err(e) => with_item(e, item),
    }
}

fn not_a_function(kind: Kind, what: &str) -> syn::Error {
    syn::Error::new(
        Span::call_site(),
        format!(
            "`#[{}]` guards a function, a method, or every method of an impl block; it cannot \
             be applied to {what}",
            kind.attr_name()
        ),
    )
}

/// Removes this crate's attributes from an item that cannot be guarded (so they do not
/// report the same mistake again), and says what the item is.
fn strip_item(item: &mut Item) -> &'static str {
    let (attrs, what) = match item {
        Item::Struct(i) => (&mut i.attrs, "a struct"),
        Item::Enum(i) => (&mut i.attrs, "an enum"),
        Item::Union(i) => (&mut i.attrs, "a union"),
        Item::Trait(i) => (&mut i.attrs, "a trait"),
        Item::Mod(i) => (&mut i.attrs, "a module"),
        Item::Const(i) => (&mut i.attrs, "a constant"),
        Item::Static(i) => (&mut i.attrs, "a static"),
        Item::Type(i) => (&mut i.attrs, "a type alias"),
        Item::Use(i) => (&mut i.attrs, "a `use` declaration"),
        Item::ForeignMod(i) => (&mut i.attrs, "an extern block"),
        Item::Macro(i) => (&mut i.attrs, "a macro invocation"),
        _ => return "this item",
    };
    let _ = stack::strip(attrs);
    what
}

/// The error followed by the item, so one mistake gives one message and the rest of the
/// program still sees the item.
fn with_item(error: syn::Error, item: TokenStream) -> TokenStream {
    let mut tokens = error.to_compile_error();
    tokens.extend(item);
    tokens
}

/// The successes of several parsed attributes, their errors kept in `errors`.
fn split(results: Vec<syn::Result<AspectArgs>>, errors: &mut Errors) -> Vec<AspectArgs> {
    results.into_iter().filter_map(|r| errors.keep(r)).collect()
}

/// `use` declarations of the stacked attributes' imports (`use resilience_runtime::bulkhead`),
/// which the topmost attribute strips before rustc resolves them: without these, the
/// import of every attribute but the topmost would be reported as unused.
fn keep_imports_used(paths: &[syn::Path]) -> TokenStream {
    quote! {
        #(
            #[allow(unused_imports)]
            use #paths as _;
        )*
    }
}

/// `block` with `prelude` run first (for items emitted unguarded next to an error).
fn prepend(block: &mut Block, prelude: TokenStream) {
    if prelude.is_empty() {
        return;
    }
    let prelude: Block = syn::parse_quote!({ #prelude });
    let mut stmts = prelude.stmts;
    stmts.append(&mut block.stmts);
    block.stmts = stmts;
}

fn expand_item_fn(first: syn::Result<AspectArgs>, mut function: ItemFn) -> TokenStream {
    let imports = keep_imports_used(&stack::imports(&function.attrs));
    let mut parsed = vec![first];
    parsed.extend(stack::strip(&mut function.attrs));
    let mut errors = Errors::default();
    let aspects = split(parsed, &mut errors);
    let guarded = errors
        .finish(aspects)
        .and_then(|aspects| valid::stack(&[], aspects))
        .and_then(|stack| {
            let guarded = valid::function(
                &stack,
                &function.attrs,
                &function.vis,
                TokenStream::new(),
                &function.sig,
                &function.block,
            )?;
            guard_fn(&guarded, &imports)
        });
    guarded.unwrap_or_else(|e| {
        prepend(&mut function.block, imports);
        with_item(e, function.into_token_stream())
    })
}

fn expand_impl(first: syn::Result<AspectArgs>, mut block: ItemImpl) -> TokenStream {
    let impl_imports = keep_imports_used(&stack::imports(&block.attrs));
    let mut parsed = vec![first];
    parsed.extend(stack::strip(&mut block.attrs));
    let mut errors = Errors::default();
    let impl_aspects = split(parsed, &mut errors);
    if let Some(stack) = errors.keep(valid::stack(&[], impl_aspects.clone())) {
        valid::impl_block(&stack, &mut errors);
    }
    if let Some(e) = errors.into_error() {
        for item in &mut block.items {
            if let ImplItem::Fn(method) = item {
                let imports = keep_imports_used(&stack::imports(&method.attrs));
                let _ = stack::strip(&mut method.attrs);
                prepend(&mut method.block, imports);
            }
        }
        let mut tokens = with_item(e, block.into_token_stream());
        tokens.extend(quote!(const _: () = { #impl_imports };));
        return tokens;
    }

    let mut method_errors = Errors::default();
    let items = std::mem::take(&mut block.items);
    for item in items {
        let ImplItem::Fn(mut method) = item else {
            block.items.push(item);
            continue;
        };
        let imports = keep_imports_used(&stack::imports(&method.attrs));
        let mut errors = Errors::default();
        let own = split(stack::strip(&mut method.attrs), &mut errors);
        // An impl block's aspects guard the methods that can carry a rejection, those that
        // return a `Result`; constructors and plain getters are left as they are. A method's
        // own attribute still applies (and still requires a `Result` or a fallback).
        if own.is_empty() && errors.is_empty() && !returns_result(&method.sig, &method.block) {
            block.items.push(ImplItem::Fn(method));
            continue;
        }
        let guarded = errors
            .finish(own)
            .and_then(|own| valid::stack(&impl_aspects, own))
            .and_then(|stack| {
                let guarded = valid::function(
                    &stack,
                    &method.attrs,
                    &method.vis,
                    method.defaultness.into_token_stream(),
                    &method.sig,
                    &method.block,
                )?;
                guard_fn(&guarded, &imports)
            });
        match guarded {
            Ok(tokens) => block.items.push(ImplItem::Verbatim(tokens)),
            Err(e) => {
                method_errors.push(e);
                prepend(&mut method.block, imports);
                block.items.push(ImplItem::Fn(method));
            }
        }
    }
    let mut tokens = match method_errors.into_error() {
        Some(e) => with_item(e, block.into_token_stream()),
        None => block.into_token_stream(),
    };
    if !impl_imports.is_empty() {
        tokens.extend(quote!(const _: () = { #impl_imports };));
    }
    tokens
}
