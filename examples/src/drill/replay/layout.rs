//! [`Prepared`]: one layout of a replay, its registry on the precise clock and the handler's
//! plan, from a configuration file as written or as a [`Variant`] changes it.

use std::sync::Arc;

use resilience_runtime::document::Setting;
use resilience_runtime::{
    AdaptiveLimit, Aspect, BulkheadConfig, Clock, ConfigError, Guard, LimitAlgorithm, Plan,
    Registry,
};

use super::{GuardFile, ReplayConfig, ReplayError, Variant};
use crate::drill::Layout;

/// One layout, ready to run: its registry (on the precise clock) and the handler's plan.
pub(super) struct Prepared {
    pub(super) name: String,
    /// The index of its file in [`ReplayConfig::files`].
    pub(super) file: usize,
    pub(super) variant: Option<Variant>,
    pub(super) description: String,
    pub(super) registry: Registry,
    pub(super) instance: String,
    /// The handler's guards, outermost first.
    pub(super) aspects: Vec<Aspect>,
    pub(super) plan: Arc<Plan>,
}

impl Prepared {
    pub(super) fn has(&self, aspect: Aspect) -> bool {
        self.aspects.contains(&aspect)
    }

    /// Whether `inner` runs inside `outer` in this layout.
    pub(super) fn inside(&self, inner: Aspect, outer: Aspect) -> bool {
        let at = |a| self.aspects.iter().position(|x| *x == a);
        matches!((at(inner), at(outer)), (Some(i), Some(o)) if i > o)
    }
}

/// The layouts of `config` (each prepared once here, so that a refused file or layout is
/// refused before anything runs), and the notes on the variants left out.
pub(super) fn prepare_all(
    config: &ReplayConfig,
) -> Result<(Vec<Prepared>, Vec<String>), ReplayError> {
    let mut layouts = Vec::new();
    let mut notes = Vec::new();
    for (i, file) in config.files.iter().enumerate() {
        let written = prepare(file, i, config.instance.as_deref(), None)?;
        if written.has(Aspect::Retry)
            && written
                .registry
                .retry_config(&written.instance)
                .randomized_wait_factor()
                > 0.0
        {
            notes.push(format!(
                "{}: the retry's jitter (randomized_wait_factor) is not seeded, so replays of \
                 this file differ a little from run to run",
                written.name
            ));
        }
        layouts.push(written);
        if i > 0 {
            continue;
        }
        for &variant in &config.variants {
            match prepare(file, i, config.instance.as_deref(), Some(variant))? {
                prepared
                    if variant == Variant::DefaultOrder
                        && prepared.aspects == layouts[0].aspects =>
                {
                    notes.push(format!(
                        "{}: the file's order is the default already, so it is not replayed again",
                        prepared.name
                    ));
                }
                prepared if variant == Variant::Adaptive && !prepared.has(Aspect::Bulkhead) => {
                    notes.push(format!(
                        "{}: the handler has no bulkhead to adapt",
                        prepared.name
                    ));
                }
                prepared => layouts.push(prepared),
            }
        }
    }
    Ok((layouts, notes))
}

/// The registry and plan of `file`, as written or as `variant` changes it.
pub(super) fn prepare(
    file: &GuardFile,
    index: usize,
    instance: Option<&str>,
    variant: Option<Variant>,
) -> Result<Prepared, ReplayError> {
    let registry = Registry::with_clock(Clock::precise());
    let changes = registry
        .load_toml(&file.text)
        .map_err(|error| ReplayError::Config {
            file: file.name.clone(),
            error,
        })?;
    let mut names: Vec<&str> = changes
        .iter()
        .filter_map(|c| match &c.setting {
            Setting::Named(aspect, name) if *aspect != Aspect::Fault => Some(&**name),
            _ => None,
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    let instance = match (instance, names.as_slice()) {
        (Some(name), _) if names.contains(&name) => name.to_owned(),
        (Some(name), _) => {
            return Err(ReplayError::Instance {
                file: file.name.clone(),
                reason: format!(
                    "configures no instance `{name}`; it names {}",
                    list_or_none(&names)
                ),
            })
        }
        (None, [one]) => (*one).to_owned(),
        (None, _) => {
            return Err(ReplayError::Instance {
                file: file.name.clone(),
                reason: format!(
                    "names {}: say which instance the handler's guards are (--instance NAME)",
                    list_or_none(&names)
                ),
            })
        }
    };
    let configured = |aspect: Aspect| {
        changes.iter().any(|c| {
            matches!(&c.setting, Setting::Named(a, name) if *a == aspect && **name == *instance)
        })
    };
    // Faults are for tests and game days: a replay's faults are its profile's.
    let carried: Vec<Aspect> = Aspect::ALL
        .into_iter()
        .filter(|&a| a != Aspect::Fault && configured(a))
        .collect();
    let mut description = String::new();
    match variant {
        None => description.push_str("as written"),
        Some(Variant::DefaultOrder) => {
            default_order(&registry)?;
            description.push_str("this project's default order");
        }
        Some(Variant::Adaptive) => {
            default_order(&registry)?;
            let config = registry.bulkhead_config(&instance);
            let initial = config.max_concurrent_calls();
            let max = initial.saturating_mul(10).max(10);
            // A new configuration, not `to_builder`: a fixed limit and an adaptive one are
            // refused together.
            registry.configure_bulkhead(
                &instance,
                BulkheadConfig::builder()
                    .max_wait_duration(config.max_wait_duration())
                    .fair_call_handling(config.fair_call_handling())
                    .adaptive(
                        AdaptiveLimit::new(LimitAlgorithm::Knee)
                            .initial_limit(initial)
                            .min_limit(1)
                            .max_limit(max),
                    )
                    .build()?,
            )?;
            description = format!(
                "default order, the bulkhead's limit adaptive (knee) from {initial}, between 1 and {max}"
            );
        }
        Some(Variant::SpringOrder) => {
            for (aspect, precedence) in Layout::SpringDefault.precedence() {
                registry.set_precedence(aspect, precedence)?;
            }
            if carried.contains(&Aspect::CircuitBreaker) {
                let config = registry.circuit_breaker_config(&instance);
                registry.configure_circuit_breaker(
                    &instance,
                    config.to_builder().record_rejections(true).build()?,
                )?;
            }
            if carried.contains(&Aspect::Retry) {
                let config = registry.retry_config(&instance);
                registry.configure_retry(
                    &instance,
                    config.to_builder().retry_on_rejection(true).build()?,
                )?;
            }
            description.push_str(
                "Resilience4j's Spring order, rejections recorded by the breaker and retried",
            );
        }
    }
    let mut aspects = carried;
    aspects.sort_by_key(|a| registry.precedence_of(*a));
    let guards: Vec<Guard<'_>> = aspects.iter().map(|a| Guard::new(*a, &instance)).collect();
    let plan = Arc::new(registry.plan(&guards)?);
    let order: Vec<&str> = aspects.iter().map(|a| a.as_str()).collect();
    description.push_str(&format!(": {}", order.join(" → ")));
    Ok(Prepared {
        file: index,
        variant,
        name: match variant {
            None => file.name.clone(),
            Some(v) => format!("{}/{}", file.name, v.name()),
        },
        description,
        registry,
        instance,
        aspects,
        plan,
    })
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "no instance".to_owned()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn default_order(registry: &Registry) -> Result<(), ConfigError> {
    for aspect in Aspect::ALL {
        registry.set_precedence(aspect, aspect.default_precedence())?;
    }
    Ok(())
}
