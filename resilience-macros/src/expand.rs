//! Code generation: one guarded body per function, for sync fns, `async fn`s and the shape
//! `#[async_trait]` leaves behind. Nothing outside this module calls `quote!`.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{
    Attribute, Block, Expr, ExprAsync, FnArg, GenericArgument, Ident, ImplItem, Item, ItemFn,
    ItemImpl, Pat, PathArguments, ReturnType, Signature, Stmt, Type, TypeParamBound, Visibility,
};

use crate::args::{AspectArgs, Kind};
use crate::stack::{self, Stack};

/// Entry point of both attributes: `kind` is the attribute invoked, `args` its arguments.
pub(crate) fn attribute(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    let first = AspectArgs::parse(kind, Span::call_site(), args);
    match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Fn(function)) => expand_item_fn(first, function),
        Ok(Item::Impl(block)) => expand_impl(first, block),
        Ok(Item::Verbatim(tokens)) if looks_like_fn_without_body(&tokens) => with_item(
            syn::Error::new_spanned(
                &tokens,
                format!(
                    "`#[{}]` needs a function body to guard; put it on the method of the impl \
                     block instead of the trait's declaration",
                    kind.attr_name()
                ),
            ),
            tokens,
        ),
        Ok(other) => with_item(
            syn::Error::new(
                Span::call_site(),
                format!(
                    "`#[{}]` guards a function, a method, or every method of an impl block; it \
                     cannot be applied here",
                    kind.attr_name()
                ),
            ),
            other.into_token_stream(),
        ),
        Err(e) => with_item(e, item),
    }
}

/// The error followed by the item, so one mistake gives one message and the rest of the
/// program still sees the item.
fn with_item(error: syn::Error, item: TokenStream) -> TokenStream {
    let mut tokens = error.to_compile_error();
    tokens.extend(item);
    tokens
}

fn looks_like_fn_without_body(tokens: &TokenStream) -> bool {
    tokens
        .clone()
        .into_iter()
        .any(|t| matches!(&t, TokenTree::Ident(i) if i == "fn"))
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

fn expand_item_fn(first: syn::Result<AspectArgs>, mut function: ItemFn) -> TokenStream {
    let mut parsed = vec![first];
    parsed.extend(stack::strip(&mut function.attrs));
    let (aspects, errors) = split(parsed);
    if let Some(e) = errors {
        return with_item(e, function.into_token_stream());
    }
    let guarded = stack::build(&[], aspects).and_then(|stack| {
        guard_fn(
            &stack,
            &function.attrs,
            &function.vis,
            TokenStream::new(),
            &function.sig,
            &function.block,
        )
    });
    guarded.unwrap_or_else(|e| with_item(e, function.into_token_stream()))
}

fn expand_impl(first: syn::Result<AspectArgs>, mut block: ItemImpl) -> TokenStream {
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
        strip_methods(&mut block);
        return with_item(e, block.into_token_stream());
    }

    let mut method_errors: Option<syn::Error> = None;
    let items = std::mem::take(&mut block.items);
    for item in items {
        let ImplItem::Fn(mut method) = item else {
            block.items.push(item);
            continue;
        };
        let (own, errors) = split(stack::strip(&mut method.attrs));
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
                )
            }),
        };
        match guarded {
            Ok(tokens) => block.items.push(ImplItem::Verbatim(tokens)),
            Err(e) => {
                push(&mut method_errors, e);
                block.items.push(ImplItem::Fn(method));
            }
        }
    }
    match method_errors {
        Some(e) => with_item(e, block.into_token_stream()),
        None => block.into_token_stream(),
    }
}

/// Removes this crate's attributes from every method, so an impl block emitted with an error
/// does not expand them again (one mistake, one message).
fn strip_methods(block: &mut ItemImpl) {
    for item in &mut block.items {
        if let ImplItem::Fn(method) = item {
            let _ = stack::strip(&mut method.attrs);
        }
    }
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
) -> syn::Result<TokenStream> {
    let attr = stack.aspects[0].kind.attr_name();
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
             rejection can reach the caller; change the return type, or name a fallback: \
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
    let on_rejected = on_rejected(stack, sig, &output, returns_result, is_async, &names)?;
    let Names {
        plan,
        entered,
        rejected,
        output: value,
        ..
    } = &names;

    let body = match shape {
        Shape::Sync => {
            let hint = return_hint(&output);
            quote! {
                #register
                let #plan = __RESILIENCE_CALL_SITE.plan();
                // Bound to a local: the temporaries of a tail expression outlive `#plan`.
                let #value = match #plan.enter() {
                    ::core::result::Result::Ok(#entered) => {
                        #entered.run(move || { #hint #block }, #classify)
                    }
                    ::core::result::Result::Err(#rejected) => #on_rejected,
                };
                #value
            }
        }
        Shape::Async => {
            let hint = return_hint(&output);
            quote! {
                #register
                let #plan = __RESILIENCE_CALL_SITE.plan();
                // Bound to a local: the temporaries of a tail expression outlive `#plan`.
                let #value = match #plan.enter_async().await {
                    ::core::result::Result::Ok(#entered) => {
                        #entered.run_async(async move { #hint #block }, #classify).await
                    }
                    ::core::result::Result::Err(#rejected) => #on_rejected,
                };
                #value
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
            *inner = ExprAsync {
                attrs: Vec::new(),
                async_token: original.async_token,
                capture: original.capture,
                block: syn::parse_quote! {{
                    let #plan = __RESILIENCE_CALL_SITE.plan();
                    // Bound to a local: the temporaries of a tail expression outlive `#plan`.
                let #value = match #plan.enter_async().await {
                        ::core::result::Result::Ok(#entered) => {
                            #entered.run_async(#original, #classify).await
                        }
                        ::core::result::Result::Err(#rejected) => #on_rejected,
                    };
                    #value
                }},
            };
            let stmts = &rewritten.stmts;
            quote! {
                #register
                #(#stmts)*
            }
        }
    };
    Ok(quote! {
        #(#attrs)*
        #vis #defaultness #sig {
            #body
        }
    })
}

/// The locals of the generated code, at mixed-site hygiene so user code cannot see or clash
/// with them.
struct Names {
    plan: Ident,
    entered: Ident,
    rejected: Ident,
    result: Ident,
    error: Ident,
    output: Ident,
}

impl Names {
    fn new() -> Self {
        let name = |n: &str| Ident::new(n, Span::mixed_site());
        Names {
            plan: name("__plan"),
            entered: name("__entered"),
            rejected: name("__rejected"),
            result: name("__result"),
            error: name("__error"),
            output: name("__output"),
        }
    }
}

/// The function's call site: a `static`, registered with `inventory` for
/// `Registry::call_sites` and `Registry::validate`.
fn register(stack: &Stack, sig: &Signature) -> TokenStream {
    let krate = &stack.krate;
    let guards = stack.aspects.iter().map(|aspect| {
        let name = &aspect.name;
        match aspect.kind {
            Kind::Bulkhead => quote!(#krate::__private::Guard::bulkhead(#name)),
            Kind::CircuitBreaker => quote!(#krate::__private::Guard::circuit_breaker(#name)),
        }
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
    if !returns_result {
        return quote!(|_| #krate::__private::CallOutcome::Success);
    }
    let breaker = stack.breaker();
    let ignore = match breaker.and_then(|b| b.ignore.as_ref()) {
        Some(p) => {
            let path = &p.path;
            quote_spanned!(path.span()=> |#error| #path(#error))
        }
        None => quote!(|_| false),
    };
    let record = match breaker.and_then(|b| b.record.as_ref()) {
        Some(p) => {
            let path = &p.path;
            quote_spanned!(path.span()=> |#error| #path(#error))
        }
        None => quote!(|_| true),
    };
    quote!(|#result| #krate::__private::classify(#result, #ignore, #record))
}

/// What a refused call returns: the rejection as the function's error, or the fallback's
/// value (the fallback receives the same arguments, then the rejection).
fn on_rejected(
    stack: &Stack,
    sig: &Signature,
    output: &Type,
    returns_result: bool,
    is_async: bool,
    names: &Names,
) -> syn::Result<TokenStream> {
    let krate = &stack.krate;
    let rejected = &names.rejected;
    let Some(fallback) = &stack.fallback else {
        debug_assert!(returns_result);
        return Ok(quote_spanned! {output.span()=>
            ::core::result::Result::Err(#krate::__private::rejection_into(#rejected))
        });
    };
    let mut args: Vec<TokenStream> = Vec::new();
    let mut has_receiver = false;
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(_) => {
                has_receiver = true;
                args.push(quote!(self));
            }
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(ident) if ident.subpat.is_none() && ident.by_ref.is_none() => {
                    let name = &ident.ident;
                    args.push(quote!(#name));
                }
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "a fallback receives the same arguments as the function, so each \
                         needs a name: write `name: Type` and destructure it in the body",
                    ))
                }
            },
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
    let call = quote_spanned!(path.span()=> #callee(#(#args,)* #rejected));
    Ok(if is_async { quote!(#call.await) } else { call })
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
