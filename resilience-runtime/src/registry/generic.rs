//! The registry underneath, for every kind alike (Polly's `ResiliencePipelineRegistry`
//! shape): get or create an instance, configure it, read its configuration, list them. The
//! public methods are generic over [`GuardInstance`]; each kind is one `registered!` row.

use std::sync::{Arc, PoisonError};

use super::kind::{Config, Instance, Kind};
use super::{Registered, Registry, State, Tap};
use crate::aspect::{aspect_table, Aspect};
use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::circuit_breaker::{CircuitBreaker, CircuitBreakerConfig};
use crate::clock::Clock;
use crate::error::ConfigError;
use crate::fault::{FaultConfig, FaultInjector};
use crate::hedge::{Hedge, HedgeConfig};
use crate::name::Name;
use crate::rate_limiter::{RateLimiter, RateLimiterConfig};
use crate::retry::{Retry, RetryConfig};
use crate::time_limiter::{TimeLimiter, TimeLimiterConfig};

/// A kind of guard instance a [`Registry`] holds: [`Bulkhead`](crate::Bulkhead),
/// [`RateLimiter`](crate::RateLimiter), [`Retry`](crate::Retry),
/// [`CircuitBreaker`](crate::CircuitBreaker), [`TimeLimiter`](crate::TimeLimiter). The type
/// parameter of the registry's generic methods ([`instance`](Registry::instance),
/// [`configure`](Registry::configure), [`configure_default`](Registry::configure_default),
/// [`config`](Registry::config), [`instances`](Registry::instances)), with its configuration
/// type as `G::Config` ([`BulkheadConfig`](crate::BulkheadConfig) for a bulkhead, and so on).
/// Sealed: the kinds are the crate's.
pub trait GuardInstance: sealed::Sealed {}

/// What the generic methods do for one kind, out of users' reach (the sealed trait pattern).
mod sealed {
    use std::sync::Arc;

    use super::Registry;
    use crate::error::ConfigError;
    use crate::name::Name;

    pub trait Sealed: Sized {
        /// The kind's configuration.
        type Config;
        fn instance_in(registry: &Registry, name: &str) -> Arc<Self>;
        fn configure_in(
            registry: &Registry,
            name: Name,
            config: Self::Config,
        ) -> Result<(), ConfigError>;
        fn configure_default_in(
            registry: &Registry,
            config: Self::Config,
        ) -> Result<(), ConfigError>;
        fn config_in(registry: &Registry, name: &str) -> Self::Config;
        fn instances_in(registry: &Registry) -> Vec<Arc<Self>>;
    }
}

impl Registry {
    // ----- every kind: the generic accessors -----

    /// The instance of `name`, created with its configuration (or the default one) on first
    /// use.
    pub(super) fn instance_of<I: Registered>(&self, name: &str) -> Arc<I> {
        if let Some(found) = I::table(&self.read()).instance(name) {
            return Arc::clone(found);
        }
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let clock = &self.clock;
        I::table_mut(&mut state).get_or_create(name, |n, c| self.made::<I>(n, c, clock))
    }

    /// Installs `config` for `name` (see the named methods).
    pub(super) fn configure_of<I: Registered>(
        &self,
        name: Name,
        mut config: I::Config,
    ) -> Result<(), ConfigError> {
        self.resolve_backend(&mut config, || self.fleet_connection())?;
        self.change(|state, clock| {
            I::table_mut(state).configure(name, config, |n, c| self.made::<I>(n, c, clock))
        })
    }

    /// Replaces the default configuration of a kind (see the named methods).
    pub(super) fn configure_default_of<I: Registered>(
        &self,
        mut config: I::Config,
    ) -> Result<(), ConfigError> {
        self.resolve_backend(&mut config, || self.fleet_connection())?;
        self.change(|state, clock| {
            I::table_mut(state).configure_default(config, |n, c| self.made::<I>(n, c, clock))
        })
    }

    /// A new instance of kind `I`, sending its rare events to the registry's taps. Called
    /// under `state`'s write lock.
    pub(super) fn made<I: Registered>(&self, name: Name, config: I::Config, clock: &Clock) -> I {
        let instance = I::make(name, config, clock);
        for tap in self
            .taps
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            instance.tap(tap);
        }
        instance
    }

    /// Adds the tap `make` builds, unless one that `exists` says is there already, and taps
    /// every existing instance with it.
    pub(super) fn add_tap(&self, exists: impl Fn(&Tap) -> bool, make: impl FnOnce() -> Tap) {
        let _changing = self.changing.lock().unwrap_or_else(PoisonError::into_inner);
        let state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let mut taps = self.taps.write().unwrap_or_else(PoisonError::into_inner);
        if taps.iter().any(exists) {
            return;
        }
        let tap = make();
        struct TapAll<'s>(&'s State, &'s Tap);
        impl EachKind for TapAll<'_> {
            fn kind<I: Registered>(&mut self) {
                for instance in I::table(self.0).all() {
                    instance.tap(self.1);
                }
            }
        }
        Kinds::each(&mut TapAll(&state, &tap));
        taps.push(tap);
    }

    pub(super) fn instances_of<I: Registered>(&self) -> Vec<Arc<I>> {
        I::table(&self.read()).all()
    }

    pub(super) fn effective_of<I: Registered>(&self, name: &str) -> I::Config {
        I::table(&self.read()).effective(name)
    }

    // ----- every kind, in public: the generic methods, and the named ones over them -----

    /// The instance `name` of the guard kind `G` ([`Bulkhead`], [`RateLimiter`], [`Retry`],
    /// [`CircuitBreaker`] or [`TimeLimiter`]), created with its configuration (or the kind's
    /// default) on first use. [`bulkhead`](Self::bulkhead) and the other named methods are
    /// this, for one kind each.
    ///
    /// ```
    /// use resilience_runtime::{Bulkhead, BulkheadConfig, Registry};
    ///
    /// let registry = Registry::new();
    /// registry.configure::<Bulkhead>("orders", BulkheadConfig::builder().max_concurrent_calls(80).build()?)?;
    /// let orders = registry.instance::<Bulkhead>("orders");
    /// assert_eq!(orders.max_allowed_concurrent_calls(), 80);
    /// assert_eq!(registry.config::<Bulkhead>("orders").max_concurrent_calls(), 80);
    /// assert_eq!(registry.instances::<Bulkhead>().len(), 1);
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn instance<G: GuardInstance>(&self, name: &str) -> Arc<G> {
        G::instance_in(self, name)
    }

    /// Installs `config` for the instance `name` of kind `G` and reconfigures the instance in
    /// place; configurations based on it are re-resolved, and their instances reconfigured if
    /// their effective configuration changed. For calls in flight (each kind's `reconfigure`):
    ///
    /// - a [`Bulkhead`]'s permits held count against the new limit;
    /// - a [`RateLimiter`] starts a fresh cycle of the new limit at once;
    /// - a [`Retry`]'s calls already retrying follow the new configuration from their next
    ///   failure;
    /// - a [`TimeLimiter`]'s calls already waiting keep their timeout;
    /// - a [`CircuitBreaker`] starts over in its initial state, with fresh metrics.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for an unknown or cyclic base configuration, or a merged
    /// configuration that is invalid; the registry is unchanged then.
    pub fn configure<G: GuardInstance>(
        &self,
        name: impl Into<Name>,
        config: G::Config,
    ) -> Result<(), ConfigError> {
        G::configure_in(self, name.into(), config)
    }

    /// Replaces the default configuration of kind `G`: the one of names never configured, and
    /// the base of named configurations that name no base.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] if `config` names a base (the default has none) or leaves a named
    /// configuration invalid; the registry is unchanged then.
    pub fn configure_default<G: GuardInstance>(
        &self,
        config: G::Config,
    ) -> Result<(), ConfigError> {
        G::configure_default_in(self, config)
    }

    /// The effective configuration of the instance `name` of kind `G` (its own, resolved
    /// against its base, or the default).
    pub fn config<G: GuardInstance>(&self, name: &str) -> G::Config {
        G::config_in(self, name)
    }

    /// Every instance of kind `G` created so far, sorted by name.
    pub fn instances<G: GuardInstance>(&self) -> Vec<Arc<G>> {
        G::instances_in(self)
    }
}

/// The kinds of [`aspect_table!`], each made a registry kind: its table in [`Kinds`], its
/// [`Registered`], [`GuardInstance`] and configuration impls, and the walk over every kind.
macro_rules! registered {
    ($(
        $(#[$doc:meta])*
        $variant:ident($instance:ident, $config:ident, $field:ident):
            $snake:literal, $words:literal, precedence $precedence:literal;
    )*) => {
        /// Every kind's instances and configurations: one table per kind.
        pub(super) struct Kinds {
            $($field: Kind<$config, $instance>,)*
        }

        impl Kinds {
            /// Every kind with its default configuration and no instance.
            pub(super) fn new() -> Self {
                Kinds {
                    $($field: Kind::new(<$config>::default()),)*
                }
            }

            /// Whether the instance `name` of `aspect` has a configuration of its own.
            pub(super) fn is_configured(&self, aspect: Aspect, name: &str) -> bool {
                match aspect {
                    $(Aspect::$variant => self.$field.is_configured(name),)*
                }
            }

            /// Calls `each.kind::<I>()` for every kind, in the table's order.
            pub(super) fn each(each: &mut impl EachKind) {
                $(each.kind::<$instance>();)*
            }
        }

        $(
            impl Config for $config {
                fn base(&self) -> Option<&str> {
                    <$config>::base(self)
                }
                fn inherit(&self, base: &Self) -> Result<Self, ConfigError> {
                    <$config>::inherit(self, base)
                }
            }

            impl Instance for $instance {
                type Config = $config;
                fn config(&self) -> $config {
                    <$instance>::config(self)
                }
                fn reconfigure(&self, config: $config) {
                    <$instance>::reconfigure(self, config);
                }
            }

            impl sealed::Sealed for $instance {
                type Config = $config;
                fn instance_in(registry: &Registry, name: &str) -> Arc<Self> {
                    registry.instance_of(name)
                }
                fn configure_in(
                    registry: &Registry,
                    name: Name,
                    config: $config,
                ) -> Result<(), ConfigError> {
                    registry.configure_of::<Self>(name, config)
                }
                fn configure_default_in(
                    registry: &Registry,
                    config: $config,
                ) -> Result<(), ConfigError> {
                    registry.configure_default_of::<Self>(config)
                }
                fn config_in(registry: &Registry, name: &str) -> $config {
                    registry.effective_of::<Self>(name)
                }
                fn instances_in(registry: &Registry) -> Vec<Arc<Self>> {
                    registry.instances_of()
                }
            }

            impl GuardInstance for $instance {}

            impl Registered for $instance {
                const ASPECT: Aspect = Aspect::$variant;
                const FIELD: &'static str = stringify!($field);
                fn table(state: &State) -> &Kind<$config, $instance> {
                    &state.kinds.$field
                }
                fn table_mut(state: &mut State) -> &mut Kind<$config, $instance> {
                    &mut state.kinds.$field
                }
                fn make(name: Name, config: $config, clock: &Clock) -> Self {
                    <$instance>::with_clock(name, config, clock.clone())
                }
                fn tap(&self, tap: &Tap) {
                    match tap {
                        #[cfg(feature = "tracing")]
                        Tap::Tracing(clock) => crate::trace::Forward::forward_events(self, clock),
                        Tap::Recent(log) => crate::recent::Keep::keep_events_in(self, log),
                    }
                }
            }
        )*
    };
}

aspect_table!(registered);

/// What is done for every kind ([`Kinds::each`]): a method generic over the kind, which a
/// closure cannot be.
pub(super) trait EachKind {
    fn kind<I: Registered>(&mut self);
}

impl Kinds {
    /// The effective fault configuration of `name`, for the plans that take its faults.
    pub(super) fn faults_of(&self, name: &str) -> FaultConfig {
        self.faults.effective(name)
    }
}
