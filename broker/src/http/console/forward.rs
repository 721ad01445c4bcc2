//! The console of one node of a cluster (several brokers on one database),
//! for the queues other nodes serve.
//!
//! A request about one such queue (its page, its messages, its dead letters,
//! an action on them) is forwarded to the HTTP endpoint of the node serving
//! it, with the caller's login, and its answer comes back as that node gave
//! it ([`to_serving_node`]); the queues table and the overview take the rows
//! of such queues from their nodes ([`rows_of_serving_nodes`]). So any node's
//! console is the cluster's, as any node's gRPC is: an operator handles a
//! dead-letter queue from whichever node the browser reached.
//!
//! Nodes reach each other's HTTP endpoint at the address each registered
//! (where it listens, or its advertised host when it listens on every
//! interface), in plaintext like the endpoint itself. The serving node logs
//! the caller in and checks its permissions again. A forwarded request is
//! marked and answered where it arrives, never forwarded again, so that two
//! nodes with stale views of who serves a queue cannot pass it back and
//! forth.
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tracing::warn;

use super::error::ApiError;
use crate::http::HttpState;

/// Marks a request one node's console forwarded to another's.
const FORWARDED: &str = "rebound-forwarded";

/// How long the serving node may take to answer (a retry of many dead
/// letters takes a while).
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// The HTTP client of the console toward the other nodes.
pub struct Nodes {
    client: Client<HttpConnector, Body>,
}

impl Default for Nodes {
    fn default() -> Nodes {
        Nodes {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }
}

/// In front of the routes about one queue (`{queue}` in their path): a
/// queue another node serves is that node's to answer for.
pub(super) async fn to_serving_node(
    State(state): State<HttpState>,
    Path(params): Path<HashMap<String, String>>,
    request: Request,
    next: Next,
) -> Response {
    let serving = params
        .get("queue")
        .and_then(|queue| state.broker.cluster().serving_node(queue));
    let Some(owner) = serving.filter(|_| !request.headers().contains_key(FORWARDED)) else {
        return next.run(request).await;
    };
    let Some(http) = owner.http else {
        return unavailable(format!(
            "this queue is served by node {}, which has no HTTP endpoint: use the gRPC API or \
             the CLI (through any node)",
            owner.node
        ));
    };
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let forwarded = forward_request(&http, path, &parts.headers, parts.method, body);
    match send(&state.console.nodes, forwarded).await {
        Ok(response) => response,
        Err(why) => unavailable(format!(
            "this queue is served by node {} at {http}, which cannot be reached: {why}",
            owner.node
        )),
    }
}

/// The rows of the queues table (each with its `name`) that other nodes
/// serve, replaced by the rows those nodes give for them (one request to
/// each node), and each row named with the node serving it (`served_by`).
/// A row whose node cannot answer keeps this node's figures, which count
/// none of its messages, and says so (`unreachable`).
pub(super) async fn rows_of_serving_nodes(state: &HttpState, headers: &HeaderMap, rows: &mut [Value]) {
    let mut by_node: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, row) in rows.iter_mut().enumerate() {
        let name = row["name"].as_str().unwrap_or_default().to_owned();
        match state.broker.cluster().serving_node(&name) {
            Some(owner) => {
                row["served_by"] = Value::from(owner.node);
                if let Some(http) = owner.http {
                    by_node.entry(http).or_default().push(i);
                }
            }
            None => {
                let queue = state.broker.queue(&name).ok();
                let me = queue
                    .map(|q| state.broker.cluster().served_by(&q))
                    .unwrap_or_default();
                row["served_by"] = Value::from(me);
            }
        }
    }
    if by_node.is_empty() || headers.contains_key(FORWARDED) {
        return;
    }
    let asked = by_node.keys().map(|http| async move {
        let request = forward_request(
            http,
            "/api/queues?served_here=true",
            headers,
            axum::http::Method::GET,
            Body::empty(),
        );
        let response = send(&state.console.nodes, request).await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .ok()?;
        let table: Value = serde_json::from_slice(&bytes).ok()?;
        Some(table["queues"].as_array()?.clone())
    });
    let answers = futures::future::join_all(asked).await;
    for ((_, indices), answer) in by_node.iter().zip(answers) {
        let remote: HashMap<&str, &Value> = answer
            .iter()
            .flatten()
            .filter_map(|row| Some((row["name"].as_str()?, row)))
            .collect();
        for &i in indices {
            let name = rows[i]["name"].as_str().unwrap_or_default().to_owned();
            let served_by = rows[i]["served_by"].clone();
            match remote.get(name.as_str()) {
                Some(&row) => {
                    rows[i] = row.clone();
                    rows[i]["served_by"] = served_by;
                }
                None => rows[i]["unreachable"] = Value::from(true),
            }
        }
    }
}

/// `method path` at the node whose HTTP endpoint is at `http`, with the
/// caller's login and the body's type from `headers`, marked as forwarded.
fn forward_request(
    http: &str,
    path: &str,
    headers: &HeaderMap,
    method: axum::http::Method,
    body: Body,
) -> Result<Request, String> {
    let uri: Uri = format!("http://{http}{path}")
        .parse()
        .map_err(|e| format!("bad address {http}: {e}"))?;
    let mut request = Request::builder().method(method).uri(uri);
    for name in [header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT] {
        if let Some(value) = headers.get(&name) {
            request = request.header(name, value);
        }
    }
    request
        .header(FORWARDED, HeaderValue::from_static("1"))
        .body(body)
        .map_err(|e| e.to_string())
}

/// Sends a forwarded request; its answer, whatever its status.
async fn send(nodes: &Nodes, request: Result<Request, String>) -> Result<Response, String> {
    let request = request?;
    match tokio::time::timeout(ANSWER_WITHIN, nodes.client.request(request)).await {
        Ok(Ok(response)) => Ok(response.map(Body::new)),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!("no answer within {} s", ANSWER_WITHIN.as_secs())),
    }
}

fn unavailable(why: String) -> Response {
    warn!(%why, "a console request for a queue another node serves failed");
    ApiError::Unavailable(why).into_response()
}
