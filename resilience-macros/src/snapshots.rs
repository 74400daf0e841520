//! Expansion snapshots of the canonical shapes, one per shape, stored in `src/snapshots/`.
//!
//! Each test feeds [`expand::attribute`] what rustc would: the topmost aspect attribute's
//! arguments as `args`, and the item with every attribute below it (stacked aspects included)
//! still on it. A snapshot is named after its test, whose source holds the input; the output
//! is pretty-printed. Review a changed snapshot as generated code: every path starts with
//! `::core`, `::resilience_runtime::__private` or the `crate = ".."` path, and every local is
//! a mixed-site `__name`.
//!
//! Update with `INSTA_UPDATE=always cargo test -p resilience-macros` (or `cargo insta review`
//! where installed) and read the diff of the `.snap` files; `CI=true` never writes them.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Attribute, ImplItem, Item};

use crate::args::Kind;
use crate::expand;

/// The expansion of `#[kind(args)] item`, pretty-printed.
fn expand(kind: Kind, args: TokenStream, item: TokenStream) -> syn::Result<String> {
    let output = expand::attribute(kind, args, item);
    Ok(prettyplease::unparse(&syn::parse2::<syn::File>(output)?))
}

/// Snapshots the expansion of `#[kind(args)] item`, named after the test function, and returns
/// it parsed, for further checks.
macro_rules! snapshot {
    ($kind:expr, ($($args:tt)*), { $($item:tt)* }) => {{
        let kind: Kind = $kind;
        let args = quote!($($args)*);
        let item = quote!($($item)*);
        let expanded = expand(kind, args, item)?;
        insta::with_settings!({ omit_expression => true }, {
            insta::assert_snapshot!(expanded);
        });
        syn::parse_file(&expanded)?
    }};
}

/// Whether `attrs` still holds an aspect attribute of this crate.
fn has_aspect(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| Kind::of_path(a.path()).is_some())
}

/// An expansion that reports a user error: a `compile_error!` first, then the item (so one
/// mistake gives one message), with no aspect attribute of this crate left anywhere on it.
fn assert_error_then_item(file: &syn::File) {
    let [Item::Macro(error), item] = file.items.as_slice() else {
        panic!(
            "expected `compile_error!` then the item, got {} items",
            file.items.len()
        );
    };
    assert!(
        error
            .mac
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "compile_error"),
        "the first item is not a `compile_error!`"
    );
    match item {
        Item::Fn(function) => assert!(!has_aspect(&function.attrs), "aspect left on the fn"),
        Item::Impl(block) => {
            assert!(!has_aspect(&block.attrs), "aspect left on the impl block");
            for item in &block.items {
                if let ImplItem::Fn(method) = item {
                    assert!(!has_aspect(&method.attrs), "aspect left on a method");
                }
            }
        }
        _ => panic!("the item after the error is not a fn or an impl block"),
    }
}

/// An expansion that succeeded: no error, and no aspect attribute left to expand again.
fn assert_guarded(file: &syn::File) {
    for item in &file.items {
        match item {
            Item::Macro(m) => assert!(
                m.mac
                    .path
                    .segments
                    .last()
                    .is_none_or(|s| s.ident != "compile_error"),
                "unexpected `compile_error!`"
            ),
            Item::Fn(function) => assert!(!has_aspect(&function.attrs), "aspect left on the fn"),
            Item::Impl(block) => {
                assert!(!has_aspect(&block.attrs), "aspect left on the impl block");
                for item in &block.items {
                    if let ImplItem::Fn(method) = item {
                        assert!(!has_aspect(&method.attrs), "aspect left on a method");
                    }
                }
            }
            _ => {}
        }
    }
}

#[test]
fn free_fn() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "orders"), {
        /// Places an order.
        #[inline]
        pub fn place_order(customer: CustomerId, lines: Vec<Line>) -> Result<OrderId, OrderError> {
            if lines.is_empty() {
                return Err(OrderError::Empty);
            }
            let id = store::insert(customer, &lines)?;
            Ok(id)
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn fixed_registry() -> syn::Result<()> {
    let file = snapshot!(
        Kind::Bulkhead,
        (name = "billing", registry = crate::BILLING),
        {
            #[circuit_breaker(name = "billing")]
            async fn bill(amount: u64) -> Result<u64, BillingError> {
                Ok(amount)
            }
        }
    );
    assert_guarded(&file);
    Ok(())
}

#[test]
fn ref_self_method() -> syn::Result<()> {
    let file = snapshot!(Kind::CircuitBreaker, (name = "catalog"), {
        pub fn price(&self, sku: &str) -> Result<u64, CatalogError> {
            self.prices
                .get(sku)
                .copied()
                .ok_or(CatalogError::UnknownSku)
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn mut_self_method() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "cart"), {
        pub fn add(&mut self, sku: String, qty: u32) -> Result<usize, CartError> {
            self.lines.push((sku, qty));
            Ok(self.lines.len())
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn owned_self_method() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "checkout"), {
        pub fn submit(self) -> Result<Receipt, CartError> {
            let total = self.lines.iter().map(|(_, qty)| *qty).sum();
            Ok(Receipt { total })
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn generics_lifetimes_where_clause() -> syn::Result<()> {
    let file = snapshot!(Kind::CircuitBreaker, (name = "search"), {
        pub fn best_match<'a, 'q: 'a, T, Q>(
            items: &'a [T],
            query: &'q Q,
        ) -> Result<&'a T, SearchError>
        where
            T: Matches<Q> + 'a,
            Q: ?Sized,
        {
            items
                .iter()
                .max_by_key(|item| item.score(query))
                .ok_or(SearchError::NoMatch)
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn impl_trait_argument_and_return() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "readings"), {
        pub fn even_readings(
            source: impl IntoIterator<Item = u32>,
        ) -> Result<impl Iterator<Item = u32>, SensorError> {
            let readings: Vec<u32> = source.into_iter().collect();
            if readings.is_empty() {
                return Err(SensorError::NoData);
            }
            Ok(readings.into_iter().filter(|r| r % 2 == 0))
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn async_fn() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "payments"), {
        pub async fn charge(client: &Client, amount: u64) -> Result<ChargeId, PaymentError> {
            let response = client.post("/charges", amount).await?;
            Ok(response.id)
        }
    });
    assert_guarded(&file);
    Ok(())
}

/// A method of `#[async_trait] impl Repository for Db`, as `async-trait` 0.1 leaves it when it
/// expands before `#[circuit_breaker]` (written below `#[async_trait]`).
#[test]
fn async_trait_method() -> syn::Result<()> {
    let file = snapshot!(Kind::CircuitBreaker, (name = "db"), {
        #[must_use]
        #[allow(
            elided_named_lifetimes,
            clippy::async_yields_async,
            clippy::diverging_sub_expression,
            clippy::let_unit_value,
            clippy::needless_arbitrary_self_type,
            clippy::no_effect_underscore_binding,
            clippy::shadow_same,
            clippy::type_complexity,
            clippy::type_repetition_in_bounds,
            clippy::used_underscore_binding
        )]
        fn find<'life0, 'async_trait>(
            &'life0 self,
            id: u32,
        ) -> ::core::pin::Pin<
            Box<
                dyn ::core::future::Future<Output = Result<u32, DbError>>
                    + ::core::marker::Send
                    + 'async_trait,
            >,
        >
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                if let ::core::option::Option::Some(__ret) =
                    ::core::option::Option::None::<Result<u32, DbError>>
                {
                    #[allow(unreachable_code)]
                    return __ret;
                }
                let __self = self;
                let id = id;
                let __ret: Result<u32, DbError> = { __self.pool.query_one(id).await };
                #[allow(unreachable_code)]
                __ret
            })
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn impl_block_with_a_second_aspect_on_one_method() -> syn::Result<()> {
    let file = snapshot!(Kind::CircuitBreaker, (name = "inventory"), {
        impl Inventory {
            const MAX_RESERVATION: u32 = 100;

            pub fn reserve(&self, sku: &str, qty: u32) -> Result<Reservation, InventoryError> {
                self.store.reserve(sku, qty.min(Self::MAX_RESERVATION))
            }

            #[bulkhead(name = "inventory-writes")]
            pub async fn restock(&mut self, sku: String, qty: u32) -> Result<(), InventoryError> {
                self.store.add(sku, qty).await
            }
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn stacked_bulkhead_above_circuit_breaker() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "shipping"), {
        #[circuit_breaker(name = "shipping")]
        pub fn quote(parcel: &Parcel) -> Result<Price, ShippingError> {
            carrier::quote(parcel)
        }
    });
    assert_guarded(&file);
    Ok(())
}

#[test]
fn stacked_circuit_breaker_above_bulkhead() -> syn::Result<()> {
    let file = snapshot!(Kind::CircuitBreaker, (name = "shipping"), {
        #[bulkhead(name = "shipping")]
        pub fn quote(parcel: &Parcel) -> Result<Price, ShippingError> {
            carrier::quote(parcel)
        }
    });
    assert_guarded(&file);
    Ok(())
}

/// The three gates, written bulkhead first: the call site lists them in source order, and
/// the runtime's precedence sorts them.
#[test]
fn stacked_three_gates_bulkhead_first() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "payments"), {
        #[rate_limiter(name = "payments")]
        #[circuit_breaker(name = "payments")]
        pub async fn pay(order: &Order) -> Result<Receipt, PayError> {
            gateway::charge(order).await
        }
    });
    assert_guarded(&file);
    Ok(())
}

/// The same three gates written breaker first: the same guarded body, the guards listed in
/// this source order.
#[test]
fn stacked_three_gates_breaker_first() -> syn::Result<()> {
    let file = snapshot!(Kind::CircuitBreaker, (name = "payments"), {
        #[rate_limiter(name = "payments")]
        #[bulkhead(name = "payments")]
        pub async fn pay(order: &Order) -> Result<Receipt, PayError> {
            gateway::charge(order).await
        }
    });
    assert_guarded(&file);
    Ok(())
}

/// All five aspects, written in default precedence order: the whole plan runs in the runtime
/// as nested segments, the body made once per attempt, its by-value argument cloned for each.
#[test]
fn stacked_five_aspects_bulkhead_first() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "inventory"), {
        #[rate_limiter(name = "inventory")]
        #[retry(name = "inventory", retry_on = InvError::is_transient)]
        #[circuit_breaker(name = "inventory")]
        #[time_limiter(name = "inventory")]
        pub async fn reserve(sku: Sku, quantity: &u32) -> Result<Hold, InvError> {
            warehouse::reserve(sku, *quantity).await
        }
    });
    assert_guarded(&file);
    Ok(())
}

/// A retry whose errors say how long to wait (`retry_after`): the wait's function is handed to
/// the runtime with its type written out at the path.
#[test]
fn retry_with_retry_after() -> syn::Result<()> {
    let file = snapshot!(
        Kind::Retry,
        (name = "payments", retry_after = PayError::retry_after),
        {
            pub async fn pay(cents: u64) -> Result<Receipt, PayError> {
                gateway::pay(cents).await
            }
        }
    );
    assert_guarded(&file);
    Ok(())
}

/// The same five written inside out: the same guarded body, the guards listed in this order.
#[test]
fn stacked_five_aspects_time_limiter_first() -> syn::Result<()> {
    let file = snapshot!(Kind::TimeLimiter, (name = "inventory"), {
        #[circuit_breaker(name = "inventory")]
        #[retry(name = "inventory", retry_on = InvError::is_transient)]
        #[rate_limiter(name = "inventory")]
        #[bulkhead(name = "inventory")]
        pub async fn reserve(sku: Sku, quantity: &u32) -> Result<Hold, InvError> {
            warehouse::reserve(sku, *quantity).await
        }
    });
    assert_guarded(&file);
    Ok(())
}

/// A sync function with a retry: the body is a closure made again per attempt; a `&mut`
/// argument is reborrowed for each.
#[test]
fn retry_sync_fn() -> syn::Result<()> {
    let file = snapshot!(Kind::Retry, (name = "ledger"), {
        pub fn append(entry: Entry, log: &mut Log) -> Result<(), LedgerError> {
            log.append(entry)
        }
    });
    assert_guarded(&file);
    Ok(())
}

/// A hedge with `hedge_on` inside a bulkhead: the body is a closure made again per attempt
/// (an argument taken by value cloned for each), and `hedge_on` reaches the runtime's judge.
#[test]
fn hedge_with_hedge_on() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "search"), {
        #[hedge(name = "search", hedge_on = SearchError::is_unavailable)]
        async fn search(query: Query) -> Result<Hits, SearchError> {
            backend::search(&query).await
        }
    });
    assert_guarded(&file);
    Ok(())
}

/// A function that does not return a `Result`: a rejection goes to the fallback, which
/// receives the same arguments and the rejection.
#[test]
fn fallback_free_fn() -> syn::Result<()> {
    let file = snapshot!(
        Kind::Bulkhead,
        (name = "recommendations", fallback = no_recommendations),
        {
            pub fn recommendations(user: UserId, limit: usize) -> Vec<Product> {
                engine::recommend(user, limit)
            }
        }
    );
    assert_guarded(&file);
    Ok(())
}

/// With `fallback_on_error`, the arguments the body takes by value are cloned first, and the
/// fallback receives the function's error for a rejection and a failure alike.
#[test]
fn fallback_on_error() -> syn::Result<()> {
    let file = snapshot!(
        Kind::CircuitBreaker,
        (
            name = "stock",
            fallback = stale_stock,
            fallback_on_error = true
        ),
        {
            pub fn stock(&self, item: String, warehouse: &Warehouse) -> Result<u32, StockError> {
                self.client.stock(item, warehouse)
            }
        }
    );
    assert_guarded(&file);
    Ok(())
}

/// In a method a bare fallback name is a function of the same type; an async fallback is
/// awaited.
#[test]
fn fallback_async_method() -> syn::Result<()> {
    let file = snapshot!(
        Kind::CircuitBreaker,
        (name = "rates", fallback = cached_rate),
        {
            pub async fn rate(&self, from: Currency, to: Currency) -> Result<Rate, RateError> {
                self.client.fetch_rate(from, to).await
            }
        }
    );
    assert_guarded(&file);
    Ok(())
}

#[test]
fn ignore_and_record_predicates() -> syn::Result<()> {
    let file = snapshot!(
        Kind::CircuitBreaker,
        (
            name = "payments",
            ignore = PaymentError::is_client_error,
            record = is_transient
        ),
        {
            pub fn refund(charge: ChargeId) -> Result<RefundId, PaymentError> {
                gateway::refund(charge)
            }
        }
    );
    assert_guarded(&file);
    Ok(())
}

/// `crate` on one attribute of a stack applies to every guard of the function.
#[test]
fn crate_renamed() -> syn::Result<()> {
    let file = snapshot!(
        Kind::CircuitBreaker,
        (name = "orders", crate = "renamed"),
        {
            #[bulkhead(name = "orders")]
            pub fn cancel(order: OrderId) -> Result<(), OrderError> {
                store::cancel(order)
            }
        }
    );
    assert_guarded(&file);
    Ok(())
}

#[test]
fn error_duplicate_aspect() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "orders"), {
        #[bulkhead(name = "orders-slow")]
        #[inline]
        pub fn place_order(order: Order) -> Result<OrderId, OrderError> {
            store::insert(order)
        }
    });
    assert_error_then_item(&file);
    Ok(())
}

#[test]
fn error_missing_name() -> syn::Result<()> {
    let file = snapshot!(Kind::CircuitBreaker, (), {
        #[bulkhead(name = "orders")]
        pub fn place_order(order: Order) -> Result<OrderId, OrderError> {
            store::insert(order)
        }
    });
    assert_error_then_item(&file);
    Ok(())
}

#[test]
fn error_non_result_return() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "orders"), {
        #[circuit_breaker(name = "orders")]
        pub fn order_count(customer: CustomerId) -> usize {
            store::count(customer)
        }
    });
    assert_error_then_item(&file);
    Ok(())
}

/// A method repeats the aspect of its impl block: the error, then the block with that method
/// unguarded and the others guarded.
#[test]
fn error_impl_block_aspect_repeated_on_a_method() -> syn::Result<()> {
    let file = snapshot!(Kind::Bulkhead, (name = "inventory"), {
        impl Inventory {
            #[bulkhead(name = "inventory-writes")]
            pub fn restock(&mut self, sku: String, qty: u32) -> Result<(), InventoryError> {
                self.store.add(sku, qty)
            }

            pub fn level(&self, sku: &str) -> Result<u32, InventoryError> {
                self.store.level(sku)
            }
        }
    });
    assert_error_then_item(&file);
    Ok(())
}

/// Every mistake of a function is reported in one compile, each at its own token: here four,
/// where a first-error-only check needed four rounds of fix and rebuild.
#[test]
fn errors_of_one_function_are_reported_together() -> syn::Result<()> {
    let output = expand::attribute(
        Kind::TimeLimiter,
        quote!(name = "quotes"),
        quote! {
            #[track_caller]
            pub const fn quote(symbol: Symbol) -> Price {
                table::lookup(symbol)
            }
        },
    );
    let file = syn::parse2::<syn::File>(output)?;
    let messages: Vec<String> = file
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Macro(m)
                if m.mac.path.is_ident("compile_error")
                    || m.mac
                        .path
                        .segments
                        .last()
                        .is_some_and(|s| s.ident == "compile_error") =>
            {
                Some(m.mac.tokens.to_string())
            }
            _ => None,
        })
        .collect();
    for expected in [
        "cannot keep `#[track_caller]`",
        "cannot guard a `const fn`",
        "bounds an `async fn`",
        "needs `quote` to return `Result<_, E>`",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(expected)),
            "no error saying {expected:?} among {messages:#?}"
        );
    }
    assert_eq!(messages.len(), 4, "{messages:#?}");
    Ok(())
}
