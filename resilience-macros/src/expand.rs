//! Code generation: one guarded body per function, for sync fns, `async fn`s and the shape
//! `#[async_trait]` leaves behind. Nothing outside this module calls `quote!`.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{
    AttrStyle, Attribute, Block, Expr, ExprAsync, FnArg, GenericArgument, Ident, ImplItem, Item,
    ItemFn, ItemImpl, Lifetime, Pat, PathArguments, ReturnType, Signature, Stmt, TraitItemFn, Type,
    TypeParamBound, Visibility,
};

use crate::args::{AspectArgs, Kind};
use crate::stack::{self, Stack};

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

/// Combines the errors of several parsed attributes, keeping the successes.
fn split(results: Vec<syn::Result<AspectArgs>>) -> (Vec<AspectArgs>, Option<syn::Error>) {
    let mut ok = Vec::new();
    let mut errors: Option<syn::Error> = None;
    for result in results {
        match result {
            Ok(args) => ok.push(args),
            Err(e) => match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            },
        }
    }
    (ok, errors)
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
    let (aspects, errors) = split(parsed);
    let guarded = match errors {
        Some(e) => Err(e),
        None => stack::build(&[], aspects).and_then(|stack| {
            guard_fn(
                &stack,
                &function.attrs,
                &function.vis,
                TokenStream::new(),
                &function.sig,
                &function.block,
                &imports,
            )
        }),
    };
    guarded.unwrap_or_else(|e| {
        prepend(&mut function.block, imports);
        with_item(e, function.into_token_stream())
    })
}

fn expand_impl(first: syn::Result<AspectArgs>, mut block: ItemImpl) -> TokenStream {
    let impl_imports = keep_imports_used(&stack::imports(&block.attrs));
    let mut parsed = vec![first];
    parsed.extend(stack::strip(&mut block.attrs));
    let (impl_aspects, mut errors) = split(parsed);
    let push = |errors: &mut Option<syn::Error>, e: syn::Error| match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    };
    match stack::build(&[], impl_aspects.clone()) {
        Ok(stack) => {
            if let Some(fallback) = &stack.fallback {
                push(
                    &mut errors,
                    syn::Error::new(
                        fallback.key.span(),
                        "`fallback` cannot be given on an impl block: each method has its own \
                         signature; give the fallback on a method's own attribute",
                    ),
                );
            }
        }
        Err(e) => push(&mut errors, e),
    }
    if let Some(e) = errors {
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

    let mut method_errors: Option<syn::Error> = None;
    let items = std::mem::take(&mut block.items);
    for item in items {
        let ImplItem::Fn(mut method) = item else {
            block.items.push(item);
            continue;
        };
        let imports = keep_imports_used(&stack::imports(&method.attrs));
        let (own, errors) = split(stack::strip(&mut method.attrs));
        // An impl block's aspects guard the methods that can carry a rejection, those that
        // return a `Result`; constructors and plain getters are left as they are. A method's
        // own attribute still applies (and still requires a `Result` or a fallback).
        if own.is_empty() && errors.is_none() && !returns_result(&method.sig, &method.block) {
            block.items.push(ImplItem::Fn(method));
            continue;
        }
        let guarded = match errors {
            Some(e) => Err(e),
            None => stack::build(&impl_aspects, own).and_then(|stack| {
                guard_fn(
                    &stack,
                    &method.attrs,
                    &method.vis,
                    method.defaultness.into_token_stream(),
                    &method.sig,
                    &method.block,
                    &imports,
                )
            }),
        };
        match guarded {
            Ok(tokens) => block.items.push(ImplItem::Verbatim(tokens)),
            Err(e) => {
                push(&mut method_errors, e);
                prepend(&mut method.block, imports);
                block.items.push(ImplItem::Fn(method));
            }
        }
    }
    let mut tokens = match method_errors {
        Some(e) => with_item(e, block.into_token_stream()),
        None => block.into_token_stream(),
    };
    if !impl_imports.is_empty() {
        tokens.extend(quote!(const _: () = { #impl_imports };));
    }
    tokens
}

/// Whether a method's call produces a `Result` (directly, from an `async fn`, or from the
/// future `#[async_trait]` leaves).
fn returns_result(sig: &Signature, block: &Block) -> bool {
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
enum Shape {
    /// A plain function: guarded by a closure, waiting by blocking.
    Sync,
    /// An `async fn`: guarded by an async block, waiting asynchronously.
    Async,
    /// A function whose body ends in `Box::pin(async move { .. })`, as `#[async_trait]` leaves
    /// it: the inner future is guarded, not the construction of the box.
    AsyncTrait,
}

/// Generates the guarded function. `defaultness` is `default` for specializing impls.
fn guard_fn(
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
    } = ending(stack, sig, &output, returns_result, is_async, &names)?;
    let krate = &stack.krate;
    let private = quote!(#krate::__private);
    let Names {
        plan,
        call,
        rejected,
        output: value,
        entry,
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
    let async_body = |future: TokenStream| {
        quote! {
            #prelude
            let #rejected = #entry: {
                // Interned: a plain reference, held across `.await`.
                let #plan = #private::CallSite::plan(&__RESILIENCE_CALL_SITE);
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
                return #finish;
            };
            let #value = #on_rejected;
            #finish
        }
    };

    // Associated functions are called by their full path, so no trait in the user's scope can
    // stand in for them.
    let body = match shape {
        Shape::Sync => {
            let hint = return_hint(&output);
            quote! {
                #register
                #prelude
                let #plan = #private::CallSite::plan(&__RESILIENCE_CALL_SITE);
                // The call's permits, written in place as the guards admit it.
                let mut #call = #private::GuardedCall::new();
                // Bound to a local: the temporaries of a tail expression outlive `#plan`.
                let #value = match #private::GuardedCall::enter(&mut #call, &#plan) {
                    ::core::result::Result::Ok(()) => #private::GuardedCall::run(
                        &mut #call,
                        move || { #hint #(#stmts)* },
                        #classify,
                    ),
                    ::core::result::Result::Err(#rejected) => #on_rejected,
                };
                #finish
            }
        }
        Shape::Async => {
            let hint = return_hint(&output);
            let body = async_body(quote!(async move { #hint #(#stmts)* }));
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
            let body = async_body(original.to_token_stream());
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

/// The locals of the generated code, at mixed-site hygiene so user code cannot see or clash
/// with them.
struct Names {
    plan: Ident,
    call: Ident,
    rejected: Ident,
    result: Ident,
    error: Ident,
    output: Ident,
    /// The label of the block that enters the guards and runs the call.
    entry: Lifetime,
}

impl Names {
    fn new() -> Self {
        let name = |n: &str| Ident::new(n, Span::mixed_site());
        Names {
            plan: name("__plan"),
            call: name("__call"),
            rejected: name("__rejected"),
            result: name("__result"),
            error: name("__error"),
            output: name("__output"),
            entry: Lifetime::new("'__resilience_entry", Span::mixed_site()),
        }
    }
}

/// The function's call site: a `static`, registered with `inventory` for
/// `Registry::call_sites` and `Registry::validate`.
fn register(stack: &Stack, sig: &Signature) -> TokenStream {
    let krate = &stack.krate;
    let guards = stack.aspects.iter().map(|aspect| {
        let name = &aspect.name;
        // The attribute's name is the runtime's `Guard` constructor.
        let constructor = syn::Ident::new(aspect.kind.attr_name(), Span::call_site());
        quote!(#krate::__private::Guard::#constructor(#name))
    });
    let function = sig.ident.to_string();
    let line = quote_spanned!(sig.ident.span()=> ::core::line!());
    quote! {
        static __RESILIENCE_CALL_SITE: #krate::__private::CallSite =
            #krate::__private::CallSite::new(
                ::core::module_path!(),
                #function,
                ::core::file!(),
                #line,
                &[#(#guards),*],
            );
        #krate::__private::inventory::submit! {
            #krate::__private::CallSiteEntry(&__RESILIENCE_CALL_SITE)
        }
    }
}

/// How the call's output counts for the breakers: the `ignore` / `record` predicates of the
/// `#[circuit_breaker]`, every `Err` a failure by default; without a `Result`, a success.
fn classify(stack: &Stack, returns_result: bool, names: &Names) -> TokenStream {
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

/// How a guarded function ends when it is refused, or (with `fallback_on_error`) fails.
struct Ending {
    /// Statements before the call: clones of the arguments a fallback on error needs.
    prelude: TokenStream,
    /// The value of a refused call.
    on_rejected: TokenStream,
    /// What becomes of the call's value: itself, or an `Err` handed to the fallback.
    finish: TokenStream,
}

/// What a refused call returns: the rejection as the function's error, or the fallback's
/// value (the fallback receives the same arguments, then the rejection). With
/// `fallback_on_error`, the fallback receives the function's error `E` instead, for a
/// rejection (converted with `From<Rejected>`) and for an `Err` alike.
fn ending(
    stack: &Stack,
    sig: &Signature,
    output: &Type,
    returns_result: bool,
    is_async: bool,
    names: &Names,
) -> syn::Result<Ending> {
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
        return Ok(Ending {
            prelude: TokenStream::new(),
            on_rejected: into_error(),
            finish: quote!(#value),
        });
    };
    let on_error = stack.fallback_on_error;
    if on_error && !returns_result {
        return Err(syn::Error::new(
            fallback.key.span(),
            "`fallback_on_error` needs the function to return `Result<_, E>`: the fallback \
             receives its `E`",
        ));
    }

    // The arguments the fallback receives: as they are on a rejection (the call never took
    // them); cloned before the call when the fallback also handles errors.
    let mut args: Vec<TokenStream> = Vec::new();
    let mut prelude = TokenStream::new();
    let mut has_receiver = false;
    for (index, input) in sig.inputs.iter().enumerate() {
        let (name, by_reference) = match input {
            FnArg::Receiver(receiver) => {
                has_receiver = true;
                if on_error && receiver.mutability.is_some() && receiver.reference.is_some() {
                    return Err(syn::Error::new_spanned(
                        receiver,
                        "`fallback_on_error` cannot hand `&mut self` to the fallback after the \
                         call used it; take `&self`, or drop `fallback_on_error`",
                    ));
                }
                (quote!(self), receiver.reference.is_some())
            }
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(ident) if ident.subpat.is_none() && ident.by_ref.is_none() => {
                    let name = &ident.ident;
                    (quote!(#name), false)
                }
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "a fallback receives the same arguments as the function, so each \
                         needs a name: write `name: Type` and destructure it in the body",
                    ))
                }
            },
        };
        if on_error && !by_reference {
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
    let call = |last: &Ident| {
        let call = if is_async {
            // An async function's fallback is async too: its future is awaited here.
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
        return Ok(Ending {
            prelude,
            on_rejected: call(rejected),
            finish: quote!(#value),
        });
    }
    let error = &names.error;
    let handle = call(error);
    Ok(Ending {
        prelude,
        on_rejected: into_error(),
        finish: quote! {
            match #value {
                ::core::result::Result::Ok(#value) => ::core::result::Result::Ok(#value),
                ::core::result::Result::Err(#error) => #handle,
            }
        },
    })
}

/// A statement that tells the compiler the body's type before the body runs, so `?` and
/// `return` inside a closure or async block convert to the function's return type. Omitted
/// when the type cannot be written in a `let` (it contains `impl Trait`).
fn return_hint(output: &Type) -> TokenStream {
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

fn mentions_impl_trait(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == "impl",
        TokenTree::Group(g) => mentions_impl_trait(g.stream()),
        _ => false,
    })
}

/// The `E` of `Result<T, E>`; `None` for an alias such as `io::Result<T>`.
fn result_error_type(ty: &Type) -> Option<&Type> {
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
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
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
fn is_result(ty: &Type) -> bool {
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
fn future_output(ty: &Type) -> Option<Type> {
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
fn async_trait_body(block: &Block) -> Option<&ExprAsync> {
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

fn async_trait_body_mut(block: &mut Block) -> Option<&mut ExprAsync> {
    let Some(Stmt::Expr(Expr::Call(call), None)) = block.stmts.last_mut() else {
        return None;
    };
    match call.args.first_mut() {
        Some(Expr::Async(inner)) => Some(inner),
        _ => None,
    }
}

fn is_box_pin(func: &Expr) -> bool {
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
