//! Standard gRPC tooling works against the broker: health checking (what load
//! balancers and `grpc_health_probe` use) and server reflection (what `grpcurl` uses).
use futures::StreamExt;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

use crate::support::Broker;

async fn channel(broker: &Broker) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(broker.url())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn health_reports_serving_for_each_service() {
    // With users too: probes need no login.
    for broker in [
        Broker::start().await,
        Broker::start_with_config("[[users]]\nname = \"a\"\n").await,
    ] {
        health_is_serving(&broker).await;
    }
}

async fn health_is_serving(broker: &Broker) {
    let mut health = HealthClient::new(channel(broker).await);
    for service in ["rebound.v1.Messaging", "rebound.v1.Admin"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reflection_lists_the_api() {
    let broker = Broker::start().await;
    let mut reflection = ServerReflectionClient::new(channel(&broker).await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection answer: {response:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [
        "rebound.v1.Messaging",
        "rebound.v1.Admin",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
}
