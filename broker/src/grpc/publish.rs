//! The Publish stream: a producer's requests, each handled as a `Send`, pipelined,
//! answered in order.
//!
//! Requests are started in the order they arrive (so their messages get ids in that
//! order) and run concurrently: their commits join the store's group commit and
//! share fsyncs. Answers wait in request order behind the oldest unanswered one.
//!
//! Flow control: the session reads a request only while fewer than
//! `max-publish-in-flight` of the stream's requests are being worked on or wait to
//! be answered; answers then go through the stream's bounded response buffer
//! (`max-unread-responses`). A producer that does not read its answers stops being
//! read, and HTTP/2 flow control pushes back on it, so the broker holds at most
//! that many requests per stream.
//!
//! Each request passes the same permission check as a `Send` (the caller may
//! `send` to each of its addresses), then the same engine path, and is
//! forwarded as a `Send` is (`proxy::send`).
//!
//! A refused request is answered with its error (through the one mapping in
//! `status.rs`) and the stream carries on. When the broker stops, the session
//! reads no more, finishes what it started, answers it if the client still has
//! room, and ends the stream with UNAVAILABLE.
use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesOrdered;
use rebound_protocol::v1::{self as pb, publish_response};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::cluster::proxy::{self, Forward};
use super::gate::Gate;
use crate::engine::Broker;
use crate::error::BrokerError;

type ResponseTx = mpsc::Sender<Result<pb::PublishResponse, Status>>;

/// Serves one Publish stream until the client closes it, it breaks, or the broker stops.
pub(super) async fn publish(
    broker: Arc<Broker>,
    gate: Gate,
    forward: Option<Forward>,
    mut inbound: Streaming<pb::PublishRequest>,
    tx: ResponseTx,
) {
    let limit = usize::try_from(broker.limits().max_publish_in_flight).unwrap_or(usize::MAX);
    let mut working = FuturesOrdered::new();
    let mut answered: VecDeque<pb::PublishResponse> = VecDeque::new();
    let mut reading = true;
    let last: Option<Status> = loop {
        if !reading && working.is_empty() && answered.is_empty() {
            break None;
        }
        let room = working.len() + answered.len() < limit;
        tokio::select! {
            // First the work under way: a request just read gets its ids before
            // the next one is read.
            biased;
            Some(response) = working.next(), if !working.is_empty() => answered.push_back(response),
            permit = tx.reserve(), if !answered.is_empty() => match permit {
                Ok(permit) => permit.send(Ok(answered.pop_front().expect("an answer waits"))),
                // The client is gone.
                Err(_) => break None,
            },
            request = inbound.message(), if reading && room => match request {
                Ok(Some(request)) => working.push_back(publish_one(broker.clone(), &gate, forward.clone(), request)),
                // The client closed its side: answer what it sent, then end.
                Ok(None) => reading = false,
                // A request that does not decode, or the connection is gone.
                Err(status) => break Some(status),
            },
            _ = broker.shutdown().cancelled() => break Some(BrokerError::ShuttingDown.into()),
        }
    };
    // Stopping (or the stream broke): what was started is finished, and answered
    // if the client has room; the stream then ends with why.
    while let Some(response) = working.next().await {
        answered.push_back(response);
    }
    for response in answered {
        if tx.try_send(Ok(response)).is_err() {
            return;
        }
    }
    if let Some(status) = last {
        let _ = tx.try_send(Err(status));
    }
}

/// One request, checked and handled as a `Send` (forwarded as one with
/// `forward`, see `proxy::send`). The permission check is made when the
/// request is read, so it applies the security in force then.
fn publish_one(
    broker: Arc<Broker>,
    gate: &Gate,
    forward: Option<Forward>,
    request: pb::PublishRequest,
) -> impl Future<Output = pb::PublishResponse> + use<> {
    let allowed = gate.authorize_sends(&broker, &request.messages);
    async move {
        let sent = match allowed {
            Ok(()) => proxy::send(&broker, forward.as_ref(), request.messages).await,
            Err(err) => Err(err.into()),
        };
        answer(request.sequence, sent)
    }
}

/// The answer to request `sequence`.
fn answer(sequence: u64, sent: Result<pb::SendResponse, Status>) -> pb::PublishResponse {
    let result = match sent {
        Ok(sent) => publish_response::Result::Sent(sent),
        Err(status) => publish_response::Result::Error(pb::PublishError {
            code: status.code() as i32,
            message: status.message().to_owned(),
        }),
    };
    pb::PublishResponse {
        sequence,
        result: Some(result),
    }
}
