//! The model of one guarded function, as `valid.rs` leaves it: every check
//! passed, and every fact the generation needs read from the item once.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Attribute, Block, FnArg, Pat, ReturnType, Signature, Type, Visibility};

use crate::expand::types::{async_trait_body, future_output, is_result};
use crate::stack::Stack;

/// How the guarded body of a function runs.
pub(crate) enum Shape {
    /// A plain function: guarded by a closure, waiting by blocking.
    Sync,
    /// An `async fn`: guarded by an async block, waiting asynchronously.
    Async,
    /// A function whose body ends in `Box::pin(async move { .. })`, as `#[async_trait]` leaves
    /// it: the inner future is guarded, not the construction of the box.
    AsyncTrait,
}

/// One function to guard.
pub(crate) struct Guarded<'a> {
    pub(crate) stack: &'a Stack,
    pub(crate) attrs: &'a [Attribute],
    pub(crate) vis: &'a Visibility,
    /// `default` for a specializing impl's method.
    pub(crate) defaultness: TokenStream,
    pub(crate) sig: &'a Signature,
    pub(crate) block: &'a Block,
    pub(crate) shape: Shape,
    /// What a call produces: the declared return type, or the output of the future an
    /// `#[async_trait]` method returns.
    pub(crate) output: Type,
    /// Whether `output` is a `Result`, which a rejection can reach the caller through.
    pub(crate) returns_result: bool,
}

impl Guarded<'_> {
    /// Whether the body takes the function's arguments before a guard can still refuse the
    /// call: a time limiter without a retry runs a future made once, which owns them (with a
    /// retry, each attempt clones them and the function keeps the originals).
    pub(crate) fn moves_arguments(&self) -> bool {
        self.stack.has_wrapper() && !self.stack.repeats()
    }

    /// Whether the arguments a fallback receives are cloned before the call: when the fallback
    /// also handles errors (the call used them), or when the call takes them.
    pub(crate) fn clones_fallback_arguments(&self) -> bool {
        self.stack.fallback_on_error || self.moves_arguments()
    }
}

/// The function's declared return type (`()` when none is written).
pub(crate) fn declared_output(sig: &Signature) -> Type {
    match &sig.output {
        ReturnType::Default => syn::parse_quote!(()),
        ReturnType::Type(_, ty) => (**ty).clone(),
    }
}

/// Whether a method's call produces a `Result` (directly, from an `async fn`, or from the
/// future `#[async_trait]` leaves).
pub(crate) fn returns_result(sig: &Signature, block: &Block) -> bool {
    if matches!(sig.output, ReturnType::Default) {
        return false;
    }
    let declared = declared_output(sig);
    if sig.asyncness.is_none() && async_trait_body(block).is_some() {
        if let Some(output) = future_output(&declared) {
            return is_result(&output);
        }
    }
    is_result(&declared)
}

/// The value of a pattern argument, rebuilt from what it bound (`Path(id)` from `id`), for a
/// fallback that receives the function's arguments: each binding cloned with `clone`. `None`
/// for a pattern that does not bind all it takes apart (`_`, `..`, a literal, a reference).
pub(crate) fn rebuild(pat: &Pat, clone: bool) -> Option<TokenStream> {
    Some(match pat {
        Pat::Ident(ident) if ident.subpat.is_none() && ident.by_ref.is_none() => {
            let name = &ident.ident;
            if clone {
                quote!(::core::clone::Clone::clone(&#name))
            } else {
                quote!(#name)
            }
        }
        Pat::Tuple(tuple) => {
            let elems = tuple
                .elems
                .iter()
                .map(|elem| rebuild(elem, clone))
                .collect::<Option<Vec<_>>>()?;
            quote!((#(#elems,)*))
        }
        Pat::TupleStruct(tuple) if tuple.qself.is_none() => {
            let path = &tuple.path;
            let elems = tuple
                .elems
                .iter()
                .map(|elem| rebuild(elem, clone))
                .collect::<Option<Vec<_>>>()?;
            quote!(#path(#(#elems),*))
        }
        Pat::Struct(structure) if structure.rest.is_none() && structure.qself.is_none() => {
            let path = &structure.path;
            let fields = structure
                .fields
                .iter()
                .map(|field| {
                    let member = &field.member;
                    rebuild(&field.pat, clone).map(|value| quote!(#member: #value))
                })
                .collect::<Option<Vec<_>>>()?;
            quote!(#path { #(#fields),* })
        }
        Pat::Paren(paren) => rebuild(&paren.pat, clone)?,
        _ => return None,
    })
}

/// How a fallback receives an argument: its name, and whether it is a reference (`&self`),
/// which needs no clone. `None` for a pattern with no one name (rebuilt with [`rebuild`]).
pub(crate) fn argument(input: &FnArg) -> Option<(TokenStream, bool)> {
    match input {
        FnArg::Receiver(receiver) => Some((quote!(self), receiver.reference.is_some())),
        FnArg::Typed(typed) => match &*typed.pat {
            Pat::Ident(ident) if ident.subpat.is_none() && ident.by_ref.is_none() => {
                let name = &ident.ident;
                Some((quote!(#name), false))
            }
            _ => None,
        },
    }
}
