//! A bulkhead whose permits are leases in Redis (feature `redis`): one script call to take a
//! lease, one command to give it back, renewals with the heartbeats, and a fallback while Redis
//! does not answer. See [`crate::fleet`] for what it means across the fleet.
//!
//! Every call admitted through Redis also holds a permit of the bulkhead's own semaphore, taken
//! with its lease. Its limit is the fleet limit while Redis answers (a replica holds at most
//! that many leases) and the local share while the fallback decides: the calls that hold a
//! lease when Redis goes away count against the share, as the calls of a local bulkhead do
//! against a smaller limit. A call the fallback admits gets a lease number too, which the
//! heartbeats add to Redis once it answers again: then it counts against the fleet limit.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use redis::Script;

use super::permit::UNTIMED;
use super::{Bulkhead, BulkheadConfig, BulkheadEvent, BulkheadPermit, Wait};
use crate::blocking::Blocking;
use crate::clock::{deadline_after, Reading};
use crate::error::Rejected;
use crate::fleet::connection::{heartbeat, CommandError};
use crate::fleet::instance::{micros, Instance};
use crate::fleet::{lock, FleetFallback, RedisConnection};
use crate::name::Name;

static LEASE: once_cell::sync::Lazy<Script> =
    once_cell::sync::Lazy::new(|| Script::new(include_str!("../fleet/scripts/lease.lua")));

/// The pause after the first "all leases held" answer; each next one is twice as long, up to
/// [`LONGEST_PAUSE`], with jitter, so that the fleet's waiters do not ask Redis in step.
const FIRST_PAUSE: Duration = Duration::from_millis(2);
const LONGEST_PAUSE: Duration = Duration::from_millis(50);

/// How long a replica takes the fleet for full after Redis said so, unless it gives back a
/// lease of its own meanwhile: its callers are refused (or pause) without asking, so a replica
/// under overload asks Redis at most about a hundred times a second to be refused.
const FULL_REMEMBERED: Duration = Duration::from_millis(10);

/// The Redis side of a fleet bulkhead, rebuilt when the bulkhead is reconfigured.
pub(super) struct Fleet {
    instance: Instance,
    limit: u32,
    /// The leases held across the fleet when Redis last answered.
    fleet_held: AtomicU32,
    /// Take the fleet for full without asking until this reading of the clock (ns); 0: ask.
    full_until: AtomicU64,
    /// The semaphore's limit as this fleet set it last: the fleet limit, or the local share.
    /// Locked while it is set, so that two changes racing reach the semaphore in their order.
    local_max: Mutex<u32>,
    /// Calls decided without Redis.
    pub(super) fallback_calls: AtomicU64,
}

/// A lease number unique in this process for as long as a call lasts (it wraps after 2³²
/// leases). It is kept in the permit where an adaptive limit keeps its start: never
/// [`UNTIMED`], which marks a permit without a lease.
fn next_lease() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    loop {
        let lease = NEXT.fetch_add(1, Ordering::Relaxed);
        if lease != UNTIMED {
            return lease;
        }
    }
}

/// What Redis answered to a lease.
#[derive(Clone, Copy)]
struct Answer {
    leased: bool,
    /// The leases held across the fleet, the new one included.
    held: u32,
}

/// What a caller does before an ask ([`Fleet::before_ask`]).
enum Before<'a> {
    /// Ask Redis over this connection.
    Ask(&'a RedisConnection),
    /// The fleet is remembered full: as [`After::Full`], without asking.
    Full,
    /// Redis does not answer: the fallback decides.
    Fallback,
}

/// What a caller does after an ask ([`Fleet::answered_with`]).
enum After<'b> {
    /// Leased: the permit, which holds the lease.
    Leased(BulkheadPermit<'b>),
    /// Every lease is held: ask again after a pause, or give up at the deadline.
    Full,
    /// Redis did not answer: the fallback decides.
    Fallback,
}

/// One caller's wait for a lease: when it started, when it gives up, its next pause.
struct Waiting {
    start: u64,
    deadline: Option<u64>,
    pause: Duration,
}

impl Waiting {
    fn new(bulkhead: &Bulkhead, wait: Wait) -> Self {
        let start = bulkhead.clock.now_nanos();
        let deadline = match wait {
            Wait::Reject => Some(start),
            Wait::For(wait) => Some(deadline_after(start, wait)),
            Wait::Forever => None,
        };
        Waiting {
            start,
            deadline,
            pause: FIRST_PAUSE,
        }
    }

    /// What is left of the wait, for the fallback.
    fn left(&self, bulkhead: &Bulkhead) -> Wait {
        match self.deadline {
            None => Wait::Forever,
            Some(deadline) => match deadline.checked_sub(bulkhead.clock.now_nanos()) {
                Some(left) if left > 0 => Wait::For(Duration::from_nanos(left)),
                _ => Wait::Reject,
            },
        }
    }

    /// After a "full": the reading to ask again at, or the refusal once the deadline has
    /// passed.
    fn after_full(&mut self, bulkhead: &Bulkhead) -> Result<u64, Rejected> {
        let now = bulkhead.clock.now_nanos();
        pause_until(now, self.deadline, &mut self.pause)
            .ok_or_else(|| bulkhead.reject(Duration::from_nanos(now.saturating_sub(self.start))))
    }
}

impl Fleet {
    /// The Redis side of `name` under `config`, whose backend is Redis (see
    /// [`Instance::new`]). On the same Redis as `previous`, its leases, what Redis said last
    /// and whether it answers carry over.
    pub(super) fn new(
        name: &Name,
        config: &BulkheadConfig,
        previous: Option<&Fleet>,
    ) -> Option<Fleet> {
        let backend = config.backend();
        let instance = Instance::new(
            "bulkhead",
            name,
            &backend,
            true,
            previous.map(|p| &p.instance),
        )?;
        let limit = config.max_concurrent_calls();
        let held = previous
            .filter(|p| p.instance.connection() == instance.connection())
            .map_or(0, |p| p.fleet_held.load(Ordering::Relaxed));
        Some(Fleet {
            instance,
            limit,
            fleet_held: AtomicU32::new(held),
            full_until: AtomicU64::new(0),
            local_max: Mutex::new(limit),
            // A counter never goes back, whatever the reconfiguration.
            fallback_calls: AtomicU64::new(
                previous.map_or(0, |p| p.fallback_calls.load(Ordering::Relaxed)),
            ),
        })
    }

    /// The leases free across the fleet when Redis last answered.
    pub(super) fn available(&self) -> u32 {
        self.limit
            .saturating_sub(self.fleet_held.load(Ordering::Relaxed))
    }

    /// Takes a lease, waiting within `wait` (pausing between asks) while the fleet's are all
    /// held. The permit holds the lease and a permit of the semaphore.
    pub(super) async fn acquire<'b>(
        &self,
        bulkhead: &'b Bulkhead,
        wait: Wait,
    ) -> Result<BulkheadPermit<'b>, Rejected> {
        let mut waiting = Waiting::new(bulkhead, wait);
        loop {
            let after = match self.before_ask(bulkhead) {
                Before::Ask(connection) => {
                    let (lease, invocation) = self.invocation(connection);
                    let answer = connection
                        .send(
                            move |mut manager| async move { invocation.run(&mut manager).await },
                            self.unclaimed(lease),
                        )
                        .answer()
                        .await;
                    self.answered_with(bulkhead, answer, lease)
                }
                Before::Full => After::Full,
                Before::Fallback => After::Fallback,
            };
            match after {
                After::Leased(permit) => return Ok(permit),
                After::Fallback => {
                    return self.fallback_async(bulkhead, waiting.left(bulkhead)).await
                }
                After::Full => {}
            }
            let until = waiting.after_full(bulkhead)?;
            bulkhead.clock.sleep_until(Reading::Precise, until).await;
        }
    }

    /// [`acquire`](Self::acquire), blocking the thread for the round trips and the pauses (on
    /// a current-thread runtime, refused with [`Rejected::WouldBlock`] when it would ask Redis
    /// or pause).
    pub(super) fn acquire_blocking<'b>(
        &self,
        bulkhead: &'b Bulkhead,
        wait: Wait,
    ) -> Result<BulkheadPermit<'b>, Rejected> {
        let mut waiting = Waiting::new(bulkhead, wait);
        let place = Blocking::here();
        loop {
            let after = match self.before_ask(bulkhead) {
                Before::Ask(_) if place == Blocking::Refused => {
                    return Err(bulkhead.refuse_blocking());
                }
                Before::Ask(connection) => {
                    let (lease, invocation) = self.invocation(connection);
                    let answer = place.run(|| {
                        connection.send_blocking(
                            move |mut manager| async move { invocation.run(&mut manager).await },
                            self.unclaimed(lease),
                        )
                    });
                    self.answered_with(bulkhead, answer, lease)
                }
                Before::Full => After::Full,
                Before::Fallback => After::Fallback,
            };
            match after {
                After::Leased(permit) => return Ok(permit),
                After::Fallback => return self.fallback_blocking(bulkhead, waiting.left(bulkhead)),
                After::Full => {}
            }
            let until = waiting.after_full(bulkhead)?;
            if place == Blocking::Refused {
                return Err(bulkhead.refuse_blocking());
            }
            place.run(|| bulkhead.clock.sleep_until_blocking(Reading::Precise, until));
        }
    }

    /// Gives back lease `lease` of a permit being released: `false` if it is not one of this
    /// fleet's (a permit of an earlier configuration, whose lease lapses by itself).
    pub(super) fn release(&self, lease: u32) -> bool {
        if !self.instance.give_back(lease) {
            return false;
        }
        // A lease of the fleet is free now: the next caller asks (one, not every caller).
        if self.full_until.load(Ordering::Relaxed) != 0 {
            self.full_until.store(1, Ordering::Relaxed);
        }
        true
    }

    /// Before an ask: the fallback's turn, a fleet remembered full, or an ask.
    fn before_ask(&self, bulkhead: &Bulkhead) -> Before<'_> {
        match self.instance.ask(bulkhead.clock.now_nanos()) {
            None => Before::Fallback,
            Some(_) if self.remembered_full(bulkhead) => Before::Full,
            Some(connection) => Before::Ask(connection),
        }
    }

    /// Whether this caller takes the fleet for full without asking: Redis said so a moment ago
    /// and this replica gave back no lease since, or another caller of this replica is asking
    /// now whether it still is.
    fn remembered_full(&self, bulkhead: &Bulkhead) -> bool {
        let until = self.full_until.load(Ordering::Relaxed);
        if until == 0 {
            return false;
        }
        let now = bulkhead.clock.now_nanos();
        if now < until {
            return true;
        }
        // One caller asks for the replica; the others keep to the memory meanwhile.
        let next = deadline_after(now, FULL_REMEMBERED);
        self.full_until
            .compare_exchange(until, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    }

    /// Remembers the fleet as full (`true`: Redis said every lease is held) or not.
    fn remember(&self, bulkhead: &Bulkhead, full: bool) {
        if full {
            let until = deadline_after(bulkhead.clock.now_nanos(), FULL_REMEMBERED);
            self.full_until.fetch_max(until.max(2), Ordering::Relaxed);
        } else {
            self.full_until.store(0, Ordering::Relaxed);
        }
    }

    /// A new lease number and the script call that asks for it.
    fn invocation(&self, connection: &RedisConnection) -> (u32, Invocation) {
        let lease = next_lease();
        let invocation = Invocation {
            key: self.instance.lease_key().to_owned(),
            id: connection.lease_id(lease),
            limit: self.limit,
            ttl_micros: micros(heartbeat::ttl(connection)),
        };
        (lease, invocation)
    }

    /// What undoes a lease its caller no longer waits for (it gave up, or was dropped): a
    /// lease taken, or one the script may have taken before its answer was lost.
    fn unclaimed(
        &self,
        lease: u32,
    ) -> impl Fn(Result<Answer, CommandError>) + Send + Sync + 'static {
        let key = self.instance.lease_key().to_owned();
        let connection = self.instance.connection().cloned();
        move |answer| {
            let taken = answer.map_or(true, |answer| answer.leased);
            if let (true, Some(connection)) = (taken, &connection) {
                connection.release_leases(&key, &[lease]);
            }
        }
    }

    /// What an answer (or its absence) to lease `lease` leaves the caller to do. A lease
    /// comes with a permit of the semaphore, at the fleet limit now that Redis answers: a
    /// replica's leases never fill it, unless calls the fallback admitted are still running
    /// (then the lease goes back, and the caller waits as for a full fleet).
    fn answered_with<'b>(
        &self,
        bulkhead: &'b Bulkhead,
        answer: Result<Answer, CommandError>,
        lease: u32,
    ) -> After<'b> {
        match answer {
            Ok(answer) => {
                self.fleet_held.store(answer.held, Ordering::Relaxed);
                self.remember(bulkhead, answer.held >= self.limit);
                let step = if answer.leased {
                    self.instance.hold(lease);
                    match bulkhead.take_permit(lease) {
                        Some(permit) => After::Leased(permit),
                        None => {
                            self.release(lease);
                            After::Full
                        }
                    }
                } else {
                    After::Full
                };
                // Told last: a subscriber that panics drops the permit, and its lease with it.
                if self.instance.answered() {
                    self.set_local_max(bulkhead, self.limit);
                    bulkhead.deliver(BulkheadEvent::FleetRestored {
                        name: bulkhead.name.clone(),
                    });
                }
                step
            }
            Err(error) => {
                // The script may have run, its answer lost: the lease goes back, or lapses.
                if let Some(connection) = self.instance.connection() {
                    connection.release_leases(self.instance.lease_key(), &[lease]);
                }
                if self.instance.failed(bulkhead.clock.now_nanos()) {
                    bulkhead.deliver(BulkheadEvent::FleetUnavailable {
                        name: bulkhead.name.clone(),
                        fallback: self.instance.fallback(),
                        reason: error.to_string(),
                    });
                }
                After::Fallback
            }
        }
    }

    /// Sets the semaphore's limit to `max`, if this fleet did not already.
    fn set_local_max(&self, bulkhead: &Bulkhead, max: u32) {
        let mut local_max = lock(&self.local_max);
        if *local_max != max {
            *local_max = max;
            bulkhead.set_max(self, max);
        }
    }

    /// A permit the fallback admitted, with a lease number of its own: the heartbeats add it to
    /// Redis once it answers again, so the call counts against the fleet limit until it ends.
    fn adopt<'b>(&self, mut permit: BulkheadPermit<'b>) -> BulkheadPermit<'b> {
        let lease = next_lease();
        self.instance.hold(lease);
        permit.start = lease;
        permit
    }

    /// Whether the fallback admits by the semaphore (refusing otherwise), its limit set for it:
    /// the local share, or the whole fleet limit when it admits every call.
    fn fallback_admits(&self, bulkhead: &Bulkhead) -> bool {
        self.fallback_calls.fetch_add(1, Ordering::Relaxed);
        let max = match self.instance.fallback() {
            FleetFallback::Refuse => return false,
            FleetFallback::Admit => self.limit,
            FleetFallback::LocalShare => (self.limit / self.instance.alive()).max(1),
        };
        self.set_local_max(bulkhead, max);
        true
    }

    async fn fallback_async<'b>(
        &self,
        bulkhead: &'b Bulkhead,
        wait: Wait,
    ) -> Result<BulkheadPermit<'b>, Rejected> {
        if self.fallback_admits(bulkhead) {
            Ok(self.adopt(bulkhead.acquire_local(wait).await?))
        } else {
            Err(bulkhead.reject(Duration::ZERO))
        }
    }

    fn fallback_blocking<'b>(
        &self,
        bulkhead: &'b Bulkhead,
        wait: Wait,
    ) -> Result<BulkheadPermit<'b>, Rejected> {
        if self.fallback_admits(bulkhead) {
            Ok(self.adopt(bulkhead.acquire_blocking_local(wait)?))
        } else {
            Err(bulkhead.reject(Duration::ZERO))
        }
    }
}

/// One call of the lease script, owned so that it runs on the connection's thread.
struct Invocation {
    key: String,
    id: String,
    limit: u32,
    ttl_micros: u64,
}

impl Invocation {
    async fn run(self, manager: &mut redis::aio::ConnectionManager) -> redis::RedisResult<Answer> {
        let (leased, held): (i64, i64) = LEASE
            .key(&self.key)
            .arg(self.limit)
            .arg(self.ttl_micros)
            .arg(&self.id)
            .invoke_async(manager)
            .await?;
        Ok(Answer {
            leased: leased == 1,
            held: u32::try_from(held).unwrap_or(u32::MAX),
        })
    }
}

/// When to ask again after a "full" at `now`: after `pause` with jitter (then doubled, up to
/// [`LONGEST_PAUSE`]), and at the latest at the deadline; `None` once the deadline has passed.
fn pause_until(now: u64, deadline: Option<u64>, pause: &mut Duration) -> Option<u64> {
    if deadline.is_some_and(|deadline| now >= deadline) {
        return None;
    }
    // Half the pause, plus up to as much again at random.
    let jittered = pause.mul_f64(0.5 + fastrand::f64() * 0.5);
    *pause = (*pause * 2).min(LONGEST_PAUSE);
    let until = deadline_after(now, jittered);
    Some(deadline.map_or(until, |deadline| until.min(deadline)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_with_jitter_up_to_the_longest_and_end_at_the_deadline() {
        let ms = |n: u64| n * 1_000_000;
        let mut pause = FIRST_PAUSE;
        let first = pause_until(0, None, &mut pause).unwrap();
        assert!((ms(1)..=ms(2)).contains(&first), "{first}");
        for _ in 0..10 {
            pause_until(0, None, &mut pause);
        }
        assert_eq!(pause, LONGEST_PAUSE);
        // The last ask is at the deadline, then none.
        assert_eq!(pause_until(ms(10), Some(ms(12)), &mut pause), Some(ms(12)));
        assert_eq!(pause_until(ms(12), Some(ms(12)), &mut pause), None);
        assert_eq!(
            pause_until(0, Some(0), &mut pause),
            None,
            "a caller that may not wait"
        );
    }
}
