//! The settings of each aspect kind as a document writes them (Resilience4j's Spring keys in
//! snake_case), and how each becomes a configuration through its builder, so that a document
//! is validated by exactly the rules code is.

use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer};

use super::choices::{
    AlgorithmSetting, BackendSetting, FallbackSetting, StateSetting, WindowTypeSetting,
};
use super::duration::Dur;
use super::keys::{settings, SetKeys};
use crate::bulkhead::{AdaptiveLimit, BulkheadConfig, LimitAlgorithm};
use crate::circuit_breaker::CircuitBreakerConfig;
use crate::error::ConfigError;
use crate::fault::FaultConfig;
use crate::fleet::Backend;
use crate::hedge::HedgeConfig;
use crate::rate_limiter::RateLimiterConfig;
use crate::retry::{RetryBudget, RetryConfig};
use crate::time_limiter::TimeLimiterConfig;

/// Resilience4j's default `exponentialBackoffMultiplier` (its `IntervalFunction`'s).
pub(crate) const DEFAULT_BACKOFF_MULTIPLIER: f64 = 1.5;
/// Resilience4j's default `randomizedWaitFactor`.
pub(crate) const DEFAULT_RANDOMIZED_WAIT_FACTOR: f64 = 0.5;

/// A table of one kind's settings: how it becomes a configuration, and which of its keys a
/// refusal of the builder's `field` is about.
pub(crate) trait Settings: SetKeys + Sized {
    /// The configuration these settings build.
    type Config;

    /// The configuration, validated by its builder.
    fn build(&self) -> Result<Self::Config, ConfigError>;

    /// The keys that set the builder's `field`, most specific first, where they are not
    /// the key of the same name (`base` is `base_config` in every table).
    fn keys_of(field: &'static str) -> &'static [&'static str] {
        let _ = field;
        &[]
    }

    /// The key of this table a refusal of `field` points at: the first of its keys that is
    /// set here, else none (the value came from a base or the default).
    fn blame(&self, field: &'static str) -> Option<&'static str> {
        blame_key(self, field)
    }
}

/// [`Settings::blame`] for a table without nested tables.
fn blame_key<S: Settings>(settings: &S, field: &'static str) -> Option<&'static str> {
    let set = settings.set_keys();
    let field_key: &[&'static str] = match field {
        "base" => &["base_config"],
        _ => &[],
    };
    S::keys_of(field)
        .iter()
        .chain(field_key)
        .copied()
        .chain(std::iter::once(field))
        .find(|k| set.contains(k))
}

/// A table's `base_config`: Resilience4j's `default` is the default configuration, which every
/// configuration without a base rests on already.
fn base_of(base_config: &Option<String>) -> Option<&str> {
    base_config.as_deref().filter(|b| *b != "default")
}

/// A setting that takes effect only with its `enable_` switch on, refused without it rather
/// than ignored as Resilience4j does.
fn needs_switch(
    field: &'static str,
    key: &str,
    switch: &str,
    set: bool,
    enabled: Option<bool>,
) -> Result<(), ConfigError> {
    if set && enabled != Some(true) {
        return Err(ConfigError::new(
            field,
            format!(
                "`{key}` takes effect only with `{switch} = true` in the same table (the \
                 settings of one backoff are inherited together); add it, or remove `{key}`"
            ),
        ));
    }
    Ok(())
}

settings! {
    /// `[bulkhead.configs.*]` and `[bulkhead.instances.*]`.
    pub(crate) struct BulkheadSettings ("bulkhead settings") {
        base_config: String,
        max_concurrent_calls: u32,
        max_wait_duration: Dur,
        fair_call_handling_enabled: bool,
        adaptive: AdaptiveTable,
        backend: BackendSetting,
        redis_fallback: FallbackSetting,
    }
    aliases { "fair_call_handling" => "fair_call_handling_enabled" }
}

settings! {
    /// `[bulkhead.instances.*.adaptive]`: an adaptive limit ([`AdaptiveLimit`]).
    pub(crate) struct AdaptiveTable ("adaptive limit settings") {
        algorithm: AlgorithmSetting,
        min_limit: u32,
        max_limit: u32,
        initial_limit: u32,
        smoothing: f64,
        rtt_tolerance: f64,
        queue_size: u32,
        long_window: u32,
        probe_multiplier: u32,
        backoff_ratio: f64,
        timeout: Dur,
    }
}

impl AdaptiveTable {
    /// The adaptive limit these settings write (the knee unless `algorithm` says otherwise);
    /// checked with the rest of the bulkhead's configuration.
    fn limit(&self) -> AdaptiveLimit {
        let algorithm = self
            .algorithm
            .map_or(LimitAlgorithm::Knee, |AlgorithmSetting(a)| a);
        let mut limit = AdaptiveLimit::new(algorithm);
        if let Some(n) = self.min_limit {
            limit = limit.min_limit(n);
        }
        if let Some(n) = self.max_limit {
            limit = limit.max_limit(n);
        }
        if let Some(n) = self.initial_limit {
            limit = limit.initial_limit(n);
        }
        if let Some(x) = self.smoothing {
            limit = limit.smoothing(x);
        }
        if let Some(x) = self.rtt_tolerance {
            limit = limit.rtt_tolerance(x);
        }
        if let Some(n) = self.queue_size {
            limit = limit.queue_size(n);
        }
        if let Some(n) = self.long_window {
            limit = limit.long_window(n);
        }
        if let Some(n) = self.probe_multiplier {
            limit = limit.probe_multiplier(n);
        }
        if let Some(x) = self.backoff_ratio {
            limit = limit.backoff_ratio(x);
        }
        if let Some(Dur(d)) = self.timeout {
            limit = limit.timeout(d);
        }
        limit
    }
}

impl Settings for BulkheadSettings {
    type Config = BulkheadConfig;

    fn build(&self) -> Result<BulkheadConfig, ConfigError> {
        let mut b = BulkheadConfig::builder();
        if let Some(base) = base_of(&self.base_config) {
            b = b.base(base);
        }
        if let Some(n) = self.max_concurrent_calls {
            b = b.max_concurrent_calls(n);
        }
        if let Some(Dur(d)) = self.max_wait_duration {
            b = b.max_wait_duration(d);
        }
        if let Some(fair) = self.fair_call_handling_enabled {
            b = b.fair_call_handling(fair);
        }
        if let Some(adaptive) = &self.adaptive {
            b = b.adaptive(adaptive.limit());
        }
        if let Some(backend) = backend_of(self.backend, self.redis_fallback, None)? {
            b = b.backend(backend);
        }
        b.build()
    }

    fn keys_of(field: &'static str) -> &'static [&'static str] {
        match field {
            "fair_call_handling" => &["fair_call_handling_enabled"],
            // A fleet limit with an adaptive one: the adaptive table is what to remove.
            "backend" => &["backend", "adaptive"],
            _ => &[],
        }
    }

    /// A refusal of a setting of the `adaptive` table points at its key in that table (the
    /// field is the path, `adaptive.min_limit`), or at the table when the key is not set.
    fn blame(&self, field: &'static str) -> Option<&'static str> {
        match (field.strip_prefix("adaptive."), &self.adaptive) {
            (Some(key), Some(table)) if table.set_keys().contains(&key) => Some(field),
            (Some(_), Some(_)) => Some("adaptive"),
            _ => blame_key(self, field),
        }
    }
}

settings! {
    /// `[rate_limiter.configs.*]` and `[rate_limiter.instances.*]`.
    pub(crate) struct RateLimiterSettings ("rate limiter settings") {
        base_config: String,
        limit_for_period: u32,
        limit_refresh_period: Dur,
        timeout_duration: Dur,
        backend: BackendSetting,
        redis_fallback: FallbackSetting,
        redis_batch: u32,
    }
}

/// The backend `backend`, `redis_fallback` and `redis_batch` write, if they write one.
fn backend_of(
    backend: Option<BackendSetting>,
    fallback: Option<FallbackSetting>,
    batch: Option<u32>,
) -> Result<Option<Backend>, ConfigError> {
    let redis_only = |key: &'static str| {
        ConfigError::new(
            key,
            format!(
                "`{key}` takes effect only with `backend = \"redis\"` in the same table; add \
                 it, or remove `{key}`"
            ),
        )
    };
    match backend {
        None | Some(BackendSetting::Local) if fallback.is_some() => {
            Err(redis_only("redis_fallback"))
        }
        None | Some(BackendSetting::Local) if batch.is_some() => Err(redis_only("redis_batch")),
        None => Ok(None),
        Some(BackendSetting::Local) => Ok(Some(Backend::local())),
        Some(BackendSetting::Redis) => {
            #[cfg(feature = "redis")]
            {
                let fallback = fallback.map_or(crate::fleet::FleetFallback::default(), |f| f.0);
                Ok(Some(
                    Backend::redis()
                        .fallback(fallback)
                        .batch(batch.unwrap_or(1)),
                ))
            }
            #[cfg(not(feature = "redis"))]
            {
                let _ = (fallback, batch);
                Err(ConfigError::new(
                    "backend",
                    "`redis` needs the `redis` feature of resilience-runtime: enable it, or \
                     write `backend = \"local\"`",
                ))
            }
        }
    }
}

settings! {
    /// `[redis]`: the connection of the fleet instances that name no other
    /// ([`RedisConnection`](crate::fleet::RedisConnection)).
    pub(crate) struct RedisSettings ("redis settings") {
        url: String,
        command_timeout: Dur,
        heartbeat_interval: Dur,
        key_prefix: String,
    }
}

#[cfg(feature = "redis")]
impl RedisSettings {
    /// The connection these settings describe: `current` when it is the same, else a new one
    /// (so a document applied again keeps its instances' connection).
    pub(crate) fn connection(
        &self,
        current: Option<crate::fleet::RedisConnection>,
    ) -> Result<crate::fleet::RedisConnection, ConfigError> {
        use crate::fleet::RedisConnection;
        let url = match &self.url {
            Some(url) => url.clone(),
            None => std::env::var(RedisConnection::URL_VARIABLE).map_err(|_| {
                ConfigError::new(
                    "url",
                    format!(
                        "`[redis]` needs a `url` (or the environment's {})",
                        RedisConnection::URL_VARIABLE
                    ),
                )
            })?,
        };
        let command_timeout = self
            .command_timeout
            .map_or(RedisConnection::DEFAULT_COMMAND_TIMEOUT, |Dur(d)| d);
        let heartbeat_interval = self
            .heartbeat_interval
            .map_or(RedisConnection::DEFAULT_HEARTBEAT_INTERVAL, |Dur(d)| d);
        let key_prefix = self
            .key_prefix
            .clone()
            .unwrap_or_else(|| RedisConnection::DEFAULT_KEY_PREFIX.to_owned());
        if let Some(current) = current.filter(|c| {
            c.url() == url
                && c.command_timeout() == command_timeout
                && c.heartbeat_interval() == heartbeat_interval
                && c.key_prefix() == key_prefix
        }) {
            return Ok(current);
        }
        RedisConnection::builder(url)
            .command_timeout(command_timeout)
            .heartbeat_interval(heartbeat_interval)
            .key_prefix(key_prefix)
            .build()
    }
}

impl Settings for RateLimiterSettings {
    type Config = RateLimiterConfig;

    fn build(&self) -> Result<RateLimiterConfig, ConfigError> {
        let mut b = RateLimiterConfig::builder();
        if let Some(base) = base_of(&self.base_config) {
            b = b.base(base);
        }
        if let Some(n) = self.limit_for_period {
            b = b.limit_for_period(n);
        }
        if let Some(Dur(d)) = self.limit_refresh_period {
            b = b.limit_refresh_period(d);
        }
        if let Some(Dur(d)) = self.timeout_duration {
            b = b.timeout_duration(d);
        }
        if let Some(backend) = backend_of(self.backend, self.redis_fallback, self.redis_batch)? {
            b = b.backend(backend);
        }
        b.build()
    }

    fn keys_of(field: &'static str) -> &'static [&'static str] {
        match field {
            // A limit is refused against its period: the limit is named first.
            "limit_for_period" => &["limit_for_period", "limit_refresh_period"],
            // A default period too short for Redis: the backend that asks for more.
            "limit_refresh_period" => &["limit_refresh_period", "backend"],
            "backend" => &["redis_batch", "backend"],
            _ => &[],
        }
    }
}

settings! {
    /// `[retry.configs.*]` and `[retry.instances.*]`.
    pub(crate) struct RetrySettings ("retry settings") {
        base_config: String,
        max_attempts: u32,
        wait_duration: Dur,
        enable_exponential_backoff: bool,
        exponential_backoff_multiplier: f64,
        exponential_max_wait_duration: Dur,
        enable_randomized_wait: bool,
        randomized_wait_factor: f64,
        retry_on_rejection: bool,
        max_retry_after: Dur,
        budget_ratio: f64,
        budget_min_retries_per_second: u32,
        budget_window: Dur,
    }
}

impl Settings for RetrySettings {
    type Config = RetryConfig;

    fn build(&self) -> Result<RetryConfig, ConfigError> {
        let mut b = RetryConfig::builder();
        let base = base_of(&self.base_config);
        if let Some(base) = base {
            b = b.base(base);
        }
        if let Some(n) = self.max_attempts {
            b = b.max_attempts(n);
        }
        if let Some(Dur(d)) = self.wait_duration {
            b = b.wait_duration(d);
        }
        let backoff = self.enable_exponential_backoff;
        needs_switch(
            "exponential_backoff",
            "exponential_backoff_multiplier",
            "enable_exponential_backoff",
            self.exponential_backoff_multiplier.is_some(),
            backoff,
        )?;
        needs_switch(
            "exponential_backoff",
            "exponential_max_wait_duration",
            "enable_exponential_backoff",
            self.exponential_max_wait_duration.is_some(),
            backoff,
        )?;
        match backoff {
            Some(true) => {
                let multiplier = self
                    .exponential_backoff_multiplier
                    .unwrap_or(DEFAULT_BACKOFF_MULTIPLIER);
                let max = self
                    .exponential_max_wait_duration
                    .map_or(Duration::MAX, |Dur(d)| d);
                b = b.exponential_backoff(multiplier, max);
            }
            // Off over a base that may have one: waits that never grow.
            Some(false) if base.is_some() => b = b.exponential_backoff(1.0, Duration::MAX),
            Some(false) | None => {}
        }
        needs_switch(
            "randomized_wait_factor",
            "randomized_wait_factor",
            "enable_randomized_wait",
            self.randomized_wait_factor.is_some(),
            self.enable_randomized_wait,
        )?;
        match self.enable_randomized_wait {
            Some(true) => {
                b = b.randomized_wait_factor(
                    self.randomized_wait_factor
                        .unwrap_or(DEFAULT_RANDOMIZED_WAIT_FACTOR),
                );
            }
            Some(false) => b = b.randomized_wait_factor(0.0),
            None => {}
        }
        if let Some(retry) = self.retry_on_rejection {
            b = b.retry_on_rejection(retry);
        }
        if let Some(wait) = self.max_retry_after {
            b = b.max_retry_after(wait.0);
        }
        if let Some(budget) = budget_of(
            self.budget_ratio,
            (
                "budget_min_retries_per_second",
                self.budget_min_retries_per_second,
            ),
            self.budget_window,
            &self.set_keys(),
            "retries allowed per first attempt",
        )? {
            b = b.budget(budget);
        }
        b.build()
    }

    fn keys_of(field: &'static str) -> &'static [&'static str] {
        match field {
            "budget.ratio" => &["budget_ratio"],
            "budget.window" => &["budget_window"],
            "exponential_backoff" => &[
                "exponential_backoff_multiplier",
                "exponential_max_wait_duration",
                "enable_exponential_backoff",
            ],
            "randomized_wait_factor" => &["randomized_wait_factor", "enable_randomized_wait"],
            _ => &[],
        }
    }
}

settings! {
    /// `[circuit_breaker.configs.*]` and `[circuit_breaker.instances.*]`.
    pub(crate) struct CircuitBreakerSettings ("circuit breaker settings") {
        base_config: String,
        failure_rate_threshold: f32,
        slow_call_rate_threshold: f32,
        slow_call_duration_threshold: Dur,
        sliding_window_type: WindowTypeSetting,
        sliding_window_size: u32,
        minimum_number_of_calls: u32,
        wait_duration_in_open_state: Dur,
        enable_exponential_backoff: bool,
        exponential_backoff_multiplier: f64,
        exponential_max_wait_duration_in_open_state: Dur,
        automatic_transition_from_open_to_half_open_enabled: bool,
        permitted_number_of_calls_in_half_open_state: u32,
        max_wait_duration_in_half_open_state: Dur,
        record_rejections: bool,
        record_call_durations: bool,
        initial_state: StateSetting,
    }
    aliases {
        "automatic_transition_from_open_to_half_open" => "automatic_transition_from_open_to_half_open_enabled",
        "permitted_calls_in_half_open_state" => "permitted_number_of_calls_in_half_open_state",
    }
}

impl Settings for CircuitBreakerSettings {
    type Config = CircuitBreakerConfig;

    fn build(&self) -> Result<CircuitBreakerConfig, ConfigError> {
        let mut b = CircuitBreakerConfig::builder();
        let base = base_of(&self.base_config);
        if let Some(base) = base {
            b = b.base(base);
        }
        if let Some(p) = self.failure_rate_threshold {
            b = b.failure_rate_threshold(p);
        }
        if let Some(p) = self.slow_call_rate_threshold {
            b = b.slow_call_rate_threshold(p);
        }
        if let Some(Dur(d)) = self.slow_call_duration_threshold {
            b = b.slow_call_duration_threshold(d);
        }
        if let Some(WindowTypeSetting(kind)) = self.sliding_window_type {
            b = b.sliding_window_type(kind);
        }
        if let Some(size) = self.sliding_window_size {
            b = b.sliding_window_size(size);
        }
        if let Some(n) = self.minimum_number_of_calls {
            b = b.minimum_number_of_calls(n);
        }
        if let Some(Dur(d)) = self.wait_duration_in_open_state {
            b = b.wait_duration_in_open_state(d);
        }
        let backoff = self.enable_exponential_backoff;
        needs_switch(
            "open_state_backoff",
            "exponential_backoff_multiplier",
            "enable_exponential_backoff",
            self.exponential_backoff_multiplier.is_some(),
            backoff,
        )?;
        needs_switch(
            "open_state_backoff",
            "exponential_max_wait_duration_in_open_state",
            "enable_exponential_backoff",
            self.exponential_max_wait_duration_in_open_state.is_some(),
            backoff,
        )?;
        match backoff {
            Some(true) => {
                let multiplier = self
                    .exponential_backoff_multiplier
                    .unwrap_or(DEFAULT_BACKOFF_MULTIPLIER);
                let max = self
                    .exponential_max_wait_duration_in_open_state
                    .map_or(Duration::MAX, |Dur(d)| d);
                b = b.open_state_backoff(multiplier, max);
            }
            Some(false) if base.is_some() => b = b.open_state_backoff(1.0, Duration::MAX),
            Some(false) | None => {}
        }
        if let Some(on) = self.automatic_transition_from_open_to_half_open_enabled {
            b = b.automatic_transition_from_open_to_half_open(on);
        }
        if let Some(n) = self.permitted_number_of_calls_in_half_open_state {
            b = b.permitted_calls_in_half_open_state(n);
        }
        if let Some(Dur(d)) = self.max_wait_duration_in_half_open_state {
            b = b.max_wait_duration_in_half_open_state(d);
        }
        if let Some(record) = self.record_rejections {
            b = b.record_rejections(record);
        }
        if let Some(record) = self.record_call_durations {
            b = b.record_call_durations(record);
        }
        if let Some(StateSetting(state)) = self.initial_state {
            b = b.initial_state(state);
        }
        b.build()
    }

    fn keys_of(field: &'static str) -> &'static [&'static str] {
        match field {
            "sliding_window" => &["sliding_window_size", "sliding_window_type"],
            "open_state_backoff" => &[
                "exponential_backoff_multiplier",
                "exponential_max_wait_duration_in_open_state",
                "enable_exponential_backoff",
            ],
            "permitted_calls_in_half_open_state" => {
                &["permitted_number_of_calls_in_half_open_state"]
            }
            _ => &[],
        }
    }
}

/// The budget of a retry or hedge table (`budget_ratio`, the floor per second under the key
/// `min_key`, `budget_window`), if it has one; `per` says what the ratio allows, for the
/// error.
fn budget_of(
    ratio: Option<f64>,
    (min_key, min_per_second): (&'static str, Option<u32>),
    window: Option<Dur>,
    set_keys: &[&'static str],
    per: &str,
) -> Result<Option<RetryBudget>, ConfigError> {
    let Some(ratio) = ratio else {
        for key in [min_key, "budget_window"] {
            if set_keys.contains(&key) {
                return Err(ConfigError::new(
                    key,
                    format!(
                        "`{key}` takes effect only with `budget_ratio` (the {per}) in the same \
                         table; add it, or remove `{key}`"
                    ),
                ));
            }
        }
        return Ok(None);
    };
    let mut budget = RetryBudget::ratio(ratio);
    if let Some(n) = min_per_second {
        budget = budget.min_retries_per_second(n);
    }
    if let Some(Dur(window)) = window {
        budget = budget.window(window);
    }
    Ok(Some(budget))
}

settings! {
    /// `[hedge.configs.*]` and `[hedge.instances.*]`.
    pub(crate) struct HedgeSettings ("hedge settings") {
        base_config: String,
        delay: Dur,
        delay_percentile: f64,
        max_hedged_attempts: u32,
        budget_ratio: f64,
        budget_min_hedges_per_second: u32,
        budget_window: Dur,
    }
}

impl Settings for HedgeSettings {
    type Config = HedgeConfig;

    fn build(&self) -> Result<HedgeConfig, ConfigError> {
        let mut b = HedgeConfig::builder();
        if let Some(base) = base_of(&self.base_config) {
            b = b.base(base);
        }
        if let Some(Dur(d)) = self.delay {
            b = b.delay(d);
        }
        if let Some(p) = self.delay_percentile {
            b = b.delay_percentile(p);
        }
        if let Some(n) = self.max_hedged_attempts {
            b = b.max_hedged_attempts(n);
        }
        if let Some(budget) = budget_of(
            self.budget_ratio,
            (
                "budget_min_hedges_per_second",
                self.budget_min_hedges_per_second,
            ),
            self.budget_window,
            &self.set_keys(),
            "extra attempts allowed per call",
        )? {
            b = b.budget(budget);
        }
        b.build()
    }

    fn keys_of(field: &'static str) -> &'static [&'static str] {
        match field {
            "budget.ratio" => &["budget_ratio"],
            "budget.window" => &["budget_window"],
            _ => &[],
        }
    }
}

settings! {
    /// `[time_limiter.configs.*]` and `[time_limiter.instances.*]`.
    pub(crate) struct TimeLimiterSettings ("time limiter settings") {
        base_config: String,
        timeout_duration: Dur,
        cancel_running_future: bool,
    }
}

impl Settings for TimeLimiterSettings {
    type Config = TimeLimiterConfig;

    fn build(&self) -> Result<TimeLimiterConfig, ConfigError> {
        let mut b = TimeLimiterConfig::builder();
        if let Some(base) = base_of(&self.base_config) {
            b = b.base(base);
        }
        if let Some(Dur(d)) = self.timeout_duration {
            b = b.timeout_duration(d);
        }
        if let Some(cancel) = self.cancel_running_future {
            b = b.cancel_running_future(cancel);
        }
        b.build()
    }
}

settings! {
    /// `[fault.configs.*]` and `[fault.instances.*]` (the error a fault makes is set in code).
    pub(crate) struct FaultSettings ("fault settings") {
        base_config: String,
        latency_rate: f64,
        latency: Dur,
        error_rate: f64,
        refusal_rate: f64,
        seed: u64,
    }
}

impl Settings for FaultSettings {
    type Config = FaultConfig;

    fn build(&self) -> Result<FaultConfig, ConfigError> {
        let mut b = FaultConfig::builder();
        if let Some(base) = base_of(&self.base_config) {
            b = b.base(base);
        }
        match (self.latency_rate, self.latency) {
            (Some(rate), Some(Dur(latency))) => b = b.latency(rate, latency),
            (None, None) => {}
            (Some(_), None) | (None, Some(_)) => {
                return Err(ConfigError::new(
                    "latency",
                    "`latency_rate` and `latency` go together: give both (how often, how long)",
                ))
            }
        }
        if let Some(rate) = self.error_rate {
            b = b.error_rate(rate);
        }
        if let Some(rate) = self.refusal_rate {
            b = b.refusal(rate);
        }
        if let Some(seed) = self.seed {
            b = b.seed(seed);
        }
        b.build()
    }

    fn keys_of(field: &'static str) -> &'static [&'static str] {
        match field {
            "latency" => &["latency", "latency_rate"],
            _ => &[],
        }
    }
}

settings! {
    /// `[precedence]`: a number per aspect kind, lower runs first (outermost).
    pub(crate) struct PrecedenceSettings ("the precedence table") {
        bulkhead: i32,
        rate_limiter: i32,
        retry: i32,
        hedge: i32,
        circuit_breaker: i32,
        time_limiter: i32,
        fault: i32,
    }
}

/// `Deserialize` for each configuration type: its settings read as in a document, then built,
/// so a configuration read through `serde` is validated as one built in code.
macro_rules! deserialize_through {
    ($config:ty, $settings:ty) => {
        impl<'de> Deserialize<'de> for $config {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <$settings>::deserialize(deserializer)?
                    .build()
                    .map_err(de::Error::custom)
            }
        }
    };
}

deserialize_through!(BulkheadConfig, BulkheadSettings);
deserialize_through!(RateLimiterConfig, RateLimiterSettings);
deserialize_through!(RetryConfig, RetrySettings);
deserialize_through!(CircuitBreakerConfig, CircuitBreakerSettings);
deserialize_through!(HedgeConfig, HedgeSettings);
deserialize_through!(FaultConfig, FaultSettings);
deserialize_through!(TimeLimiterConfig, TimeLimiterSettings);
