//! Forwarding a Consume stream to the node that serves its queue, when
//! several brokers share one database (`crate::cluster`).
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
//! When the serving node goes away or gives the queue up, the forwarded
//! stream ends with UNAVAILABLE, as a local one whose queue moved; the
//! client's next Consume (the SDK's Listener reconnects by itself) reaches
//! the queue's new node, through whichever node it connects to.
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use rebound_protocol::v1::{self as pb, messaging_client::MessagingClient};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request, Status, Streaming};

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
    authorization: Option<MetadataValue<tonic::metadata::Ascii>>,
    subscribe: pb::ConsumeRequest,
    mut inbound: Streaming<pb::ConsumeRequest>,
    counted: C,
) -> Result<Responses, Status> {
    let unreachable = |err: &dyn std::fmt::Display| {
        Status::unavailable(format!(
            "the node serving this queue, at {owner}, cannot be reached: {err}"
        ))
    };
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{owner}"))
        .map_err(|e| unreachable(&e))?
        .connect_timeout(CONNECT_TIMEOUT);
    let channel = endpoint.connect().await.map_err(|e| unreachable(&e))?;
    let (upstream, requests) = mpsc::channel(16);
    let _ = upstream.try_send(subscribe);
    let mut request = Request::new(ReceiverStream::new(requests));
    if let Some(authorization) = authorization {
        request.metadata_mut().insert("authorization", authorization);
    }
    let mut responses = MessagingClient::new(channel).consume(request).await?.into_inner();
    let (tx, rx) = mpsc::channel(16);
    let shutdown = broker.shutdown().clone();
    let mut upstream = Some(upstream);
    broker.spawn(async move {
        let _counted = counted;
        let last = loop {
            tokio::select! {
                request = inbound.message(), if upstream.is_some() => match (request, &upstream) {
                    (Ok(Some(request)), Some(up)) => {
                        let _ = up.send(request).await;
                    }
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
