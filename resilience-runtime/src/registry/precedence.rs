//! [`Precedence`]: the number of each aspect kind that orders the guards of a call (lower runs
//! first, outermost), and the one place that sorts by it.

use crate::aspect::Aspect;
use crate::error::ConfigError;

/// The precedence table of a registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Precedence([i32; Aspect::ALL.len()]);

impl Precedence {
    /// The defaults: bulkhead 100, rate limiter 200, retry 300, circuit breaker 400, time
    /// limiter 500.
    pub(crate) fn new() -> Self {
        Precedence(Aspect::ALL.map(Aspect::default_precedence))
    }

    /// The precedence of `aspect`.
    pub(crate) fn of(&self, aspect: Aspect) -> i32 {
        self.0[aspect.index()]
    }

    /// Gives `aspect` the precedence `precedence`, unless another aspect has it.
    pub(crate) fn set(&mut self, aspect: Aspect, precedence: i32) -> Result<(), ConfigError> {
        if let Some(other) = Aspect::ALL
            .into_iter()
            .find(|a| *a != aspect && self.of(*a) == precedence)
        {
            return Err(ConfigError::new(
                "precedence",
                format!(
                    "{aspect} and {other} would both have precedence {precedence}; \
                     give each aspect its own value"
                ),
            ));
        }
        self.0[aspect.index()] = precedence;
        Ok(())
    }

    /// This table with `aspect` at `precedence`, ties unchecked: a document sets every number
    /// first and checks the whole table once ([`tie`](Self::tie)), so that swapping two
    /// numbers is not refused halfway.
    #[cfg(feature = "serde")]
    pub(crate) fn with(mut self, aspect: Aspect, precedence: i32) -> Self {
        self.0[aspect.index()] = precedence;
        self
    }

    #[cfg(feature = "serde")]
    /// Two aspects with the same number, if any: the later one in [`Aspect::ALL`] first.
    pub(crate) fn tie(&self) -> Option<(Aspect, Aspect)> {
        Aspect::ALL.into_iter().enumerate().find_map(|(i, later)| {
            Aspect::ALL[..i]
                .iter()
                .find(|earlier| self.of(**earlier) == self.of(later))
                .map(|earlier| (later, *earlier))
        })
    }

    /// Sorts `items` by the precedence of their aspect, outermost first. Ties cannot happen:
    /// [`set`](Self::set) refuses them.
    pub(crate) fn sort<T>(&self, items: &mut [T], aspect: impl Fn(&T) -> Aspect) {
        items.sort_by_key(|item| self.of(aspect(item)));
    }

    /// Every aspect kind, outermost first.
    pub(crate) fn order(&self) -> Vec<Aspect> {
        let mut order = Aspect::ALL.to_vec();
        self.sort(&mut order, |a| *a);
        order
    }
}
