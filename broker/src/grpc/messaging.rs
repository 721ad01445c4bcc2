//! `rebound.v1.Messaging`: send, the consumer stream, and transacted sessions.
//!
//! A Consume stream is one consumer attached to one queue. A session task per stream
//! forwards the queue's deliveries to the client and applies the client's credit and
//! settlements. Settlements are taken from the queue at once, in stream order, and
//! their storage commits run concurrently, each answered with `Settled` when durable,
//! so a consumer that acks every message is not held to one fsync per ack. When the
//! stream ends — the client closed it, the connection dropped, or the broker is
//! stopping — the session detaches the consumer and what it held goes back to the
//! queue at once (uncounted if it had sent `close` first).
//!
//! A Transact stream is a session: its requests are answered one at a time, in
//! order, and the transactions it began are rolled back when it ends.
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use rebound_protocol::v1::{
    self as pb, consume_request, consume_response, transact_request, transact_response,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::broker::{Broker, Settlement};
use crate::message::to_wire;
use crate::queue::{ConsumerId, Dispatched, Queue};

pub struct MessagingService {
    broker: Arc<Broker>,
}

impl MessagingService {
    pub fn new(broker: Arc<Broker>) -> MessagingService {
        MessagingService { broker }
    }
}

type ResponseTx = mpsc::UnboundedSender<Result<pb::ConsumeResponse, Status>>;

#[tonic::async_trait]
impl pb::messaging_server::Messaging for MessagingService {
    async fn send(&self, request: Request<pb::SendRequest>) -> Result<Response<pb::SendResponse>, Status> {
        let (message_ids, unrouted) = self.broker.send(request.into_inner().messages).await?;
        Ok(Response::new(pb::SendResponse {
            message_ids,
            unrouted,
        }))
    }

    type TransactStream = Pin<Box<dyn Stream<Item = Result<pb::TransactResponse, Status>> + Send>>;

    async fn transact(
        &self,
        request: Request<Streaming<pb::TransactRequest>>,
    ) -> Result<Response<Self::TransactStream>, Status> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(transact(self.broker.clone(), request.into_inner(), tx));
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx))))
    }

    type ConsumeStream = Pin<Box<dyn Stream<Item = Result<pb::ConsumeResponse, Status>> + Send>>;

    async fn consume(
        &self,
        request: Request<Streaming<pb::ConsumeRequest>>,
    ) -> Result<Response<Self::ConsumeStream>, Status> {
        let mut inbound = request.into_inner();
        let subscribe = match inbound.message().await? {
            Some(pb::ConsumeRequest {
                kind: Some(consume_request::Kind::Subscribe(s)),
            }) => s,
            _ => {
                return Err(Status::invalid_argument(
                    "the first message on a Consume stream must be `subscribe`",
                ));
            }
        };
        let filter = crate::broker::parse_filter(&subscribe.filter)?.map(Arc::new);
        let queue = self.broker.queue_for_consumer(&subscribe.queue).await?;
        let consumer = self.broker.next_consumer_id();
        let deliveries = queue
            .attach(consumer, subscribe.initial_credit, filter)
            .ok_or_else(|| Status::not_found(format!("queue '{}' was deleted", queue.name)))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(Ok(pb::ConsumeResponse {
            kind: Some(consume_response::Kind::Subscribed(pb::Subscribed {
                queue: queue.name.clone(),
                address: queue.address.clone(),
            })),
        }));
        let session = Session {
            broker: self.broker.clone(),
            queue,
            consumer,
            tx,
        };
        tokio::spawn(session.run(inbound, deliveries));
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx))))
    }
}

/// A transacted session: requests answered in order, one at a time.
async fn transact(
    broker: Arc<Broker>,
    mut inbound: Streaming<pb::TransactRequest>,
    tx: mpsc::UnboundedSender<Result<pb::TransactResponse, Status>>,
) {
    let session = broker.next_consumer_id();
    loop {
        let request = tokio::select! {
            request = inbound.message() => match request {
                Ok(Some(request)) => request,
                Ok(None) | Err(_) => break,
            },
            _ = broker.shutdown.cancelled() => {
                let _ = tx.send(Err(Status::unavailable("the broker is shutting down")));
                break;
            }
        };
        let kind = match transact_one(&broker, session, request.kind).await {
            Ok(kind) => kind,
            Err(err) => {
                let status = Status::from(err);
                transact_response::Kind::Error(pb::TransactError {
                    code: status.code() as i32,
                    message: status.message().to_owned(),
                })
            }
        };
        let response = pb::TransactResponse {
            request_id: request.request_id,
            kind: Some(kind),
        };
        if tx.send(Ok(response)).is_err() {
            break;
        }
    }
    broker.session_gone(session).await;
}

async fn transact_one(
    broker: &Arc<Broker>,
    session: u64,
    kind: Option<transact_request::Kind>,
) -> crate::error::Result<transact_response::Kind> {
    use transact_request::Kind as Rq;
    use transact_response::Kind as Rs;
    Ok(match kind {
        Some(Rq::Begin(_)) => Rs::Begun(pb::Begun {
            transaction_id: broker.transactions().begin(session),
        }),
        Some(Rq::Send(send)) => {
            let records = broker.prepare(send.messages)?;
            let message_ids = records.iter().map(|r| r.message_id).collect();
            broker
                .transactions()
                .add_sends(send.transaction_id, session, records)?;
            Rs::Sent(pb::SendResponse {
                message_ids,
                unrouted: 0,
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
        None => {
            return Err(crate::error::BrokerError::InvalidArgument(
                "empty TransactRequest".into(),
            ));
        }
    })
}

struct Session {
    broker: Arc<Broker>,
    queue: Arc<Queue>,
    consumer: ConsumerId,
    tx: ResponseTx,
}

impl Session {
    async fn run(
        self,
        mut inbound: Streaming<pb::ConsumeRequest>,
        mut deliveries: mpsc::UnboundedReceiver<Vec<Dispatched>>,
    ) {
        loop {
            tokio::select! {
                batch = deliveries.recv() => match batch {
                    Some(batch) => {
                        if self.tx.send(Ok(deliveries_response(&self.queue.name, batch))).is_err() {
                            break;
                        }
                    }
                    None => {
                        let _ = self.tx.send(Err(Status::not_found(format!("queue '{}' was deleted", self.queue.name))));
                        break;
                    }
                },
                request = inbound.message() => match request {
                    Ok(Some(request)) => {
                        if let Err(status) = self.handle(request) {
                            let _ = self.tx.send(Err(status));
                            break;
                        }
                    }
                    // The client closed its side, or the connection is gone.
                    Ok(None) | Err(_) => break,
                },
                _ = self.broker.shutdown.cancelled() => {
                    let _ = self.tx.send(Err(Status::unavailable("the broker is shutting down")));
                    break;
                }
            }
        }
        self.broker.consumer_gone(&self.queue, self.consumer).await;
    }

    fn handle(&self, request: pb::ConsumeRequest) -> Result<(), Status> {
        match request.kind {
            Some(consume_request::Kind::Credit(c)) => {
                self.queue.grant(self.consumer, c.credit);
                Ok(())
            }
            Some(consume_request::Kind::Settle(s)) => self.settle(s),
            Some(consume_request::Kind::Close(_)) => {
                self.queue.stop(self.consumer);
                Ok(())
            }
            Some(consume_request::Kind::Subscribe(_)) => {
                Err(Status::invalid_argument("this stream is already subscribed"))
            }
            None => Err(Status::invalid_argument("empty ConsumeRequest")),
        }
    }

    fn settle(&self, settle: pb::Settle) -> Result<(), Status> {
        let how = match pb::Outcome::try_from(settle.outcome) {
            Ok(pb::Outcome::Ack) => Settlement::Ack,
            Ok(pb::Outcome::Nack) => Settlement::Nack {
                reason: settle.reason,
                retry_after_ms: settle.retry_after_ms,
            },
            Ok(pb::Outcome::Release) => Settlement::Release,
            Ok(pb::Outcome::DeadLetter) => Settlement::DeadLetter {
                reason: settle.reason,
            },
            Ok(pb::Outcome::Unspecified) | Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "settle needs an outcome (ACK, NACK, RELEASE or DEAD_LETTER), got {}",
                    settle.outcome
                )));
            }
        };
        if let Some(transaction) = settle.transaction_id {
            if how != Settlement::Ack {
                return Err(Status::invalid_argument(
                    "only an ACK can be part of a transaction",
                ));
            }
            if let Err(err) = self.broker.transactions().check(transaction) {
                let refused = u32::try_from(settle.delivery_ids.len()).unwrap_or(u32::MAX);
                self.queue.revoke(self.consumer, refused);
                let _ = self.tx.send(Ok(settled_response(
                    Vec::new(),
                    Vec::new(),
                    Some(Status::from(err)),
                )));
                return Ok(());
            }
        }
        let (entries, unknown) = self.queue.take_delivered(self.consumer, &settle.delivery_ids);
        let settled: Vec<u64> = settle
            .delivery_ids
            .into_iter()
            .filter(|id| !unknown.contains(id))
            .collect();
        let (broker, queue, tx) = (self.broker.clone(), self.queue.clone(), self.tx.clone());
        tokio::spawn(async move {
            let result = match settle.transaction_id {
                Some(transaction) => match broker.transactions().add_acks(transaction, &queue, entries) {
                    Ok(()) => Ok(()),
                    // Rolled back meanwhile: the acks count as failed deliveries.
                    Err(entries) => broker.fail_deliveries(&queue, entries, "transaction ended").await,
                },
                None => broker.settle(&queue, entries, how).await,
            };
            let answer = result.map(|()| settled_response(settled, unknown, None));
            let _ = tx.send(answer.map_err(Status::from));
        });
        Ok(())
    }
}

fn settled_response(
    delivery_ids: Vec<u64>,
    unknown_delivery_ids: Vec<u64>,
    error: Option<Status>,
) -> pb::ConsumeResponse {
    let (error, error_code) = match error {
        Some(status) => (status.message().to_owned(), status.code() as i32),
        None => (String::new(), 0),
    };
    pb::ConsumeResponse {
        kind: Some(consume_response::Kind::Settled(pb::Settled {
            delivery_ids,
            unknown_delivery_ids,
            error,
            error_code,
        })),
    }
}

fn deliveries_response(queue: &str, batch: Vec<Dispatched>) -> pb::ConsumeResponse {
    let deliveries = batch
        .into_iter()
        .map(|d| pb::Delivery {
            delivery_id: d.delivery_id,
            message: Some(to_wire(&d.record)),
            delivery_count: d.delivery_count,
            redelivered: d.delivery_count > 1,
            queue: queue.to_owned(),
        })
        .collect();
    pb::ConsumeResponse {
        kind: Some(consume_response::Kind::Deliveries(pb::Deliveries { deliveries })),
    }
}
