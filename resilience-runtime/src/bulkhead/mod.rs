//! The semaphore bulkhead: at most `max_concurrent_calls` calls at once.
//!
//! [`Bulkhead`] is the guard, [`BulkheadPermit`] the RAII permit of one admitted call,
//! [`BulkheadMetrics`] a snapshot of its counters (`metrics.rs`). The permit accounting lives
//! in `semaphore.rs` (one atomic word, a locked wait queue), the queue in `wait_list.rs`, the
//! configured wait in `wait.rs`, and a fleet bulkhead's leases in Redis in `fleet.rs`.
//!
//! A bulkhead lives as long as its owner (the registry) and is reconfigured in place
//! ([`Bulkhead::reconfigure`]): references to it, its permits and its waiters stay valid, and
//! the limit it enforces is always the one configured last, never the sum of an old and a new
//! instance's.

mod adaptive;
mod config;
mod events;
#[cfg(feature = "redis")]
mod fleet;
mod metrics;
mod permit;
mod semaphore;
mod wait;
mod wait_list;

#[cfg(all(test, not(loom)))]
mod adaptive_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use adaptive::{AdaptiveLimit, AdaptiveSettings, LimitAlgorithm};
pub use config::{BulkheadConfig, BulkheadConfigBuilder, MAX_CONCURRENT_CALLS_LIMIT};
pub use events::BulkheadEvent;
pub use metrics::{AdaptiveEstimates, BulkheadMetrics};

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::blocking::Blocking;
use crate::clock::{deadline_after, Clock, Reading};
use crate::error::Rejected;
use crate::name::Name;
use crate::subscribers::{Interest, Subscribers, SubscriptionId};
use crate::sync::{lock, AtomicU64, Mutex, Ordering};

use adaptive::{Controller, Sample};
use metrics::nanos_duration;
pub use permit::BulkheadPermit;
pub(crate) use permit::Ended;
use permit::{tick, TICK_SHIFT, UNTIMED};
use semaphore::{Semaphore, Waking};
use wait::Wait;
use wait_list::{Key, Wake};

/// A semaphore bulkhead: admits at most
/// [`max_concurrent_calls`](BulkheadConfig::max_concurrent_calls) calls at once, and makes
/// the others wait up to [`max_wait_duration`](BulkheadConfig::max_wait_duration) for a
/// permit before rejecting them with [`Rejected::BulkheadFull`].
///
/// Each admitted call holds a [`BulkheadPermit`]; dropping it (on return, on error, on a
/// panic, or with a cancelled future) frees the permit.
///
/// Fairness: with [`fair_call_handling`](BulkheadConfig::fair_call_handling) (the default),
/// waiters get freed permits in arrival order and no newcomer takes a permit while anyone
/// waits; without it, a newcomer may take a freed permit ahead of the waiters.
///
/// Cancellation: a waiting caller that gives up (timed out, or its `acquire` future dropped)
/// leaves the queue at once, and a permit it had already been handed goes to the next waiter.
///
/// Reconfiguration: [`reconfigure`](Self::reconfigure) changes the limit, the wait and the
/// fairness of this instance in place, while calls hold permits and callers wait; permits held
/// count against the new limit, and the counters carry on.
///
/// Taking a free permit costs one compare-and-swap on one atomic word and releasing it one
/// atomic add; neither allocates nor locks.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{Bulkhead, BulkheadConfig, Rejected};
///
/// let bulkhead = Bulkhead::new(
///     "inventory",
///     BulkheadConfig::builder()
///         .max_concurrent_calls(2)
///         .max_wait_duration(Duration::from_secs(1))
///         .build()?,
/// );
///
/// let first = bulkhead.try_acquire()?;
/// let _second = bulkhead.try_acquire()?;
/// assert_eq!(bulkhead.available_concurrent_calls(), 0);
/// assert!(matches!(bulkhead.try_acquire(), Err(Rejected::BulkheadFull { .. })));
///
/// // A caller that may wait gets the permit another thread frees.
/// std::thread::scope(|s| {
///     s.spawn(move || {
///         std::thread::sleep(Duration::from_millis(10));
///         drop(first);
///     });
///     let third = bulkhead.acquire_blocking();
///     assert!(third.is_ok());
/// });
///
/// assert_eq!(bulkhead.available_concurrent_calls(), 1);
/// assert_eq!(bulkhead.metrics().permitted_calls(), 3);
/// assert_eq!(bulkhead.metrics().rejected_calls(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Bulkhead {
    name: Name,
    id: u64,
    /// The configuration in force. Its lock also orders a reconfiguration with the readings
    /// that combine the limit and the free permits ([`metrics`](Self::metrics)).
    config: Mutex<BulkheadConfig>,
    clock: Clock,
    /// The [`Wait`] of the configuration, encoded by [`Wait::to_nanos`].
    wait: AtomicU64,
    semaphore: Semaphore,
    /// The adaptive limit's algorithm, off for a fixed limit.
    controller: Controller,
    subscribers: Subscribers<BulkheadEvent>,
    /// The Redis side of a fleet bulkhead (`None`: local), and whether there is one: the local
    /// path reads the flag alone.
    #[cfg(feature = "redis")]
    fleet: arc_swap::ArcSwapOption<fleet::Fleet>,
    #[cfg(feature = "redis")]
    has_fleet: std::sync::atomic::AtomicBool,
}

impl Bulkhead {
    /// A bulkhead named `name`, configured by `config`, on the system clock.
    pub fn new(name: impl Into<Name>, config: BulkheadConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }

    /// A bulkhead reading `clock` for the time a rejected caller waited.
    ///
    /// The clock only measures; the wait itself runs on the operating system's clock
    /// ([`acquire_blocking`](Self::acquire_blocking)) or on tokio's timer
    /// ([`acquire`](Self::acquire)).
    pub fn with_clock(name: impl Into<Name>, config: BulkheadConfig, clock: Clock) -> Self {
        let id = crate::next_instance_id();
        let settings = config.adaptive().map(AdaptiveLimit::settings);
        let name = name.into();
        #[cfg(feature = "redis")]
        let fleet = fleet::Fleet::new(&name, &config, None).map(Arc::new);
        Bulkhead {
            #[cfg(feature = "redis")]
            has_fleet: std::sync::atomic::AtomicBool::new(fleet.is_some()),
            #[cfg(feature = "redis")]
            fleet: arc_swap::ArcSwapOption::new(fleet),
            name,
            id,
            wait: AtomicU64::new(Wait::from_config(config.max_wait_duration()).to_nanos()),
            semaphore: Semaphore::new(config.max_concurrent_calls(), config.fair_call_handling()),
            controller: Controller::new(settings.as_ref(), id, clock.coarse_resolution().is_some()),
            config: Mutex::new(config),
            clock,
            subscribers: Subscribers::new(),
        }
    }

    /// The instance name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The configuration in force (a copy: [`reconfigure`](Self::reconfigure) may change it).
    pub fn config(&self) -> BulkheadConfig {
        lock(&self.config).clone()
    }

    /// Changes the configuration of this bulkhead in place (Resilience4j's
    /// `Bulkhead.changeConfig`): the instance, its permits, its waiters and its counters stay.
    ///
    /// - `max_concurrent_calls` takes effect at once. Permits already held stay held and count
    ///   against the new limit: after shrinking from 10 to 4 with 7 calls in flight, no call is
    ///   admitted until at most 3 remain in flight (the first 3 releases free no permit). A
    ///   waiter already handed a permit before the change counts as in flight: it is admitted
    ///   with that permit. A grow
    ///   frees the extra permits at once and serves waiters with them as releases would: in
    ///   queue order under fair call handling, by waking them under unfair.
    /// - `max_wait_duration` applies to callers that start waiting from now on; a caller
    ///   already waiting keeps its deadline.
    /// - `fair_call_handling` applies from now on; waiters already queued stay queued and are
    ///   served.
    /// - An [`adaptive`](BulkheadConfigBuilder::adaptive) limit starts over at its
    ///   `initial_limit` when its settings change, or when it replaces a fixed limit; the
    ///   permits held count against it as against a fixed limit. A fixed limit replaces an
    ///   adaptive one the same way. Changing only the wait or the fairness of an adaptive
    ///   bulkhead keeps the limit its algorithm found.
    /// - The counters ([`metrics`](Self::metrics)) are not reset.
    /// - A fleet bulkhead ([`backend`](BulkheadConfigBuilder::backend)) keeps its leases when
    ///   the connection stays the same; leases held across a change of connection or to a
    ///   local backend are no longer renewed and lapse within one lease.
    ///
    /// Reconfiguring with a configuration equal to the one in force does nothing. Taking and
    /// releasing permits stay lock-free while a reconfiguration runs.
    ///
    /// ```
    /// use resilience_runtime::{Bulkhead, BulkheadConfig};
    ///
    /// let limit = |calls| BulkheadConfig::builder().max_concurrent_calls(calls).build();
    /// let bulkhead = Bulkhead::new("inventory", limit(3)?);
    /// let mut held: Vec<_> = (0..3).map(|_| bulkhead.try_acquire()).collect::<Result<_, _>>()?;
    ///
    /// // Shrink to 1 with 3 calls in flight: the first two releases free no permit.
    /// bulkhead.reconfigure(limit(1)?);
    /// assert_eq!(bulkhead.max_allowed_concurrent_calls(), 1);
    /// assert_eq!(bulkhead.available_concurrent_calls(), 0);
    /// held.truncate(1);
    /// assert!(bulkhead.try_acquire().is_err());
    /// held.clear();
    /// assert_eq!(bulkhead.available_concurrent_calls(), 1);
    ///
    /// // Grow to 2: the extra permit is free at once.
    /// let _one = bulkhead.try_acquire()?;
    /// bulkhead.reconfigure(limit(2)?);
    /// let _two = bulkhead.try_acquire()?;
    /// assert_eq!(bulkhead.metrics().permitted_calls(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconfigure(&self, config: BulkheadConfig) {
        let mut current = lock(&self.config);
        if *current == config {
            return;
        }
        // Read once by each caller when it starts waiting: a waiter keeps its deadline.
        self.wait.store(
            Wait::from_config(config.max_wait_duration()).to_nanos(),
            Ordering::Relaxed,
        );
        let fair = config.fair_call_handling();
        // Settings in force compared, not as written: a default set explicitly changes nothing.
        let settings = config.adaptive().map(AdaptiveLimit::settings);
        let wakes = if current.adaptive().map(AdaptiveLimit::settings) == settings {
            // The same limit, fixed or as the algorithm has found it: only the fairness may
            // change.
            self.controller.exclusive(|| {
                let max = match settings {
                    Some(_) => self.semaphore.max(),
                    None => config.max_concurrent_calls(),
                };
                self.semaphore.reconfigure(max, fair)
            })
        } else {
            self.controller.install(settings.as_ref(), || {
                self.semaphore
                    .reconfigure(config.max_concurrent_calls(), fair)
            })
        };
        #[cfg(feature = "redis")]
        {
            let previous = self.fleet.load_full();
            let fleet = fleet::Fleet::new(&self.name, &config, previous.as_deref()).map(Arc::new);
            self.has_fleet.store(fleet.is_some(), Ordering::Relaxed);
            self.fleet.store(fleet);
        }
        *current = config;
        drop(current);
        for wake in wakes {
            wake.wake();
        }
    }

    /// The Redis side, for a fleet bulkhead (one relaxed load when there is none).
    #[cfg(feature = "redis")]
    #[inline]
    fn fleet(&self) -> Option<Arc<fleet::Fleet>> {
        if self.has_fleet.load(Ordering::Relaxed) {
            self.fleet.load_full()
        } else {
            None
        }
    }

    /// Sets the semaphore's limit, keeping the configuration (a fleet bulkhead's switch between
    /// the fleet limit and its local share), unless `fleet` is no longer this bulkhead's.
    #[cfg(feature = "redis")]
    fn set_max(&self, fleet: &fleet::Fleet, max: u32) {
        let current = lock(&self.config);
        // A reconfiguration replaces the fleet under this lock, and sets the limit itself.
        if !self
            .fleet
            .load()
            .as_deref()
            .is_some_and(|now| std::ptr::eq(now, fleet))
        {
            return;
        }
        let wakes = self
            .semaphore
            .reconfigure(max, current.fair_call_handling());
        drop(current);
        for wake in wakes {
            wake.wake();
        }
    }

    /// Delivers `event` to the subscribers.
    #[cfg(feature = "redis")]
    #[cold]
    fn deliver(&self, event: BulkheadEvent) {
        if self.subscribers.any() {
            self.subscribers.deliver([event]);
        }
    }

    /// How long a caller who finds no free permit waits, as configured now.
    #[inline]
    fn wait(&self) -> Wait {
        Wait::from_nanos(self.wait.load(Ordering::Relaxed))
    }

    /// The process-wide unique id of this instance, for the re-entrancy record of a call chain.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The number of permits free right now: zero while more calls hold a permit than a
    /// shrink left room for. For a fleet bulkhead, the leases free across the fleet when Redis
    /// last answered this process.
    pub fn available_concurrent_calls(&self) -> u32 {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.available();
        }
        self.semaphore.available()
    }

    /// The number of calls admitted at once: `max_concurrent_calls` of the configuration, or
    /// the limit an adaptive one has found.
    pub fn max_allowed_concurrent_calls(&self) -> u32 {
        self.semaphore.max()
    }

    /// The latencies an adaptive limit's algorithm works from, or `None` for a fixed limit.
    pub fn adaptive_estimates(&self) -> Option<AdaptiveEstimates> {
        self.controller.estimates().map(|e| AdaptiveEstimates {
            baseline_rtt: (e.baseline_rtt > 0.0).then(|| nanos_duration(e.baseline_rtt)),
            sample_rtt: (e.sample_rtt > 0.0).then(|| nanos_duration(e.sample_rtt)),
        })
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> BulkheadMetrics {
        // The config lock keeps a reconfiguration, and the controller an adaptive limit, from
        // changing the limit between the two readings that give the permits held.
        let config = lock(&self.config);
        let (counts, max) = self
            .controller
            .exclusive(|| (self.semaphore.counts(), self.semaphore.max()));
        drop(config);
        #[cfg(feature = "redis")]
        let (available, fleet_fallback_calls) = match self.fleet() {
            Some(fleet) => (
                fleet.available(),
                fleet.fallback_calls.load(Ordering::Relaxed),
            ),
            None => (counts.available, 0),
        };
        #[cfg(not(feature = "redis"))]
        let (available, fleet_fallback_calls) = (counts.available, 0);
        BulkheadMetrics {
            available_concurrent_calls: available,
            max_allowed_concurrent_calls: max,
            permitted_calls: counts.permitted,
            rejected_calls: counts.rejected,
            finished_calls: counts.permitted.saturating_sub(counts.held),
            fleet_fallback_calls,
        }
    }

    /// Takes a free permit without waiting, or rejects the call at once.
    ///
    /// Under fair call handling a permit is not free for a newcomer while callers wait. A
    /// fleet bulkhead ([`BulkheadConfigBuilder::backend`]) asks Redis for a lease, blocking the
    /// thread for the round trip (at most the connection's command timeout) as
    /// [`acquire_blocking`](Self::acquire_blocking) does.
    ///
    /// # Errors
    ///
    /// [`Rejected::BulkheadFull`] (with `waited` zero, or a fleet bulkhead's round trip) if no
    /// permit is free; for a fleet bulkhead on a current-thread runtime,
    /// [`Rejected::WouldBlock`] (the round trip would block it).
    #[inline]
    pub fn try_acquire(&self) -> Result<BulkheadPermit<'_>, Rejected> {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.acquire_blocking(self, Wait::Reject);
        }
        if self.semaphore.try_acquire() {
            Ok(self.permit())
        } else {
            Err(self.reject(Duration::ZERO))
        }
    }

    /// Takes a free permit if there is one, counting nothing when there is not: the first step
    /// of a guarded call, which then waits with [`acquire`](Self::acquire) (or is rejected by
    /// it) only when [`waits`](Self::waits) says a full bulkhead makes callers wait.
    #[inline]
    pub(crate) fn try_acquire_uncounted(&self) -> Option<BulkheadPermit<'_>> {
        // A fleet bulkhead's admission is a round trip: the caller waits for it.
        #[cfg(feature = "redis")]
        if self.has_fleet.load(Ordering::Relaxed) {
            return None;
        }
        self.semaphore.try_acquire().then(|| self.permit())
    }

    /// Whether a caller who finds no free permit waits for one (`max_wait_duration` above
    /// zero), or for the answer of Redis (a fleet bulkhead).
    #[inline]
    pub(crate) fn waits(&self) -> bool {
        #[cfg(feature = "redis")]
        if self.has_fleet.load(Ordering::Relaxed) {
            return true;
        }
        self.wait.load(Ordering::Relaxed) != 0
    }

    /// Takes a permit, blocking the current thread up to `max_wait_duration` until one is
    /// free. Needs no async runtime.
    ///
    /// Inside a tokio runtime it does not stall the runtime's other tasks: on a multi-thread
    /// runtime it waits through [`tokio::task::block_in_place`]; on a current-thread runtime
    /// it does not wait at all (see [`allow_blocking`](crate::allow_blocking)).
    ///
    /// # Errors
    ///
    /// [`Rejected::BulkheadFull`] if no permit was free within `max_wait_duration`;
    /// [`Rejected::WouldBlock`] if none was free and waiting would block a current-thread
    /// runtime.
    pub fn acquire_blocking(&self) -> Result<BulkheadPermit<'_>, Rejected> {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.acquire_blocking(self, self.wait());
        }
        self.acquire_blocking_local(self.wait())
    }

    /// [`acquire_blocking`](Self::acquire_blocking) of a permit of the semaphore, waiting
    /// within `wait`.
    fn acquire_blocking_local(&self, wait: Wait) -> Result<BulkheadPermit<'_>, Rejected> {
        if self.semaphore.try_acquire() {
            return Ok(self.permit());
        }
        let wait = match wait {
            Wait::Reject => return Err(self.reject(Duration::ZERO)),
            wait => wait,
        };
        match Blocking::here() {
            Blocking::Refused => Err(self.refuse_blocking()),
            place => place.run(|| self.wait_blocking(wait)),
        }
    }

    /// The blocking wait of [`acquire_blocking`](Self::acquire_blocking), for a permit that
    /// was not free.
    fn wait_blocking(&self, wait: Wait) -> Result<BulkheadPermit<'_>, Rejected> {
        let start = self.clock.now();
        let deadline = match wait {
            Wait::For(wait) => Instant::now().checked_add(wait),
            Wait::Reject | Wait::Forever => None,
        };
        let key = match self.semaphore.acquire_or_enqueue(Waking::Thread.to_wake()) {
            Ok(()) => return Ok(self.permit()),
            Err(key) => key,
        };
        let mut waiter = Waiter::new(&self.semaphore, key);
        loop {
            match deadline {
                None => std::thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        // Leaves the queue, passing on a permit handed over meanwhile.
                        drop(waiter);
                        return Err(self.reject(self.clock.now().saturating_sub(start)));
                    }
                    std::thread::park_timeout(deadline - now);
                }
            }
            if waiter.poll(Waking::Thread) {
                return Ok(self.permit());
            }
        }
    }

    /// Takes a permit, waiting asynchronously up to `max_wait_duration` until one is free.
    ///
    /// A free permit, or a zero `max_wait_duration`, needs no runtime. A finite wait runs on
    /// the bulkhead's clock: a [`ManualClock`](crate::ManualClock) ends it when advanced; the
    /// system clock sleeps on tokio's timer inside a tokio runtime (whose time driver must be
    /// enabled), else on the crate's shared timer thread. Dropping the future gives up the
    /// wait: the caller leaves the queue and a permit it had been handed goes to the next
    /// waiter.
    ///
    /// # Errors
    ///
    /// [`Rejected::BulkheadFull`] if no permit was free within `max_wait_duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{Bulkhead, BulkheadConfig, Rejected};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bulkhead = Bulkhead::new(
    ///     "inventory",
    ///     BulkheadConfig::builder()
    ///         .max_concurrent_calls(1)
    ///         .max_wait_duration(Duration::from_millis(20))
    ///         .build()?,
    /// );
    /// let permit = bulkhead.acquire().await?;
    /// // Full: the next caller waits 20 ms for a permit, then is rejected.
    /// match bulkhead.acquire().await {
    ///     Err(Rejected::BulkheadFull { waited, .. }) => assert!(waited >= Duration::from_millis(20)),
    ///     other => panic!("expected a full bulkhead, got {other:?}"),
    /// }
    /// drop(permit);
    /// assert!(bulkhead.acquire().await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire(&self) -> Result<BulkheadPermit<'_>, Rejected> {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.acquire(self, self.wait()).await;
        }
        self.acquire_local(self.wait()).await
    }

    /// [`acquire`](Self::acquire) of a permit of the semaphore, waiting within `wait`.
    async fn acquire_local(&self, wait: Wait) -> Result<BulkheadPermit<'_>, Rejected> {
        if self.semaphore.try_acquire() {
            return Ok(self.permit());
        }
        let wait = match wait {
            Wait::Reject => return Err(self.reject(Duration::ZERO)),
            wait => wait,
        };
        let start = self.clock.now();
        // Queued without a waker: the waiter is polled, and registers one, right below.
        let key = match self.semaphore.acquire_or_enqueue(Wake::Nothing) {
            Ok(()) => return Ok(self.permit()),
            Err(key) => key,
        };
        let acquired = {
            let mut waiter = std::pin::pin!(Waiter::new(&self.semaphore, key));
            match wait {
                // Timed on the bulkhead's clock, as every other wait of a guard: a manual clock
                // moves it, the system clock sleeps on tokio's timer (or the shared timer thread).
                Wait::For(wait) => {
                    let deadline = deadline_after(self.clock.read(Reading::Precise), wait);
                    let mut expired =
                        std::pin::pin!(self.clock.sleep_until(Reading::Precise, deadline));
                    std::future::poll_fn(|cx| {
                        if waiter.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(true);
                        }
                        expired.as_mut().poll(cx).map(|()| false)
                    })
                    .await
                }
                Wait::Reject | Wait::Forever => {
                    waiter.await;
                    true
                }
            }
            // A waiter that timed out leaves the queue here, before its refusal is counted and
            // delivered (passing on a permit handed to it meanwhile).
        };
        if acquired {
            Ok(self.permit())
        } else {
            Err(self.reject(self.clock.now().saturating_sub(start)))
        }
    }

    /// A free permit of the semaphore, if there is one, marked `start` (a fleet bulkhead's
    /// lease), counted.
    #[cfg(feature = "redis")]
    fn take_permit(&self, start: u32) -> Option<BulkheadPermit<'_>> {
        self.semaphore
            .try_acquire()
            .then(|| BulkheadPermit::new(self, start))
    }

    #[inline]
    fn permit(&self) -> BulkheadPermit<'_> {
        // An adaptive limit times the call from its admission: the wait for a permit is the
        // bulkhead's own queue, not the dependency's latency.
        let timed = self.controller.is_on()
            && self
                .controller
                .times_call(|| self.clock.read(Reading::Coarse));
        let start = if timed {
            match tick(self.clock.read(Reading::Precise)) {
                // A microsecond off, once every 73 minutes, rather than untimed.
                UNTIMED => UNTIMED - 1,
                start => start,
            }
        } else {
            UNTIMED
        };
        BulkheadPermit::new(self, start)
    }

    /// Releases the permit of a call timed since `start`, and gives the adaptive limit its
    /// sample (unless `end` says there is none); applies and tells a change of the limit.
    #[inline(never)]
    fn release_sampled(&self, start: u32, end: Ended) {
        // A fleet bulkhead keeps the permit's lease where an adaptive one keeps its start.
        #[cfg(feature = "redis")]
        if self.fleet().is_some_and(|fleet| fleet.release(start)) {
            self.semaphore.release();
            return;
        }
        let held = self.semaphore.release_held();
        if end == Ended::Unsampled {
            return;
        }
        let now = self.clock.read(Reading::Precise);
        let rtt = u64::from(tick(now).wrapping_sub(start)) << TICK_SHIFT;
        let mut wakes = Vec::new();
        let sample = Sample {
            now,
            rtt,
            inflight: held,
            dropped: end == Ended::Dropped,
        };
        let change = self.controller.sample(sample, |limit| {
            wakes = self.semaphore.reconfigure(limit, self.semaphore.is_fair());
        });
        for wake in wakes {
            wake.wake();
        }
        if let Some((from, to)) = change {
            if self.subscribers.any() {
                self.tell_limit_changed(from, to);
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn tell_limit_changed(&self, from: u32, to: u32) {
        self.subscribers.deliver([BulkheadEvent::LimitChanged {
            name: self.name.clone(),
            from,
            to,
        }]);
    }

    /// Calls `callback` with every event of this bulkhead (its refusals), on the thread of the
    /// refused call. A callback that panics does not keep the event from the others; the panic
    /// is then resumed on that thread (unless it is already panicking).
    pub fn subscribe(
        &self,
        callback: impl Fn(&BulkheadEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add(Arc::new(callback))
    }

    /// Like [`subscribe`](Self::subscribe), for the events of `interest`.
    pub(crate) fn subscribe_with(
        &self,
        interest: Interest,
        callback: impl Fn(&BulkheadEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add_with(interest, Arc::new(callback))
    }

    /// Removes a callback added by [`subscribe`](Self::subscribe); `false` if it was not
    /// subscribed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.subscribers.remove(id)
    }

    /// Delivers a refusal's event: out of line, so that the refusal inlined into every guarded
    /// call stays the size it is without subscribers.
    #[cold]
    #[inline(never)]
    fn tell_rejected(&self, waited: Duration) {
        self.subscribers.deliver([BulkheadEvent::CallRejected {
            name: self.name.clone(),
            waited,
        }]);
    }

    #[cold]
    fn reject(&self, waited: Duration) -> Rejected {
        self.count_rejected(waited);
        Rejected::BulkheadFull {
            name: self.name.clone(),
            waited,
        }
    }

    /// Counts a refusal and tells the subscribers, whatever the rejection says.
    fn count_rejected(&self, waited: Duration) {
        self.semaphore.count_rejected();
        if self.subscribers.any() {
            self.tell_rejected(waited);
        }
    }

    /// No permit was free and the call may not block its thread to wait for one: a rejection
    /// as [`reject`](Self::reject) counts and tells it, saying why.
    #[cold]
    fn refuse_blocking(&self) -> Rejected {
        self.count_rejected(Duration::ZERO);
        Rejected::WouldBlock {
            aspect: crate::Aspect::Bulkhead,
            name: self.name.clone(),
        }
    }
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("name", &self.name)
            .field("id", &self.id)
            .field(
                "available_concurrent_calls",
                &self.available_concurrent_calls(),
            )
            .field("config", &*lock(&self.config))
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// A caller's place in the wait queue; dropping it gives up the place (and passes on a permit
/// handed to it meanwhile). As a future, it completes once the caller holds a permit.
struct Waiter<'a> {
    semaphore: &'a Semaphore,
    /// `None` once the permit is taken: the place is spent.
    key: Option<Key>,
}

impl<'a> Waiter<'a> {
    fn new(semaphore: &'a Semaphore, key: Key) -> Self {
        Waiter {
            semaphore,
            key: Some(key),
        }
    }

    /// Whether the caller holds a permit now; if not, it is to be woken through `waking`.
    fn poll(&mut self, waking: Waking<'_>) -> bool {
        let key = self
            .key
            .expect("a waiter is not polled after it got its permit");
        let acquired = self.semaphore.poll_waiter(key, waking);
        if acquired {
            self.key = None;
        }
        acquired
    }
}

impl Future for Waiter<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.get_mut().poll(Waking::Task(cx.waker())) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.semaphore.cancel(key);
        }
    }
}
