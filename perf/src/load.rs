//! The producer and consumer tasks of `rebound perf`, and the counters they share.
//!
//! Every message carries its own send time: the first 8 bytes of the body are
//! nanoseconds since the run's [`Run::epoch`] (little-endian), the next 8 its
//! sequence number. Producers and consumers live in this one process, so a
//! monotonic clock serves and no clock sync is involved. Latencies are from the
//! moment the `Send` call was made, not from an intended schedule: the load is
//! closed-loop (a window of unacknowledged sends), so they measure the service
//! time under that window rather than correcting for coordinated omission.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use bytes::{BufMut as _, BytesMut};
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use hdrhistogram::Histogram;
use rebound_client::{Client, OutgoingMessage, PublisherOptions};
use tokio_util::sync::CancellationToken;

use super::workload::Workload;

/// Bytes of the body taken by the send time and the sequence number.
pub const HEADER: usize = 16;

/// Most deliveries settled by one `Settle`: each delivery is acked by id, but
/// those already received go together, as Artemis's ack batching does.
const SETTLE_BATCH: usize = 256;

/// How producers send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Through a [`rebound_client::Publisher`] per producer: one message per
    /// `send` call, the concurrent calls of the window batched into Publish frames
    /// by the client. Needs a batch of 1.
    Publish,
    /// A unary `Send` call per batch.
    Send,
}

impl Api {
    /// Its `--api` name, also in the report.
    pub fn name(self) -> &'static str {
        match self {
            Api::Publish => "publish",
            Api::Send => "send",
        }
    }

    /// The default for a batch size: the publisher for one message per call.
    pub fn default_for(batch: usize) -> Api {
        if batch == 1 { Api::Publish } else { Api::Send }
    }
}

/// What one run's tasks share.
#[derive(Debug)]
pub struct Run {
    /// The workload, with the command line's overrides applied.
    pub spec: Workload,
    /// How producers send.
    pub api: Api,
    /// The queue (and its address, of the same name).
    pub queue: String,
    /// Time zero: send times in bodies and every reported instant count from here.
    pub epoch: Instant,
    /// Messages whose send was acknowledged.
    pub sent: AtomicU64,
    /// When the latest send acknowledgement arrived, ns since `epoch`.
    pub last_sent_ns: AtomicU64,
    /// Good (non-poison) messages acked.
    pub acked: AtomicU64,
    /// When the latest ack was sent, ns since `epoch`.
    pub last_ack_ns: AtomicU64,
}

impl Run {
    /// A run about to start now.
    pub fn new(spec: Workload, api: Api, queue: String) -> Run {
        Run {
            spec,
            api,
            queue,
            epoch: Instant::now(),
            sent: AtomicU64::new(0),
            last_sent_ns: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            last_ack_ns: AtomicU64::new(0),
        }
    }

    /// Good messages the consumers must ack.
    pub fn good_messages(&self) -> u64 {
        self.spec.messages - self.spec.poison_count()
    }

    /// Now, in ns since `epoch`.
    fn now_ns(&self) -> u64 {
        nanos(self.epoch.elapsed())
    }

    fn message(&self, seq: u64, sent_ns: u64) -> OutgoingMessage {
        let mut body = BytesMut::with_capacity(self.spec.size);
        body.put_u64_le(sent_ns);
        body.put_u64_le(seq);
        body.resize(self.spec.size, 0);
        let message = OutgoingMessage::new(self.queue.clone(), body.freeze());
        match self.spec.group(seq) {
            Some(group) => message.group(group),
            None => message,
        }
    }
}

/// A latency histogram in microseconds, 1 µs to 1 h at 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The message numbers producer `index` of `producers` sends: contiguous shares.
pub fn share(messages: u64, producers: u32, index: u32) -> Range<u64> {
    let at = |i: u32| messages * u64::from(i) / u64::from(producers);
    at(index)..at(index + 1)
}

/// Sends messages `seqs` keeping up to `in_flight` unacknowledged, as the run's
/// [`Api`] says; returns the send-acknowledgement latencies.
pub async fn produce(client: Client, run: Arc<Run>, seqs: Range<u64>) -> anyhow::Result<Histogram<u64>> {
    match run.api {
        Api::Send => produce_unary(client, run, seqs).await,
        Api::Publish => publish(client, run, seqs).await,
    }
}

/// [`Api::Send`]: `Send` calls of `batch` messages, `in_flight / batch` at once.
async fn produce_unary(client: Client, run: Arc<Run>, seqs: Range<u64>) -> anyhow::Result<Histogram<u64>> {
    let batch = run.spec.batch as u64;
    let max_calls = (run.spec.in_flight / run.spec.batch).max(1);
    let mut latencies = histogram();
    let mut calls = FuturesUnordered::new();
    let mut next = seqs.start;
    loop {
        while calls.len() < max_calls && next < seqs.end {
            let n = batch.min(seqs.end - next);
            let sent_ns = run.now_ns();
            let messages = (next..next + n).map(|seq| run.message(seq, sent_ns)).collect();
            next += n;
            let client = client.clone();
            calls.push(async move { (sent_ns, n, client.send_batch(messages).await) });
        }
        let Some((sent_ns, n, response)) = calls.next().await else {
            return Ok(latencies);
        };
        if response.context("send failed")?.unrouted > 0 {
            bail!(
                "the broker dropped messages as unrouted: queue {} is gone",
                run.queue
            );
        }
        let now_ns = run.now_ns();
        latencies.saturating_record_n(now_ns.saturating_sub(sent_ns) / 1000, n);
        run.last_sent_ns.fetch_max(now_ns, Ordering::Relaxed);
        run.sent.fetch_add(n, Ordering::Relaxed);
    }
}

/// [`Api::Publish`]: `in_flight` concurrent one-message sends on one publisher.
async fn publish(client: Client, run: Arc<Run>, seqs: Range<u64>) -> anyhow::Result<Histogram<u64>> {
    let publisher = client.publisher_with(PublisherOptions {
        max_pending: run.spec.in_flight,
        ..PublisherOptions::default()
    });
    let mut latencies = histogram();
    let mut sends = FuturesUnordered::new();
    let mut next = seqs.start;
    loop {
        while sends.len() < run.spec.in_flight && next < seqs.end {
            let sent_ns = run.now_ns();
            let message = run.message(next, sent_ns);
            next += 1;
            let publisher = publisher.clone();
            sends.push(async move { (sent_ns, publisher.send(message).await) });
        }
        let Some((sent_ns, sent)) = sends.next().await else {
            return Ok(latencies);
        };
        sent.context("send failed")?;
        let now_ns = run.now_ns();
        latencies.saturating_record(now_ns.saturating_sub(sent_ns) / 1000);
        run.last_sent_ns.fetch_max(now_ns, Ordering::Relaxed);
        run.sent.fetch_add(1, Ordering::Relaxed);
    }
}

/// Consumes until `stop`: acks good messages (recording their end-to-end
/// latency), nacks poison ones; returns the latencies.
pub async fn consume(
    client: Client,
    run: Arc<Run>,
    stop: CancellationToken,
) -> anyhow::Result<Histogram<u64>> {
    let mut consumer = client.consume(&run.queue, run.spec.credit).await?;
    let mut latencies = histogram();
    let (mut acks, mut nacks) = (Vec::new(), Vec::new());
    loop {
        let mut delivery = tokio::select! {
            delivery = consumer.next() => delivery?,
            () = stop.cancelled() => break,
        };
        if delivery.is_none() {
            bail!("the broker ended the consumer stream");
        }
        // Take what has already arrived too, and settle it in one go.
        while let Some(d) = delivery.take() {
            let body = &d.message.body;
            let (Some(sent_ns), Some(seq)) = (le_u64(body, 0), le_u64(body, 8)) else {
                bail!(
                    "message {} is not from rebound perf (body too short)",
                    d.message.message_id
                );
            };
            if run.spec.is_poison(seq) {
                nacks.push(d.id);
            } else {
                latencies.saturating_record(run.now_ns().saturating_sub(sent_ns) / 1000);
                acks.push(d.id);
            }
            if acks.len() + nacks.len() < SETTLE_BATCH {
                delivery = consumer.next_timeout(Duration::ZERO).await?;
            }
        }
        if !nacks.is_empty() {
            consumer.nack(&nacks, "rebound perf: poison message").await?;
            nacks.clear();
        }
        if !acks.is_empty() {
            consumer.ack(&acks).await?;
            run.last_ack_ns.fetch_max(run.now_ns(), Ordering::Relaxed);
            run.acked.fetch_add(acks.len() as u64, Ordering::Relaxed);
            acks.clear();
        }
    }
    consumer.close().await?;
    Ok(latencies)
}

fn le_u64(body: &[u8], at: usize) -> Option<u64> {
    let bytes = body.get(at..at + 8)?;
    Some(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_message_once() {
        let shares: Vec<_> = (0..4).map(|i| share(10, 4, i)).collect();
        assert_eq!(shares, [0..2, 2..5, 5..7, 7..10]);
    }

    #[test]
    fn body_starts_with_send_time_and_sequence() {
        let spec = super::super::workload::named("durable").unwrap().clone();
        let run = Run::new(spec, Api::Send, "q".into());
        let wire = rebound_client::proto::OutgoingMessage::from(run.message(7, 42));
        assert_eq!(wire.body.len(), 1024);
        assert_eq!(
            (le_u64(&wire.body, 0), le_u64(&wire.body, 8)),
            (Some(42), Some(7))
        );
    }
}
