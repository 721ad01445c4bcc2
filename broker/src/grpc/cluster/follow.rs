//! A Consume stream follows its queue: when the node serving the queue goes
//! away (killed, or stalled past the nodes' keepalive) or gives the queue
//! up, the node the client talks to attaches the stream to the queue's next
//! node, itself included once it serves the queue, rather than ending it.
//! That holds for a stream this node forwards (`cluster/proxy.rs`) and for one it
//! served itself until it gave the queue up (`messaging.rs`, [`Rejoin`]).
//! The client sees a pause, not an error. The stream ends only when no node
//! serves the queue within [`FOLLOW_FOR`], or the next node refuses the
//! subscription (the queue was deleted, say), with that answer.
//!
//! Across its attachments the client sees one stream:
//! - delivery ids stay unique: each attachment numbers its deliveries from
//!   1, so its ids are shifted past every id the client has seen ([`Ids`]);
//! - credit carries over: the next attachment is granted what the client
//!   granted and no delivery used ([`Credit`]);
//! - every settle gets one answer. Deliveries of an attachment that ended are
//!   unknown (their messages went back to the queue with it, and come again,
//!   counted as a failed attempt), so a settle naming only such ids is answered
//!   here, and the settles an attachment had not answered when it ended are
//!   answered here with their ids unknown;
//! - the deliveries of an attachment that ended are voided (`Voided`, [`Held`]):
//!   a client drops those it has not handed to its application yet, which
//!   would otherwise process a message another consumer has by then.
//!
//! An attachment also ends when this node could not beat on it in time
//! (`heartbeat.rs`): it stalled, and what the attachment still brings is stale.
//!
//! A node attaches a stream to itself through its own gRPC endpoint (its
//! advertised address), as it would to another node: one path for both.
use std::collections::{BTreeSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use rebound_protocol::v1::{self as pb, consume_request, consume_response};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming};

use super::heartbeat::Beat;
use super::nodes::{self, Nodes};
use super::proxy::{self, Credentials};
use crate::engine::Broker;
use crate::error::BrokerError;
use crate::transactions::Tell;

type Responses = Pin<Box<dyn Stream<Item = Result<pb::ConsumeResponse, Status>> + Send>>;

/// How long a stream waits for its queue's next node before it ends.
const FOLLOW_FOR: Duration = Duration::from_secs(30);

/// How long attaching to a node may take (a stalled node accepts the
/// connection but never answers).
const ATTACH_WITHIN: Duration = Duration::from_secs(5);

/// The pause between two tries to attach.
const RETRY: Duration = Duration::from_millis(200);

/// Forwards a Consume stream with `subscribe` to the node at `owner`, and on
/// to the queue's next nodes, with the caller's `credentials`; `counted`
/// lives as long as the stream. The first attachment's refusal is the call's.
pub(in crate::grpc) async fn consume<C: Send + 'static>(
    broker: &Arc<Broker>,
    nodes: &Arc<Nodes>,
    owner: String,
    credentials: Credentials,
    subscribe: pb::Subscribe,
    inbound: Streaming<pb::ConsumeRequest>,
    counted: C,
) -> Result<Responses, Status> {
    let (attachment, subscribed) =
        Attachment::open(broker, nodes, owner, &credentials, subscribe.clone()).await?;
    let (tx, rx) = mpsc::channel(16);
    let _ = tx.try_send(Ok(subscribed));
    let follower = Follower {
        broker: broker.clone(),
        nodes: nodes.clone(),
        credit: Credit {
            granted: u64::from(subscribe.initial_credit),
            used: 0,
        },
        credentials,
        subscribe,
        ids: Ids::default(),
        held: Held::default(),
        tx,
    };
    broker.spawn(async move {
        let _counted = counted;
        follower.run(attachment, inbound).await;
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}

/// What a stream this node serves itself needs to follow its queue when
/// this node gives the queue up (`messaging.rs`; only on a node of a
/// cluster): how to attach it elsewhere, and what it carried so far.
pub(in crate::grpc) struct Rejoin {
    nodes: Arc<Nodes>,
    credentials: Credentials,
    subscribe: pb::Subscribe,
    ids: Ids,
    credit: Credit,
    held: Held,
    /// The client said it stops: nothing to follow.
    closing: bool,
}

impl Rejoin {
    pub(in crate::grpc) fn new(
        nodes: &Arc<Nodes>,
        credentials: Credentials,
        subscribe: pb::Subscribe,
    ) -> Rejoin {
        Rejoin {
            nodes: nodes.clone(),
            credentials,
            credit: Credit {
                granted: u64::from(subscribe.initial_credit),
                used: 0,
            },
            subscribe,
            ids: Ids::default(),
            held: Held::default(),
            closing: false,
        }
    }

    /// The stream delivered `ids`.
    pub(in crate::grpc) fn delivered(&mut self, ids: impl ExactSizeIterator<Item = u64>) {
        self.credit.used += ids.len() as u64;
        ids.for_each(|id| {
            self.held.given(self.ids.outward(id));
        });
    }

    /// The client sent `request`.
    pub(in crate::grpc) fn requested(&mut self, request: &pb::ConsumeRequest) {
        match &request.kind {
            Some(consume_request::Kind::Credit(pb::Credit { credit })) => {
                self.credit.granted += u64::from(*credit)
            }
            Some(consume_request::Kind::Close(_)) => self.closing = true,
            Some(consume_request::Kind::Settle(settle)) => self.held.settled(&settle.delivery_ids),
            _ => {}
        }
    }

    /// Attaches the stream, whose queue this node gave up, to the queue's
    /// next node (as a forwarded stream follows it), in a task of its own.
    pub(in crate::grpc) fn resume<C: Send + 'static>(
        self,
        broker: &Arc<Broker>,
        tx: mpsc::Sender<Result<pb::ConsumeResponse, Status>>,
        inbound: Streaming<pb::ConsumeRequest>,
        counted: C,
    ) {
        let why = BrokerError::QueueMoved(self.subscribe.queue.clone()).into();
        let closing = self.closing;
        let mut follower = Follower {
            broker: broker.clone(),
            nodes: self.nodes,
            credentials: self.credentials,
            subscribe: self.subscribe,
            ids: self.ids,
            credit: self.credit,
            held: self.held,
            tx,
        };
        broker.spawn(async move {
            let _counted = counted;
            let followed = match closing {
                true => Err(why),
                false if !follower.void().await => return,
                false => follower.follow(why).await,
            };
            match followed {
                Ok(attachment) => follower.run(attachment, inbound).await,
                Err(status) => {
                    let _ = follower.tx.send(Err(status)).await;
                }
            }
        });
    }
}

/// Whether a stream that ended with `status` follows its queue: the node
/// serving it went away, stops, or gave the queue up.
fn follows(status: &Status) -> bool {
    matches!(status.code(), Code::Unavailable | Code::Unknown | Code::Cancelled)
}

/// The stream as the client sees it, and what it needs to attach again.
struct Follower {
    broker: Arc<Broker>,
    nodes: Arc<Nodes>,
    credentials: Credentials,
    subscribe: pb::Subscribe,
    ids: Ids,
    credit: Credit,
    held: Held,
    tx: mpsc::Sender<Result<pb::ConsumeResponse, Status>>,
}

impl Follower {
    async fn run(mut self, mut attachment: Attachment, mut inbound: Streaming<pb::ConsumeRequest>) {
        // Whether the client still sends, and whether it said it stops: a
        // stream it ends, or is ending, follows nothing.
        let (mut open, mut closing) = (true, false);
        let shutdown = self.broker.shutdown().clone();
        let last = loop {
            let lapses = attachment.lapses();
            // Why the attachment ended, once it did.
            let ended = tokio::select! {
                request = inbound.message(), if open => {
                    match request {
                        Ok(Some(request)) => {
                            closing |= matches!(request.kind, Some(consume_request::Kind::Close(_)));
                            if !self.request(&mut attachment, request).await {
                                break None;
                            }
                        }
                        // The client ended its side: so does the forwarded stream.
                        _ => {
                            open = false;
                            attachment.requests = None;
                        }
                    }
                    continue;
                }
                response = attachment.responses.message() => match response {
                    // Stale: not passed on. An answer to a settle still is.
                    Ok(Some(pb::ConsumeResponse {
                        kind: Some(consume_response::Kind::Deliveries(_)),
                    })) if attachment.lapsed() => lapsed(),
                    Ok(Some(response)) => {
                        if !self.response(&mut attachment, response).await {
                            break None;
                        }
                        continue;
                    }
                    Ok(None) => break None,
                    Err(status) => status,
                },
                _ = lapses => lapsed(),
                _ = shutdown.cancelled() => break Some(BrokerError::ShuttingDown.into()),
            };
            if !(open && !closing && follows(&ended)) {
                break Some(proxy::moved(ended));
            }
            if !self.void().await || !self.answer_unanswered(&mut attachment).await {
                break None;
            }
            match self.follow(ended).await {
                Ok(next) => attachment = next,
                Err(status) => break Some(status),
            }
        };
        if let Some(status) = last {
            let _ = self.tx.send(Err(status)).await;
        }
    }

    /// Passes a client's request on, its ids as the attachment numbers
    /// them, or answers it here. False when the client is gone.
    async fn request(&mut self, attachment: &mut Attachment, mut request: pb::ConsumeRequest) -> bool {
        if let Some(refused) = proxy::refused_here(&self.broker, &request) {
            return self.tx.send(Ok(refused)).await.is_ok();
        }
        match &mut request.kind {
            Some(consume_request::Kind::Credit(credit)) => self.credit.granted += u64::from(credit.credit),
            Some(consume_request::Kind::Settle(settle)) => {
                self.held.settled(&settle.delivery_ids);
                let (current, ended) = self.ids.split(&settle.delivery_ids);
                if current.is_empty() {
                    return self.tx.send(Ok(unknown(ended))).await.is_ok();
                }
                settle.delivery_ids = current.iter().map(|&id| self.ids.inward(id)).collect();
                attachment.unanswered.push_back((current, ended));
            }
            _ => {}
        }
        if let Some(requests) = &attachment.requests {
            // An attachment that ended meanwhile: its end comes next.
            let _ = requests.send(request).await;
        }
        true
    }

    /// Passes an attachment's response on, its ids as the client knows them.
    /// False when the client is gone.
    async fn response(&mut self, attachment: &mut Attachment, mut response: pb::ConsumeResponse) -> bool {
        proxy::take_held(&self.broker, &attachment.tell, &mut response);
        match &mut response.kind {
            Some(consume_response::Kind::Deliveries(batch)) => {
                self.credit.used += batch.deliveries.len() as u64;
                for delivery in &mut batch.deliveries {
                    delivery.delivery_id = self.ids.outward(delivery.delivery_id);
                    self.held.given(delivery.delivery_id);
                }
            }
            Some(consume_response::Kind::Settled(settled)) => {
                for ids in [
                    &mut settled.delivery_ids,
                    &mut settled.unknown_delivery_ids,
                    &mut settled.refused_delivery_ids,
                ] {
                    ids.iter_mut().for_each(|id| *id = self.ids.known(*id));
                }
                if let Some((_, ended)) = attachment.unanswered.pop_front() {
                    settled.unknown_delivery_ids.extend(ended);
                }
            }
            _ => {}
        }
        self.tx.send(Ok(response)).await.is_ok()
    }

    /// Voids what the client holds of an attachment that ended. False when
    /// the client is gone.
    async fn void(&mut self) -> bool {
        let delivery_ids = self.held.take();
        if delivery_ids.is_empty() {
            return true;
        }
        let voided = pb::ConsumeResponse {
            kind: Some(consume_response::Kind::Voided(pb::Voided { delivery_ids })),
        };
        self.tx.send(Ok(voided)).await.is_ok()
    }

    /// Answers the settles an ending attachment will not: their ids unknown.
    async fn answer_unanswered(&mut self, attachment: &mut Attachment) -> bool {
        for (mut current, ended) in attachment.unanswered.drain(..) {
            current.extend(ended);
            if self.tx.send(Ok(unknown(current))).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Attaches the stream to the queue's next node, ended because of `why`.
    async fn follow(&mut self, why: Status) -> Result<Attachment, Status> {
        let deadline = tokio::time::Instant::now() + FOLLOW_FOR;
        let mut last = why;
        loop {
            if let Some(owner) = self.broker.cluster().served_at_soon(&self.subscribe.queue).await {
                let subscribe = pb::Subscribe {
                    initial_credit: self.credit.unused(),
                    ..self.subscribe.clone()
                };
                let open = Attachment::open(
                    &self.broker,
                    &self.nodes,
                    owner.clone(),
                    &self.credentials,
                    subscribe,
                );
                match tokio::time::timeout(ATTACH_WITHIN, open).await {
                    Ok(Ok((attachment, _subscribed))) => {
                        self.ids.next_attachment();
                        return Ok(attachment);
                    }
                    Ok(Err(status)) if follows(&status) => last = status,
                    Ok(Err(status)) => return Err(status),
                    Err(_) => last = Status::unavailable(format!("the node at {owner} did not answer")),
                }
            }
            if tokio::time::Instant::now() + RETRY >= deadline {
                return Err(proxy::moved(last));
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = self.tx.closed() => return Err(Status::cancelled("the client went away")),
                _ = self.broker.shutdown().cancelled() => return Err(BrokerError::ShuttingDown.into()),
            }
        }
    }
}

/// Why an attachment this node could not beat on in time ended.
fn lapsed() -> Status {
    Status::unavailable("this node stalled, and the queue's node may have ended the stream it forwarded")
}

/// The answer to a settle whose `ids` are all unknown here.
fn unknown(ids: Vec<u64>) -> pb::ConsumeResponse {
    pb::ConsumeResponse {
        kind: Some(consume_response::Kind::Settled(pb::Settled {
            unknown_delivery_ids: ids,
            ..Default::default()
        })),
    }
}

/// The stream forwarded to one node.
struct Attachment {
    /// `None` once the client ended its side.
    requests: Option<mpsc::Sender<pb::ConsumeRequest>>,
    responses: Streaming<pb::ConsumeResponse>,
    /// How that node is asked to resolve acks it holds (`cluster/proxy.rs`).
    tell: Tell,
    /// The settles sent to it and not answered yet: their ids of this
    /// attachment and of ended ones, as the client knows them.
    unanswered: VecDeque<(Vec<u64>, Vec<u64>)>,
    /// Its heartbeats; `None` outside a cluster.
    beat: Option<Beat>,
}

impl Attachment {
    /// Subscribes at the node at `owner`; returns the attachment and the
    /// node's `Subscribed`.
    async fn open(
        broker: &Arc<Broker>,
        nodes: &Arc<Nodes>,
        owner: String,
        credentials: &Credentials,
        subscribe: pb::Subscribe,
    ) -> Result<(Attachment, pb::ConsumeResponse), Status> {
        let (requests, outbound) = mpsc::channel(16);
        let tell = proxy::teller(broker, nodes, &owner, credentials.clone());
        let mut request =
            proxy::forwarded(ReceiverStream::new(outbound), credentials.clone(), nodes, &owner)?;
        proxy::mark_forwarded_by(broker, &mut request);
        let channel = nodes.connect(&owner).await?;
        let _ = requests.try_send(pb::ConsumeRequest {
            kind: Some(consume_request::Kind::Subscribe(subscribe)),
        });
        let mut responses = nodes::messaging(channel).consume(request).await?.into_inner();
        let subscribed = responses
            .message()
            .await?
            .ok_or_else(|| Status::unavailable(format!("the node at {owner} ended the stream at once")))?;
        let attachment = Attachment {
            beat: nodes.lease().map(|lease| Beat::start(lease, &requests)),
            requests: Some(requests),
            responses,
            tell,
            unanswered: VecDeque::new(),
        };
        Ok((attachment, subscribed))
    }

    /// Whether this node could not beat on it in time (`heartbeat.rs`).
    fn lapsed(&self) -> bool {
        self.beat.as_ref().is_some_and(Beat::lapsed)
    }

    /// Resolves once this node could not beat on it in time.
    fn lapses(&self) -> impl Future<Output = ()> + 'static {
        let lapses = self.beat.as_ref().map(Beat::lapses);
        async move {
            match lapses {
                Some(lapses) => lapses.await,
                None => std::future::pending().await,
            }
        }
    }
}

/// The deliveries the client was given and has not settled, by the ids it
/// knows them by: when their attachment ends, they are voided.
#[derive(Debug, Default)]
struct Held(BTreeSet<u64>);

impl Held {
    fn given(&mut self, id: u64) {
        self.0.insert(id);
    }

    /// The client settled `ids` (answered by the node, or unknown here).
    fn settled(&mut self, ids: &[u64]) {
        ids.iter().for_each(|id| {
            self.0.remove(id);
        });
    }

    /// Those held, to void: no longer held.
    fn take(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.0).into_iter().collect()
    }
}

/// Delivery ids as the client knows them, across attachments.
#[derive(Debug, Default)]
struct Ids {
    /// Added to the current attachment's ids.
    shift: u64,
    /// The highest id the client was given.
    highest: u64,
}

impl Ids {
    /// The client's id of the current attachment's delivery `id`.
    fn outward(&mut self, id: u64) -> u64 {
        let outward = self.known(id);
        self.highest = self.highest.max(outward);
        outward
    }

    /// The client's id of an id the current attachment names.
    fn known(&self, id: u64) -> u64 {
        id.saturating_add(self.shift)
    }

    /// The current attachment's id of one of its deliveries' client `id`.
    fn inward(&self, id: u64) -> u64 {
        id - self.shift
    }

    /// A new attachment: its ids come after every id given so far.
    fn next_attachment(&mut self) {
        self.shift = self.highest;
    }

    /// A settle's client `ids`: those of the current attachment, and those
    /// of attachments that ended.
    fn split(&self, ids: &[u64]) -> (Vec<u64>, Vec<u64>) {
        ids.iter().partition(|&&id| id > self.shift)
    }
}

/// The credit the client granted, and what deliveries used of it.
#[derive(Debug)]
struct Credit {
    granted: u64,
    used: u64,
}

impl Credit {
    /// What a new attachment is granted up front.
    fn unused(&self) -> u32 {
        u32::try_from(self.granted.saturating_sub(self.used)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_a_new_attachment_come_after_every_id_given() {
        let mut ids = Ids::default();
        assert_eq!([1, 2, 3].map(|id| ids.outward(id)), [1, 2, 3]);
        ids.next_attachment();
        assert_eq!(ids.outward(1), 4, "the next attachment numbers from 1 again");
        assert_eq!(ids.split(&[2, 4, 3]), (vec![4], vec![2, 3]));
        assert_eq!(ids.inward(4), 1);
        assert_eq!(ids.known(7), 10, "an id the attachment names in an answer");
        ids.next_attachment();
        assert_eq!(ids.outward(1), 5);
        ids.next_attachment();
        ids.next_attachment();
        assert_eq!(
            ids.outward(1),
            6,
            "attachments that delivered nothing take no ids"
        );
    }

    #[test]
    fn the_next_attachment_gets_the_credit_no_delivery_used() {
        let mut credit = Credit { granted: 10, used: 0 };
        credit.used += 4;
        credit.granted += 2;
        assert_eq!(credit.unused(), 8);
        credit.used += 8;
        assert_eq!(credit.unused(), 0);
    }
}
