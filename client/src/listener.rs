//! A listener container: what an MDB container does for a Java team.
//!
//! One task owns the consumer (and, when transacted, the session): it takes
//! deliveries while fewer than `concurrency` handlers run, runs each handler in a
//! task of its own under `catch_unwind`, and settles each outcome as it comes back.
//! When the stream breaks it forgets everything tied to it — a delivery id is only
//! meaningful on its own stream — and resubscribes with a bounded exponential backoff.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::{Client, Consumer, Delivery, Error, Message, Result, Session, Transaction};

/// The first wait before resubscribing after a failure; doubled per failure.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two subscription attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why a handler did not process a message. Its outcome decides what happens to
/// the message.
///
/// Any `std::error::Error` converts into [`HandlerError::Failed`], so a handler
/// can use `?`.
#[derive(Debug)]
pub enum HandlerError {
    /// A transient failure the handler recognised (a dependency is down, data is
    /// not there yet): the message is nacked — with `retry_after`, if given, instead
    /// of the address's redelivery delay — and the listener goes on with the next
    /// messages at once.
    TemporarilyUnavailable {
        /// Why, kept with the message.
        reason: String,
        /// Redeliver after this long instead of the configured delay (clamped by
        /// the broker to the address's `max-retry-after`, default 1 h).
        retry_after: Option<Duration>,
    },
    /// A dependency every message needs is down: the message is nacked and the
    /// broker pauses the whole queue for `pause` (outage mode: capped by the
    /// address's `max-outage-pause`, then one probe message); the attempt does not
    /// count unless the address sets `outage-counts-attempts`.
    DependencyDown {
        /// Why, kept with the message.
        reason: String,
        /// How long the queue pauses.
        pause: Duration,
    },
    /// The message can never be processed: it is dead-lettered now, with this reason.
    Permanent(String),
    /// Any other failure: nacked (redelivered per the address settings, then
    /// dead-lettered after `max-delivery-attempts`) and logged.
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl HandlerError {
    /// [`TemporarilyUnavailable`](Self::TemporarilyUnavailable) with the address's
    /// redelivery delay.
    pub fn temporarily_unavailable(reason: impl Into<String>) -> Self {
        HandlerError::TemporarilyUnavailable {
            reason: reason.into(),
            retry_after: None,
        }
    }

    /// [`TemporarilyUnavailable`](Self::TemporarilyUnavailable), redelivered after
    /// `retry_after`.
    pub fn retry_after(reason: impl Into<String>, retry_after: Duration) -> Self {
        HandlerError::TemporarilyUnavailable {
            reason: reason.into(),
            retry_after: Some(retry_after),
        }
    }

    /// [`DependencyDown`](Self::DependencyDown): pause the queue for `pause`.
    pub fn dependency_down(reason: impl Into<String>, pause: Duration) -> Self {
        HandlerError::DependencyDown {
            reason: reason.into(),
            pause,
        }
    }

    /// [`Permanent`](Self::Permanent).
    pub fn permanent(reason: impl Into<String>) -> Self {
        HandlerError::Permanent(reason.into())
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandlerError::TemporarilyUnavailable { reason, .. } => {
                write!(f, "temporarily unavailable: {reason}")
            }
            HandlerError::DependencyDown { reason, .. } => write!(f, "dependency down: {reason}"),
            HandlerError::Permanent(reason) => write!(f, "permanent failure: {reason}"),
            HandlerError::Failed(err) => write!(f, "{err}"),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(err: E) -> Self {
        HandlerError::Failed(Box::new(err))
    }
}

/// One message handed to a [`Listener`]'s handler.
#[derive(Debug)]
pub struct Incoming {
    /// The message.
    pub message: Message,
    /// 1 on the first delivery, incremented by every failed attempt (JMSXDeliveryCount).
    pub delivery_count: u32,
    /// Whether the message was delivered before (JMSRedelivered): the handler may
    /// have seen it already, possibly on another listener.
    pub redelivered: bool,
    /// The queue it came from.
    pub queue: String,
    transaction: Option<Transaction>,
}

impl Incoming {
    /// In a [transacted](ListenerBuilder::transacted) listener, the transaction of
    /// this message: what the handler sends through it is committed together with
    /// the message's ack, or discarded if the handler fails.
    pub fn transaction(&self) -> Option<&Transaction> {
        self.transaction.as_ref()
    }
}

/// What a [`Listener`] did with the messages it was handed, since it started.
///
/// Every handler run ends up in exactly one of the settled counters or in
/// `abandoned`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// Handled and acknowledged (committed, in a transacted listener).
    pub acked: u64,
    /// Nacked after [`HandlerError::TemporarilyUnavailable`] or
    /// [`HandlerError::DependencyDown`].
    pub retried: u64,
    /// Nacked after [`HandlerError::Failed`], a panic, or a failed commit.
    pub failed: u64,
    /// Dead-lettered after [`HandlerError::Permanent`].
    pub dead_lettered: u64,
    /// Not settled because their stream broke first; the broker redelivers them.
    pub abandoned: u64,
    /// Times the subscription was lost and opened again.
    pub reconnects: u64,
}

#[derive(Default)]
struct Counters {
    acked: AtomicU64,
    retried: AtomicU64,
    failed: AtomicU64,
    dead_lettered: AtomicU64,
    abandoned: AtomicU64,
    reconnects: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ListenerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ListenerStats {
            acked: get(&self.acked),
            retried: get(&self.retried),
            failed: get(&self.failed),
            dead_lettered: get(&self.dead_lettered),
            abandoned: get(&self.abandoned),
            reconnects: get(&self.reconnects),
        }
    }
}

impl fmt::Debug for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

type Handler = dyn Fn(Incoming) -> BoxFuture<'static, Result<(), HandlerError>> + Send + Sync;

/// Options of a [`Listener`], from [`Listener::builder`]; [`start`](Self::start)
/// starts it.
#[derive(Debug, Clone)]
#[must_use = "a listener builder does nothing until `start`"]
pub struct ListenerBuilder {
    client: Client,
    queue: String,
    concurrency: usize,
    transacted: bool,
}

impl ListenerBuilder {
    /// Runs up to `concurrency` handlers at once (at least 1; default 1). It is also
    /// the consumer's credit window, so the broker hands this listener no more
    /// messages than it can work on.
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Handles each message in a transaction of its own (default: no). Success
    /// commits the handler's sends ([`Incoming::transaction`]) together with the
    /// message's ack; a failure rolls the sends back.
    pub fn transacted(mut self, transacted: bool) -> Self {
        self.transacted = transacted;
        self
    }

    /// Starts the listener in the background and returns at once; it subscribes,
    /// and keeps resubscribing (logging why) until [`Listener::stop`].
    pub fn start<H, F>(self, handler: H) -> Listener
    where
        H: Fn(Incoming) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), HandlerError>> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let counters = Arc::new(Counters::default());
        let run = Run {
            config: self,
            handler: Arc::new(move |incoming| handler(incoming).boxed()),
            stop: stop.clone(),
            counters: counters.clone(),
        };
        Listener {
            task: tokio::spawn(run.run()),
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
            counters,
        }
    }
}

/// Consumes a queue and runs a handler for every message, the way an MDB
/// container runs `onMessage`, mapping the handler's outcome to a settlement:
///
/// | outcome | non-transacted | [transacted](ListenerBuilder::transacted) |
/// |---|---|---|
/// | `Ok(())` | ack | ack in the message's transaction, commit |
/// | [`TemporarilyUnavailable`](HandlerError::TemporarilyUnavailable) | nack (with its retry-after) | rollback, nack |
/// | [`DependencyDown`](HandlerError::DependencyDown) | nack pausing the queue | rollback, nack pausing the queue |
/// | [`Permanent`](HandlerError::Permanent) | dead-letter with the error as reason | rollback, dead-letter |
/// | [`Failed`](HandlerError::Failed) or a panic | nack, logged with the message id | rollback, nack, logged |
///
/// A nacked message counts as a failed delivery: the address's redelivery settings
/// apply (delay, max-delivery-attempts, dead-letter address), and it may come back
/// to any consumer of the queue, behind messages sent after it. Meanwhile the
/// listener goes on with the next messages; a panicking handler neither stops the
/// listener nor loses its message.
///
/// Delivery is at least once: when the broker restarts or the connection breaks,
/// the listener resubscribes (backoff from 100 ms doubling to 5 s) and the messages
/// it had not settled are delivered again, possibly to a handler that already
/// processed them (check [`Incoming::redelivered`]). Handlers still running when
/// their stream broke finish, but their outcome is discarded ([`ListenerStats::abandoned`]):
/// their delivery ids mean nothing on the new stream.
///
/// ```no_run
/// # async fn demo() -> rebound_client::Result<()> {
/// use rebound_client::{Client, HandlerError, Incoming, Listener};
///
/// let client = Client::connect("http://127.0.0.1:61616").await?;
/// let listener = Listener::builder(client, "orders")
///     .concurrency(4)
///     .start(|incoming: Incoming| async move {
///         let order = std::str::from_utf8(&incoming.message.body)?;
///         if order.is_empty() {
///             return Err(HandlerError::permanent("empty order"));
///         }
///         println!("order {order} (attempt {})", incoming.delivery_count);
///         Ok(())
///     });
/// tokio::signal::ctrl_c().await.ok();
/// let stats = listener.stop().await;
/// println!("{} orders processed", stats.acked);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Listener {
    task: JoinHandle<()>,
    stop: CancellationToken,
    /// Dropping the listener stops it too (in the background).
    _stop_on_drop: DropGuard,
    counters: Arc<Counters>,
}

impl Listener {
    /// A listener for `queue` that `client` connects to; set its options, then
    /// [`start`](ListenerBuilder::start) it with the handler.
    pub fn builder(client: Client, queue: impl Into<String>) -> ListenerBuilder {
        ListenerBuilder {
            client,
            queue: queue.into(),
            concurrency: 1,
            transacted: false,
        }
    }

    /// What the listener did so far.
    pub fn stats(&self) -> ListenerStats {
        self.counters.snapshot()
    }

    /// Stops gracefully: takes no more messages, waits for the running handlers
    /// and settles their outcomes, then closes the consumer, so that the messages
    /// it had received but not handed out go back to the queue without counting
    /// as a delivery attempt. Returns the final [`stats`](Self::stats).
    pub async fn stop(self) -> ListenerStats {
        self.stop.cancel();
        if let Err(err) = self.task.await {
            tracing::error!(%err, "the listener task failed");
        }
        self.counters.snapshot()
    }
}

/// The listener's task.
struct Run {
    config: ListenerBuilder,
    handler: Arc<Handler>,
    stop: CancellationToken,
    counters: Arc<Counters>,
}

/// How a subscription ended.
enum Ended {
    Stopped,
    Broken(Error),
}

/// A handler run that has finished: the delivery, its transaction, and what came
/// of it (`Err`: the handler panicked, with the panic's message).
struct Finished {
    delivery_id: u64,
    message_id: u64,
    transaction: Option<Transaction>,
    result: std::result::Result<Result<(), HandlerError>, String>,
}

impl Run {
    async fn run(self) {
        let queue = &self.config.queue;
        let mut backoff = MIN_BACKOFF;
        loop {
            match self.subscribe().await {
                Ok((consumer, session)) => {
                    backoff = MIN_BACKOFF;
                    match self.serve(consumer, session).await {
                        Ended::Stopped => return,
                        Ended::Broken(err) => {
                            Counters::add(&self.counters.reconnects, 1);
                            tracing::warn!(%queue, %err, "listener lost its subscription; resubscribing");
                        }
                    }
                }
                Err(err) => tracing::warn!(%queue, %err, retry_in = ?backoff, "listener cannot subscribe"),
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn subscribe(&self) -> Result<(Consumer, Option<Session>)> {
        let client = &self.config.client;
        let window = u32::try_from(self.config.concurrency).unwrap_or(u32::MAX);
        let session = if self.config.transacted {
            Some(client.session().await?)
        } else {
            None
        };
        Ok((client.consume(&self.config.queue, window).await?, session))
    }

    /// Runs one subscription until it breaks or the listener is stopped.
    async fn serve(&self, mut consumer: Consumer, session: Option<Session>) -> Ended {
        let mut running: JoinSet<Finished> = JoinSet::new();
        let ended = loop {
            tokio::select! {
                _ = self.stop.cancelled() => break Ended::Stopped,
                Some(joined) = running.join_next() => {
                    // `Finished` catches the handler's panic, so only an abort could fail here.
                    let Ok(finished) = joined else { continue };
                    if let Err(err) = self.settle(&mut consumer, finished).await {
                        // Its delivery went back with the stream, like the running ones.
                        Counters::add(&self.counters.abandoned, 1);
                        break Ended::Broken(err);
                    }
                }
                next = consumer.next(), if running.len() < self.config.concurrency => match next {
                    Ok(Some(delivery)) => match self.spawn(&mut running, delivery, session.as_ref()).await {
                        Ok(()) => {}
                        Err(err) => break Ended::Broken(err),
                    },
                    Ok(None) => break Ended::Broken(Error::StreamClosed),
                    Err(err) => break Ended::Broken(err),
                },
            }
        };
        match ended {
            Ended::Stopped => {
                while let Some(joined) = running.join_next().await {
                    let Ok(finished) = joined else { continue };
                    if let Err(err) = self.settle(&mut consumer, finished).await {
                        Counters::add(&self.counters.abandoned, 1);
                        return self.abandon(running, err);
                    }
                }
                if let Err(err) = consumer.close().await {
                    tracing::warn!(queue = %self.config.queue, %err, "could not close the listener's consumer");
                }
                Ended::Stopped
            }
            Ended::Broken(err) => self.abandon(running, err),
        }
    }

    /// Lets the running handlers finish on their own: their deliveries went back
    /// to the queue with the stream, so their outcomes must not be settled.
    fn abandon(&self, mut running: JoinSet<Finished>, err: Error) -> Ended {
        Counters::add(&self.counters.abandoned, running.len() as u64);
        running.detach_all();
        if self.stop.is_cancelled() {
            Ended::Stopped
        } else {
            Ended::Broken(err)
        }
    }

    async fn spawn(
        &self,
        running: &mut JoinSet<Finished>,
        delivery: Delivery,
        session: Option<&Session>,
    ) -> Result<()> {
        let transaction = match session {
            Some(session) => Some(session.begin().await?),
            None => None,
        };
        let (delivery_id, message_id) = (delivery.id, delivery.message.message_id);
        let incoming = Incoming {
            message: delivery.message,
            delivery_count: delivery.delivery_count,
            redelivered: delivery.redelivered,
            queue: delivery.queue,
            transaction: transaction.clone(),
        };
        let handler = self.handler.clone();
        running.spawn(async move {
            // The closure is called inside too, so that a panic before its future exists is caught.
            let result = AssertUnwindSafe(async move { handler(incoming).await })
                .catch_unwind()
                .await
                .map_err(|panic| panic_message(&*panic));
            Finished {
                delivery_id,
                message_id,
                transaction,
                result,
            }
        });
        Ok(())
    }

    /// Settles one outcome. Errors only when the consumer's stream is broken.
    async fn settle(&self, consumer: &mut Consumer, finished: Finished) -> Result<()> {
        let Finished {
            delivery_id: id,
            message_id,
            transaction,
            result,
        } = finished;
        let queue = &self.config.queue;
        let c = &self.counters;
        let failure = match result {
            Ok(Ok(())) => {
                let committed = match &transaction {
                    None => consumer.ack(&[id]).await.map(Ok)?,
                    Some(tx) => self.commit(consumer, id, tx).await?,
                };
                match committed {
                    Ok(()) => Counters::add(&c.acked, 1),
                    // The message is back on the queue as a failed delivery.
                    Err(err) => {
                        tracing::warn!(%queue, message_id, %err, "commit failed; the message will be redelivered");
                        Counters::add(&c.failed, 1);
                    }
                }
                return Ok(());
            }
            Ok(Err(failure)) => failure,
            Err(panic) => {
                tracing::error!(%queue, message_id, panic, "handler panicked");
                HandlerError::Failed(format!("handler panicked: {panic}").into())
            }
        };
        if let Some(tx) = transaction
            && let Err(err) = tx.rollback().await
        {
            // A broken session rolls back by itself.
            tracing::debug!(%queue, message_id, %err, "rollback failed");
        }
        match failure {
            HandlerError::TemporarilyUnavailable { reason, retry_after } => {
                tracing::debug!(%queue, message_id, %reason, "message will be redelivered");
                match retry_after {
                    Some(after) => consumer.nack_after(&[id], &reason, after).await?,
                    None => consumer.nack(&[id], &reason).await?,
                }
                Counters::add(&c.retried, 1);
            }
            HandlerError::DependencyDown { reason, pause } => {
                tracing::debug!(%queue, message_id, %reason, ?pause, "dependency down; pausing the queue");
                consumer.nack_pausing_queue(&[id], &reason, pause).await?;
                Counters::add(&c.retried, 1);
            }
            HandlerError::Permanent(reason) => {
                tracing::warn!(%queue, message_id, %reason, "dead-lettering message");
                consumer.dead_letter(&[id], &reason).await?;
                Counters::add(&c.dead_lettered, 1);
            }
            HandlerError::Failed(err) => {
                let reason = err.to_string();
                tracing::warn!(%queue, message_id, %reason, "handler failed; the message will be redelivered");
                consumer.nack(&[id], &reason).await?;
                Counters::add(&c.failed, 1);
            }
        }
        Ok(())
    }

    /// Acks `id` in `tx` and commits. The outer error is a broken consumer; the
    /// inner one a commit that did not happen, after which the message is back on
    /// the queue (or still outstanding, then nacked here).
    async fn commit(&self, consumer: &mut Consumer, id: u64, tx: &Transaction) -> Result<Result<()>> {
        match consumer.ack_in(tx, &[id]).await {
            Ok(_) => Ok(tx.commit().await.map(drop)),
            // The transaction is gone (its session broke): settle the delivery itself.
            Err(err @ Error::SettleRejected(_)) => {
                consumer.nack(&[id], &err.to_string()).await?;
                Ok(Err(err))
            }
            Err(err) => Err(err),
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "a non-string panic payload".to_owned(),
    }
}
