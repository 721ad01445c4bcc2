//! The console's read-only API: overview, queues, a queue's messages and settings,
//! a dead-letter queue's groups, an address's redelivery plan.
use std::collections::{BTreeSet, HashMap};

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::ApiError;
use super::rates::Totals;
use super::{browse_address, browse_queue, browse_queues, forward, groups, json};
use crate::explain;
use crate::http::HttpState;
use crate::queue::Queue;
use crate::security::access::Caller;

/// Messages one page of a queue shows at most.
const MAX_PAGE: usize = 200;
/// How deep into a queue pages go: browsing walks from the head each time.
const MAX_BROWSE_DEPTH: usize = 10_000;
/// Dead letters grouped at most (the first ones of the queue); the answer says so.
pub const MAX_GROUPED: usize = 10_000;

/// The settings the redelivery explainer shows beside the plan.
const REDELIVERY_KEYS: [&str; 12] = [
    "max-delivery-attempts",
    "redelivery-delay",
    "redelivery-delay-multiplier",
    "max-redelivery-delay",
    "redelivery-collision-avoidance-factor",
    "redelivery-schedule",
    "dead-letter-address",
    "auto-create-dead-letter-resources",
    "dead-letter-queue-prefix",
    "dead-letter-queue-suffix",
    "max-retry-after",
    "max-redrive",
];

type ApiResult = Result<Json<Value>, ApiError>;

/// The queues' gauges summed.
#[derive(Default, Serialize)]
struct Gauges {
    queues: usize,
    messages: u64,
    delivering: u64,
    scheduled: u64,
    consumers: u64,
    bytes: u64,
}

/// The broker at a glance; the message figures are those of the queues the
/// caller may browse (the rate history only for one who may browse them all),
/// on a cluster those of the queues other nodes serve as those nodes see them
/// (the rates are this node's).
pub(super) async fn overview(
    State(state): State<HttpState>,
    caller: Caller,
    headers: HeaderMap,
) -> ApiResult {
    let broker = &state.broker;
    let stats = broker.store().stats();
    let queues = browse_queues(&state, &caller);
    let (latest, rates) = if queues.len() == broker.queue_count() {
        state.console.sampler.history()
    } else {
        (Totals::of(broker, &queues), Vec::new())
    };
    let mut gauges = Gauges {
        queues: queues.len(),
        ..Gauges::default()
    };
    let mut elsewhere = Vec::new();
    for queue in &queues {
        if broker.serving_node(&queue.name).is_some() {
            elsewhere.push(json!({ "name": queue.name }));
            continue;
        }
        let snap = queue.snapshot();
        gauges.messages += snap.messages;
        gauges.delivering += snap.delivering;
        gauges.scheduled += snap.scheduled;
        gauges.consumers += u64::from(snap.consumers);
        gauges.bytes += snap.bytes;
    }
    forward::rows_of_serving_nodes(&state, &headers, &mut elsewhere).await;
    for row in &elsewhere {
        let gauge = |name: &str| row[name].as_u64().unwrap_or(0);
        gauges.messages += gauge("messages");
        gauges.delivering += gauge("delivering");
        gauges.scheduled += gauge("scheduled");
        gauges.consumers += gauge("consumers");
        gauges.bytes += gauge("bytes");
    }
    let listening = state.console.listening;
    Ok(Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_ms": broker.uptime().as_millis() as u64,
        "listen": {"grpc": listening.grpc.to_string(), "http": listening.http.to_string()},
        "addresses": broker.address_count(),
        "connections": broker.metrics().connections.get(),
        "open_transactions": broker.open_transactions(),
        "store": {"commits": stats.commits, "ops": stats.ops, "syncs": stats.syncs, "disk_bytes": stats.disk_bytes},
        "gauges": gauges,
        "totals": latest,
        "rates": rates,
        "sample_every_ms": super::rates::EVERY.as_millis() as u64,
    })))
}

/// Every queue with its live counts, rates, and the settings matches that apply;
/// on a cluster, a queue another node serves as that node shows it.
pub(super) async fn queues(State(state): State<HttpState>, caller: Caller, headers: HeaderMap) -> ApiResult {
    let broker = &state.broker;
    let queues = browse_queues(&state, &caller);
    let mut per_address: HashMap<&str, (Vec<String>, Option<String>)> = HashMap::new();
    for queue in &queues {
        per_address.entry(&queue.address).or_insert_with(|| {
            let resolved = broker.resolve_settings(&queue.address);
            let dla = resolved.settings.dead_letter_address.clone();
            (json::matches(&resolved), dla)
        });
    }
    let dead_letter_addresses: BTreeSet<&str> = per_address
        .values()
        .filter_map(|(_, dla)| dla.as_deref())
        .collect();
    let mut rows: Vec<Value> = queues
        .iter()
        .map(|queue| {
            let mut row = with_rates(&state, queue);
            row["settings_matches"] = json!(per_address[queue.address.as_str()].0);
            row["dead_letter_queue"] = json!(dead_letter_addresses.contains(queue.address.as_str()));
            row
        })
        .collect();
    forward::rows_of_serving_nodes(&state, &headers, &mut rows).await;
    Ok(Json(json!({ "queues": rows })))
}

/// One queue: its counts and its effective settings with their sources.
pub(super) async fn queue(
    State(state): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    let queue = browse_queue(&state, &caller, &name)?;
    let resolved = state.broker.resolve_settings(&queue.address);
    let mut out = with_rates(&state, &queue);
    out["settings"] = json!(json::settings(&resolved, |_| true));
    out["settings_matches"] = json!(json::matches(&resolved));
    Ok(Json(out))
}

/// A queue's counts with its in and out rates.
fn with_rates(state: &HttpState, queue: &Queue) -> Value {
    let mut out = json::queue(queue);
    let rates = state.console.sampler.queue(&queue.name);
    out["in_per_s"] = json!(rates.in_per_s);
    out["out_per_s"] = json!(rates.out_per_s);
    out
}

#[derive(Deserialize)]
pub(super) struct PageQuery {
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    filter: String,
}

/// A page of a queue's messages in queue order (ready, delivering, scheduled).
pub(super) async fn messages(
    State(state): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> ApiResult {
    let Query(page) = query?;
    let queue = browse_queue(&state, &caller, &name)?;
    let limit = page.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    if page.offset >= MAX_BROWSE_DEPTH {
        return Err(ApiError::BadRequest(format!(
            "offset {} is past the {MAX_BROWSE_DEPTH} messages the console browses; use a filter",
            page.offset
        )));
    }
    let depth = (page.offset + limit + 1).min(MAX_BROWSE_DEPTH);
    let browsed = state.broker.browse(&queue.name, &page.filter, depth)?;
    let more = browsed.len() > page.offset + limit;
    let messages: Vec<Value> = browsed
        .iter()
        .skip(page.offset)
        .take(limit)
        .map(json::message)
        .collect();
    Ok(Json(json!({
        "queue": queue.name,
        "offset": page.offset,
        "messages": messages,
        "more": more,
    })))
}

/// One message, with its failure history when it is a dead letter.
pub(super) async fn message(
    State(state): State<HttpState>,
    caller: Caller,
    Path((name, id)): Path<(String, u64)>,
) -> ApiResult {
    let queue = browse_queue(&state, &caller, &name)?;
    Ok(Json(json::message(&state.broker.message(&queue.name, id)?)))
}

/// A dead-letter queue's messages grouped by origin and reason (the first
/// [`MAX_GROUPED`] of them).
pub(super) async fn dead_letters(
    State(state): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    let queue = browse_queue(&state, &caller, &name)?;
    let browsed = state.broker.browse(&queue.name, "", MAX_GROUPED)?;
    let total = queue.snapshot().messages;
    Ok(Json(json!({
        "queue": queue.name,
        "total": total,
        "grouped": browsed.len(),
        "limit": MAX_GROUPED,
        "groups": groups::group(&browsed),
    })))
}

/// An address's redelivery policy as a schedule, with the settings behind it.
pub(super) async fn redelivery(
    State(state): State<HttpState>,
    caller: Caller,
    Path(address): Path<String>,
) -> ApiResult {
    browse_address(&state, &caller, &address)?;
    let resolved = state.broker.resolve_settings(&address);
    let plan = explain::plan(&resolved.settings, &address);
    let settings = json::settings(&resolved, |key| REDELIVERY_KEYS.contains(&key));
    Ok(Json(json!({
        "address": address,
        "plan": json::plan(&plan),
        "settings": settings,
        "shown": explain::SHOWN,
    })))
}
