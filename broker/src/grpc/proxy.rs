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
//! as usual. A client certificate cannot go along (it belongs to the
//! caller's TLS connection): for a caller who logged in with one, this node
//! vouches with the cluster's secret (`security/forwarded.rs`), and without
//! a secret the call is refused (FAILED_PRECONDITION, naming the node to
//! connect to). Nodes reach each other at their advertised address, over
//! TLS when they serve it (`peers.rs`).
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
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status, Streaming};

use super::peers::Peers;
use super::status::code_and_message;
use crate::engine::Broker;
use crate::error::BrokerError;
use crate::security::Principal;
use crate::security::access::Caller;

type Responses = Pin<Box<dyn Stream<Item = Result<pb::ConsumeResponse, Status>> + Send>>;

/// Forwards a Consume stream whose `subscribe` request came already to the
/// node at `owner` (`host:port`), with the caller's `credentials`;
/// `counted` lives as long as the stream.
pub(super) async fn consume<C: Send + 'static>(
    broker: &Arc<Broker>,
    peers: &Peers,
    owner: String,
    credentials: Credentials,
    subscribe: pb::ConsumeRequest,
    mut inbound: Streaming<pb::ConsumeRequest>,
    counted: C,
) -> Result<Responses, Status> {
    let (upstream, requests) = mpsc::channel(16);
    let request = forwarded(ReceiverStream::new(requests), credentials, peers, &owner)?;
    let channel = peers.connect(&owner).await?;
    let _ = upstream.try_send(subscribe);
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
    peers: &Peers,
    owner: String,
    request: Request<Req>,
    call: F,
) -> Result<Response<Resp>, Status>
where
    F: FnOnce(AdminClient<Channel>, Request<Req>) -> Fut,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    let credentials = Credentials::of(&request);
    let request = forwarded(request.into_inner(), credentials, peers, &owner)?;
    let channel = peers.connect(&owner).await?;
    call(AdminClient::new(channel), request).await.map_err(moved)
}

/// The figures of queues `names` from the node at `owner` that serves
/// them: one connection, the GetQueue calls on it at once, each forwarded
/// with the caller's `credentials`. A queue the node cannot answer for is
/// left out.
pub(super) async fn queue_infos(
    peers: &Peers,
    owner: String,
    names: Vec<String>,
    credentials: &Credentials,
) -> Vec<pb::QueueInfo> {
    let Ok(channel) = peers.connect(&owner).await else {
        return Vec::new();
    };
    let calls = names.into_iter().filter_map(|queue| {
        let mut client = AdminClient::new(channel.clone());
        let request = forwarded(pb::GetQueueRequest { queue }, credentials.clone(), peers, &owner).ok()?;
        Some(async move { client.get_queue(request).await.ok()?.into_inner().queue })
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

/// How the serving node learns who the caller is.
#[derive(Clone)]
pub(super) enum Credentials {
    /// The caller's `authorization` metadata, which the serving node checks
    /// again.
    Authorization(MetadataValue<Ascii>),
    /// A user who logged in with a client certificate, whom this node
    /// vouches for.
    Certificate(String),
    /// Nobody: security is off.
    Anonymous,
}

impl Credentials {
    /// The credentials of an authenticated `request`: its `authorization`
    /// metadata if it has some; otherwise its user logged in with a
    /// certificate (`security/authenticator.rs`).
    pub(super) fn of<T>(request: &Request<T>) -> Credentials {
        if let Some(authorization) = request.metadata().get("authorization") {
            return Credentials::Authorization(authorization.clone());
        }
        match Caller::of(request).principal {
            Principal::User { name } => Credentials::Certificate(name),
            Principal::Anonymous => Credentials::Anonymous,
        }
    }
}

/// A request to the node at `owner`: the message, the caller's credentials,
/// and the mark of a forwarded call. Refused when the caller logged in with
/// a certificate and the nodes share no secret to vouch for it with.
fn forwarded<T>(
    message: T,
    credentials: Credentials,
    peers: &Peers,
    owner: &str,
) -> Result<Request<T>, Status> {
    let mut request = Request::new(message);
    match credentials {
        Credentials::Authorization(authorization) => {
            request.metadata_mut().insert("authorization", authorization);
        }
        Credentials::Certificate(user) => {
            if !peers.vouch(request.metadata_mut(), &user) {
                return Err(BrokerError::FailedPrecondition(format!(
                    "this queue is served by the node at {owner}, and a caller who logs in with a \
                     client certificate is forwarded there only when the nodes share a secret \
                     ([cluster] secret-file): connect to {owner}"
                ))
                .into());
            }
        }
        Credentials::Anonymous => {}
    }
    request
        .metadata_mut()
        .insert(FORWARDED, MetadataValue::from_static("1"));
    Ok(request)
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
