//! The same named guards around outgoing HTTP requests (feature `reqwest`):
//! [`GuardMiddleware`], a `reqwest-middleware` [`Middleware`] whose requests run through the
//! instances of a registry chosen per request, by host or by a [`GuardName`] the caller sets.
//!
//! ```no_run
//! use std::time::Duration;
//! use resilience_runtime::reqwest::{GuardMiddleware, RequestError};
//! use resilience_runtime::{Aspect, CircuitBreakerConfig, Registry};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! Registry::global().configure_circuit_breaker("payments", CircuitBreakerConfig::default())?;
//! let guards = GuardMiddleware::new(&[Aspect::Bulkhead, Aspect::CircuitBreaker])
//!     .host("payments.example.com", "payments");
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(guards)
//!     .build();
//! match client.get("https://payments.example.com/v1/balance").send().await {
//!     Ok(response) => println!("{}", response.status()),
//!     Err(error) => match RequestError::of(&error) {
//!         // Shed by the server (429, or 503 with `Retry-After`): not a failure of it.
//!         Some(RequestError::ServerRefused { retry_after, .. }) => println!("later: {retry_after:?}"),
//!         // Refused here, by a guard: the request was not sent.
//!         Some(RequestError::Rejected(rejected)) => println!("{rejected}"),
//!         _ => println!("{error}"),
//!     },
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # How responses count
//!
//! A transport error (no response) and a `5xx` response are failures: the breakers record
//! them and a retry retries them. A `4xx` is an answer, a success. A `429`, and a `503` that
//! carries `Retry-After`, are a refusal by the server, shedding load as this library's own
//! axum responses do: the breakers do not record them (the incident this library exists for,
//! one hop away: a client breaker counting a server's sheds opens on a healthy server), unless
//! [`record_server_refusals`](GuardMiddleware::record_server_refusals) says so; a retry
//! retries them, waiting at least the server's `Retry-After`; and the caller receives
//! [`RequestError::ServerRefused`] with it. `Retry-After` is read in seconds; the HTTP-date
//! form is read as no hint.
//!
//! # Retries and bodies
//!
//! A retry sends the request again, so its body must be cloneable
//! ([`reqwest::Request::try_clone`]): a buffered body (bytes, a string, JSON, a form) is; a
//! streaming one is not. A request with a streaming body under a retry is refused before it
//! is sent, with [`RequestError::BodyNotRepeatable`]: send it through instances without a
//! retry ([`GuardName`]) or buffer the body. A retry resends any method, `POST` included:
//! configure retries for the instances of idempotent calls.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use http::Extensions;
use reqwest::{Request, Response, StatusCode};
use reqwest_middleware::{Middleware, Next};

use crate::aspect::Aspect;
use crate::call::{run_wrapped_async, GuardedCall};
use crate::error::{ConfigError, Rejected};
use crate::name::Name;
use crate::outcome::CallOutcome;
use crate::plan::{Guard, GuardListError};
use crate::plan_cache::{PlanCache, SitePlan};
use crate::registry::Registry;
use crate::shed::shed;

/// A `reqwest-middleware` [`Middleware`] that sends each request through named guard
/// instances: the ones `#[bulkhead]`, `#[circuit_breaker]` and the others of the same names
/// use, in the registry's precedence (see the [module](self) for how responses count).
///
/// Each request runs through one instance of each of the middleware's aspect kinds, named
/// after the request: the [`GuardName`] in its extensions if the caller set one, else the
/// name [`host`](Self::host) maps its host to, else its host itself (`"api.example.com"`).
/// Hosts are bounded, as instance names must be (each is kept for the life of the process);
/// under [`Registry::set_require_configured`] a host nobody configured is refused.
pub struct GuardMiddleware {
    kinds: Vec<Aspect>,
    /// Whether `kinds` has a retry: a request may then be sent again.
    retries: bool,
    hosts: HashMap<String, Name>,
    registry: Option<Arc<Registry>>,
    record_server_refusals: bool,
    /// The plan cache of each instance name seen, found once per name.
    caches: RwLock<HashMap<Name, &'static PlanCache>>,
}

/// The instance name a request's guards use, set by the caller on the request
/// (`RequestBuilder::with_extension(GuardName::new("payments"))`), ahead of its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardName(Name);

impl GuardName {
    /// The instances named `name`.
    pub fn new(name: impl Into<Name>) -> Self {
        GuardName(name.into())
    }
}

impl GuardMiddleware {
    /// A middleware whose requests run through one instance of each kind of `kinds`, in the
    /// [global](Registry::global) registry.
    ///
    /// # Panics
    ///
    /// If `kinds` names an aspect twice; [`try_new`](Self::try_new) returns it as an error.
    #[track_caller]
    pub fn new(kinds: &[Aspect]) -> Self {
        GuardMiddleware::try_new(kinds).unwrap_or_else(|error| panic!("{error}"))
    }

    /// [`new`](Self::new), returning a repeated aspect as a [`ConfigError`].
    ///
    /// # Errors
    ///
    /// If `kinds` names an aspect twice.
    pub fn try_new(kinds: &[Aspect]) -> Result<Self, ConfigError> {
        let guards: Vec<Guard<'_>> = kinds.iter().map(|&kind| Guard::new(kind, "")).collect();
        if let Some(problem) = GuardListError::check(&guards) {
            return Err(ConfigError::new("guards", problem.to_string()));
        }
        Ok(GuardMiddleware {
            kinds: kinds.to_vec(),
            retries: kinds.contains(&Aspect::Retry),
            hosts: HashMap::new(),
            registry: None,
            record_server_refusals: false,
            caches: RwLock::default(),
        })
    }

    /// Requests to `host` (as in their URL, without the port) use the instances `name`.
    pub fn host(mut self, host: &str, name: impl Into<Name>) -> Self {
        self.hosts.insert(host.to_ascii_lowercase(), name.into());
        self
    }

    /// The instances of `registry` rather than of the global one (a test's own registry). A
    /// middleware on the global registry follows [`Registry::scope`] as the annotations do.
    pub fn with_registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Whether the breakers record a server's refusal (a `429`, a `503` with `Retry-After`) as
    /// a failure; `false` by default (see the [module](self)).
    pub fn record_server_refusals(mut self, record: bool) -> Self {
        self.record_server_refusals = record;
        self
    }

    /// The instance name of `request`.
    fn instance<'r>(&'r self, request: &'r Request, extensions: &'r Extensions) -> &'r str {
        if let Some(GuardName(name)) = extensions.get::<GuardName>() {
            return name.as_str();
        }
        let host = request.url().host_str().unwrap_or_default();
        self.hosts.get(host).map_or(host, Name::as_str)
    }

    /// The current plan of the instances `name`. Found by the name as a string: a name is
    /// made (interned, under a process-wide lock) only the first time it is seen.
    fn plan(&self, name: &str) -> SitePlan {
        let known = self
            .caches
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .copied();
        let cache = known.unwrap_or_else(|| {
            let guards: Vec<Guard<'_>> = self
                .kinds
                .iter()
                .map(|&kind| Guard::new(kind, name))
                .collect();
            let cache = PlanCache::for_list(&guards);
            let mut caches = self.caches.write().unwrap_or_else(PoisonError::into_inner);
            caches.insert(Name::from(name), cache);
            cache
        });
        match &self.registry {
            Some(registry) => cache.site_plan_in(registry),
            None => cache.site_plan(),
        }
    }

    async fn send(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let plan = self.plan(self.instance(&request, extensions));
        // Each attempt after the first sends a clone of this one (cloned only under a retry).
        let template = match self.retries.then(|| request.try_clone()) {
            None => None,
            Some(Some(template)) => Some(template),
            Some(None) => {
                let instance = Name::from(self.instance(&request, extensions));
                return Err(reqwest_middleware::Error::middleware(
                    RequestError::BodyNotRepeatable { instance },
                ));
            }
        };
        // The attempts run one after another, each holding the extensions while it runs.
        let extensions = tokio::sync::Mutex::new(extensions);
        let mut first = Some(request);
        let attempt = || {
            let request = first
                .take()
                .or_else(|| template.as_ref().and_then(Request::try_clone));
            let (next, extensions) = (next.clone(), &extensions);
            async move {
                let request = request.expect("a cloneable request is sent again");
                let mut extensions = extensions.lock().await;
                next.run(request, &mut extensions).await
            }
        };
        let refusals = self.record_server_refusals;
        let classify = move |result: &Sent| classify(result, refusals);
        let ended = if plan.has_wrappers() {
            // A retry sends the request again after what a time limiter counts as a failure.
            run_wrapped_async(
                &plan,
                attempt,
                classify,
                failed,
                failed,
                retry_after,
                failed,
            )
            .await
        } else {
            let mut attempt = attempt;
            let mut guarded = GuardedCall::new();
            match guarded.enter_async(&plan).await {
                Ok(()) => Ok(guarded.run_async(attempt(), classify).await),
                Err(rejected) => Err(rejected),
            }
        };
        match ended {
            Err(rejected) => Err(reqwest_middleware::Error::middleware(
                RequestError::Rejected(rejected),
            )),
            Ok(Ok(response)) => match server_refusal(&response) {
                Some(retry_after) => Err(reqwest_middleware::Error::middleware(
                    RequestError::ServerRefused {
                        status: response.status(),
                        retry_after,
                    },
                )),
                None => Ok(response),
            },
            Ok(Err(error)) => Err(error),
        }
    }
}

impl Middleware for GuardMiddleware {
    fn handle<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        request: Request,
        extensions: &'life1 mut Extensions,
        next: Next<'life2>,
    ) -> Pin<Box<dyn Future<Output = reqwest_middleware::Result<Response>> + Send + 'async_trait>>
    where
        Self: 'async_trait,
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
    {
        Box::pin(self.send(request, extensions, next))
    }
}

impl fmt::Debug for GuardMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardMiddleware")
            .field("kinds", &self.kinds)
            .field("hosts", &self.hosts)
            .field("record_server_refusals", &self.record_server_refusals)
            .finish_non_exhaustive()
    }
}

/// What one attempt gives: the response, or reqwest's (or a later middleware's) error.
type Sent = reqwest_middleware::Result<Response>;

/// A `429`, or a `503` with `Retry-After`: `Some` of the server's hint.
fn server_refusal(response: &Response) -> Option<Option<Duration>> {
    shed(response.status(), response.headers())
}

/// How an attempt counts for the breakers.
fn classify(result: &Sent, record_server_refusals: bool) -> CallOutcome {
    match result {
        Err(_) => CallOutcome::Failure,
        Ok(response) if server_refusal(response).is_some() => match record_server_refusals {
            true => CallOutcome::Failure,
            false => CallOutcome::Overloaded,
        },
        Ok(response) if response.status().is_server_error() => CallOutcome::Failure,
        Ok(_) => CallOutcome::Success,
    }
}

/// Whether an attempt failed, as a time limiter counts it: no answer, a `5xx`, a refusal.
fn failed(result: &Sent) -> bool {
    match result {
        Err(_) => true,
        Ok(response) => response.status().is_server_error() || server_refusal(response).is_some(),
    }
}

/// The least wait before the next attempt: a server refusal's `Retry-After`.
fn retry_after(result: &Sent) -> Option<Duration> {
    match result {
        Ok(response) => server_refusal(response).flatten(),
        Err(_) => None,
    }
}

/// Why [`GuardMiddleware`] answered a request with an error: inside
/// `reqwest_middleware::Error::Middleware`, found with [`RequestError::of`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// A guard of this client refused the request: it was not sent (or, inside a retry, its
    /// last attempt was not).
    Rejected(Rejected),
    /// The server refused it: a `429`, or a `503` with `Retry-After` (the server's hint, in
    /// seconds). The breakers did not count it as a failure unless told to.
    ServerRefused {
        /// The response's status.
        status: StatusCode,
        /// The server's `Retry-After`, if it gave one in seconds.
        retry_after: Option<Duration>,
    },
    /// The request's instances have a retry, and its body is a stream, which cannot be sent
    /// twice: it was not sent.
    BodyNotRepeatable {
        /// The instances the request was for.
        instance: Name,
    },
}

impl RequestError {
    /// The `RequestError` inside `error`, if the middleware made it.
    pub fn of(error: &reqwest_middleware::Error) -> Option<&RequestError> {
        match error {
            reqwest_middleware::Error::Middleware(error) => error.downcast_ref(),
            reqwest_middleware::Error::Reqwest(_) => None,
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Rejected(rejected) => fmt::Display::fmt(rejected, f),
            RequestError::ServerRefused {
                status,
                retry_after: Some(wait),
            } => write!(
                f,
                "the server refused the request ({status}, retry after {} s)",
                wait.as_secs()
            ),
            RequestError::ServerRefused { status, .. } => {
                write!(f, "the server refused the request ({status})")
            }
            RequestError::BodyNotRepeatable { instance } => write!(
                f,
                "retry `{instance}` may send this request again, but its body is a stream, which \
                 can be sent once: buffer the body, or send it through instances without a retry \
                 (`GuardName`)"
            ),
        }
    }
}

impl std::error::Error for RequestError {}
