//! Fault injection (Polly's chaos strategies, tower-resilience's chaos layer), for tests and
//! game days: latency, errors and refusals injected into the calls through a named instance,
//! each with a probability, from a seeded sequence, so that they go through the real guards.
//!
//! [`FaultInjector`] is the instance, [`FaultConfig`] its configuration, [`FaultMetrics`] a
//! snapshot of its counters and [`FaultEvent`] what it tells subscribers. It is a gate,
//! innermost by default (precedence 650, inside the time limiter): a plan of a registry that
//! [allows fault injection](crate::Registry::allow_fault_injection) takes the injector of
//! each of its guards' names that has a configuration injecting something, without any
//! change to the annotations. Off by default: a registry injects nothing until code (not a
//! configuration file) allows it, and a plan without faults carries no injector.

mod config;
mod events;

#[cfg(test)]
mod tests;

pub use config::{FaultConfig, FaultConfigBuilder};
pub use events::FaultEvent;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::blocking::Blocking;
use crate::clock::{deadline_after, Clock, Reading};
use crate::error::{InjectedError, Rejected};
use crate::name::Name;
use crate::subscribers::{Subscribers, SubscriptionId};

/// The faults of one instance name: draws from a seeded sequence, counts what it injected.
pub struct FaultInjector {
    name: Name,
    id: u64,
    config: ArcSwap<FaultConfig>,
    clock: Clock,
    subscribers: Subscribers<FaultEvent>,
    /// The draws made: the next draw's place in the seeded sequence.
    draws: AtomicU64,
    latencies: AtomicU64,
    errors: AtomicU64,
    refusals: AtomicU64,
    /// The name's own stream of draws (a hash of it), mixed with the seed.
    stream: u64,
}

/// What one draw injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Draw {
    /// Nothing but, if `Some`, a latency first.
    Run(Option<Duration>),
    /// The call fails with the injected error (after the latency, if `Some`).
    Error(Option<Duration>),
    /// The call is refused (after the latency, if `Some`).
    Refusal(Option<Duration>),
}

impl Draw {
    /// The latency drawn, if any.
    pub(crate) fn latency(self) -> Option<Duration> {
        match self {
            Draw::Run(latency) | Draw::Error(latency) | Draw::Refusal(latency) => latency,
        }
    }
}

/// `SplitMix64`'s output function: a well-mixed 64-bit value of `x` (Vigna's constants).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A uniform draw in [0, 1) from 53 bits of `x`.
fn unit(x: u64) -> f64 {
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

impl FaultInjector {
    /// The faults of `name`, configured by `config`, on the system clock.
    pub fn new(name: impl Into<Name>, config: FaultConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }

    /// The faults of `name` whose latency follows `clock`, such as a
    /// [`ManualClock`](crate::ManualClock).
    pub fn with_clock(name: impl Into<Name>, config: FaultConfig, clock: Clock) -> Self {
        FaultInjector {
            name: name.into(),
            id: crate::next_instance_id(),
            config: ArcSwap::from_pointee(config),
            clock,
            subscribers: Subscribers::new(),
            draws: AtomicU64::new(0),
            latencies: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            stream: 0,
        }
        .with_stream()
    }

    /// Sets the name's stream of draws: FNV-1a of the name (stable across runs and builds,
    /// unlike the standard hasher's seeds).
    fn with_stream(mut self) -> Self {
        self.stream = self
            .name
            .as_str()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        self
    }

    /// The instance name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The process-wide unique id of this instance.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The configuration in force (a copy: [`reconfigure`](Self::reconfigure) may change it).
    pub fn config(&self) -> FaultConfig {
        FaultConfig::clone(&self.config.load())
    }

    /// Changes the configuration in place: the counters stay. A new seed starts its sequence
    /// from its beginning.
    pub fn reconfigure(&self, config: FaultConfig) {
        if config.seed() != self.config.load().seed() {
            self.draws.store(0, Ordering::Relaxed);
        }
        self.config.store(Arc::new(config));
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> FaultMetrics {
        FaultMetrics {
            draws: self.draws.load(Ordering::Relaxed),
            latencies: self.latencies.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            refusals: self.refusals.load(Ordering::Relaxed),
        }
    }

    /// Calls `callback` with every fault injected, on the thread of the call.
    pub fn subscribe(
        &self,
        callback: impl Fn(&FaultEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add(Arc::new(callback))
    }

    /// Like [`subscribe`](Self::subscribe), for the events of `interest`.
    pub(crate) fn subscribe_with(
        &self,
        interest: crate::subscribers::Interest,
        callback: impl Fn(&FaultEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add_with(interest, Arc::new(callback))
    }

    /// Removes a callback added by [`subscribe`](Self::subscribe); `false` if it was not
    /// subscribed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.subscribers.remove(id)
    }

    /// The configuration a call draws from: loaded once per call, so that what it asks
    /// (whether it may wait) and what it draws agree.
    pub(crate) fn snapshot(&self) -> arc_swap::Guard<Arc<FaultConfig>> {
        self.config.load()
    }

    /// The next draw of the seeded sequence from `config`, counted and told. The sequence is
    /// the seed's and the name's: two names with one seed (the default's) draw apart.
    pub(crate) fn draw(&self, config: &FaultConfig) -> Draw {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let x = mix(config.seed() ^ self.stream ^ mix(n));
        let pick = unit(x);
        let slow = unit(mix(x));
        let latency =
            (config.injects_latency() && slow < config.latency_rate()).then(|| config.latency());
        let draw = if pick < config.refusal_rate() {
            Draw::Refusal(latency)
        } else if pick < config.refusal_rate() + config.error_rate() {
            Draw::Error(latency)
        } else {
            Draw::Run(latency)
        };
        self.count(draw);
        draw
    }

    fn count(&self, draw: Draw) {
        let name = || self.name.clone();
        if let Some(latency) = draw.latency() {
            self.latencies.fetch_add(1, Ordering::Relaxed);
            self.emit(|| FaultEvent::Latency {
                name: name(),
                latency,
            });
        }
        match draw {
            Draw::Run(_) => {}
            Draw::Error(_) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                self.emit(|| FaultEvent::Error { name: name() });
            }
            Draw::Refusal(_) => {
                self.refusals.fetch_add(1, Ordering::Relaxed);
                self.emit(|| FaultEvent::Refusal { name: name() });
            }
        }
    }

    fn emit(&self, event: impl FnOnce() -> FaultEvent) {
        if self.subscribers.any() {
            self.subscribers.deliver([event()]);
        }
    }

    /// What a draw does to the call once its latency passed: it runs, or it is refused with
    /// the injected refusal or error.
    pub(crate) fn outcome(&self, draw: Draw) -> Result<(), Rejected> {
        let error = match draw {
            Draw::Run(_) => return Ok(()),
            Draw::Refusal(_) => None,
            Draw::Error(_) => Some(self.own_error()),
        };
        Err(Rejected::Injected {
            name: self.name.clone(),
            error,
        })
    }

    /// The configuration's error, or this library's own (one for the process: the name is in
    /// the rejection that carries it).
    fn own_error(&self) -> InjectedError {
        static OWN: std::sync::OnceLock<InjectedError> = std::sync::OnceLock::new();
        self.config
            .load()
            .injected_error()
            .unwrap_or_else(|| *OWN.get_or_init(|| InjectedError::new("an injected error".into())))
    }

    /// Waits `latency` on this injector's clock, asynchronously.
    pub(crate) async fn sleep(&self, latency: Duration) {
        let deadline = deadline_after(self.clock.read(Reading::Precise), latency);
        self.clock.sleep_until(Reading::Precise, deadline).await;
    }

    /// Waits `latency` on this injector's clock, blocking the thread.
    pub(crate) fn sleep_blocking(&self, latency: Duration) {
        let deadline = deadline_after(self.clock.read(Reading::Precise), latency);
        Blocking::here().run(|| self.clock.sleep_until_blocking(Reading::Precise, deadline));
    }

    /// A sync call that may draw a latency, where blocking would stall a current-thread
    /// runtime: refused before it draws (nothing counted, nothing told), as a guard that
    /// would make it wait refuses it.
    pub(crate) fn refuse_blocking(&self, config: &FaultConfig) -> Result<(), Rejected> {
        if config.injects_latency() && Blocking::here() == Blocking::Refused {
            return Err(Rejected::WouldBlock {
                aspect: crate::Aspect::Fault,
                name: self.name.clone(),
            });
        }
        Ok(())
    }
}

impl fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultInjector")
            .field("name", &self.name)
            .field("config", &*self.config.load())
            .finish()
    }
}

/// A snapshot of a fault injector's counters, from [`FaultInjector::metrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultMetrics {
    draws: u64,
    latencies: u64,
    errors: u64,
    refusals: u64,
}

impl FaultMetrics {
    /// Calls (attempts) that drew.
    pub fn number_of_draws(&self) -> u64 {
        self.draws
    }

    /// Latencies injected.
    pub fn number_of_injected_latencies(&self) -> u64 {
        self.latencies
    }

    /// Errors injected.
    pub fn number_of_injected_errors(&self) -> u64 {
        self.errors
    }

    /// Refusals injected.
    pub fn number_of_injected_refusals(&self) -> u64 {
        self.refusals
    }
}
