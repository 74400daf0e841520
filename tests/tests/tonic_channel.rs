//! A tonic client channel guarded by a `GuardLayer`, against tonic's own health service on
//! 127.0.0.1: calls pass through the named instances, a refusal reaches the caller as the gRPC
//! status it asked for (`UNAVAILABLE` for a full bulkhead or an open breaker), a `NOT_FOUND`
//! is an answer, and a server that went away opens the breaker.

use std::sync::Arc;
use std::time::Duration;

use resilience_runtime::tower::{GrpcErrorsAreFailures, GuardError, GuardLayer};
use resilience_runtime::{
    BulkheadConfig, CircuitBreakerConfig, CircuitState, Guard, Registry, SlidingWindow,
};
use tokio::sync::oneshot;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Endpoint, Server};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tower::ServiceBuilder;

/// tonic's health service on an ephemeral port of 127.0.0.1, until `stop` is sent.
async fn health_server() -> (String, oneshot::Sender<()>) {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("orders", tonic_health::ServingStatus::Serving)
        .await;
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        // Keeps the reporter, and so the service's statuses, while it serves.
        let _reporter = reporter;
        Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            })
            .await
    });
    (format!("http://{addr}"), stop)
}

fn check(service: &str) -> HealthCheckRequest {
    HealthCheckRequest {
        service: service.to_owned(),
    }
}

#[tokio::test]
async fn a_guarded_channel_answers_refusals_as_grpc_statuses_and_opens_when_the_server_goes() {
    let (url, stop) = health_server().await;
    let registry = Arc::new(Registry::new());
    let one = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .build()
        .unwrap();
    registry.configure_bulkhead("grpc", one).unwrap();
    let breaker = CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::CountBased(4))
        .minimum_number_of_calls(4)
        .failure_rate_threshold(50.0)
        .wait_duration_in_open_state(Duration::from_secs(60))
        .build()
        .unwrap();
    registry.configure_circuit_breaker("grpc", breaker).unwrap();

    let channel = Endpoint::from_shared(url).unwrap().connect().await.unwrap();
    let guards = GuardLayer::new(&[Guard::bulkhead("grpc"), Guard::circuit_breaker("grpc")])
        .with_registry(registry.clone())
        .classifier(GrpcErrorsAreFailures);
    let guarded = ServiceBuilder::new()
        .map_err(GuardError::<tonic::transport::Error>::into_grpc_error)
        .layer(guards)
        .service(channel);
    let mut client = HealthClient::new(guarded);

    let serving = client.check(check("orders")).await.unwrap();
    assert_eq!(serving.into_inner().status(), ServingStatus::Serving);
    // An unknown service is the server's answer, not its failure.
    let unknown = client.check(check("nobody")).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    let metrics = registry.circuit_breaker("grpc").metrics();
    assert_eq!(metrics.number_of_successful_calls(), 2);

    // The bulkhead held elsewhere: the call is refused before it is sent, as UNAVAILABLE.
    let bulkhead = registry.bulkhead("grpc");
    let held = bulkhead.try_acquire().unwrap();
    let refused = client.check(check("orders")).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    assert!(
        refused.message().contains("bulkhead `grpc` is full"),
        "{refused}"
    );
    drop(held);

    // The server goes away (gracefully: calls already on their way may still be answered);
    // then each call fails to connect, and the breaker opens on them.
    stop.send(()).unwrap();
    let breaker = registry.circuit_breaker("grpc");
    for _ in 0..400 {
        if breaker.state() == CircuitState::Open {
            break;
        }
        if let Err(failed) = client.check(check("orders")).await {
            assert_eq!(failed.code(), Code::Unavailable, "{failed}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(breaker.state(), CircuitState::Open);
    let open = client.check(check("orders")).await.unwrap_err();
    assert_eq!(open.code(), Code::Unavailable);
    assert!(open.message().contains("circuit breaker `grpc`"), "{open}");
    assert_eq!(registry.bulkhead("grpc").available_concurrent_calls(), 1);
}
