//! Every check of the macros, in one place: what cannot stand together in a stack of
//! attributes, and what a guarded function must be. Each error points at the token to change
//! and says how; all of them are reported at once ([`Errors`]). Parsing an attribute's own
//! arguments is `args.rs`; generation, `expand/`, which sees only what passed.

use syn::{Attribute, Block, FnArg, ReturnType, Signature, Visibility};

use crate::args::{AspectArgs, Kind, PathArg};
use crate::errors::Errors;
use crate::expand::types::{async_trait_body, future_output, is_result};
use crate::model::{argument, declared_output, rebuild, Guarded, Shape};
use crate::stack::Stack;

/// Puts the parsed aspects of one function together. `inherited` are those of the impl block
/// around it, which apply to it too.
pub(crate) fn stack(inherited: &[AspectArgs], own: Vec<AspectArgs>) -> syn::Result<Stack> {
    let mut errors = Errors::default();
    let mut push = |e: syn::Error| errors.push(e);

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
    errors.finish(Stack {
        aspects,
        fallback: fallback.map(|(f, _)| f),
        fallback_on_error,
        registry: registry.map(|r| r.path),
        krate: krate.map_or_else(|| syn::parse_quote!(::resilience_runtime), |k| k.path),
    })
}

/// The aspects of an impl block, which apply to each of its methods: a fallback cannot be
/// given there.
pub(crate) fn impl_block(stack: &Stack, errors: &mut Errors) {
    if let Some(fallback) = &stack.fallback {
        errors.push(syn::Error::new(
            fallback.key.span(),
            "`fallback` cannot be given on an impl block: each method has its own \
             signature; give the fallback on a method's own attribute",
        ));
    }
}

/// One function under `stack`, checked and read into its model.
pub(crate) fn function<'a>(
    stack: &'a Stack,
    attrs: &'a [Attribute],
    vis: &'a Visibility,
    defaultness: proc_macro2::TokenStream,
    sig: &'a Signature,
    block: &'a Block,
) -> syn::Result<Guarded<'a>> {
    let mut errors = Errors::default();
    let attr = stack.aspects[0].kind.attr_name();
    if let Some(track_caller) = attrs.iter().find(|a| a.path().is_ident("track_caller")) {
        errors.push(syn::Error::new_spanned(
            track_caller,
            format!(
                "`#[{attr}]` cannot keep `#[track_caller]`: the body runs inside the guard, so \
                 the caller's location would be lost; remove one of them"
            ),
        ));
    }
    if let Some(constness) = &sig.constness {
        errors.push(syn::Error::new_spanned(
            constness,
            format!(
                "`#[{attr}]` cannot guard a `const fn`: a guard acts when the function runs; \
                 remove `const`"
            ),
        ));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new_spanned(
            variadic,
            format!("`#[{attr}]` cannot guard a variadic function"),
        ));
    }

    let declared = declared_output(sig);
    let (shape, output) = if sig.asyncness.is_some() {
        (Shape::Async, declared)
    } else if let Some(output) = future_output(&declared) {
        if async_trait_body(block).is_none() {
            return Err(errors.and(syn::Error::new_spanned(
                &declared,
                format!(
                    "`#[{attr}]` on a function that returns a future would guard only the \
                     creation of the future, not the call; write it as an `async fn`"
                ),
            )));
        }
        (Shape::AsyncTrait, output)
    } else {
        (Shape::Sync, declared)
    };

    if matches!(shape, Shape::Sync) && stack.of(Kind::TimeLimiter).is_some() {
        errors.push(syn::Error::new_spanned(
            sig.fn_token,
            "`#[time_limiter]` bounds an `async fn`: a thread cannot be cancelled, so a sync \
             call would run to its end whatever the timeout; make the function `async`, or \
             bound it with a bulkhead's `max_wait_duration` and a timeout inside the body",
        ));
    }

    if matches!(shape, Shape::Sync) && stack.of(Kind::Hedge).is_some() {
        errors.push(syn::Error::new_spanned(
            sig.fn_token,
            "`#[hedge]` runs attempts side by side, which a thread cannot: make the function \
             `async`, or use `#[retry]` for a sync call",
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
        errors.push(match &sig.output {
            ReturnType::Default => syn::Error::new_spanned(&sig.ident, message),
            ReturnType::Type(_, ty) => syn::Error::new_spanned(ty, message),
        });
    }
    let guarded = Guarded {
        stack,
        attrs,
        vis,
        defaultness,
        sig,
        block,
        shape,
        output,
        returns_result,
    };
    if let Some(fallback) = &stack.fallback {
        fallback_receives(&guarded, fallback, attr, &mut errors);
    }
    errors.finish(guarded)
}

/// What a fallback needs of the function: its arguments, each by a name (and `&mut self`
/// only if the call has not used it); its `Err`, with `fallback_on_error`.
fn fallback_receives(guarded: &Guarded<'_>, fallback: &PathArg, attr: &str, errors: &mut Errors) {
    let on_error = guarded.stack.fallback_on_error;
    if matches!(guarded.shape, Shape::AsyncTrait) {
        errors.push(syn::Error::new(
            fallback.key.span(),
            format!(
                "a `fallback` on a method already rewritten by `#[async_trait]` cannot receive \
                 its arguments; put `#[{attr}]` above `#[async_trait]` on the impl block, or \
                 handle `Rejected` in the caller"
            ),
        ));
    }
    if on_error && !guarded.returns_result {
        errors.push(syn::Error::new(
            fallback.key.span(),
            "`fallback_on_error` needs the function to return `Result<_, E>`: the fallback \
             receives its `E`",
        ));
    }
    for input in &guarded.sig.inputs {
        match input {
            FnArg::Receiver(receiver)
                if guarded.clones_fallback_arguments()
                    && receiver.mutability.is_some()
                    && receiver.reference.is_some() =>
            {
                let message = if on_error {
                    "`fallback_on_error` cannot hand `&mut self` to the fallback after the \
                     call used it; take `&self`, or drop `fallback_on_error`"
                } else {
                    "a fallback cannot receive `&mut self` after a time limiter cut off the \
                     call that borrowed it; take `&self`, or handle `Rejected` in the caller"
                };
                errors.push(syn::Error::new_spanned(receiver, message));
            }
            FnArg::Typed(typed)
                if argument(input).is_none() && rebuild(&typed.pat, false).is_none() =>
            {
                errors.push(syn::Error::new_spanned(
                    &typed.pat,
                    "a fallback receives the same arguments as the function, so a pattern \
                     argument is rebuilt for it from what it binds (`Path(id)`, `(a, b)`), and \
                     this one does not bind all it takes apart (`_`, `..`, a literal or a \
                     reference); write `name: Type` and destructure it in the body",
                ));
            }
            _ => {}
        }
    }
}
