//! `GET /health/live` and `GET /health/ready`, for Kubernetes probes and load
//! balancers.
//!
//! - live: 200 `live` as long as the process answers and its store writes;
//!   503 `store failed` once the store refuses every commit until a restart
//!   (a supervisor then restarts it);
//! - ready: 200 `ready` when the broker takes work — recovery is done (the
//!   endpoint starts only after it) and the last store commit succeeded; 503
//!   `shutting down` once shutdown began, 503 `store failing` while the last
//!   commit failed or the store retries its writes (it is ready again once
//!   they go through and a commit succeeds).
//!
//! Bodies are one line of plain text, so a probe or a person needs no parser.
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use super::HttpState;

pub(super) fn routes() -> Router<HttpState> {
    Router::new()
        .route("/health/live", get(live))
        .route("/health/ready", get(ready))
}

async fn live(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    match state.broker.store_failed() {
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "store failed\n"),
        None => (StatusCode::OK, "live\n"),
    }
}

async fn ready(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    if state.broker.is_shutting_down() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
    } else if state.broker.store_failing() {
        (StatusCode::SERVICE_UNAVAILABLE, "store failing\n")
    } else {
        (StatusCode::OK, "ready\n")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rebound_config::Config;
    use rebound_storage::MemoryStore;

    use super::*;
    use crate::engine::Broker;

    #[tokio::test]
    async fn ready_until_shutdown_begins() {
        let config = Config::parse("", "test.toml").unwrap();
        let broker = Broker::open(&config, Arc::new(MemoryStore::new())).await.unwrap();
        let nowhere = "127.0.0.1:0".parse().unwrap();
        let listening = crate::http::console::Listening {
            grpc: nowhere,
            http: nowhere,
        };
        let state = HttpState::new(
            broker.clone(),
            listening,
            Arc::new(crate::security::Authenticator::new(&config.users)),
            Arc::new(crate::security::Security::new(&config)),
        );
        assert_eq!(live(State(state.clone())).await, (StatusCode::OK, "live\n"));
        assert_eq!(ready(State(state.clone())).await, (StatusCode::OK, "ready\n"));
        broker.shutdown().cancel();
        assert_eq!(
            ready(State(state.clone())).await,
            (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
        );
        assert_eq!(live(State(state)).await, (StatusCode::OK, "live\n"));
    }
}
