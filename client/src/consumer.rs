//! A consumer: one Consume stream, with its credit and settle bookkeeping.
//!
//! The stream interleaves two kinds of answers, deliveries and `Settled`
//! confirmations (one per settle, sent once the settle's effect is on disk).
//! [`Consumer`] reads whichever comes and sorts them: deliveries are buffered until
//! [`Consumer::next`] asks for them, confirmations are counted so that
//! [`Consumer::flush`] can wait for the outstanding ones without losing a delivery
//! that arrives meanwhile.

use std::collections::VecDeque;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::credentials::Transport;
use crate::proto::consume_request::Kind as RequestKind;
use crate::proto::consume_response::Kind as ResponseKind;
use crate::proto::messaging_client::MessagingClient;
use crate::{Error, Message, Result, Transaction, proto};

/// Requests queued for the stream before `ack` and friends wait for room.
const REQUEST_BUFFER: usize = 64;

/// The window of a [`ConsumerBuilder`] that was given none.
const DEFAULT_WINDOW: u32 = 10;

/// One delivery of a message to a [`Consumer`].
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Names this delivery when settling it; unique on its stream.
    pub id: u64,
    /// The message.
    pub message: Message,
    /// 1 on the first delivery, incremented by every failed attempt (JMSXDeliveryCount).
    pub delivery_count: u32,
    /// Whether the message was delivered before (`delivery_count > 1`).
    pub redelivered: bool,
    /// The queue it was delivered from.
    pub queue: String,
}

impl TryFrom<proto::Delivery> for Delivery {
    type Error = Error;

    fn try_from(d: proto::Delivery) -> Result<Self> {
        Ok(Delivery {
            id: d.delivery_id,
            message: d.message.ok_or_else(|| Error::missing("Delivery.message"))?,
            delivery_count: d.delivery_count,
            redelivered: d.redelivered,
            queue: d.queue,
        })
    }
}

/// Options of a new [`Consumer`], from [`Client::consumer`](crate::Client::consumer);
/// [`open`](Self::open) subscribes.
///
/// ```no_run
/// # async fn demo(client: rebound_client::Client) -> rebound_client::Result<()> {
/// let mut reds = client.consumer("orders").window(10).filter("color = 'red'").open().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a consumer builder does nothing until `open`"]
pub struct ConsumerBuilder {
    messaging: MessagingClient<Transport>,
    queue: String,
    credit: u32,
    replenish: bool,
    filter: String,
}

impl ConsumerBuilder {
    pub(crate) fn new(messaging: MessagingClient<Transport>, queue: &str) -> Self {
        ConsumerBuilder {
            messaging,
            queue: queue.to_owned(),
            credit: DEFAULT_WINDOW,
            replenish: true,
            filter: String::new(),
        }
    }

    /// A steady window of `window` unsettled deliveries: the consumer grants one
    /// more credit for every delivery it settles (and takes it back from later
    /// grants if the broker refuses the settle). The default, with a window of 10.
    pub fn window(mut self, window: u32) -> Self {
        (self.credit, self.replenish) = (window, true);
        self
    }

    /// `initial_credit` and no automatic credit: the broker delivers no more than
    /// what is granted here and by [`Consumer::grant`]. For taking an exact number
    /// of messages.
    pub fn manual_credit(mut self, initial_credit: u32) -> Self {
        (self.credit, self.replenish) = (initial_credit, false);
        self
    }

    /// Only the messages this selector matches (JMS syntax, e.g.
    /// `color = 'red' AND weight > 2`; empty: every message); the others stay on the
    /// queue for other consumers. A malformed selector makes [`open`](Self::open) fail with
    /// [`Code::InvalidArgument`](crate::Code::InvalidArgument), naming the column.
    pub fn filter(mut self, selector: impl Into<String>) -> Self {
        self.filter = selector.into();
        self
    }

    /// Opens the Consume stream; returns once the broker has confirmed the
    /// subscription.
    pub async fn open(mut self) -> Result<Consumer> {
        let (requests, rx) = mpsc::channel(REQUEST_BUFFER);
        let subscribe = proto::Subscribe {
            queue: self.queue,
            initial_credit: self.credit,
            filter: self.filter,
        };
        requests
            .try_send(request(RequestKind::Subscribe(subscribe)))
            .expect("a new channel has room");
        let mut responses = self
            .messaging
            .consume(ReceiverStream::new(rx))
            .await?
            .into_inner();
        let subscribed = match responses.message().await? {
            Some(proto::ConsumeResponse {
                kind: Some(ResponseKind::Subscribed(s)),
            }) => s,
            Some(other) => {
                return Err(Error::Protocol(format!(
                    "expected Subscribed first, got {other:?}"
                )));
            }
            None => return Err(Error::StreamClosed),
        };
        Ok(Consumer {
            requests: Some(requests),
            responses,
            queue: subscribed.queue,
            address: subscribed.address,
            buffered: VecDeque::new(),
            unconfirmed: 0,
            unknown: Vec::new(),
            rejected: Vec::new(),
            replenish: self.replenish,
            owed: 0,
            regrant: 0,
        })
    }
}

/// A subscription to a queue, opened with [`Client::consumer`](crate::Client::consumer)
/// (or its shorthands [`Client::consume`](crate::Client::consume) and
/// [`Client::consume_manual_credit`](crate::Client::consume_manual_credit)).
///
/// Every delivery uses one credit, and the broker never has more deliveries
/// outstanding than it was granted: the initial credit, every
/// [`grant`](Self::grant), and (with a [`window`](ConsumerBuilder::window)) one
/// credit per settled delivery. Each delivery must be settled: [`ack`](Self::ack),
/// [`nack`](Self::nack), [`release`](Self::release) or
/// [`dead_letter`](Self::dead_letter). Settles are pipelined;
/// [`flush`](Self::flush) waits until the broker has made them durable.
///
/// End it with [`close`](Self::close): what it still holds goes back to the queue
/// without counting as a delivery attempt. A consumer that is dropped instead (or
/// whose connection breaks) counts as a failed delivery of everything it held.
///
/// In a cluster the stream follows its queue from node to node; deliveries the
/// queue's previous node took back are voided, and those not yet returned by
/// [`next`](Self::next) never are (their credit is granted again).
#[derive(Debug)]
pub struct Consumer {
    requests: Option<mpsc::Sender<proto::ConsumeRequest>>,
    responses: Streaming<proto::ConsumeResponse>,
    queue: String,
    address: String,
    /// Deliveries received but not yet returned by `next`.
    buffered: VecDeque<Delivery>,
    /// Settles sent and not yet answered by a `Settled`.
    unconfirmed: usize,
    /// `Settled.unknown_delivery_ids` gathered since the last `flush`.
    unknown: Vec<u64>,
    /// `Settled.error`s (settles the broker could not apply) since the last `flush`.
    rejected: Vec<String>,
    /// Grant a credit per settled delivery (a steady window).
    replenish: bool,
    /// Credit granted for settles the broker then refused: their deliveries are
    /// still outstanding, so the window's next grants pay it back.
    owed: u32,
    /// The credit of voided deliveries dropped unseen, to grant again.
    regrant: u32,
}

impl Consumer {
    /// The queue consumed from, as the broker named it.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The address the queue is bound to.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The next delivery, waiting as long as it takes; `None` once the broker has
    /// ended the stream.
    ///
    /// Cancel-safe: dropping the future (e.g. in `select!`) loses no delivery.
    pub async fn next(&mut self) -> Result<Option<Delivery>> {
        loop {
            // What has arrived is read first: a void among it drops deliveries
            // received before it.
            while let Some(more) = self.read().now_or_never() {
                if !more? {
                    break;
                }
            }
            if let Some(delivery) = self.buffered.pop_front() {
                return Ok(Some(delivery));
            }
            if self.regrant > 0 {
                // Taken off once sent: a cancelled grant is made next time.
                let regrant = self.regrant;
                self.grant(regrant).await?;
                self.regrant -= regrant;
                continue;
            }
            if !self.read().await? {
                return Ok(None);
            }
        }
    }

    /// Like [`next`](Self::next), but `None` also when nothing arrived within `timeout`.
    pub async fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Delivery>> {
        tokio::time::timeout(timeout, self.next())
            .await
            .unwrap_or(Ok(None))
    }

    /// Grants `credit` more deliveries.
    pub async fn grant(&mut self, credit: u32) -> Result<()> {
        self.request(RequestKind::Credit(proto::Credit { credit })).await
    }

    /// Acknowledges deliveries: processed, remove the messages from the queue.
    pub async fn ack(&mut self, delivery_ids: &[u64]) -> Result<()> {
        self.settle(delivery_ids, proto::Outcome::Ack, "", None, None, None)
            .await
    }

    /// Rejects deliveries as failed: counts as an attempt, redelivered per the
    /// address settings or dead-lettered after `max-delivery-attempts`.
    pub async fn nack(&mut self, delivery_ids: &[u64], reason: &str) -> Result<()> {
        self.settle(delivery_ids, proto::Outcome::Nack, reason, None, None, None)
            .await
    }

    /// Like [`nack`](Self::nack), but redeliver after `retry_after` instead of the
    /// configured delay (capped by the broker to the address's `max-retry-after`, default 1 h).
    pub async fn nack_after(
        &mut self,
        delivery_ids: &[u64],
        reason: &str,
        retry_after: Duration,
    ) -> Result<()> {
        let retry_after_ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
        self.settle(
            delivery_ids,
            proto::Outcome::Nack,
            reason,
            Some(retry_after_ms),
            None,
            None,
        )
        .await
    }

    /// Like [`nack`](Self::nack), and the consumer's dependency is down: the broker
    /// pauses the whole queue for `pause` (capped by the address's
    /// `max-outage-pause`), then delivers one probe message (outage mode). These
    /// deliveries do not count this attempt unless the address sets
    /// `outage-counts-attempts`.
    pub async fn nack_pausing_queue(
        &mut self,
        delivery_ids: &[u64],
        reason: &str,
        pause: Duration,
    ) -> Result<()> {
        let pause_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX);
        self.settle(
            delivery_ids,
            proto::Outcome::Nack,
            reason,
            None,
            None,
            Some(pause_ms),
        )
        .await
    }

    /// Hands deliveries back unprocessed: requeued at once, not counted as an attempt.
    pub async fn release(&mut self, delivery_ids: &[u64]) -> Result<()> {
        self.settle(delivery_ids, proto::Outcome::Release, "", None, None, None)
            .await
    }

    /// Fails deliveries permanently: straight to the dead-letter address.
    pub async fn dead_letter(&mut self, delivery_ids: &[u64], reason: &str) -> Result<()> {
        self.settle(delivery_ids, proto::Outcome::DeadLetter, reason, None, None, None)
            .await
    }

    /// Acknowledges deliveries inside `transaction`: the messages stay out of the
    /// queue and are removed when it commits; a rollback returns them with their
    /// delivery count incremented. Waits, as [`flush`](Self::flush) does, until the
    /// broker has taken them into the transaction, so that a commit that follows
    /// includes them; returns what `flush` returns ([`Error::SettleRejected`] if the
    /// transaction is unknown or finished).
    pub async fn ack_in(&mut self, transaction: &Transaction, delivery_ids: &[u64]) -> Result<Vec<u64>> {
        self.settle(
            delivery_ids,
            proto::Outcome::Ack,
            "",
            None,
            Some(transaction.id()),
            None,
        )
        .await?;
        self.flush().await
    }

    /// Waits until every settle sent so far is durable, and returns the delivery ids
    /// the broker reported as unknown (already settled, or never delivered on this
    /// stream) since the previous flush. Deliveries arriving meanwhile are kept for
    /// [`next`](Self::next).
    ///
    /// Fails with [`Error::SettleRejected`] if the broker could not apply one of
    /// those settles (e.g. an ack in an unknown transaction): its deliveries are
    /// still outstanding and can be settled again. The unknown ids are then kept
    /// for the next flush.
    pub async fn flush(&mut self) -> Result<Vec<u64>> {
        while self.unconfirmed > 0 {
            if !self.read().await? {
                return Err(Error::StreamClosed);
            }
        }
        if !self.rejected.is_empty() {
            return Err(Error::SettleRejected(
                std::mem::take(&mut self.rejected).join("; "),
            ));
        }
        Ok(std::mem::take(&mut self.unknown))
    }

    /// Ends the subscription gracefully: tells the broker to stop deliveries,
    /// flushes, ends the request stream and waits for the broker to end its side.
    /// Returns what [`flush`](Self::flush) returns.
    ///
    /// Every delivery still unsettled then, whether returned by [`next`](Self::next)
    /// or not, goes back to the queue at once and does not count as a delivery
    /// attempt: a graceful close never raises a message's delivery count.
    pub async fn close(mut self) -> Result<Vec<u64>> {
        self.request(RequestKind::Close(proto::Close {})).await?;
        let unknown = self.flush().await?;
        self.requests = None;
        while self.responses.message().await?.is_some() {}
        Ok(unknown)
    }

    async fn settle(
        &mut self,
        delivery_ids: &[u64],
        outcome: proto::Outcome,
        reason: &str,
        retry_after_ms: Option<u64>,
        transaction_id: Option<u64>,
        pause_queue_ms: Option<u64>,
    ) -> Result<()> {
        if delivery_ids.is_empty() {
            return Ok(());
        }
        let settle = proto::Settle {
            delivery_ids: delivery_ids.to_vec(),
            outcome: outcome.into(),
            reason: reason.to_owned(),
            retry_after_ms,
            transaction_id,
            pause_queue_ms,
        };
        self.request(RequestKind::Settle(settle)).await?;
        self.unconfirmed += 1;
        if self.replenish {
            // Granted at once, so the window never waits for the settle's fsync.
            let settled = u32::try_from(delivery_ids.len()).unwrap_or(u32::MAX);
            let paid = settled.min(self.owed);
            self.owed -= paid;
            if settled > paid {
                self.grant(settled - paid).await?;
            }
        }
        Ok(())
    }

    /// Sends a request. The broker stops reading requests while its responses go
    /// unread, so responses are read (and filed) while waiting for room: a consumer
    /// that settles many deliveries before it reads cannot deadlock with the broker.
    async fn request(&mut self, kind: RequestKind) -> Result<()> {
        let requests = self.requests.clone().ok_or(Error::StreamClosed)?;
        loop {
            tokio::select! {
                biased;
                room = requests.reserve() => {
                    room.map_err(|_| Error::StreamClosed)?.send(request(kind));
                    return Ok(());
                }
                more = self.read() => {
                    if !more? {
                        return Err(Error::StreamClosed);
                    }
                }
            }
        }
    }

    /// Reads one response and files it; `false` when the stream has ended.
    /// Cancel-safe: nothing is awaited after a response has been taken.
    async fn read(&mut self) -> Result<bool> {
        let Some(response) = self.responses.message().await? else {
            return Ok(false);
        };
        match response.kind {
            Some(ResponseKind::Deliveries(batch)) => {
                for delivery in batch.deliveries {
                    self.buffered.push_back(delivery.try_into()?);
                }
            }
            Some(ResponseKind::Settled(settled)) => {
                self.unconfirmed = self
                    .unconfirmed
                    .checked_sub(1)
                    .ok_or_else(|| Error::Protocol("Settled without a settle".into()))?;
                if self.replenish {
                    // A refused settle's deliveries still hold their credit (link
                    // credit: only deliveries use it), so what was granted for them
                    // is paid back before the window grows.
                    let refused = u32::try_from(settled.refused_delivery_ids.len()).unwrap_or(u32::MAX);
                    self.owed = self.owed.saturating_add(refused);
                }
                self.unknown.extend(settled.unknown_delivery_ids);
                if !settled.error.is_empty() {
                    self.rejected.push(settled.error);
                }
            }
            Some(ResponseKind::Voided(voided)) => {
                // Their messages went back to the queue: the application must not
                // see them, and never used their credit.
                let before = self.buffered.len();
                self.buffered
                    .retain(|delivery| !voided.delivery_ids.contains(&delivery.id));
                let dropped = u32::try_from(before - self.buffered.len()).unwrap_or(u32::MAX);
                self.regrant = self.regrant.saturating_add(dropped);
            }
            Some(ResponseKind::Subscribed(_)) => return Err(Error::Protocol("a second Subscribed".into())),
            None => return Err(Error::missing("ConsumeResponse.kind")),
        }
        Ok(true)
    }
}

fn request(kind: RequestKind) -> proto::ConsumeRequest {
    proto::ConsumeRequest { kind: Some(kind) }
}
