//! gRPC health while the broker serves: it follows whether the store takes
//! commits.
use std::sync::Arc;
use std::time::Duration;

use rebound_protocol::v1::{admin_server::AdminServer, messaging_server::MessagingServer};

use crate::engine::Broker;
use crate::grpc::{admin::AdminService, messaging::MessagingService};

/// How often gRPC health looks at the store.
const HEALTH_EVERY: Duration = Duration::from_secs(1);

/// Keeps gRPC health NOT_SERVING while the store fails its commits (what
/// `/health/ready` says on HTTP), SERVING otherwise, until shutdown, which
/// sets it for good.
pub(super) async fn report_store_health(broker: Arc<Broker>, health: tonic_health::server::HealthReporter) {
    let mut was_failing = false;
    loop {
        tokio::select! {
            _ = broker.shutdown().cancelled() => return,
            _ = tokio::time::sleep(HEALTH_EVERY) => {}
        }
        let failing = broker.store_failing();
        if failing == was_failing {
            continue;
        }
        was_failing = failing;
        let status = match failing {
            true => tonic_health::ServingStatus::NotServing,
            false => tonic_health::ServingStatus::Serving,
        };
        let messaging = <MessagingServer<MessagingService> as tonic::server::NamedService>::NAME;
        let admin = <AdminServer<AdminService> as tonic::server::NamedService>::NAME;
        for service in ["", messaging, admin] {
            health.set_service_status(service, status).await;
        }
    }
}
