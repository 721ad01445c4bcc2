//! The console's actions on a queue's messages: retry (dead letters back to the
//! queue they failed on), move to another address, remove; and on a queue in
//! outage mode: resume its delivery, or send its next probe now.
//!
//! They call the engine's operations, with the CLI's guarantees: one commit per
//! message, `max-redrive`, messages being delivered left alone. Each takes a
//! selection — ids, a filter, or everything — and a `dry_run`: a retry's dry run is
//! the engine's (where each message would go, or why it would stay); a move's or
//! removal's counts what it would take. The page shows the preview, then confirms
//! with exactly the ids it showed.
//!
//! Each needs what the gRPC Admin operation does (`manage_queue`): `manage` on the
//! queue's address, a move `send` on its target, and a retry skips each message
//! whose original address the caller may not send to. A dry run needs the same,
//! so the preview never shows what the caller could not do. Each action (not its
//! dry run) is written to the audit log as gRPC's are.
use std::collections::BTreeSet;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::json::{self, Id};
use super::manage_queue;
use crate::engine::{Management, RetryOutcome, Selection};
use crate::http::HttpState;
use crate::queue::Queue;
use crate::security::access::{self, Caller, Kind, Operation};
use crate::security::audit;

/// Messages one retry preview lists at most; the answer says when there are more.
const MAX_PREVIEW: usize = 10_000;

/// Which messages an action takes, as the page sends it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Request {
    /// These messages (with `filter`: those of them it matches).
    #[serde(default)]
    ids: Vec<Id>,
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
            message_ids: self.ids.iter().map(|id| id.0).collect::<BTreeSet<u64>>(),
        })
    }
}

/// The request's selection, once `caller` may carry out `operation`.
fn read(
    state: &HttpState,
    caller: &Caller,
    operation: &Operation<'_>,
    request: &Request,
) -> Result<Selection, ApiError> {
    let queue = manage_queue(state, caller, operation)?;
    request.selection(queue.name.clone())
}

/// Sends dead letters back to the queue they failed on; a dry run says where each
/// would go.
pub(super) async fn retry(
    State(state): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
    body: Result<Json<Request>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(request) = body?;
    let operation = Operation::on_queue(&state.broker, Kind::Retry, &name);
    let selection = read(&state, &caller, &operation, &request)?;
    let limit = request.dry_run.then_some(MAX_PREVIEW);
    let policy = state.security.policy();
    let may_return_to = |address: &str| access::may_return_to(&policy, &caller, &selection.queue, address);
    let work = state
        .broker
        .management()
        .retry_messages(&selection, request.dry_run, 0, limit, may_return_to);
    let outcomes = if request.dry_run {
        work.await?
    } else {
        let moved = |outcomes: &Vec<RetryOutcome>| Some(RetryOutcome::moved(outcomes) as u64);
        audit::carried_out(&caller, &operation, moved, work).await?
    };
    let moving = RetryOutcome::moved(&outcomes);
    let skipped = outcomes.len() - moving;
    let outcomes: Vec<Value> = outcomes.iter().map(json::retry_outcome).collect();
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
    caller: Caller,
    Path(name): Path<String>,
    body: Result<Json<Request>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(request) = body?;
    if request.to_address.trim().is_empty() {
        return Err(ApiError::BadRequest("a move needs \"to_address\"".into()));
    }
    let operation = Operation::move_to(&state.broker, &name, &request.to_address);
    let to = request.to_address.clone();
    take(
        &state,
        &caller,
        &operation,
        &request,
        "moved",
        |management, selection| async move { management.move_messages(&selection, &to).await },
    )
    .await
}

/// Removes messages for good.
pub(super) async fn remove(
    State(state): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
    body: Result<Json<Request>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(request) = body?;
    let operation = Operation::on_queue(&state.broker, Kind::Remove, &name);
    take(
        &state,
        &caller,
        &operation,
        &request,
        "removed",
        |management, selection| async move { management.remove_messages(&selection).await },
    )
    .await
}

/// A move or a removal: its dry run counts what it would take; carried out,
/// it is audited and answers how many it took, as `done`.
async fn take<'a, F>(
    state: &'a HttpState,
    caller: &Caller,
    operation: &Operation<'_>,
    request: &Request,
    done: &str,
    work: impl FnOnce(Management<'a>, Selection) -> F,
) -> Result<Json<Value>, ApiError>
where
    F: Future<Output = crate::error::Result<u64>>,
{
    let selection = read(state, caller, operation, request)?;
    let management = state.broker.management();
    if request.dry_run {
        let count = management.count_messages(&selection)?;
        return Ok(Json(json!({"dry_run": true, "count": count})));
    }
    let taken = audit::carried_out(caller, operation, |n| Some(*n), work(management, selection)).await?;
    Ok(Json(json!({"dry_run": false, done: taken})))
}

/// Ends a queue's outage: delivery resumes at once. `resumed` is false when the
/// queue was not in outage mode.
pub(super) async fn resume(
    State(state): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    on_outage(
        &state,
        &caller,
        Kind::Resume,
        &name,
        "resumed",
        Management::resume_queue,
    )
    .await
}

/// Sends a paused queue's next probe now. `probing` is false when the queue is
/// not in outage mode or its probe is already out.
pub(super) async fn probe(
    State(state): State<HttpState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    on_outage(
        &state,
        &caller,
        Kind::Probe,
        &name,
        "probing",
        Management::probe_queue_now,
    )
    .await
}

/// An action on a queue's outage, audited; the answer says whether it did
/// anything, as `done`.
async fn on_outage<'a>(
    state: &'a HttpState,
    caller: &Caller,
    kind: Kind,
    name: &str,
    done: &str,
    act: impl FnOnce(Management<'a>, &Queue) -> bool,
) -> Result<Json<Value>, ApiError> {
    let operation = Operation::on_queue(&state.broker, kind, name);
    let queue = manage_queue(state, caller, &operation)?;
    let work = async { Ok(act(state.broker.management(), &queue)) };
    let did = audit::carried_out(caller, &operation, |_| None, work).await?;
    Ok(Json(json!({ done: did })))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ids_are_read_from_strings_or_numbers_without_rounding() {
        let ids = |body: Value| -> Result<BTreeSet<u64>, String> {
            let request: Request = serde_json::from_value(body).map_err(|e| e.to_string())?;
            Ok(request.selection("q".into()).unwrap().message_ids)
        };
        let big = (1 << 60) + 1;
        assert_eq!(
            ids(json!({"ids": ["1152921504606846977", "7"]})),
            Ok([7, big].into())
        );
        // Older scripts send numbers: read as 64-bit integers, exactly.
        assert_eq!(ids(json!({"ids": [1152921504606846977_u64]})), Ok([big].into()));
        for bad in [
            json!(["-1"]),
            json!(["+1"]),
            json!([""]),
            json!(["1e3"]),
            json!([1.5]),
            json!([-1]),
        ] {
            let err = ids(json!({ "ids": bad })).unwrap_err();
            assert!(err.contains("message id"), "{bad}: {err}");
        }
        let too_big = ids(json!({"ids": ["18446744073709551616"]})).unwrap_err();
        assert!(too_big.contains("message id"), "{too_big}");
    }
}
