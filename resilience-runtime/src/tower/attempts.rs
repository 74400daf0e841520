//! [`Attempts`]: whether a guarded service makes a request more than once.

/// Whether a guarded service makes a request more than once: [`SendOnce`] (every layer but a
/// retrying one) or [`CloneRequests`] (a layer built with `GuardLayer::retrying`, `Request:
/// Clone`).
pub trait Attempts<Request>: sealed::Sealed {
    /// A copy of `request` for another attempt; `None` when requests are sent once.
    fn again(&self, request: &Request) -> Option<Request>;
}

/// Each request is sent once (the layer has no retry).
#[derive(Clone, Copy, Debug, Default)]
pub struct SendOnce;

/// Each attempt of a retry sends a clone of the request.
#[derive(Clone, Copy, Debug, Default)]
pub struct CloneRequests;

impl<Request> Attempts<Request> for SendOnce {
    #[inline]
    fn again(&self, _: &Request) -> Option<Request> {
        None
    }
}

impl<Request: Clone> Attempts<Request> for CloneRequests {
    #[inline]
    fn again(&self, request: &Request) -> Option<Request> {
        Some(request.clone())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::SendOnce {}
    impl Sealed for super::CloneRequests {}
}
