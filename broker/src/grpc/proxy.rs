//! Forwarding a Consume stream, and the Admin calls about one queue
//! (counters, browsing, purge, remove, move, retry), to the node that serves
//! the queue, when several brokers share one database (`crate::cluster`);
//! a listing of queues asks each serving node for its queues' figures.
//!
//! Why a proxy and not a redirect: a client connects to any node (one
//! address behind a load balancer, say) and its stream works as on a single
//! broker; no SDK needs to learn where queues live. The cost is one more hop
//! for deliveries and settles. The caller's `authorization` metadata goes
//! along, so that the serving node authenticates and authorizes the caller
//! as usual (a client certificate cannot go along: a caller that logs in with
//! one must connect to the serving node). Nodes reach each other in plaintext
//! at their advertised address.
//!
//! Transactions stay node-local: a settle inside a transaction on a
//! forwarded stream is refused (FAILED_PRECONDITION, naming the node that
//! serves the queue), since this node's transaction cannot commit another
//! node's acks atomically with its own work.
//!
//! When the serving node goes away or gives the queue up, the forwarded
//! stream ends with UNAVAILABLE, as a local one whose queue moved; the
//! client's next Consume (the SDK's Listener reconnects by itself) reaches
//! the queue's new node, through whichever node it connects to.
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use rebound_protocol::v1::{
    self as pb, admin_client::AdminClient, consume_request, consume_response,
    messaging_client::MessagingClient,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status, Streaming};

use super::status::code_and_message;
use crate::engine::Broker;
use crate::error::BrokerError;

/// How long connecting to the serving node may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

type Responses = Pin<Box<dyn Stream<Item = Result<pb::ConsumeResponse, Status>> + Send>>;

/// Forwards a Consume stream whose `subscribe` request came already to the
/// node at `owner` (`host:port`), with the caller's `authorization`;
/// `counted` lives as long as the stream.
pub(super) async fn consume<C: Send + 'static>(
    broker: &Arc<Broker>,
    owner: String,
    authorization: Option<MetadataValue<Ascii>>,
    subscribe: pb::ConsumeRequest,
    mut inbound: Streaming<pb::ConsumeRequest>,
    counted: C,
) -> Result<Responses, Status> {
    let channel = connect(&owner).await?;
    let (upstream, requests) = mpsc::channel(16);
    let _ = upstream.try_send(subscribe);
    let request = forwarded(ReceiverStream::new(requests), authorization);
    let mut responses = MessagingClient::new(channel).consume(request).await?.into_inner();
    let (tx, rx) = mpsc::channel(16);
    let shutdown = broker.shutdown().clone();
    let mut upstream = Some(upstream);
    broker.spawn(async move {
        let _counted = counted;
        let last = loop {
            tokio::select! {
                request = inbound.message(), if upstream.is_some() => match (request, &upstream) {
                    (Ok(Some(request)), Some(up)) => match in_transaction(&request, &owner) {
                        Some(refused) => {
                            if tx.send(Ok(refused)).await.is_err() {
                                break None;
                            }
                        }
                        None => {
                            let _ = up.send(request).await;
                        }
                    },
                    // The client ended its side: so does the forwarded stream.
                    _ => upstream = None,
                },
                response = responses.message() => match response {
                    Ok(Some(response)) => {
                        if tx.send(Ok(response)).await.is_err() {
                            break None;
                        }
                    }
                    Ok(None) => break None,
                    Err(status) => break Some(moved(status)),
                },
                _ = shutdown.cancelled() => break Some(BrokerError::ShuttingDown.into()),
            }
        };
        if let Some(status) = last {
            let _ = tx.send(Err(status)).await;
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}

/// The refusal of a settle inside a transaction on a forwarded stream:
/// transactions are this node's, the queue is another's (FAILED_PRECONDITION,
/// naming both). `None` for any other request.
fn in_transaction(request: &pb::ConsumeRequest, owner: &str) -> Option<pb::ConsumeResponse> {
    let Some(consume_request::Kind::Settle(settle)) = &request.kind else {
        return None;
    };
    settle.transaction_id?;
    let (error_code, error) = code_and_message(BrokerError::FailedPrecondition(format!(
        "this consumer's queue is served by the node at {owner}, and a transaction of this node \
         cannot settle its messages: connect the transacted session and the consumer to {owner}"
    )));
    Some(pb::ConsumeResponse {
        kind: Some(consume_response::Kind::Settled(pb::Settled {
            delivery_ids: Vec::new(),
            unknown_delivery_ids: Vec::new(),
            error,
            error_code,
            refused_delivery_ids: settle.delivery_ids.clone(),
        })),
    })
}

/// Forwards a unary Admin call about a queue another node serves, at
/// `owner`: `call` makes it on a client of that node.
pub(super) async fn admin<Req, Resp, F, Fut>(
    owner: String,
    request: Request<Req>,
    call: F,
) -> Result<Response<Resp>, Status>
where
    F: FnOnce(AdminClient<Channel>, Request<Req>) -> Fut,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    let channel = connect(&owner).await?;
    let authorization = request.metadata().get("authorization").cloned();
    let request = forwarded(request.into_inner(), authorization);
    call(AdminClient::new(channel), request).await.map_err(moved)
}

/// The figures of queues `names` from the node at `owner` that serves
/// them: one connection, the GetQueue calls on it at once, each forwarded
/// with `authorization`. A queue the node cannot answer for is left out.
pub(super) async fn queue_infos(
    owner: String,
    names: Vec<String>,
    authorization: Option<MetadataValue<Ascii>>,
) -> Vec<pb::QueueInfo> {
    let Ok(channel) = connect(&owner).await else {
        return Vec::new();
    };
    let calls = names.into_iter().map(|queue| {
        let mut client = AdminClient::new(channel.clone());
        let request = forwarded(pb::GetQueueRequest { queue }, authorization.clone());
        async move { client.get_queue(request).await.ok()?.into_inner().queue }
    });
    futures::future::join_all(calls)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Whether `request` was forwarded by another node: it is answered here,
/// never forwarded again (two nodes with stale views of who serves a queue
/// could otherwise pass a call back and forth).
pub(super) fn was_forwarded<T>(request: &Request<T>) -> bool {
    request.metadata().contains_key(FORWARDED)
}

/// Marks a forwarded call (see [`was_forwarded`]).
const FORWARDED: &str = "rebound-forwarded";

/// A request to the serving node: the message, the caller's credentials,
/// and the mark of a forwarded call.
fn forwarded<T>(message: T, authorization: Option<MetadataValue<Ascii>>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(authorization) = authorization {
        request.metadata_mut().insert("authorization", authorization);
    }
    request
        .metadata_mut()
        .insert(FORWARDED, MetadataValue::from_static("1"));
    request
}

/// A connection to the node at `owner`.
async fn connect(owner: &str) -> Result<Channel, Status> {
    let unreachable = |err: &dyn std::fmt::Display| {
        Status::unavailable(format!(
            "the node serving this queue, at {owner}, cannot be reached: {err}"
        ))
    };
    Endpoint::from_shared(format!("http://{owner}"))
        .map_err(|e| unreachable(&e))?
        .connect_timeout(CONNECT_TIMEOUT)
        .connect()
        .await
        .map_err(|e| unreachable(&e))
}

/// The serving node's status as the client should see it: a broken
/// connection to it is the queue being unavailable here.
fn moved(status: Status) -> Status {
    match status.code() {
        Code::Unknown | Code::Cancelled => Status::unavailable(format!(
            "the node serving this queue went away ({}): connect again",
            status.message()
        )),
        _ => status,
    }
}
