//! Forwarding a Consume stream, and the Admin calls about one queue
//! (counters, browsing, purge, remove, move, retry), to the node that serves
//! the queue, when several brokers share one database (`crate::cluster`);
//! a listing of queues asks each serving node for its queues' figures.
//!
//! A send (a `Send`, or a request of a Publish stream) with a non-durable
//! message for a queue another node serves is forwarded too, whole: this
//! node would not keep that message (it keeps non-durable messages in memory
//! only), and refuses the send before storing any of it (`engine/send.rs`).
//! A transaction's send is not forwarded (it commits here with the
//! transaction's acks), and is refused with UNAVAILABLE.
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
//! TLS when they serve it (`nodes.rs`).
//!
//! An ack inside a transaction of this node on a forwarded stream goes to
//! the serving node marked with this node's id (`rebound-forwarded-by`);
//! that node holds the acked messages aside and says which they are
//! (`Settled.held`, taken off before the client sees the answer). The
//! transaction's commit removes them in this node's own database
//! transaction, under a claim on the serving node's lease, and once the
//! transaction has ended this node asks the serving node to resolve what it
//! held ([`teller`], `Cluster.Resolve`, with the consumer's credentials).
//! `engine/cluster/held.rs` has the serving node's side.
//!
//! When the serving node goes away or gives the queue up, a forwarded
//! Consume stream follows the queue to its next node (`follow.rs`).
use std::sync::Arc;

use rebound_protocol::v1::{self as pb, admin_client::AdminClient, consume_request, consume_response};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tracing::warn;

use super::nodes::{self, Nodes};
use crate::engine::Broker;
use crate::error::BrokerError;
use crate::grpc::convert::{held_from_wire, messages_from_wire};
use crate::grpc::status::code_and_message;
use crate::security::Principal;
use crate::security::access::Caller;
use crate::transactions::Tell;

/// Marks a Consume stream forwarded by this node with its id and
/// incarnation ([`FORWARDED_BY`]).
pub(in crate::grpc) fn mark_forwarded_by<T>(broker: &Arc<Broker>, request: &mut Request<T>) {
    if let Some((node, incarnation)) = broker.cluster().node()
        && let Ok(value) = format!("{node}/{incarnation}").parse()
    {
        request.metadata_mut().insert(FORWARDED_BY, value);
    }
}

/// The refusal of an ack inside a transaction of this node that is not open
/// or has no room for it, answered here as the serving node would answer
/// for one of its own. `None` for any other request.
pub(in crate::grpc) fn refused_here(
    broker: &Broker,
    request: &pb::ConsumeRequest,
) -> Option<pb::ConsumeResponse> {
    let Some(consume_request::Kind::Settle(settle)) = &request.kind else {
        return None;
    };
    let error = broker
        .check_transaction_room(settle.transaction_id?, settle.delivery_ids.len())
        .err()?;
    let (error_code, error) = code_and_message(error);
    Some(pb::ConsumeResponse {
        kind: Some(consume_response::Kind::Settled(pb::Settled {
            delivery_ids: Vec::new(),
            unknown_delivery_ids: Vec::new(),
            error,
            error_code,
            refused_delivery_ids: settle.delivery_ids.clone(),
            held: None,
        })),
    })
}

/// Takes what the serving node says it holds for a transaction of this node
/// off its answer to a settle, into that transaction, with `tell` to ask it
/// to resolve them; if the transaction ended meanwhile, it is asked at once.
pub(in crate::grpc) fn take_held(broker: &Broker, tell: &Tell, response: &mut pb::ConsumeResponse) {
    let Some(consume_response::Kind::Settled(settled)) = &mut response.kind else {
        return;
    };
    let Some(held) = settled.held.take() else {
        return;
    };
    match held_from_wire(held) {
        Ok(held) => {
            if let Err(held) = broker.add_held_elsewhere(tell.clone(), held) {
                tell(held.transaction);
            }
        }
        Err(err) => warn!(%err, "the serving node's held acks do not decode"),
    }
}

/// How this node asks the node at `owner` to resolve the acks it holds for
/// a transaction of this node, as the consumer with `credentials` whose acks
/// they are (see the module's doc). Each call is an engine task, tried a few
/// times (once when this node is stopping): a node that cannot be reached
/// resolves them by itself once it sees this node gone, or leaves them to
/// the queue's next owner.
pub(in crate::grpc) fn teller(
    broker: &Arc<Broker>,
    nodes: &Arc<Nodes>,
    owner: &str,
    credentials: Credentials,
) -> Tell {
    let (engine, nodes, owner) = (broker.clone(), nodes.clone(), owner.to_owned());
    Arc::new(move |transaction: u64| {
        let Some((node, _)) = engine.cluster().node() else {
            return;
        };
        let (nodes, credentials, owner) = (nodes.clone(), credentials.clone(), owner.clone());
        let attempts = match engine.is_shutting_down() {
            true => 1,
            false => RESOLVE_ATTEMPTS,
        };
        engine.spawn(async move {
            let mut last = None;
            for attempt in 0..attempts {
                if attempt > 0 {
                    tokio::time::sleep(RESOLVE_RETRY).await;
                }
                let request = pb::ResolveRequest {
                    node: node.clone(),
                    transaction_id: transaction,
                };
                match resolve(&nodes, &owner, request, credentials.clone()).await {
                    Ok(()) => return,
                    Err(status) => last = Some(status),
                }
            }
            if let Some(status) = last {
                warn!(%owner, transaction, %status, "could not ask a node to resolve the acks it holds");
            }
        });
    })
}

/// How often, and how far apart, a node is asked to resolve acks.
const RESOLVE_ATTEMPTS: u32 = 3;
const RESOLVE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

async fn resolve(
    nodes: &Nodes,
    owner: &str,
    request: pb::ResolveRequest,
    credentials: Credentials,
) -> Result<(), Status> {
    let request = forwarded(request, credentials, nodes, owner)?;
    let channel = nodes.connect(owner).await?;
    nodes::cluster(channel).resolve(request).await.map(drop)
}

/// Forwards a unary Admin call about a queue another node serves, at
/// `owner`: `call` makes it on a client of that node.
pub(in crate::grpc) async fn admin<Req, Resp, F, Fut>(
    nodes: &Nodes,
    owner: String,
    request: Request<Req>,
    call: F,
) -> Result<Response<Resp>, Status>
where
    F: FnOnce(AdminClient<Channel>, Request<Req>) -> Fut,
    Fut: Future<Output = Result<Response<Resp>, Status>>,
{
    let credentials = Credentials::of(&request);
    let request = forwarded(request.into_inner(), credentials, nodes, &owner)?;
    let channel = nodes.connect(&owner).await?;
    call(nodes::admin(channel), request).await.map_err(moved)
}

/// What a send refused here for a queue another node serves needs to be
/// made through that node: the caller's credentials.
#[derive(Clone)]
pub(in crate::grpc) struct Forward {
    nodes: Arc<Nodes>,
    credentials: Credentials,
}

impl Forward {
    /// How `request`'s sends are forwarded; `None` when it was forwarded
    /// here already (see [`was_forwarded`]).
    pub(in crate::grpc) fn of<T>(nodes: &Arc<Nodes>, request: &Request<T>) -> Option<Forward> {
        (!was_forwarded(request)).then(|| Forward {
            nodes: nodes.clone(),
            credentials: Credentials::of(request),
        })
    }
}

/// Sends `messages` through this node, or, when it refuses them for a
/// non-durable message to a queue another node serves (which it would not
/// keep: [`BrokerError::NotKeptHere`]), all of them through that node with
/// `forward`, as if the producer had connected there: nothing was stored
/// here, so each is stored or kept once.
pub(in crate::grpc) async fn send(
    broker: &Arc<Broker>,
    forward: Option<&Forward>,
    messages: Vec<pb::OutgoingMessage>,
) -> Result<pb::SendResponse, Status> {
    // A copy to forward, of a send with a non-durable message only.
    let again = forward
        .filter(|_| messages.iter().any(|m| m.durable == Some(false)))
        .map(|forward| (forward, messages.clone()));
    match (broker.send(messages_from_wire(messages)).await, again) {
        (Ok(sent), _) => Ok(pb::SendResponse {
            message_ids: sent.ids,
            unrouted: sent.unrouted,
            duplicates: sent.duplicates,
        }),
        (Err(BrokerError::NotKeptHere { queue, owner }), Some((forward, messages))) => {
            // A queue created a moment ago, or whose node just went, may have
            // a node in a moment.
            let owner = match owner {
                Some(owner) => owner,
                None => broker
                    .cluster()
                    .owner_of_soon(&queue)
                    .await
                    .ok_or(BrokerError::NotKeptHere { queue, owner: None })?,
            };
            let request = forwarded(
                pb::SendRequest { messages },
                forward.credentials.clone(),
                &forward.nodes,
                &owner,
            )?;
            let channel = forward.nodes.connect(&owner).await?;
            let sent = nodes::messaging(channel).send(request).await.map_err(moved)?;
            Ok(sent.into_inner())
        }
        (Err(err), _) => Err(err.into()),
    }
}

/// The figures of queues `names` from the node at `owner` that serves
/// them: one connection, the GetQueue calls on it at once, each forwarded
/// with the caller's `credentials`. A queue the node cannot answer for is
/// left out.
pub(in crate::grpc) async fn queue_infos(
    nodes: &Nodes,
    owner: String,
    names: Vec<String>,
    credentials: &Credentials,
) -> Vec<pb::QueueInfo> {
    let Ok(channel) = nodes.connect(&owner).await else {
        return Vec::new();
    };
    let calls = names.into_iter().filter_map(|queue| {
        let mut client = nodes::admin(channel.clone());
        let request = forwarded(pb::GetQueueRequest { queue }, credentials.clone(), nodes, &owner).ok()?;
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
pub(in crate::grpc) fn was_forwarded<T>(request: &Request<T>) -> bool {
    request.metadata().contains_key(FORWARDED)
}

/// Marks a forwarded call (see [`was_forwarded`]).
const FORWARDED: &str = "rebound-forwarded";

/// On a forwarded Consume stream: the forwarding node's id and incarnation
/// (`node/incarnation`), whose transactions the stream's acks name.
const FORWARDED_BY: &str = "rebound-forwarded-by";

/// The node (id and incarnation) that forwarded a Consume stream, if one did.
pub(in crate::grpc) fn forwarded_by<T>(request: &Request<T>) -> Option<(String, u64)> {
    if !was_forwarded(request) {
        return None;
    }
    let value = request.metadata().get(FORWARDED_BY)?.to_str().ok()?;
    let (node, incarnation) = value.rsplit_once('/')?;
    Some((node.to_owned(), incarnation.parse().ok()?))
}

/// How the serving node learns who the caller is.
#[derive(Clone)]
pub(in crate::grpc) enum Credentials {
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
    pub(in crate::grpc) fn of<T>(request: &Request<T>) -> Credentials {
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
pub(in crate::grpc) fn forwarded<T>(
    message: T,
    credentials: Credentials,
    nodes: &Nodes,
    owner: &str,
) -> Result<Request<T>, Status> {
    let mut request = Request::new(message);
    match credentials {
        Credentials::Authorization(authorization) => {
            request.metadata_mut().insert("authorization", authorization);
        }
        Credentials::Certificate(user) => {
            if !nodes.vouch(request.metadata_mut(), &user) {
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
pub(in crate::grpc) fn moved(status: Status) -> Status {
    match status.code() {
        Code::Unknown | Code::Cancelled => Status::unavailable(format!(
            "the node serving this queue went away ({}): connect again",
            status.message()
        )),
        _ => status,
    }
}
