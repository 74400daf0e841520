//! A rate limiter whose timeline is in Redis (feature `redis`): one script call per admission,
//! refusals remembered until a caller could be admitted again, and a fallback while Redis does
//! not answer. See [`crate::fleet`] for what it means across the fleet.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use redis::Script;

use super::{params_for, RateLimiter, RateLimiterConfig, RateLimiterEvent};
use crate::blocking::Blocking;
use crate::clock::{deadline_after, Reading};
use crate::error::Rejected;
use crate::fleet::connection::CommandError;
use crate::fleet::instance::{micros, Instance};
use crate::fleet::{lock, FleetFallback, RedisConnection};
use crate::name::Name;

static ADMIT: once_cell::sync::Lazy<Script> =
    once_cell::sync::Lazy::new(|| Script::new(include_str!("../fleet/scripts/rate.lua")));

/// The Redis side of a fleet rate limiter, rebuilt when the limiter is reconfigured.
pub(super) struct Fleet {
    instance: Instance,
    key: String,
    limit: u32,
    period_micros: u64,
    timeout_micros: u64,
    /// Permissions asked for per round trip.
    batch: u32,
    /// Permissions of a batch not used yet, and the reading of the limiter's clock at which
    /// their cycle ends at the earliest.
    pool: Mutex<Pool>,
    /// Refuse without asking Redis until this reading of the limiter's clock (ns); 0: ask.
    refused_until: AtomicU64,
    /// What `available_permissions` reports: the permissions left in the cycle at the last
    /// answer (negative: reserved ahead).
    left: AtomicI64,
    /// The configuration, whose limit the local share divides.
    config: RateLimiterConfig,
    /// The replicas the limiter's own timeline (idle while Redis answers) is set up for: the
    /// local share is that timeline with the fleet limit divided among them.
    share_of: AtomicU32,
    /// Calls decided without Redis.
    pub(super) fallback_calls: AtomicU64,
    pub(super) permitted: AtomicU64,
}

/// The permissions of a batch this replica has not used yet.
#[derive(Default)]
struct Pool {
    left: u32,
    /// The clock reading (ns) past which they are void: the request's sending time plus what
    /// Redis said was left of their cycle, so never after the cycle's real end.
    until: u64,
}

/// How a call starts ([`Fleet::begin`]).
enum Begin<'a> {
    Decided(Result<(), Rejected>),
    Fallback,
    Ask {
        connection: &'a RedisConnection,
        sent_at: u64,
    },
}

/// How it goes on after Redis answered or did not ([`Fleet::end`]).
enum End {
    Decided(Result<(), Rejected>),
    Fallback,
    /// A permission reserved in a later cycle: wait this long for it.
    WaitFor(Duration),
}

/// What the script said, and the permissions it left in the cycle.
struct Answer {
    kind: AnswerKind,
    left: i64,
}

enum AnswerKind {
    /// `taken` permissions of the current cycle, which ends in `cycle_left`.
    Granted {
        taken: u32,
        cycle_left: Duration,
    },
    Reserved {
        wait: Duration,
    },
    Refused {
        wait: Duration,
    },
}

impl Fleet {
    /// The Redis side of `name` under `config`, whose backend is Redis (see
    /// [`Instance::new`]). Its counters go on from `previous`'s; on the same Redis, so do its
    /// place among the replicas and its view of whether Redis answers (a reconfiguration while
    /// Redis is away keeps to the fallback rather than asking again at once).
    pub(super) fn new(
        name: &Name,
        config: &RateLimiterConfig,
        previous: Option<&Fleet>,
    ) -> Option<Fleet> {
        let instance = Instance::new(
            "rate_limiter",
            name,
            &config.backend(),
            false,
            previous.map(|p| &p.instance),
        )?;
        let fleet = Fleet {
            key: instance.key("next"),
            limit: config.limit_for_period(),
            period_micros: micros(config.limit_refresh_period()).max(1),
            timeout_micros: micros(config.timeout_duration()),
            batch: config.backend().batch_size().unwrap_or(1).max(1),
            pool: Mutex::new(Pool::default()),
            refused_until: AtomicU64::new(0),
            left: AtomicI64::new(i64::from(config.limit_for_period())),
            // The limiter's timeline starts with the whole limit: the share of one replica.
            config: config.clone(),
            share_of: AtomicU32::new(1),
            instance,
            // A counter never goes back, whatever the reconfiguration.
            fallback_calls: AtomicU64::new(previous.map_or(0, |previous| {
                previous.fallback_calls.load(Ordering::Relaxed)
            })),
            permitted: AtomicU64::new(
                previous.map_or(0, |previous| previous.permitted.load(Ordering::Relaxed)),
            ),
        };
        Some(fleet)
    }

    /// The permissions left in the cycle when Redis last answered.
    pub(super) fn available(&self) -> i64 {
        self.left.load(Ordering::Relaxed)
    }

    /// A refusal remembered from Redis, if one still holds: how long until a caller could be
    /// admitted (its `retry_after`).
    fn remembered(&self, limiter: &RateLimiter) -> Option<u64> {
        let until = self.refused_until.load(Ordering::Relaxed);
        if until == 0 {
            return None;
        }
        let now = limiter.clock.now_nanos();
        (now < until).then(|| until - now + self.timeout_micros.saturating_mul(1_000))
    }

    /// The first step of a guarded call: a refusal remembered, or a permission of a batch,
    /// else "go ask Redis" (`Wait`).
    pub(super) fn first_step(&self, limiter: &RateLimiter) -> super::Admission {
        match self.decided_here(limiter) {
            Some(Ok(())) => super::Admission::Granted,
            Some(Err(refused)) => super::Admission::Refused(refused),
            None => super::Admission::Wait,
        }
    }

    /// A call this replica decides without Redis: a refusal remembered, or a permission of
    /// its batch (granted, counted).
    fn decided_here(&self, limiter: &RateLimiter) -> Option<Result<(), Rejected>> {
        if let Some(retry_after) = self.remembered(limiter) {
            return Some(Err(limiter.refuse(retry_after)));
        }
        self.take_pooled(limiter).then_some(Ok(()))
    }

    /// What a call does before any round trip: decided here (a refusal remembered, a
    /// permission of a batch), decided by the fallback, or asked of Redis.
    fn begin(&self, limiter: &RateLimiter) -> Begin<'_> {
        if let Some(decided) = self.decided_here(limiter) {
            return Begin::Decided(decided);
        }
        let sent_at = limiter.clock.now_nanos();
        match self.instance.ask(sent_at) {
            Some(connection) => Begin::Ask {
                connection,
                sent_at,
            },
            None => Begin::Fallback,
        }
    }

    /// What Redis's answer (or its absence) leaves the call to do.
    fn end(
        &self,
        limiter: &RateLimiter,
        answer: Result<Answer, CommandError>,
        sent_at: u64,
    ) -> End {
        match answer {
            Ok(answer) => {
                self.answered(limiter);
                match self.decide(limiter, answer, sent_at) {
                    Ok(Some(wait)) => End::WaitFor(wait),
                    Ok(None) => End::Decided(Ok(())),
                    Err(refused) => End::Decided(Err(refused)),
                }
            }
            Err(error) => {
                self.failed(limiter, &error.to_string());
                End::Fallback
            }
        }
    }

    /// Takes a permission, asking Redis, waiting for a reserved one on the limiter's clock.
    pub(super) async fn acquire(
        &self,
        limiter: &RateLimiter,
        may_wait: bool,
    ) -> Result<(), Rejected> {
        let (connection, sent_at) = match self.begin(limiter) {
            Begin::Decided(decided) => return decided,
            Begin::Fallback => return self.fallback_async(limiter).await,
            Begin::Ask {
                connection,
                sent_at,
            } => (connection, sent_at),
        };
        let invocation = self.invocation(may_wait);
        let answer = connection
            .send(
                move |mut manager| async move { invocation.run(&mut manager).await },
                |_| {},
            )
            .answer()
            .await;
        match self.end(limiter, answer, sent_at) {
            End::Decided(decided) => decided,
            End::Fallback => self.fallback_async(limiter).await,
            End::WaitFor(wait) => {
                let _waiting = limiter.count_waiting();
                let now = limiter.clock.read(Reading::Precise);
                limiter
                    .clock
                    .sleep_until(Reading::Precise, deadline_after(now, wait))
                    .await;
                self.granted_after(limiter, wait);
                Ok(())
            }
        }
    }

    /// [`acquire`](Self::acquire), blocking the thread for the round trip and the wait.
    pub(super) fn acquire_blocking(
        &self,
        limiter: &RateLimiter,
        may_wait: bool,
    ) -> Result<(), Rejected> {
        let (connection, sent_at) = match self.begin(limiter) {
            Begin::Decided(decided) => return decided,
            Begin::Fallback => return self.fallback_blocking(limiter),
            Begin::Ask {
                connection,
                sent_at,
            } => (connection, sent_at),
        };
        let place = Blocking::here();
        if place == Blocking::Refused {
            return Err(limiter.refuse_blocking(0));
        }
        let invocation = self.invocation(may_wait);
        let answer = place.run(|| {
            connection.send_blocking(
                move |mut manager| async move { invocation.run(&mut manager).await },
                |_| {},
            )
        });
        match self.end(limiter, answer, sent_at) {
            End::Decided(decided) => decided,
            End::Fallback => self.fallback_blocking(limiter),
            End::WaitFor(wait) => {
                // Blocking was allowed for the round trip, so it is for the wait.
                let _waiting = limiter.count_waiting();
                let now = limiter.clock.read(Reading::Precise);
                place.run(|| {
                    limiter
                        .clock
                        .sleep_until_blocking(Reading::Precise, deadline_after(now, wait));
                });
                self.granted_after(limiter, wait);
                Ok(())
            }
        }
    }

    /// A permission of the batch taken last, if one is left in its cycle (granted, counted).
    fn take_pooled(&self, limiter: &RateLimiter) -> bool {
        if self.batch == 1 {
            return false;
        }
        let mut pool = lock(&self.pool);
        if pool.left == 0 || limiter.clock.now_nanos() >= pool.until {
            return false;
        }
        pool.left -= 1;
        drop(pool);
        self.granted_after(limiter, Duration::ZERO);
        true
    }

    fn invocation(&self, may_wait: bool) -> Invocation {
        Invocation {
            batch: self.batch,
            key: self.key.clone(),
            limit: self.limit,
            period_micros: self.period_micros,
            timeout_micros: if may_wait { self.timeout_micros } else { 0 },
        }
    }

    /// What Redis answered, for the caller: granted (`None`), a wait for a reserved
    /// permission, or a refusal (remembered).
    fn decide(
        &self,
        limiter: &RateLimiter,
        answer: Answer,
        sent_at: u64,
    ) -> Result<Option<Duration>, Rejected> {
        self.left.store(answer.left, Ordering::Relaxed);
        match answer.kind {
            AnswerKind::Granted { taken, cycle_left } => {
                if taken > 1 {
                    // Redis read its clock after `sent_at`: the cycle ends no sooner than this.
                    let until = deadline_after(sent_at, cycle_left);
                    let mut pool = lock(&self.pool);
                    if pool.left == 0 || limiter.clock.now_nanos() >= pool.until {
                        *pool = Pool {
                            left: taken - 1,
                            until,
                        };
                    } else {
                        // A pool still valid now is of this same cycle.
                        pool.left += taken - 1;
                        pool.until = pool.until.min(until);
                    }
                }
                self.permitted.fetch_add(1, Ordering::Relaxed);
                limiter.granted(Duration::ZERO);
                Ok(None)
            }
            AnswerKind::Reserved { wait } => Ok(Some(wait)),
            AnswerKind::Refused { wait } => {
                // No caller is admitted before the earliest free permission is within its
                // timeout: every replica's later takes only push it further.
                let refused_for = wait.saturating_sub(Duration::from_micros(self.timeout_micros));
                let until = deadline_after(limiter.clock.now_nanos(), refused_for).max(1);
                self.refused_until.fetch_max(until, Ordering::Relaxed);
                Err(limiter.refuse(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX)))
            }
        }
    }

    fn granted_after(&self, limiter: &RateLimiter, waited: Duration) {
        self.permitted.fetch_add(1, Ordering::Relaxed);
        limiter.granted(waited);
    }

    fn answered(&self, limiter: &RateLimiter) {
        if self.instance.answered() {
            limiter.deliver(RateLimiterEvent::FleetRestored {
                name: limiter.name.clone(),
            });
        }
    }

    fn failed(&self, limiter: &RateLimiter, reason: &str) {
        if self.instance.failed(limiter.clock.now_nanos()) {
            limiter.deliver(RateLimiterEvent::FleetUnavailable {
                name: limiter.name.clone(),
                fallback: self.instance.fallback(),
                reason: reason.to_owned(),
            });
        }
    }

    /// The fallback's decision, when it makes one at once: admit or refuse every call. For
    /// the local share, `None`: the limiter's own timeline decides, set to the fleet limit
    /// divided among the replicas seen alive last.
    fn fallback_now(&self, limiter: &RateLimiter) -> Option<Result<(), Rejected>> {
        self.fallback_calls.fetch_add(1, Ordering::Relaxed);
        match self.instance.fallback() {
            FleetFallback::Admit => {
                self.granted_after(limiter, Duration::ZERO);
                Some(Ok(()))
            }
            FleetFallback::Refuse => Some(Err(limiter.refuse(self.retry_interval_nanos()))),
            FleetFallback::LocalShare => {
                let alive = self.instance.alive();
                if self.share_of.swap(alive, Ordering::Relaxed) != alive {
                    let share = self.config.local_share(alive);
                    limiter
                        .timeline
                        .reconfigure(params_for(&share, &limiter.clock));
                }
                None
            }
        }
    }

    async fn fallback_async(&self, limiter: &RateLimiter) -> Result<(), Rejected> {
        match self.fallback_now(limiter) {
            Some(decided) => decided,
            None => limiter.acquire_local().await,
        }
    }

    fn fallback_blocking(&self, limiter: &RateLimiter) -> Result<(), Rejected> {
        self.fallback_now(limiter)
            .unwrap_or_else(|| limiter.acquire_blocking_local())
    }

    fn retry_interval_nanos(&self) -> u64 {
        u64::try_from(self.instance.retry_interval().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// One call of the admission script, owned so that it runs on the connection's thread.
struct Invocation {
    key: String,
    batch: u32,
    limit: u32,
    period_micros: u64,
    timeout_micros: u64,
}

impl Invocation {
    async fn run(self, manager: &mut redis::aio::ConnectionManager) -> redis::RedisResult<Answer> {
        let (outcome, wait, left, taken, cycle_left): (i64, i64, i64, i64, i64) = ADMIT
            .key(&self.key)
            .arg(self.limit)
            .arg(self.period_micros)
            .arg(self.timeout_micros)
            .arg(self.batch)
            .invoke_async(manager)
            .await?;
        let micros = |m: i64| Duration::from_micros(u64::try_from(m).unwrap_or(0));
        let wait = micros(wait);
        let kind = match outcome {
            1 => AnswerKind::Granted {
                taken: u32::try_from(taken).unwrap_or(1).max(1),
                cycle_left: micros(cycle_left),
            },
            2 => AnswerKind::Reserved { wait },
            _ => AnswerKind::Refused { wait },
        };
        Ok(Answer { kind, left })
    }
}
