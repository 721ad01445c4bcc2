//! `rebound.v1.Messaging`: send, the consumer stream, and transacted sessions.
//!
//! A Consume stream is one consumer attached to one queue. A session task per stream
//! forwards the queue's deliveries to the client and hands the client's credit and
//! settles to the engine, which answers each settle once it is durable. When the
//! stream ends — the client closed it, the connection dropped, or the broker is
//! stopping — the session detaches the consumer and what it held goes back to the
//! queue at once (uncounted if it had sent `close` first).
//!
//! A Consume stream for a queue another node serves (several brokers on one
//! database) is forwarded to that node (`cluster/proxy.rs`). A stream another
//! node forwarded here ends when that node goes silent for a lease
//! (`cluster/heartbeat.rs`).
//!
//! A Publish stream is a producer's pipeline of sends, answered in order
//! (`publish.rs`).
//!
//! A Transact stream is a session: its requests are answered one at a time, in
//! order, and the transactions it began are rolled back when it ends.
//!
//! Permissions: a send (also one in a transaction) is checked on every request
//! (`gate.rs`), a consumer when it subscribes and again whenever the security
//! in force changes:
//! a consumer whose user lost `consume` on the queue's address (or was removed)
//! is ended with PERMISSION_DENIED, its unsettled deliveries released (back to
//! the queue, delivery count unchanged) as for a graceful close.
//!
//! Every kind of session runs as an engine task ([`Broker::spawn`]), so shutdown waits
//! for them and for the settles they started.
//!
//! Backpressure: a stream's responses wait in a bounded buffer of
//! `max-unread-responses`, and a settle reserves its answer's room there before it
//! is started. A client that does not read its responses therefore stops being
//! served: the session stops reading its requests, and HTTP/2 flow control pushes
//! back on the client, rather than the broker buffering without bound.
use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::Stream;
use rebound_protocol::v1::{
    self as pb, consume_request, consume_response, transact_request, transact_response,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::cluster::Nodes;
use super::cluster::heartbeat::Silence;
use super::cluster::user_of;
use super::cluster::{follow, proxy};
use super::convert::{delivery_to_wire, held_to_wire, messages_from_wire, settlement_from_wire};
use super::gate::Gate;
use super::publish::publish;
use super::status::code_and_message;
use crate::engine::{Broker, HeldFor, Joins, Settled, Subscription, queue_gone};
use crate::error::{BrokerError, Result};
use crate::queue::{ConsumerId, Dispatched, Queue};
use crate::security::Security;
use crate::security::access::{self, Caller, Operation};
use crate::security::policy::Policy;

pub struct MessagingService {
    broker: Arc<Broker>,
    security: Arc<Security>,
    streams: Arc<StreamCounts>,
    /// How to reach the other nodes, to forward a Consume (`cluster/proxy.rs`).
    nodes: Arc<Nodes>,
}

impl MessagingService {
    pub fn new(broker: Arc<Broker>, security: Arc<Security>, nodes: Arc<Nodes>) -> MessagingService {
        MessagingService {
            broker,
            security,
            streams: Arc::default(),
            nodes,
        }
    }
}

/// The Consume streams open per connection (its peer address), for
/// `max-consume-streams-per-connection`.
#[derive(Default)]
struct StreamCounts(Mutex<HashMap<SocketAddr, u64>>);

/// One open Consume stream of a connection; uncounted when its session ends.
struct Counted {
    counts: Arc<StreamCounts>,
    peer: SocketAddr,
}

impl StreamCounts {
    /// Counts a new stream of `peer`, unless it has the most it may. A stream
    /// whose peer is unknown is not counted.
    fn open(self: &Arc<Self>, peer: Option<SocketAddr>, limit: u64) -> Result<Option<Counted>> {
        let Some(peer) = peer else { return Ok(None) };
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let open = counts.entry(peer).or_default();
        if *open >= limit {
            return Err(BrokerError::LimitReached {
                what: format!("this connection has {open} Consume streams open"),
                limit: "max-consume-streams-per-connection",
                value: limit,
            });
        }
        *open += 1;
        Ok(Some(Counted {
            counts: self.clone(),
            peer,
        }))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = counts.get_mut(&self.peer) {
            *open -= 1;
            if *open == 0 {
                counts.remove(&self.peer);
            }
        }
    }
}

type ResponseTx = mpsc::Sender<Result<pb::ConsumeResponse, Status>>;

/// How often a subscription to a queue between nodes looks again where it is
/// served (each look waits a few seconds at most, `Cluster::owner_of_soon`).
const WHERE_ROUNDS: usize = 3;

/// A stream's bounded response buffer, of `max-unread-responses`.
fn responses<T>(broker: &Broker) -> (mpsc::Sender<T>, mpsc::Receiver<T>) {
    let room = usize::try_from(broker.limits().max_unread_responses).unwrap_or(usize::MAX);
    mpsc::channel(room.clamp(1, tokio::sync::Semaphore::MAX_PERMITS))
}

/// Sends a response, waiting while the client leaves the buffer full (the session
/// reads no request meanwhile). False when the client is gone or the broker stops.
async fn tell<T>(broker: &Broker, tx: &mpsc::Sender<T>, response: T) -> bool {
    tokio::select! {
        biased;
        sent = tx.send(response) => sent.is_ok(),
        _ = broker.shutdown().cancelled() => false,
    }
}

#[tonic::async_trait]
impl pb::messaging_server::Messaging for MessagingService {
    async fn send(&self, request: Request<pb::SendRequest>) -> Result<Response<pb::SendResponse>, Status> {
        let gate = Gate::of(&self.security, &request);
        let forward = proxy::Forward::of(&self.nodes, &request);
        let messages = request.into_inner().messages;
        gate.authorize_sends(&self.broker, &messages)?;
        let sent = proxy::send(&self.broker, forward.as_ref(), messages).await?;
        Ok(Response::new(sent))
    }

    type PublishStream = Pin<Box<dyn Stream<Item = Result<pb::PublishResponse, Status>> + Send>>;

    async fn publish(
        &self,
        request: Request<Streaming<pb::PublishRequest>>,
    ) -> Result<Response<Self::PublishStream>, Status> {
        let (tx, rx) = responses(&self.broker);
        let gate = Gate::of(&self.security, &request);
        let forward = proxy::Forward::of(&self.nodes, &request);
        self.broker.spawn(publish(
            self.broker.clone(),
            gate,
            forward,
            request.into_inner(),
            tx,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type TransactStream = Pin<Box<dyn Stream<Item = Result<pb::TransactResponse, Status>> + Send>>;

    async fn transact(
        &self,
        request: Request<Streaming<pb::TransactRequest>>,
    ) -> Result<Response<Self::TransactStream>, Status> {
        let (tx, rx) = responses(&self.broker);
        let gate = Gate::of(&self.security, &request);
        self.broker
            .spawn(transact(self.broker.clone(), gate, request.into_inner(), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type ConsumeStream = Pin<Box<dyn Stream<Item = Result<pb::ConsumeResponse, Status>> + Send>>;

    async fn consume(
        &self,
        request: Request<Streaming<pb::ConsumeRequest>>,
    ) -> Result<Response<Self::ConsumeStream>, Status> {
        let caller = Caller::of(&request);
        let limit = self.broker.limits().max_consume_streams_per_connection;
        let counted = self.streams.open(request.remote_addr(), limit)?;
        let credentials = proxy::Credentials::of(&request);
        let forwarded = proxy::was_forwarded(&request);
        let forwarded_by = proxy::forwarded_by(&request);
        let mut inbound = request.into_inner();
        let subscribe = match inbound.message().await? {
            Some(pb::ConsumeRequest {
                kind: Some(consume_request::Kind::Subscribe(s)),
            }) => s,
            _ => {
                return Err(BrokerError::InvalidArgument(
                    "the first message on a Consume stream must be `subscribe`".into(),
                )
                .into());
            }
        };
        // Watched from before the check, so no change after it goes unseen.
        let changes = self.security.changes();
        let consume = Operation::consume(&self.broker, &subscribe.queue);
        access::authorize(&self.security.policy(), &caller, &consume)?;
        let mut subscribed = self
            .broker
            .subscribe(&subscribe.queue, subscribe.initial_credit, &subscribe.filter)
            .await;
        // A queue between nodes (created a moment ago, or moving): where it
        // is served is looked up again, for a few rounds.
        for _ in 0..WHERE_ROUNDS {
            let Err(BrokerError::QueueMoved(name)) = &subscribed else {
                break;
            };
            if forwarded {
                // Sent here as the queue's node: this node may have taken
                // its lease a moment ago, and not serve it yet.
                if self.broker.cluster().served_here_soon(name).await {
                    subscribed = self
                        .broker
                        .subscribe(&subscribe.queue, subscribe.initial_credit, &subscribe.filter)
                        .await;
                }
                break;
            }
            match self.broker.cluster().owner_of_soon(name).await {
                // Served by another node: forwarded there (`cluster/proxy.rs`).
                Some(owner) => {
                    let forwarded = follow::consume(
                        &self.broker,
                        &self.nodes,
                        owner,
                        credentials,
                        subscribe,
                        inbound,
                        counted,
                    )
                    .await?;
                    return Ok(Response::new(forwarded));
                }
                // Served here by now, or gone: once more, here.
                None => {
                    subscribed = self
                        .broker
                        .subscribe(&subscribe.queue, subscribe.initial_credit, &subscribe.filter)
                        .await;
                }
            }
        }
        let Subscription {
            queue,
            consumer,
            deliveries,
        } = subscribed?;
        let (tx, rx) = responses(&self.broker);
        // A new buffer has room for one.
        let _ = tx.try_send(Ok(pb::ConsumeResponse {
            kind: Some(consume_response::Kind::Subscribed(pb::Subscribed {
                queue: queue.name.clone(),
                address: queue.address.clone(),
            })),
        }));
        let session = Session {
            broker: self.broker.clone(),
            serving: queue.serving(),
            queue,
            consumer,
            tx,
            caller,
            silence: forwarded_by
                .is_some()
                .then(|| self.nodes.lease().map(Silence::new))
                .flatten(),
            forwarded_by,
            _counted: counted,
            // Only a node's queues move.
            rejoin: (self.broker.cluster().is_node() && !forwarded)
                .then(|| follow::Rejoin::new(&self.nodes, credentials, subscribe)),
        };
        self.broker.spawn(session.run(inbound, deliveries, changes));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// A transacted session: requests answered in order, one at a time.
async fn transact(
    broker: Arc<Broker>,
    gate: Gate,
    mut inbound: Streaming<pb::TransactRequest>,
    tx: mpsc::Sender<Result<pb::TransactResponse, Status>>,
) {
    let session = broker.next_consumer_id();
    let last = loop {
        let request = tokio::select! {
            request = inbound.message() => match request {
                Ok(Some(request)) => request,
                Ok(None) => break None,
                Err(status) => break Some(status),
            },
            _ = broker.shutdown().cancelled() => break Some(BrokerError::ShuttingDown.into()),
        };
        let kind = match transact_one(&broker, &gate, session, request.kind).await {
            Ok(kind) => kind,
            Err(err) => {
                let (code, message) = code_and_message(err);
                transact_response::Kind::Error(pb::TransactError { code, message })
            }
        };
        let response = pb::TransactResponse {
            request_id: request.request_id,
            kind: Some(kind),
        };
        if !tell(&broker, &tx, Ok(response)).await {
            break None;
        }
    };
    broker.session_gone(session).await;
    if let Some(status) = last {
        tell(&broker, &tx, Err(status)).await;
    }
}

async fn transact_one(
    broker: &Arc<Broker>,
    gate: &Gate,
    session: u64,
    kind: Option<transact_request::Kind>,
) -> Result<transact_response::Kind> {
    use transact_request::Kind as Rq;
    use transact_response::Kind as Rs;
    Ok(match kind {
        Some(Rq::Begin(_)) => Rs::Begun(pb::Begun {
            transaction_id: broker.begin_transaction(session)?,
        }),
        Some(Rq::Send(send)) => {
            gate.authorize_sends(broker, &send.messages)?;
            let message_ids = broker.send_in_transaction(
                send.transaction_id,
                session,
                messages_from_wire(send.messages),
            )?;
            Rs::Sent(pb::SendResponse {
                message_ids,
                unrouted: 0,
                // A transaction's duplicates fail its commit.
                duplicates: Vec::new(),
            })
        }
        Some(Rq::Commit(c)) => {
            let done = broker.commit_transaction(c.transaction_id, session).await?;
            Rs::Committed(pb::Committed {
                transaction_id: c.transaction_id,
                sent: done.sends,
                acked: done.acks,
            })
        }
        Some(Rq::Rollback(r)) => {
            let done = broker.rollback_transaction(r.transaction_id, session).await?;
            Rs::RolledBack(pb::RolledBack {
                transaction_id: r.transaction_id,
                discarded: done.sends,
                returned: done.acks,
            })
        }
        None => return Err(BrokerError::InvalidArgument("empty TransactRequest".into())),
    })
}

struct Session {
    broker: Arc<Broker>,
    queue: Arc<Queue>,
    /// The serving of the queue the consumer is attached under (`queue/away.rs`).
    serving: u64,
    consumer: ConsumerId,
    tx: ResponseTx,
    caller: Caller,
    /// The node that forwarded this stream, and its incarnation, if another
    /// node did: the transactions its acks name are that node's.
    forwarded_by: Option<(String, u64)>,
    /// How long the node that forwarded this stream has not beaten on it;
    /// `None` for a client's own stream.
    silence: Option<Silence>,
    /// Counts the stream against its connection's limit while the session lives.
    _counted: Option<Counted>,
    /// How the stream follows its queue when this node gives it up; `None`
    /// for a stream another node forwarded here (that node follows it).
    rejoin: Option<follow::Rejoin>,
}

impl Session {
    /// Whether deliveries made for this consumer now are stale: the node
    /// stopped serving the queue, or stalled past its leases and, resumed,
    /// has yet to stop (a non-durable queue is no lease's). Not sent: the
    /// queue's next owner delivers those messages again (`pause`, seed 32:
    /// `p1:432` sent as the node resumed from a stall of 7.8 s, after another
    /// node had delivered it and had its ack). A batch the stall caught on
    /// its way to the client, past this check, still goes.
    fn stale(&self) -> bool {
        !self.queue.is_serving(self.serving) || (self.queue.durable && self.broker.cluster().leases_ran_out())
    }

    async fn run(
        mut self,
        mut inbound: Streaming<pb::ConsumeRequest>,
        mut deliveries: mpsc::UnboundedReceiver<Vec<Dispatched>>,
        mut changes: watch::Receiver<Arc<Policy>>,
    ) {
        let mut rejoin = self.rejoin.take();
        let mut silence = self.silence.take();
        // Why the stream ends, for the client (if it still listens): told after the
        // consumer is detached, so a client that does not read holds nothing.
        let mut moved = false;
        let last: Option<Status> = loop {
            let quiet = silence.as_ref().map(Silence::too_long);
            tokio::select! {
                batch = deliveries.recv() => match batch {
                    Some(_) if self.stale() => {}
                    Some(batch) => {
                        if let Some(rejoin) = &mut rejoin {
                            rejoin.delivered(batch.iter().map(|d| d.delivery_id));
                        }
                        // Waiting for the forwarding node to read is not its silence.
                        let waits = self.tx.capacity() == 0;
                        if !tell(&self.broker, &self.tx, Ok(deliveries_response(&self.queue.name, batch))).await {
                            break None;
                        }
                        if let (true, Some(silence)) = (waits, &mut silence) {
                            silence.heard();
                        }
                    }
                    None => {
                        let gone = queue_gone(&self.queue);
                        moved = matches!(gone, BrokerError::QueueMoved(_));
                        break Some(gone.into());
                    }
                },
                request = inbound.message() => match request {
                    Ok(Some(request)) => {
                        if let Some(silence) = &mut silence {
                            silence.heard();
                        }
                        if let Some(rejoin) = &mut rejoin {
                            rejoin.requested(&request);
                        }
                        if let Err(err) = self.handle(request).await {
                            break Some(err.into());
                        }
                    }
                    // The client closed its side.
                    Ok(None) => break None,
                    // A request that does not decode, or the connection is gone.
                    Err(status) => break Some(status),
                },
                Ok(()) = changes.changed() => {
                    let policy = changes.borrow_and_update().clone();
                    let still = Operation::attached(&self.queue.name, &self.queue.address);
                    if let Err(err) = access::authorize(&policy, &self.caller, &still) {
                        // Released, not failed: losing a permission is no failed delivery.
                        self.queue.stop(self.consumer);
                        break Some(err.into());
                    }
                }
                _ = async {
                    match quiet {
                        Some(quiet) => quiet.await,
                        None => std::future::pending().await,
                    }
                } => {
                    break Some(Status::unavailable("the node that forwarded this stream sent no heartbeat for a lease"));
                }
                _ = self.broker.shutdown().cancelled() => break Some(BrokerError::ShuttingDown.into()),
            }
        };
        self.broker.consumer_gone(&self.queue, self.consumer).await;
        if let (true, Some(rejoin)) = (moved, rejoin) {
            // This node gave the queue up: the stream follows it to its next node.
            rejoin.resume(&self.broker, self.tx, inbound, self._counted);
        } else if let Some(status) = last {
            tell(&self.broker, &self.tx, Err(status)).await;
        }
    }

    async fn handle(&self, request: pb::ConsumeRequest) -> Result<()> {
        match request.kind {
            Some(consume_request::Kind::Credit(c)) => {
                self.broker.grant(&self.queue, self.consumer, c.credit);
                Ok(())
            }
            Some(consume_request::Kind::Settle(s)) => {
                let how = settlement_from_wire(&s)?;
                // The answer's room is reserved before the settle starts, which bounds
                // the settles in flight as well as the answers unread.
                let room = tokio::select! {
                    biased;
                    room = self.tx.clone().reserve_owned() => room,
                    _ = self.broker.shutdown().cancelled() => return Err(BrokerError::ShuttingDown),
                };
                // The client is gone: the stream is about to end, and what the settle
                // named goes back with everything the consumer held.
                let Ok(room) = room else { return Ok(()) };
                let answer = move |result: Result<Settled>| {
                    room.send(result.map(settled_response).map_err(Status::from));
                };
                let joins = s.transaction_id.map(|transaction| match &self.forwarded_by {
                    Some((node, incarnation)) => Joins::Elsewhere(HeldFor {
                        node: node.clone(),
                        incarnation: *incarnation,
                        transaction,
                        user: user_of(&self.caller),
                    }),
                    None => Joins::Here(transaction),
                });
                self.broker
                    .settle_deliveries(&self.queue, self.consumer, s.delivery_ids, how, joins, answer)
            }
            Some(consume_request::Kind::Close(_)) => {
                self.queue.stop(self.consumer);
                Ok(())
            }
            Some(consume_request::Kind::Subscribe(_)) => Err(BrokerError::InvalidArgument(
                "this stream is already subscribed".into(),
            )),
            None => Err(BrokerError::InvalidArgument("empty ConsumeRequest".into())),
        }
    }
}

fn settled_response(settled: Settled) -> pb::ConsumeResponse {
    let settled = match settled {
        Settled::Done {
            settled,
            unknown,
            held,
        } => pb::Settled {
            delivery_ids: settled,
            unknown_delivery_ids: unknown,
            error: String::new(),
            error_code: 0,
            refused_delivery_ids: Vec::new(),
            held: held.map(held_to_wire),
        },
        Settled::Refused { error, delivery_ids } => {
            let (error_code, error) = code_and_message(error);
            pb::Settled {
                delivery_ids: Vec::new(),
                unknown_delivery_ids: Vec::new(),
                error,
                error_code,
                refused_delivery_ids: delivery_ids,
                held: None,
            }
        }
    };
    pb::ConsumeResponse {
        kind: Some(consume_response::Kind::Settled(settled)),
    }
}

fn deliveries_response(queue: &str, batch: Vec<Dispatched>) -> pb::ConsumeResponse {
    let deliveries = batch.into_iter().map(|d| delivery_to_wire(queue, d)).collect();
    pb::ConsumeResponse {
        kind: Some(consume_response::Kind::Deliveries(pb::Deliveries { deliveries })),
    }
}
