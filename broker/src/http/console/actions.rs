//! The console's actions on a queue's messages: retry (dead letters back to the
//! queue they failed on), move to another address, remove.
//!
//! They call the engine's operations, with the CLI's guarantees: one commit per
//! message, `max-redrive`, messages being delivered left alone. Each takes a
//! selection — ids, a filter, or everything — and a `dry_run`: a retry's dry run is
//! the engine's (where each message would go, or why it would stay); a move's or
//! removal's counts what it would take. The page shows the preview, then confirms
//! with exactly the ids it showed.
use std::collections::BTreeSet;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::manage_queue;
use crate::engine::Selection;
use crate::http::HttpState;

/// Messages one retry preview lists at most; the answer says when there are more.
const MAX_PREVIEW: usize = 10_000;

/// Which messages an action takes, as the page sends it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Request {
    /// These messages (with `filter`: those of them it matches).
    #[serde(default)]
    ids: Vec<u64>,
    /// A selector.
    #[serde(default)]
    filter: String,
    /// Every message of the queue: must be said, so that an empty selection
    /// never means "all" by accident.
    #[serde(default)]
    all: bool,
    #[serde(default)]
    dry_run: bool,
    /// Where a move goes.
    #[serde(default)]
    to_address: String,
}

impl Request {
    fn selection(&self, queue: String) -> Result<Selection, ApiError> {
        let selects = !self.ids.is_empty() || !self.filter.trim().is_empty();
        if selects == self.all {
            return Err(ApiError::BadRequest(
                "select the messages: \"ids\", a \"filter\", or \"all\": true (one of them)".into(),
            ));
        }
        Ok(Selection {
            queue,
            filter: self.filter.clone(),
            message_ids: self.ids.iter().copied().collect::<BTreeSet<u64>>(),
        })
    }
}

fn read(
    name: &str,
    state: &HttpState,
    body: Result<Json<Request>, JsonRejection>,
) -> Result<(Request, Selection), ApiError> {
    let Json(request) = body?;
    let queue = manage_queue(state, name)?;
    let selection = request.selection(queue.name.clone())?;
    Ok((request, selection))
}

/// Sends dead letters back to the queue they failed on; a dry run says where each
/// would go.
pub(super) async fn retry(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    body: Result<Json<Request>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let (request, selection) = read(&name, &state, body)?;
    let limit = request.dry_run.then_some(MAX_PREVIEW);
    let outcomes = state
        .broker
        .retry_messages(&selection, request.dry_run, 0, limit, |_| Ok(()))
        .await?;
    let skipped = outcomes.iter().filter(|o| o.skipped.is_some()).count();
    let moving = outcomes.len() - skipped;
    let outcomes: Vec<Value> = outcomes
        .into_iter()
        .map(|o| {
            json!({
                "id": o.message_id,
                "to_address": o.to_address,
                "to_queue": o.to_queue,
                "skipped": o.skipped,
            })
        })
        .collect();
    Ok(Json(json!({
        "dry_run": request.dry_run,
        "moved": if request.dry_run { 0 } else { moving },
        "would_move": if request.dry_run { moving } else { 0 },
        "skipped": skipped,
        "more": request.dry_run && moving == MAX_PREVIEW,
        "outcomes": outcomes,
    })))
}

/// Moves messages to another address.
pub(super) async fn move_to(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    body: Result<Json<Request>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let (request, selection) = read(&name, &state, body)?;
    if request.to_address.trim().is_empty() {
        return Err(ApiError::BadRequest("a move needs \"to_address\"".into()));
    }
    if request.dry_run {
        let count = state.broker.count_messages(&selection)?;
        return Ok(Json(json!({"dry_run": true, "count": count})));
    }
    let moved = state
        .broker
        .move_messages(&selection, &request.to_address)
        .await?;
    Ok(Json(json!({"dry_run": false, "moved": moved})))
}

/// Removes messages for good.
pub(super) async fn remove(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    body: Result<Json<Request>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let (request, selection) = read(&name, &state, body)?;
    if request.dry_run {
        let count = state.broker.count_messages(&selection)?;
        return Ok(Json(json!({"dry_run": true, "count": count})));
    }
    let removed = state.broker.remove_messages(&selection).await?;
    Ok(Json(json!({"dry_run": false, "removed": removed})))
}
