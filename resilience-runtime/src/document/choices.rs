//! The settings a document writes as one of a few strings (`"count_based"`, `"redis"`), each
//! read through [`choice`], which names the choices when a value is none of them.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

use super::keys::choice;
use crate::bulkhead::LimitAlgorithm;
use crate::circuit_breaker::{CircuitState, WindowType};
use crate::fleet::FleetFallback;
use crate::plan::ReentrancyPolicy;

/// `algorithm`: `"knee"`, `"gradient2"`, `"vegas"` or `"aimd"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AlgorithmSetting(pub(crate) LimitAlgorithm);

impl<'de> Deserialize<'de> for AlgorithmSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ChoiceVisitor {
            what: "limit algorithm",
            choices: &[
                ("knee", AlgorithmSetting(LimitAlgorithm::Knee)),
                ("gradient2", AlgorithmSetting(LimitAlgorithm::Gradient2)),
                ("vegas", AlgorithmSetting(LimitAlgorithm::Vegas)),
                ("aimd", AlgorithmSetting(LimitAlgorithm::Aimd)),
            ],
        })
    }
}

/// `backend = "local" | "redis"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackendSetting {
    Local,
    Redis,
}

impl<'de> Deserialize<'de> for BackendSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ChoiceVisitor {
            what: "backend",
            choices: &[
                ("local", BackendSetting::Local),
                ("redis", BackendSetting::Redis),
            ],
        })
    }
}

/// `redis_fallback = "local_share" | "admit" | "refuse"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FallbackSetting(pub(crate) FleetFallback);

impl<'de> Deserialize<'de> for FallbackSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ChoiceVisitor {
            what: "Redis fallback",
            choices: &[
                ("local_share", FallbackSetting(FleetFallback::LocalShare)),
                ("admit", FallbackSetting(FleetFallback::Admit)),
                ("refuse", FallbackSetting(FleetFallback::Refuse)),
            ],
        })
    }
}

/// `sliding_window_type`: `"count_based"` or `"time_based"` (also `COUNT_BASED`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct WindowTypeSetting(pub(crate) WindowType);

impl<'de> Deserialize<'de> for WindowTypeSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ChoiceVisitor {
            what: "sliding window type",
            choices: &[
                ("count_based", WindowTypeSetting(WindowType::CountBased)),
                ("time_based", WindowTypeSetting(WindowType::TimeBased)),
            ],
        })
    }
}

/// `initial_state`: `"closed"`, `"open"` or `"metrics_only"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct StateSetting(pub(crate) CircuitState);

impl<'de> Deserialize<'de> for StateSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ChoiceVisitor {
            what: "state a breaker can start in",
            choices: &[
                ("closed", StateSetting(CircuitState::Closed)),
                ("open", StateSetting(CircuitState::Open)),
                ("metrics_only", StateSetting(CircuitState::MetricsOnly)),
            ],
        })
    }
}

impl<'de> Deserialize<'de> for ReentrancyPolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ChoiceVisitor {
            what: "re-entrancy policy",
            choices: &[
                ("pass_through", ReentrancyPolicy::PassThrough),
                ("reject", ReentrancyPolicy::Reject),
                ("allow", ReentrancyPolicy::Allow),
            ],
        })
    }
}

/// Reads a string that must be one of `choices` (see [`choice`]).
struct ChoiceVisitor<T: 'static> {
    what: &'static str,
    choices: &'static [(&'static str, T)],
}

impl<T: Copy> Visitor<'_> for ChoiceVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} in a string", self.what)
    }

    fn visit_str<E: de::Error>(self, raw: &str) -> Result<T, E> {
        choice(self.what, raw, self.choices)
    }
}
