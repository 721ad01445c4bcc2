//! The web console (`GET /`): a page for operators, and the JSON API under
//! `/api/` it is built on.
//!
//! rebound's reason to exist is failing messages, so the console is built around
//! them: a dead-letter queue's messages grouped by where and why they failed
//! ([`groups`]), a retry that first shows where each message would go and then
//! moves exactly those, and the redelivery policy of any address as a schedule
//! ([`crate::explain`]). Around it: an overview with rates ([`rates`]), the queues
//! table, and a queue's messages page by page.
//!
//! The API calls the same engine methods as the gRPC Admin service, never a second
//! implementation; errors map to HTTP statuses in one place ([`error`]). The page
//! is static files embedded in the binary (`assets`); it gets every broker value
//! through the API and shows it as text.
//!
//! Access: every handler reaches a queue through `browse_queue` (to look) or
//! `manage_queue` (to act), an address through `browse_address`, the list of
//! queues through `browse_queues`: the one place where a per-address permission
//! check (or filter) belongs; every route sits in the one
//! `routes` router, so one layer covers them.
mod actions;
mod api;
mod assets;
pub mod error;
pub mod groups;
mod json;
pub mod rates;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use self::error::ApiError;
use self::rates::Sampler;
use super::HttpState;
use crate::engine::Broker;
use crate::queue::Queue;

/// What the console keeps: the rate samples and the addresses the broker listens on.
pub struct Console {
    pub sampler: Arc<Sampler>,
    pub listening: Listening,
}

/// Where the broker listens, for the overview.
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    pub grpc: SocketAddr,
    pub http: SocketAddr,
}

impl Console {
    /// The console of `broker`; starts sampling its counters.
    pub fn start(broker: &Arc<Broker>, listening: Listening) -> Console {
        Console {
            sampler: Sampler::start(broker),
            listening,
        }
    }
}

/// Every route of the console: the page, its assets and the API.
pub(super) fn routes() -> Router<HttpState> {
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{file}", get(assets::file))
        .route("/api/overview", get(api::overview))
        .route("/api/queues", get(api::queues))
        .route("/api/queues/{queue}", get(api::queue))
        .route("/api/queues/{queue}/messages", get(api::messages))
        .route("/api/queues/{queue}/messages/{id}", get(api::message))
        .route("/api/queues/{queue}/dead-letters", get(api::dead_letters))
        .route("/api/addresses/{address}/redelivery", get(api::redelivery))
        .route("/api/queues/{queue}/retry", post(actions::retry))
        .route("/api/queues/{queue}/move", post(actions::move_to))
        .route("/api/queues/{queue}/remove", post(actions::remove))
}

/// A queue someone wants to look at (its messages, settings, dead letters).
fn browse_queue(state: &HttpState, name: &str) -> Result<Arc<Queue>, ApiError> {
    Ok(state.broker.queue(name)?)
}

/// The queues someone may look at (the overview's gauges, the queues table).
fn browse_queues(state: &HttpState) -> Vec<Arc<Queue>> {
    state.broker.queues_page("", usize::MAX, |_| true).items
}

/// An address someone wants to look at (its settings, its redelivery plan).
fn browse_address(_state: &HttpState, name: &str) -> Result<(), ApiError> {
    Ok(crate::message::check_name("address", name)?)
}

/// A queue someone wants to change (retry, move, remove its messages).
fn manage_queue(state: &HttpState, name: &str) -> Result<Arc<Queue>, ApiError> {
    Ok(state.broker.queue(name)?)
}
