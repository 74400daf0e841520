//! The same named guards around a tower `Service` (feature `tower`): [`GuardLayer`] and its
//! [`GuardService`], whose errors are [`GuardError`]s and whose responses a [`Classifier`]
//! counts.
//!
//! An axum router (`GuardLayer::for_axum`, feature `axum`), a tonic channel
//! ([`GrpcErrorsAreFailures`], and `GuardError::into_grpc_error` with the feature `tonic`), a
//! hyper client, any `tower::Service`, runs through the instances the annotations use, in the
//! registry's precedence, with their configuration files, metrics,
//! events and actuator: a bulkhead named `"orders"` is one bulkhead whether a `#[bulkhead]`
//! function or a layer enters it.
//!
//! ```
//! use resilience_runtime::tower::GuardLayer;
//! use resilience_runtime::Guard;
//! use tower::ServiceBuilder;
//!
//! let svc = ServiceBuilder::new()
//!     .layer(GuardLayer::new(&[Guard::bulkhead("orders"), Guard::circuit_breaker("orders")]))
//!     .service_fn(|id: u32| async move { Ok::<_, std::io::Error>(id * 2) });
//! # let _ = svc;
//! ```

mod attempts;
mod classify;
mod error;
mod future;
mod grpc;
mod layer;
mod plans;
mod service;

pub use attempts::{Attempts, CloneRequests, SendOnce};
pub use classify::{Classifier, ErrorsAreFailures, ServerErrorsAreFailures};
pub use error::GuardError;
pub use future::ResponseFuture;
pub use grpc::GrpcErrorsAreFailures;
pub use layer::GuardLayer;
pub use service::GuardService;
