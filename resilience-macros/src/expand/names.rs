//! The names of the generated code's own locals.

use proc_macro2::Span;
use syn::{Ident, Lifetime};

/// The locals of the generated code, at mixed-site hygiene so user code cannot see or clash
/// with them.
pub(super) struct Names {
    pub(super) plan: Ident,
    pub(super) call: Ident,
    pub(super) rejected: Ident,
    pub(super) result: Ident,
    pub(super) error: Ident,
    pub(super) output: Ident,
    /// The label of the block that enters the guards and runs the call.
    pub(super) entry: Lifetime,
    /// The argument of a sync body that also answers a refusal: admitted, or the rejection.
    pub(super) admission: Ident,
}

impl Names {
    pub(super) fn new() -> Self {
        let name = |n: &str| Ident::new(n, Span::mixed_site());
        Names {
            plan: name("__plan"),
            call: name("__call"),
            rejected: name("__rejected"),
            result: name("__result"),
            error: name("__error"),
            output: name("__output"),
            entry: Lifetime::new("'__resilience_entry", Span::mixed_site()),
            admission: name("__admission"),
        }
    }
}
