//! The broker's health, by the standard gRPC health check (`grpc.health.v1`), the
//! same question load balancers, orchestrators and `grpc_health_probe` ask.

use tonic_health::pb::HealthCheckRequest;

use crate::{Client, Result};

/// What a health check answered: `Serving`, `NotServing` (the broker is shutting
/// down), ... [`HealthStatus::as_str_name`] gives the protocol's name (`SERVING`).
pub use tonic_health::pb::health_check_response::ServingStatus as HealthStatus;

impl Client {
    /// The broker's overall health (the health service's `""` entry).
    pub async fn health(&self) -> Result<HealthStatus> {
        let request = HealthCheckRequest {
            service: String::new(),
        };
        let status = self.health.clone().check(request).await?.into_inner().status;
        Ok(HealthStatus::try_from(status).unwrap_or(HealthStatus::Unknown))
    }
}
