//! The rate limiter: at most `limit_for_period` calls per `limit_refresh_period`
//! (Resilience4j's `AtomicRateLimiter`).
//!
//! [`RateLimiter`] is the guard, [`RateLimiterConfig`] its configuration,
//! [`RateLimiterMetrics`] a snapshot and [`RateLimiterEvent`] what it tells subscribers. The
//! permission accounting lives in `timeline.rs` (one atomic word, one compare-and-swap per
//! acquisition).
//!
//! Time is cut into cycles of `limit_refresh_period`, counted from the limiter's creation (or
//! its last reconfiguration). Every cycle starts with `limit_for_period` permissions; unused
//! ones are lost at its end. A caller that finds none left either reserves a permission of a
//! later cycle and waits for that cycle to start, when the wait is within `timeout_duration`,
//! or is refused at once with [`Rejected::RequestNotPermitted`] and nothing consumed.
//! Reservations are paid by the later cycles: while callers wait,
//! [`available_permissions`](RateLimiter::available_permissions) is negative.
//!
//! A rate limiter does not hold a permit while the call runs: a permission is spent when it is
//! granted, whatever the call then does.

mod config;
mod events;
#[cfg(feature = "redis")]
mod fleet;
mod metrics;
mod timeline;

#[cfg(all(test, not(loom)))]
mod tests;

pub use config::{RateLimiterConfig, RateLimiterConfigBuilder, MAX_PERMISSIONS_PER_NANOSECOND};
pub use events::RateLimiterEvent;
pub use metrics::RateLimiterMetrics;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::blocking::Blocking;
use crate::clock::{Clock, Reading};
use crate::error::Rejected;
use crate::name::Name;
use crate::subscribers::{Subscribers, SubscriptionId};
use crate::sync::{lock, AtomicU64, Mutex, Ordering};

use timeline::{Mode, Params, Reservation, Take, Timeline};

/// A rate limiter: grants at most
/// [`limit_for_period`](RateLimiterConfig::limit_for_period) permissions per cycle of
/// [`limit_refresh_period`](RateLimiterConfig::limit_refresh_period), and makes a caller that
/// finds none left wait for a later cycle up to
/// [`timeout_duration`](RateLimiterConfig::timeout_duration), or refuses it with
/// [`Rejected::RequestNotPermitted`].
///
/// Fairness: waiters are served in the order they reserved (each reserves the next free
/// permission of a later cycle), and a caller arriving later never takes a permission set
/// aside for one of them.
///
/// Cancellation: an async caller whose [`acquire`](Self::acquire) future is dropped while it
/// waits gives its permission back, so that a later caller can use it in its cycle (unless the
/// limiter was reconfigured meanwhile, or that cycle is already over).
///
/// Cost: taking a permission is one compare-and-swap on one atomic word and one clock reading
/// (the coarse clock when its resolution is at most 1 % of the period, else the precise one);
/// nothing is locked or allocated, and events cost one relaxed load when nobody subscribed.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{Clock, ManualClock, RateLimiter, RateLimiterConfig, Rejected};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::with_clock(
///     "payments",
///     RateLimiterConfig::builder()
///         .limit_for_period(2)
///         .limit_refresh_period(Duration::from_secs(1))
///         .build()?,
///     Clock::from(clock.clone()),
/// );
///
/// limiter.try_acquire()?;
/// limiter.try_acquire()?;
/// match limiter.try_acquire() {
///     Err(Rejected::RequestNotPermitted { retry_after, .. }) => {
///         assert_eq!(retry_after, Duration::from_secs(1))
///     }
///     other => panic!("expected a refusal, got {other:?}"),
/// }
///
/// // A new cycle: two permissions again (unused ones never add up).
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(limiter.available_permissions(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimiter {
    name: Name,
    id: u64,
    /// The configuration in force; its lock serialises reconfigurations.
    config: Mutex<RateLimiterConfig>,
    clock: Clock,
    timeline: Timeline,
    subscribers: Subscribers<RateLimiterEvent>,
    /// Callers waiting for their cycle now.
    waiting: AtomicU64,
    /// Permissions granted after a wait (those granted at once are counted by the timeline).
    permitted_after_wait: AtomicU64,
    /// The largest count of permissions granted at once reported so far, so that the count
    /// never goes down while operations are in flight.
    reported_at_once: AtomicU64,
    rejected: AtomicU64,
    /// The Redis side of a fleet limiter (`None`: local), and whether there is one: the local
    /// path reads the flag alone.
    #[cfg(feature = "redis")]
    fleet: arc_swap::ArcSwapOption<fleet::Fleet>,
    #[cfg(feature = "redis")]
    has_fleet: std::sync::atomic::AtomicBool,
}

/// What a guarded call does next, from [`RateLimiter::try_acquire_or_wait`].
#[derive(Debug)]
pub(crate) enum Admission {
    /// A permission of the current cycle was taken.
    Granted,
    /// None now, but the caller may wait for one (`timeout_duration` above zero and a
    /// permission within it). Nothing is reserved: call [`RateLimiter::acquire`] or
    /// [`RateLimiter::acquire_blocking`], which may reserve (or refuse, or grant at once).
    Wait,
    /// Refused at once (counted, and the event delivered).
    Refused(Rejected),
}

/// The parameters of `config` on `clock`, with cycle 0 starting now.
fn params_for(config: &RateLimiterConfig, clock: &Clock) -> Params {
    let period = config.period_nanos();
    // The coarse clock when it is fine enough for the cycle (at most 1 % of it), as the
    // breaker times its calls; a manual clock has no coarse reading.
    let reading = match clock.coarse_resolution() {
        Some(resolution) if resolution.saturating_mul(100) <= period => Reading::Coarse,
        _ => Reading::Precise,
    };
    Params {
        seq: 0,
        t0: clock.read(reading),
        base: 0,
        period,
        limit: u64::from(config.limit_for_period()),
        timeout: u64::try_from(config.timeout_duration().as_nanos()).unwrap_or(u64::MAX),
        reading,
    }
}

impl RateLimiter {
    /// A rate limiter named `name`, configured by `config`, on the system clock.
    pub fn new(name: impl Into<Name>, config: RateLimiterConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }

    /// A rate limiter on `clock`: its cycles and its waits follow that clock, so a
    /// [`ManualClock`](crate::ManualClock) drives every cycle and wakes every waiter in tests.
    ///
    /// On the system clock, waits sleep on the operating system's clock (blocking) or on
    /// tokio's timer (async, so paused test time applies) and the cycles are read from the
    /// precise clock, or from the coarse one when the period is at least 100 times its
    /// resolution (then paused tokio time drives the waits but not the cycles).
    pub fn with_clock(name: impl Into<Name>, config: RateLimiterConfig, clock: Clock) -> Self {
        let name = name.into();
        #[cfg(feature = "redis")]
        let fleet = fleet::Fleet::new(&name, &config, None).map(Arc::new);
        RateLimiter {
            #[cfg(feature = "redis")]
            has_fleet: std::sync::atomic::AtomicBool::new(fleet.is_some()),
            #[cfg(feature = "redis")]
            fleet: arc_swap::ArcSwapOption::new(fleet),
            name,
            id: crate::next_instance_id(),
            timeline: Timeline::new(params_for(&config, &clock)),
            config: Mutex::new(config),
            clock,
            subscribers: Subscribers::new(),
            waiting: AtomicU64::new(0),
            permitted_after_wait: AtomicU64::new(0),
            reported_at_once: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    /// The instance name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The process-wide unique id of this instance, for the re-entrancy record of a call chain.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The configuration in force (a copy: [`reconfigure`](Self::reconfigure) may change it).
    pub fn config(&self) -> RateLimiterConfig {
        lock(&self.config).clone()
    }

    /// Changes the configuration of this rate limiter in place (Resilience4j's
    /// `changeLimitForPeriod` / `changeTimeoutDuration`, all at once): the instance, its name,
    /// its subscribers and its counters stay.
    ///
    /// The new limit, period and timeout take effect at once, with a fresh cycle starting now
    /// and a full `limit_for_period`. Callers already waiting keep their permission and their
    /// wait. A call racing the reconfiguration is judged entirely by the old configuration or
    /// entirely by the new one. Reconfiguring with the configuration in force does nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{Clock, ManualClock, RateLimiter, RateLimiterConfig};
    ///
    /// let limit = |n| RateLimiterConfig::builder()
    ///     .limit_for_period(n)
    ///     .limit_refresh_period(Duration::from_secs(1))
    ///     .build();
    /// let limiter = RateLimiter::with_clock("payments", limit(1)?, Clock::from(ManualClock::new()));
    /// limiter.try_acquire()?;
    /// assert!(limiter.try_acquire().is_err());
    ///
    /// limiter.reconfigure(limit(3)?);
    /// assert_eq!(limiter.available_permissions(), 3);
    /// assert_eq!(limiter.config().limit_for_period(), 3);
    /// assert_eq!(limiter.metrics().permitted_calls(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconfigure(&self, config: RateLimiterConfig) {
        let mut current = lock(&self.config);
        if *current == config {
            return;
        }
        self.timeline.reconfigure(params_for(&config, &self.clock));
        #[cfg(feature = "redis")]
        {
            let previous = self.fleet.load_full();
            let fleet = fleet::Fleet::new(&self.name, &config, previous.as_deref()).map(Arc::new);
            self.has_fleet
                .store(fleet.is_some(), std::sync::atomic::Ordering::Relaxed);
            self.fleet.store(fleet);
        }
        *current = config;
    }

    /// The Redis side, for a fleet limiter (one relaxed load when there is none).
    #[cfg(feature = "redis")]
    #[inline]
    fn fleet(&self) -> Option<Arc<fleet::Fleet>> {
        if self.has_fleet.load(std::sync::atomic::Ordering::Relaxed) {
            self.fleet.load_full()
        } else {
            None
        }
    }

    /// The permissions a fleet limiter got from Redis (or its fallback's `admit`) and the calls
    /// it decided without Redis; zeros for a local limiter.
    fn fleet_counts(&self) -> (u64, u64) {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return (
                fleet.permitted.load(Ordering::Relaxed),
                fleet.fallback_calls.load(Ordering::Relaxed),
            );
        }
        (0, 0)
    }

    /// Counts a caller waiting for its cycle while the guard lives.
    #[cfg(feature = "redis")]
    fn count_waiting(&self) -> impl Drop + '_ {
        struct Counted<'a>(&'a AtomicU64);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Counted(&self.waiting)
    }

    /// The permissions left in the current cycle; negative when waiters have reserved
    /// permissions of later cycles (Resilience4j's `getAvailablePermissions`).
    ///
    /// For a fleet limiter ([`Backend::redis`](crate::fleet::Backend)), the permissions left
    /// across the fleet when Redis last answered this process.
    pub fn available_permissions(&self) -> i64 {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.available();
        }
        self.timeline.available(&self.clock)
    }

    /// A snapshot of the state and the counters.
    pub fn metrics(&self) -> RateLimiterMetrics {
        let at_once = self.timeline.granted_at_once();
        let at_once = self
            .reported_at_once
            .fetch_max(at_once, Ordering::Relaxed)
            .max(at_once);
        let (fleet_permitted, fleet_fallback_calls) = self.fleet_counts();
        RateLimiterMetrics {
            available_permissions: self.available_permissions(),
            number_of_waiting_threads: self.waiting.load(Ordering::Relaxed),
            permitted_calls: at_once
                .saturating_add(self.permitted_after_wait.load(Ordering::Relaxed))
                .saturating_add(fleet_permitted),
            rejected_calls: self.rejected.load(Ordering::Relaxed),
            fleet_fallback_calls,
        }
    }

    /// Uses up the permissions left in the current cycle (Resilience4j's `drainPermissions`):
    /// until the next cycle starts, callers wait or are refused. Reservations already made
    /// are kept.
    ///
    /// ```
    /// use resilience_runtime::{RateLimiter, RateLimiterConfig};
    ///
    /// let limiter = RateLimiter::new("payments", RateLimiterConfig::builder()
    ///     .limit_for_period(10)
    ///     .limit_refresh_period(std::time::Duration::from_secs(3600))
    ///     .build()?);
    /// limiter.drain_permissions();
    /// assert_eq!(limiter.available_permissions(), 0);
    /// assert!(limiter.try_acquire().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain_permissions(&self) {
        self.timeline.drain(&self.clock);
    }

    /// Takes a permission of the current cycle without waiting, or refuses the call at once
    /// (whatever `timeout_duration` says).
    ///
    /// # Errors
    ///
    /// [`Rejected::RequestNotPermitted`] if no permission is left in this cycle; nothing is
    /// consumed.
    #[inline]
    pub fn try_acquire(&self) -> Result<(), Rejected> {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.acquire_blocking(self, false);
        }
        match self.timeline.take(&self.clock, Mode::Now) {
            Take::Granted => {
                self.granted(Duration::ZERO);
                Ok(())
            }
            Take::Refused { retry_after } => Err(self.refuse(retry_after)),
            // `Mode::Now` neither waits nor reserves.
            Take::WouldWait | Take::Reserved(_) => Err(self.refuse(0)),
        }
    }

    /// The first step of a guarded call: takes a permission of the current cycle if there is
    /// one, says whether the caller may wait for a later one (reserving nothing), or refuses
    /// at once. See [`Admission`].
    #[inline]
    pub(crate) fn try_acquire_or_wait(&self) -> Admission {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.first_step(self);
        }
        match self.timeline.take(&self.clock, Mode::Probe) {
            Take::Granted => {
                self.granted(Duration::ZERO);
                Admission::Granted
            }
            Take::WouldWait => Admission::Wait,
            Take::Refused { retry_after } => Admission::Refused(self.refuse(retry_after)),
            // `Mode::Probe` reserves nothing.
            Take::Reserved(_) => Admission::Wait,
        }
    }

    /// Takes a permission, blocking the current thread until its cycle starts if none is left
    /// now and that cycle starts within `timeout_duration`. Needs no async runtime.
    ///
    /// Inside a tokio runtime it does not stall the runtime's other tasks: on a multi-thread
    /// runtime it waits through [`tokio::task::block_in_place`]; on a current-thread runtime
    /// it does not wait at all (see [`allow_blocking`](crate::allow_blocking)).
    ///
    /// # Errors
    ///
    /// [`Rejected::RequestNotPermitted`] if no permission is free within `timeout_duration`;
    /// [`Rejected::WouldBlock`] if one is, later, and waiting for it would block a
    /// current-thread runtime. Nothing is consumed.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use resilience_runtime::{RateLimiter, RateLimiterConfig};
    ///
    /// let limiter = RateLimiter::new("payments", RateLimiterConfig::builder()
    ///     .limit_for_period(1)
    ///     .limit_refresh_period(Duration::from_millis(20))
    ///     .timeout_duration(Duration::from_millis(100))
    ///     .build()?);
    /// let start = Instant::now();
    /// limiter.acquire_blocking()?;
    /// limiter.acquire_blocking()?; // waits for the next cycle
    /// assert!(start.elapsed() > Duration::from_millis(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_blocking(&self) -> Result<(), Rejected> {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.acquire_blocking(self, true);
        }
        self.acquire_blocking_local()
    }

    /// [`acquire_blocking`](Self::acquire_blocking) on this process's timeline.
    fn acquire_blocking_local(&self) -> Result<(), Rejected> {
        if let Some(mut waiter) = self.reserve()? {
            let reservation = waiter.reservation();
            match Blocking::here() {
                Blocking::Refused => {
                    // Gives the permission back for a later caller of its cycle.
                    drop(waiter);
                    return Err(self.refuse_blocking(reservation.wait));
                }
                place => place.run(|| {
                    self.clock
                        .sleep_until_blocking(reservation.reading, reservation.deadline);
                }),
            }
            waiter.proceed();
        }
        Ok(())
    }

    /// The first step of [`acquire`](Self::acquire) and
    /// [`acquire_blocking`](Self::acquire_blocking), which differ only in how they wait: a
    /// permission taken now (`None`), one reserved in a later cycle (its waiter, which gives
    /// it back if dropped before it proceeds), or a refusal.
    fn reserve(&self) -> Result<Option<Waiter<'_>>, Rejected> {
        match self.timeline.take(&self.clock, Mode::Reserve) {
            Take::Granted => {
                self.granted(Duration::ZERO);
                Ok(None)
            }
            Take::Refused { retry_after } => Err(self.refuse(retry_after)),
            Take::Reserved(reservation) => Ok(Some(Waiter::new(self, reservation))),
            Take::WouldWait => Err(self.refuse(0)),
        }
    }

    /// Takes a permission, waiting asynchronously until its cycle starts if none is left now
    /// and that cycle starts within `timeout_duration`.
    ///
    /// The wait runs on the limiter's clock: a [`ManualClock`](crate::ManualClock)'s
    /// `advance`, else tokio's timer inside a tokio runtime (with the time driver enabled),
    /// else the crate's timer thread. Cancel-safe: dropping the future while it waits gives
    /// the permission back for a later caller of its cycle.
    ///
    /// # Errors
    ///
    /// [`Rejected::RequestNotPermitted`] if no permission is free within `timeout_duration`;
    /// nothing is consumed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{RateLimiter, RateLimiterConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RateLimiter::new("payments", RateLimiterConfig::builder()
    ///     .limit_for_period(1)
    ///     .limit_refresh_period(Duration::from_millis(100))
    ///     .timeout_duration(Duration::from_millis(500))
    ///     .build()?);
    /// let start = tokio::time::Instant::now();
    /// limiter.acquire().await?;
    /// limiter.acquire().await?; // waits for the next cycle
    /// assert!(start.elapsed() >= Duration::from_millis(50));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire(&self) -> Result<(), Rejected> {
        #[cfg(feature = "redis")]
        if let Some(fleet) = self.fleet() {
            return fleet.acquire(self, true).await;
        }
        self.acquire_local().await
    }

    /// [`acquire`](Self::acquire) on this process's timeline.
    async fn acquire_local(&self) -> Result<(), Rejected> {
        if let Some(mut waiter) = self.reserve()? {
            let reservation = waiter.reservation();
            self.clock
                .sleep_until(reservation.reading, reservation.deadline)
                .await;
            waiter.proceed();
        }
        Ok(())
    }

    /// Calls `callback` with every event of this limiter, on the thread that caused it, after
    /// the limiter's state is consistent. A callback that panics does not keep the event from
    /// the others; the panic is then resumed on that thread (unless it is already panicking).
    pub fn subscribe(
        &self,
        callback: impl Fn(&RateLimiterEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add(Arc::new(callback))
    }

    /// Like [`subscribe`](Self::subscribe), for the events of `interest`.
    pub(crate) fn subscribe_with(
        &self,
        interest: crate::subscribers::Interest,
        callback: impl Fn(&RateLimiterEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add_with(interest, Arc::new(callback))
    }

    /// Removes a callback added by [`subscribe`](Self::subscribe); `false` if it was not
    /// subscribed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.subscribers.remove(id)
    }

    #[inline]
    fn granted(&self, waited: Duration) {
        if self.subscribers.per_call() {
            self.deliver(RateLimiterEvent::SuccessfulAcquire {
                name: self.name.clone(),
                waited,
            });
        }
    }

    #[cold]
    fn refuse(&self, retry_after: u64) -> Rejected {
        let retry_after = self.count_refused(retry_after);
        Rejected::RequestNotPermitted {
            name: self.name.clone(),
            retry_after,
        }
    }

    /// Counts a refusal and tells the subscribers, whatever the rejection says; returns
    /// `retry_after` (nanoseconds) as a duration.
    fn count_refused(&self, retry_after: u64) -> Duration {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        let retry_after = Duration::from_nanos(retry_after);
        if self.subscribers.any() {
            self.deliver(RateLimiterEvent::FailedAcquire {
                name: self.name.clone(),
                retry_after,
            });
        }
        retry_after
    }

    /// A permission was free in a later cycle, `retry_after` nanoseconds away, and the call may
    /// not block its thread to wait for it: a refusal as [`refuse`](Self::refuse) counts and
    /// tells it, saying why.
    #[cold]
    fn refuse_blocking(&self, retry_after: u64) -> Rejected {
        self.count_refused(retry_after);
        Rejected::WouldBlock {
            aspect: crate::Aspect::RateLimiter,
            name: self.name.clone(),
        }
    }

    #[cold]
    fn deliver(&self, event: RateLimiterEvent) {
        self.subscribers.deliver([event]);
    }
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("name", &self.name)
            .field("id", &self.id)
            .field("available_permissions", &self.available_permissions())
            .field("config", &*lock(&self.config))
            .field("clock", &self.clock)
            .field("timeline", &self.timeline)
            .field("subscribers", &self.subscribers)
            .finish_non_exhaustive()
    }
}

/// A caller waiting for its reserved permission: counted as waiting while it lives; dropped
/// before [`proceed`](Self::proceed), it gives the permission back.
struct Waiter<'a> {
    limiter: &'a RateLimiter,
    reservation: Reservation,
    waiting: bool,
}

impl<'a> Waiter<'a> {
    fn new(limiter: &'a RateLimiter, reservation: Reservation) -> Self {
        limiter.waiting.fetch_add(1, Ordering::Relaxed);
        Waiter {
            limiter,
            reservation,
            waiting: true,
        }
    }

    /// What it waits for.
    fn reservation(&self) -> Reservation {
        self.reservation
    }

    /// Its cycle has started: the caller goes ahead with its permission.
    fn proceed(&mut self) {
        self.waiting = false;
        let limiter = self.limiter;
        limiter.waiting.fetch_sub(1, Ordering::Relaxed);
        limiter.permitted_after_wait.fetch_add(1, Ordering::Relaxed);
        let start = self
            .reservation
            .deadline
            .saturating_sub(self.reservation.wait);
        let now = limiter.clock.read(self.reservation.reading);
        limiter.granted(Duration::from_nanos(now.saturating_sub(start)));
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.waiting {
            self.limiter.waiting.fetch_sub(1, Ordering::Relaxed);
            self.limiter
                .timeline
                .give_back(&self.limiter.clock, &self.reservation);
        }
    }
}
