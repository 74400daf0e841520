//! One accumulator for the errors of an expansion: every mistake found is reported in the same
//! compile, each at its own token, instead of one per fix-and-rebuild.

/// The errors found so far.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Keeps `error` with those found before.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// The value of `result`; `None` with its error kept.
    pub(crate) fn keep<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.push(error);
                None
            }
        }
    }

    /// Whether nothing was found.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// `value` if nothing was found, else every error found.
    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            None => Ok(value),
            Some(error) => Err(error),
        }
    }

    /// Every error found, and `last`: for a mistake past which nothing more can be checked.
    pub(crate) fn and(self, last: syn::Error) -> syn::Error {
        match self.0 {
            Some(mut all) => {
                all.combine(last);
                all
            }
            None => last,
        }
    }

    /// Every error found, if any.
    pub(crate) fn into_error(self) -> Option<syn::Error> {
        self.0
    }
}
