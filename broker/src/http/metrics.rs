//! `GET /metrics`: the registry of [`crate::metrics`] in the OpenMetrics text
//! format, which Prometheus scrapes (the names are listed in docs/operations.md),
//! gzipped when the scraper accepts it.
//!
//! Broker-wide figures need only a login; a queue's samples show only when the
//! caller may browse its address (`security::access::may_browse`), and so do an
//! address's.
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::compression::CompressionLayer;

use super::HttpState;
use crate::security::access::{self, Caller};

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A scrape of many queues compresses well (14.5 MB of text at 10,000 queues
/// is under 1 MB gzipped): gzip when the scraper asks for it, as Prometheus
/// does.
pub(super) fn routes() -> Router<HttpState> {
    Router::new()
        .route("/metrics", get(metrics))
        .layer(CompressionLayer::new().gzip(true))
}

async fn metrics(State(state): State<HttpState>, caller: Caller) -> Response {
    let policy = state.security.policy();
    let shown = Arc::new(move |address: &str| access::may_browse(&policy, &caller, address));
    let registry = crate::metrics::registry(&state.broker, shown);
    // Encoding reads every queue: off the async workers, as 10,000 queues take
    // milliseconds.
    let encoded = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).map(|()| text)
    })
    .await;
    match encoded {
        Ok(Ok(text)) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "encoding the metrics failed\n").into_response(),
    }
}
