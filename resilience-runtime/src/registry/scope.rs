//! A registry in scope: [`Registry::scope`] and [`Registry::scope_async`] make the guarded
//! functions of the attribute macros use another registry than the global one, for the extent
//! of a closure or for every poll of a future. What a test needs to give annotated code its
//! own instances and a [`ManualClock`](crate::ManualClock).
//!
//! Written by hand rather than with tokio's `task_local!`: a task-local holds a `'static`
//! value (the registry would have to be an `Arc` or leaked) and costs a `RefCell` borrow per
//! read; this is one thread-local `Cell` of a pointer to a registry borrowed for the scope,
//! read once per guarded call, and null when no scope is active.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::ptr;
use std::task::{Context, Poll};

use super::Registry;

thread_local! {
    /// The registry of the innermost active scope on this thread; null outside every scope.
    static SCOPED: Cell<*const Registry> = const { Cell::new(ptr::null()) };
}

/// The registry in scope on this thread, if any, lent to `f`.
#[inline(always)]
pub(crate) fn with_scoped<R>(f: impl FnOnce(Option<&Registry>) -> R) -> R {
    let scoped = SCOPED.with(Cell::get);
    #[allow(unsafe_code)]
    // SAFETY: a non-null pointer was set by an `Enter` that borrows its registry for as long
    // as the pointer is in the cell (its drop restores the previous value, on unwinding too),
    // and `f` cannot keep the reference beyond this call.
    let registry = unsafe { scoped.as_ref() };
    f(registry)
}

/// The scope of one registry on this thread, until dropped.
struct Enter<'r> {
    previous: *const Registry,
    _registry: std::marker::PhantomData<&'r Registry>,
}

impl<'r> Enter<'r> {
    fn new(registry: &'r Registry) -> Self {
        Enter {
            previous: SCOPED.replace(registry),
            _registry: std::marker::PhantomData,
        }
    }
}

impl Drop for Enter<'_> {
    fn drop(&mut self) {
        SCOPED.set(self.previous);
    }
}

impl Registry {
    /// Runs `f` with this registry in place of the [global](Registry::global) one for every
    /// function guarded by the attribute macros that `f` calls on this thread: a test's own
    /// instances, configuration and clock, not shared with the tests running beside it.
    ///
    /// A function annotated with `registry = path` keeps its registry. Threads and tasks that
    /// `f` starts are outside the scope (give them one of their own); scopes nest, the
    /// innermost one counting. A guarded `async fn` takes its plan when first polled: one
    /// whose future `f` makes but does not poll runs on whatever is in scope when it is
    /// polled; use [`scope_async`](Self::scope_async) for async code. Outside every scope a guarded call pays one thread-local read
    /// for this (see BENCHMARKS.md at 79fb71f); inside one, it takes its plan from a per-call-site cache
    /// of the last registry used (an `Arc` clone).
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{circuit_breaker, CircuitBreakerConfig, CircuitState, ManualClock, Registry, Rejected, SlidingWindow};
    ///
    /// #[derive(Debug)]
    /// enum FetchError { Down, Rejected(Rejected) }
    /// impl From<Rejected> for FetchError {
    ///     fn from(r: Rejected) -> Self { FetchError::Rejected(r) }
    /// }
    ///
    /// #[circuit_breaker(name = "inventory")]
    /// fn fetch_stock(up: bool) -> Result<u32, FetchError> {
    ///     if up { Ok(7) } else { Err(FetchError::Down) }
    /// }
    ///
    /// let clock = ManualClock::new();
    /// let registry = Registry::with_clock(clock.clone());
    /// registry.configure_circuit_breaker("inventory", CircuitBreakerConfig::builder()
    ///     .sliding_window(SlidingWindow::CountBased(2))
    ///     .minimum_number_of_calls(2)
    ///     .wait_duration_in_open_state(Duration::from_secs(30))
    ///     .build()?)?;
    ///
    /// registry.scope(|| {
    ///     let _ = fetch_stock(false);
    ///     let _ = fetch_stock(false);
    ///     // Two failures of two: this registry's breaker opened, the global one never ran.
    ///     assert!(matches!(fetch_stock(true), Err(FetchError::Rejected(_))));
    ///     clock.advance(Duration::from_secs(30));
    ///     assert_eq!(fetch_stock(true).unwrap(), 7); // a half-open probe
    /// });
    /// assert_eq!(registry.circuit_breaker("inventory").state(), CircuitState::HalfOpen);
    /// assert!(Registry::global().circuit_breakers().is_empty());
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _enter = Enter::new(self);
        f()
    }

    /// [`scope`](Self::scope) for a future: this registry is in scope each time `future` is
    /// polled (a guarded `async fn` takes its plan on its first poll, and keeps it). Tasks
    /// the future spawns are outside the scope.
    ///
    /// ```
    /// use resilience_runtime::{bulkhead, BulkheadConfig, Registry, Rejected};
    ///
    /// #[bulkhead(name = "payments")]
    /// async fn charge(cents: u64) -> Result<u64, Rejected> {
    ///     Ok(cents)
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), resilience_runtime::ConfigError> {
    /// let registry = Registry::new();
    /// registry.configure_bulkhead("payments", BulkheadConfig::builder().max_concurrent_calls(3).build()?)?;
    /// let charged = registry.scope_async(async { charge(250).await }).await;
    /// assert_eq!(charged, Ok(250));
    /// assert_eq!(registry.bulkhead("payments").max_allowed_concurrent_calls(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scope_async<F: Future>(&self, future: F) -> WithRegistry<'_, F> {
        WithRegistry {
            registry: self,
            future,
        }
    }
}

pin_project_lite::pin_project! {
    /// A future run with a [`Registry`] in scope ([`Registry::scope_async`]).
    #[must_use = "futures do nothing unless polled"]
    pub struct WithRegistry<'r, F> {
        registry: &'r Registry,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for WithRegistry<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _enter = Enter::new(this.registry);
        this.future.poll(cx)
    }
}

impl<F> std::fmt::Debug for WithRegistry<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithRegistry")
            .field("registry", &self.registry.generation())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scoped_generation() -> Option<u64> {
        with_scoped(|r| r.map(Registry::generation))
    }

    #[test]
    fn scopes_nest_and_restore_the_outer_one_on_exit_and_on_panic() {
        let outer = Registry::new();
        let inner = Registry::new();
        assert_eq!(scoped_generation(), None);
        outer.scope(|| {
            assert_eq!(scoped_generation(), Some(outer.generation()));
            inner.scope(|| assert_eq!(scoped_generation(), Some(inner.generation())));
            assert_eq!(scoped_generation(), Some(outer.generation()));
            let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                inner.scope(|| panic!("in the inner scope"))
            }));
            assert!(panicked.is_err());
            assert_eq!(scoped_generation(), Some(outer.generation()));
        });
        assert_eq!(scoped_generation(), None);
    }

    #[test]
    fn a_scoped_future_has_its_registry_only_while_polled() {
        let registry = Registry::new();
        let generation = registry.generation();
        let mut seen = Vec::new();
        let future = registry.scope_async(std::future::poll_fn(|cx| {
            seen.push(scoped_generation());
            if seen.len() < 2 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        }));
        {
            let mut future = std::pin::pin!(future);
            let mut cx = Context::from_waker(std::task::Waker::noop());
            assert!(future.as_mut().poll(&mut cx).is_pending());
            assert_eq!(scoped_generation(), None, "not between polls");
            assert!(future.as_mut().poll(&mut cx).is_ready());
        }
        assert_eq!(seen, [Some(generation), Some(generation)]);
    }
}
