//! The console's read-only API: overview, queues, a queue's messages and settings,
//! a dead-letter queue's groups, an address's redelivery plan.
use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::ApiError;
use super::rates::Totals;
use super::{browse_address, browse_queue, browse_queues, forward, groups, json};
use crate::explain;
use crate::http::HttpState;
use crate::outage::Status;
use crate::queue::Queue;
use crate::security::access::Caller;

/// Messages one page of a queue shows at most.
const MAX_PAGE: usize = 200;
/// How deep into a queue pages go: browsing walks from the head each time.
const MAX_BROWSE_DEPTH: usize = 10_000;
/// Dead letters grouped at most (the first ones of the queue); the answer says so.
pub const MAX_GROUPED: usize = 10_000;

/// Dead-letter queues and queues in outage the overview names at most (it
/// counts them all).
const OVERVIEW_ROWS: usize = 20;

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
    let (latest, rates) = if queues.len() == broker.management().queue_count() {
        state.console.sampler.history()
    } else {
        (Totals::of(broker, &queues), Vec::new())
    };
    let mut gauges = Gauges {
        queues: queues.len(),
        ..Gauges::default()
    };
    let mut elsewhere = Vec::new();
    let dead_letter_addresses = broker.dead_letter_addresses();
    let mut waiting = Vec::new();
    let mut in_outage = Vec::new();
    for queue in &queues {
        if broker.cluster().serving_node(&queue.name).is_some() {
            elsewhere.push(json!({ "name": queue.name }));
            continue;
        }
        let snap = queue.snapshot();
        if snap.messages > 0 && dead_letter_addresses.contains(queue.address.as_str()) {
            waiting.push((snap.messages, queue));
        }
        if let Status::Outage {
            since_ms,
            next_probe_ms,
        } = snap.outage
        {
            in_outage.push((since_ms, next_probe_ms, queue));
        }
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
    // The fullest dead-letter queues and the longest outages, a few of each.
    let counted = (waiting.len(), in_outage.len());
    waiting.sort_by(|(a, qa), (b, qb)| b.cmp(a).then_with(|| qa.name.cmp(&qb.name)));
    in_outage.sort_by(|(a, _, qa), (b, _, qb)| a.cmp(b).then_with(|| qa.name.cmp(&qb.name)));
    let waiting: Vec<Value> = waiting
        .iter()
        .take(OVERVIEW_ROWS)
        .map(|(messages, q)| json!({"name": q.name, "address": q.address, "messages": messages}))
        .collect();
    let in_outage: Vec<Value> = in_outage
        .iter()
        .take(OVERVIEW_ROWS)
        .map(|(since_ms, next_probe_ms, q)| {
            json!({"name": q.name, "address": q.address, "outage_since_ms": since_ms, "next_probe_at_ms": next_probe_ms})
        })
        .collect();
    let listening = state.console.listening;
    Ok(Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_ms": broker.uptime().as_millis() as u64,
        "listen": {"grpc": listening.grpc.to_string(), "http": listening.http.to_string()},
        "addresses": broker.management().address_count(),
        "connections": broker.metrics().connections.get(),
        "open_transactions": broker.open_transactions(),
        "store": {"commits": stats.commits, "ops": stats.ops, "syncs": stats.syncs, "disk_bytes": stats.disk_bytes},
        "gauges": gauges,
        "totals": latest,
        "rates": rates,
        "sample_every_ms": super::rates::EVERY.as_millis() as u64,
        "dead_letters_waiting": {"count": counted.0, "queues": waiting},
        "outages": {"count": counted.1, "queues": in_outage},
    })))
}

/// Rows of the queues table one page shows unless asked otherwise, and at most.
const DEFAULT_ROWS: usize = 50;
const MAX_ROWS: usize = 500;

/// A column the queues table sorts by.
#[derive(Deserialize, Default, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Column {
    #[default]
    Name,
    Address,
    RoutingType,
    State,
    Messages,
    Delivering,
    Scheduled,
    Consumers,
    InPerS,
    OutPerS,
    DeadLettered,
}

#[derive(Deserialize, Default, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Direction {
    #[default]
    Asc,
    Desc,
}

#[derive(Deserialize)]
pub(super) struct TableQuery {
    #[serde(default)]
    sort: Column,
    #[serde(default)]
    dir: Direction,
    /// Kept: the queues whose name or address contains it, ignoring case.
    #[serde(default)]
    filter: String,
    /// Kept: only the queues on a dead-letter address.
    #[serde(default)]
    dead_letters: bool,
    /// Kept: only the queues this node serves, all of them (what one node of a
    /// cluster asks another for, `forward.rs`).
    #[serde(default)]
    served_here: bool,
    /// Where the page starts, as the previous answer gave it; empty: the first.
    #[serde(default)]
    page_token: String,
    limit: Option<usize>,
}

/// One page of the queues, sorted and filtered on the server, with their live
/// counts, rates, and the settings matches that apply; `total` counts the
/// queues that pass the filter. On a cluster, a queue another node serves
/// shows as that node shows it (sorted by this node's figures for it).
pub(super) async fn queues(
    State(state): State<HttpState>,
    caller: Caller,
    headers: HeaderMap,
    query: Result<Query<TableQuery>, QueryRejection>,
) -> ApiResult {
    let Query(table) = query?;
    let broker = &state.broker;
    let offset = match table.page_token.as_str() {
        "" => 0,
        token => token.parse::<usize>().map_err(|_| {
            ApiError::BadRequest(format!(
                "page_token {token:?} is not one this API gave: pass back a next_page_token or prev_page_token"
            ))
        })?,
    };
    let limit = match table.limit {
        _ if table.served_here => usize::MAX,
        Some(limit) if !(1..=MAX_ROWS).contains(&limit) => {
            return Err(ApiError::BadRequest(format!(
                "limit {limit} is out of range: a page holds 1 to {MAX_ROWS} queues"
            )));
        }
        limit => limit.unwrap_or(DEFAULT_ROWS),
    };
    let queues = browse_queues(&state, &caller);
    let shown = queues.len();
    let dead_letter_addresses = broker.dead_letter_addresses();
    let needle = table.filter.trim().to_lowercase();
    let kept: Vec<Arc<Queue>> = queues
        .into_iter()
        .filter(|q| {
            (needle.is_empty()
                || q.name.to_lowercase().contains(&needle)
                || q.address.to_lowercase().contains(&needle))
                && (!table.dead_letters || dead_letter_addresses.contains(q.address.as_str()))
                && (!table.served_here || broker.cluster().serving_node(&q.name).is_none())
        })
        .collect();
    let total = kept.len();
    let kept = sorted(&state, &kept, table.sort, table.dir, offset.saturating_add(limit));
    let page = kept.get(offset.min(total)..).unwrap_or_default();
    let page = &page[..page.len().min(limit)];
    let mut per_address: HashMap<&str, Vec<String>> = HashMap::new();
    let mut rows: Vec<Value> = page
        .iter()
        .map(|queue| {
            let matches = per_address
                .entry(&queue.address)
                .or_insert_with(|| json::matches(&broker.resolve_settings(&queue.address)));
            let mut row = with_rates(&state, queue);
            row["settings_matches"] = json!(matches);
            row["dead_letter_queue"] = json!(dead_letter_addresses.contains(queue.address.as_str()));
            row
        })
        .collect();
    forward::rows_of_serving_nodes(&state, &headers, &mut rows).await;
    let end = offset + page.len();
    Ok(Json(json!({
        "queues": rows,
        "total": total,
        "shown": shown,
        "offset": offset,
        "next_page_token": (end < total).then(|| end.to_string()),
        "prev_page_token": (offset > 0).then(|| offset.saturating_sub(limit).to_string()),
    })))
}

/// What a queue sorts by in one column.
#[derive(PartialEq, PartialOrd)]
enum Key<'a> {
    Text(&'a str),
    Number(f64),
}

/// The first `first` of the queues sorted by `column` (each queue's figures
/// read once), then by name. Only those are put in order: a page near the
/// start of 100,000 queues costs a partition, not a sort of them all.
fn sorted(
    state: &HttpState,
    queues: &[Arc<Queue>],
    column: Column,
    dir: Direction,
    first: usize,
) -> Vec<Arc<Queue>> {
    let figure = |q: &Queue| -> f64 {
        let snap = q.snapshot();
        match column {
            Column::State => f64::from(u8::from(snap.outage != Status::Normal)),
            Column::Messages => snap.messages as f64,
            Column::Delivering => snap.delivering as f64,
            Column::Scheduled => snap.scheduled as f64,
            Column::Consumers => f64::from(snap.consumers),
            // DeadLettered: the text and rate columns do not read a snapshot.
            _ => snap.counters.dead_lettered as f64,
        }
    };
    let keys: Vec<Key> = queues
        .iter()
        .map(|q| match column {
            Column::Name => Key::Text(&q.name),
            Column::Address => Key::Text(&q.address),
            Column::RoutingType => Key::Text(q.routing_type.as_str()),
            Column::InPerS => Key::Number(state.console.sampler.queue(&q.name).in_per_s),
            Column::OutPerS => Key::Number(state.console.sampler.queue(&q.name).out_per_s),
            _ => Key::Number(figure(q)),
        })
        .collect();
    let mut order: Vec<usize> = (0..queues.len()).collect();
    let cmp = |&a: &usize, &b: &usize| {
        let by_column = keys[a].partial_cmp(&keys[b]).unwrap_or(std::cmp::Ordering::Equal);
        let by_column = if dir == Direction::Desc {
            by_column.reverse()
        } else {
            by_column
        };
        by_column.then_with(|| queues[a].name.cmp(&queues[b].name))
    };
    if first < order.len() {
        order.select_nth_unstable_by(first, cmp);
        order.truncate(first);
    }
    order.sort_unstable_by(cmp);
    order.into_iter().map(|i| queues[i].clone()).collect()
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
    let browsed = state
        .broker
        .management()
        .browse(&queue.name, &page.filter, depth)?;
    let more = browsed.len() > page.offset + limit;
    let snap = queue.snapshot();
    // A queue in outage mode holds its ready messages back.
    let paused = snap.outage != Status::Normal;
    let messages: Vec<Value> = browsed
        .iter()
        .skip(page.offset)
        .take(limit)
        .map(|b| {
            let mut message = json::message(b);
            if paused && message["state"] == "ready" {
                message["state"] = json!("paused");
            }
            message
        })
        .collect();
    // The walk stopped at its depth with messages left behind it.
    let window_ended = !more && browsed.len() == MAX_BROWSE_DEPTH && snap.messages > MAX_BROWSE_DEPTH as u64;
    Ok(Json(json!({
        "queue": queue.name,
        "offset": page.offset,
        "messages": messages,
        "more": more,
        "window": MAX_BROWSE_DEPTH,
        "window_ended": window_ended,
    })))
}

/// A message's whole body, as a download.
pub(super) async fn body(
    State(state): State<HttpState>,
    caller: Caller,
    Path((name, id)): Path<(String, u64)>,
) -> Result<Response, ApiError> {
    let queue = browse_queue(&state, &caller, &name)?;
    let message = state.broker.management().message(&queue.name, id)?;
    let headers = [
        (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
        (
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"message-{id}.bin\""),
        ),
    ];
    Ok((headers, message.record.body.clone()).into_response())
}

/// One message, with its failure history when it is a dead letter.
pub(super) async fn message(
    State(state): State<HttpState>,
    caller: Caller,
    Path((name, id)): Path<(String, u64)>,
) -> ApiResult {
    let queue = browse_queue(&state, &caller, &name)?;
    Ok(Json(json::message(
        &state.broker.management().message(&queue.name, id)?,
    )))
}

/// A dead-letter queue's messages grouped by origin and reason (the first
/// [`MAX_GROUPED`] of them).
pub(super) async fn dead_letters(
    State(state): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult {
    let queue = browse_queue(&state, &caller, &name)?;
    let browsed = state.broker.management().browse(&queue.name, "", MAX_GROUPED)?;
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
