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
//! Access: every route sits behind the endpoint's login (`http::login`), and
//! every handler reaches a queue through `browse_queue` (to look) or
//! `manage_queue` (to act), an address through `browse_address`, the list of
//! queues through `browse_queues`: there the caller's permissions are checked
//! with `security::access`, the same operations as the gRPC Admin service's
//! (`browse` to look; `manage`, plus `send` where messages go, to act). A denial
//! is audited and answers 403.
//!
//! | file | what |
//! |---|---|
//! | `api.rs` | the read-only API: overview, queues, a queue's messages and settings, dead-letter groups, redelivery plans |
//! | `actions.rs` | the actions on a queue's messages (retry, move, remove) and on a queue in outage mode |
//! | `groups.rs` | dead-letter triage: a dead-letter queue's messages grouped by the queue they failed on and why |
//! | `rates.rs` | rates: a ring of samples of the broker's counters, taken by a task of the engine |
//! | `forward.rs` | on a node of a cluster: requests about a queue another node serves, forwarded to it |
//! | `json.rs` | how the API shows the engine's things as JSON |
//! | `error.rs` | the one mapping from the engine's errors to HTTP statuses |
//! | `assets.rs` | the page and its files (`assets/`), embedded in the binary, under a Content-Security-Policy |
mod actions;
mod api;
mod assets;
pub mod error;
mod forward;
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
use crate::security::access::{self, Caller, Kind, Operation};

/// What the console keeps: the rate samples, the addresses the broker
/// listens on, and its client toward the other nodes of a cluster.
pub struct Console {
    pub sampler: Arc<Sampler>,
    pub listening: Listening,
    nodes: forward::Nodes,
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
            nodes: forward::Nodes::default(),
        }
    }
}

/// Every route of the console: the page, its assets and the API. The routes
/// about one queue go to the node serving it when that is another
/// (`forward.rs`).
pub(super) fn routes(state: &HttpState) -> Router<HttpState> {
    let one_queue = Router::new()
        .route("/api/queues/{queue}", get(api::queue))
        .route("/api/queues/{queue}/messages", get(api::messages))
        .route("/api/queues/{queue}/messages/{id}", get(api::message))
        .route("/api/queues/{queue}/messages/{id}/body", get(api::body))
        .route("/api/queues/{queue}/dead-letters", get(api::dead_letters))
        .route("/api/queues/{queue}/retry", post(actions::retry))
        .route("/api/queues/{queue}/move", post(actions::move_to))
        .route("/api/queues/{queue}/remove", post(actions::remove))
        .route("/api/queues/{queue}/resume", post(actions::resume))
        .route("/api/queues/{queue}/probe", post(actions::probe))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            forward::to_serving_node,
        ));
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{file}", get(assets::file))
        .route("/api/overview", get(api::overview))
        .route("/api/queues", get(api::queues))
        .route("/api/addresses/{address}/redelivery", get(api::redelivery))
        .merge(one_queue)
}

/// A queue `caller` wants to look at (its messages, settings, dead letters).
fn browse_queue(state: &HttpState, caller: &Caller, name: &str) -> Result<Arc<Queue>, ApiError> {
    let operation = Operation::on_queue(&state.broker, Kind::Browse, name);
    access::authorize(&state.security.policy(), caller, &operation)?;
    Ok(state.broker.queue(name)?)
}

/// The queues `caller` may look at (the overview's gauges, the queues table),
/// in no particular order.
fn browse_queues(state: &HttpState, caller: &Caller) -> Vec<Arc<Queue>> {
    let policy = state.security.policy();
    state
        .broker
        .management()
        .queues_where(|queue| access::may_browse(&policy, caller, &queue.address))
}

/// An address `caller` wants to look at (its settings, its redelivery plan).
fn browse_address(state: &HttpState, caller: &Caller, name: &str) -> Result<(), ApiError> {
    crate::message::check_name("address", name)?;
    access::authorize(&state.security.policy(), caller, &Operation::browse_address(name))?;
    Ok(())
}

/// `operation` on a queue's messages (retry, move, remove), if `caller` may
/// carry it out: the queue it acts on.
fn manage_queue(
    state: &HttpState,
    caller: &Caller,
    operation: &Operation<'_>,
) -> Result<Arc<Queue>, ApiError> {
    access::authorize(&state.security.policy(), caller, operation)?;
    let name = operation.queue.expect("a message operation names its queue");
    Ok(state.broker.queue(name)?)
}
