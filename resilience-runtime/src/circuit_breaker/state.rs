//! [`CircuitState`], and how a breaker packs it with its epoch into one word.

use std::fmt;

/// The states of a circuit breaker.
///
/// ```
/// use resilience_runtime::CircuitState;
///
/// assert_eq!(CircuitState::HalfOpen.to_string(), "half-open");
/// assert!(CircuitState::ForcedOpen.refuses_calls());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CircuitState {
    /// Calls pass and are recorded; the breaker opens when a rate reaches its threshold.
    Closed,
    /// Calls are refused until the wait in the open state is over.
    Open,
    /// A bounded number of probe calls pass; their outcome closes or opens the breaker.
    HalfOpen,
    /// Calls pass, nothing is recorded, the state never changes by itself.
    Disabled,
    /// Calls are refused until a manual transition.
    ForcedOpen,
    /// Calls pass and are recorded (with their events); the state never changes by itself.
    MetricsOnly,
}

impl CircuitState {
    /// The state as a label: `closed`, `open`, `half_open`, `disabled`, `forced_open`,
    /// `metrics_only` (Resilience4j's `state` tag values; the [`Display`](std::fmt::Display)
    /// form is for people).
    pub const fn as_str(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half_open",
            CircuitState::Disabled => "disabled",
            CircuitState::ForcedOpen => "forced_open",
            CircuitState::MetricsOnly => "metrics_only",
        }
    }

    /// Whether every call is refused in this state (open or forced open). A half-open breaker
    /// refuses calls only once its probes are taken.
    pub fn refuses_calls(self) -> bool {
        matches!(self, CircuitState::Open | CircuitState::ForcedOpen)
    }

    const fn code(self) -> u64 {
        match self {
            CircuitState::Closed => 0,
            CircuitState::Open => 1,
            CircuitState::HalfOpen => 2,
            CircuitState::Disabled => 3,
            CircuitState::ForcedOpen => 4,
            CircuitState::MetricsOnly => 5,
        }
    }

    const fn from_code(code: u64) -> Self {
        match code {
            0 => CircuitState::Closed,
            1 => CircuitState::Open,
            2 => CircuitState::HalfOpen,
            3 => CircuitState::Disabled,
            4 => CircuitState::ForcedOpen,
            _ => CircuitState::MetricsOnly,
        }
    }
}

impl fmt::Display for CircuitState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half-open",
            CircuitState::Disabled => "disabled",
            CircuitState::ForcedOpen => "forced open",
            CircuitState::MetricsOnly => "metrics only",
        })
    }
}

/// The state and its epoch (the number of transitions so far) in one word, so that one atomic
/// load tells a caller both.
pub(super) fn pack(epoch: u64, state: CircuitState) -> u64 {
    (epoch << 8) | state.code()
}

pub(super) fn unpack(packed: u64) -> (u64, CircuitState) {
    (packed >> 8, CircuitState::from_code(packed & 0xff))
}
