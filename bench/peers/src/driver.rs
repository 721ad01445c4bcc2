//! The workload flow both peers run, written once: connections, producers with
//! `in_flight` publishes unconfirmed, consumers that ack good messages and hand poison
//! back for a retry, fill-then-drain, the wait for the dead-letter queue, the report.
//! What differs between brokers is the [`Peer`] trait, implemented by nats.rs and
//! rabbit.rs.
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, Stream};
use futures::StreamExt;
use serde_json::{Map, Value};
use tokio::task::JoinHandle;

use crate::common::{body_fields, report, rss, share, Outcome, Run, Workload, POLL};

/// An answer still to come from the broker: a publish confirm, or an ack or nack sent.
pub type Pending = BoxFuture<'static, Result<()>>;

/// One peer broker, after its queue (stream) and dead-letter route were set up.
pub trait Peer: Send + Sync + Sized + 'static {
    /// One client connection: every producer and consumer has its own.
    type Conn: Send + 'static;
    /// What a producer publishes through (a channel, a JetStream context).
    type Publisher: Send + Sync;
    /// One delivery to a consumer.
    type Delivery: Send;
    /// `system` in the report.
    const SYSTEM: &'static str;
    /// `queue` in the report.
    const QUEUE: &'static str;
    /// Acks and nacks a consumer may have sent without their outcome (1: each awaited).
    const SETTLING: usize;

    fn connect(url: &str) -> impl Future<Output = Result<Self::Conn>> + Send;
    fn publisher(conn: Self::Conn) -> impl Future<Output = Result<Self::Publisher>> + Send;
    /// Starts publishing `body`; the [`Pending`] ends with the broker's confirm.
    fn publish(p: &Self::Publisher, body: Vec<u8>) -> impl Future<Output = Result<Pending>> + Send;
    /// Subscribes consumer `index` on `conn` and runs [`settle`] over its deliveries.
    fn consume(
        self: Arc<Self>,
        conn: Self::Conn,
        run: Arc<Run>,
        index: u32,
    ) -> impl Future<Output = Result<()>> + Send;
    fn body(d: &Self::Delivery) -> &[u8];
    /// Whether the broker delivered `d` before.
    fn redelivered(d: &Self::Delivery) -> bool;
    fn ack(d: Self::Delivery) -> Pending;
    /// Hands a poison delivery back for another attempt; `None` leaves it unacked.
    fn retry(&self, d: Self::Delivery) -> Option<Pending>;
    /// Tasks that run beside the consumers; the run fails if one ends.
    fn side_tasks(&mut self) -> Vec<JoinHandle<Result<()>>> {
        vec![]
    }
    /// Poison messages on the dead-letter queue so far.
    fn dead_lettered(&self) -> impl Future<Output = Result<u64>> + Send;
    /// The peer's own report fields.
    fn extra(&self, poison: bool) -> Map<String, Value>;
}

/// Runs `spec` against `peer` and returns the report.
pub async fn run<P: Peer>(
    mut peer: P,
    url: &str,
    spec: Workload,
    pid: Option<u32>,
    deadline: Instant,
) -> Result<Value> {
    let mut producers = vec![];
    for _ in 0..spec.producers {
        producers.push(P::connect(url).await?);
    }
    let mut consumers = vec![];
    for _ in 0..spec.consumers {
        consumers.push(P::connect(url).await?);
    }
    let before = rss(pid).0;
    let run = Run::new(spec.clone());
    let mut consumer_tasks = peer.side_tasks();
    let peer = Arc::new(peer);
    let spawn_consumers = |conns: Vec<P::Conn>, tasks: &mut Vec<JoinHandle<Result<()>>>| {
        for (i, c) in conns.into_iter().enumerate() {
            tasks.push(tokio::spawn(peer.clone().consume(c, run.clone(), i as u32)));
        }
    };
    let tasks: Vec<_> = producers
        .into_iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(produce::<P>(c, run.clone(), i as u32)))
        .collect();
    let mut backlog = None;
    if spec.backlog {
        for t in tasks {
            t.await.context("producer")??;
        }
        let filled = rss(pid).0;
        backlog = Some((before, filled, run.epoch.elapsed().as_secs_f64()));
        spawn_consumers(consumers, &mut consumer_tasks);
    } else {
        spawn_consumers(consumers, &mut consumer_tasks);
        for t in tasks {
            t.await.context("producer")??;
        }
    }
    let waited = tokio::select! {
        r = run.wait_acked(deadline) => r,
        r = async {
            loop {
                if consumer_tasks.iter().any(|t| t.is_finished()) {
                    return Err(anyhow::anyhow!("a consumer stopped early"));
                }
                tokio::time::sleep(POLL).await;
            }
        } => r,
    };
    if let Err(err) = waited {
        for t in &consumer_tasks {
            t.abort();
        }
        return Err(err);
    }
    let mut poison_dlq_s = None;
    let poison = spec.poison_count();
    if poison > 0 {
        loop {
            let n = peer.dead_lettered().await?;
            if n >= poison {
                break;
            }
            if Instant::now() > deadline {
                bail!("timed out: {n} of {poison} poison messages dead-lettered");
            }
            tokio::time::sleep(POLL).await;
        }
        poison_dlq_s = Some(run.epoch.elapsed().as_secs_f64());
    }
    let end_s = run.epoch.elapsed().as_secs_f64();
    for t in &consumer_tasks {
        t.abort();
    }
    let outcome = Outcome {
        queue: P::QUEUE.into(),
        end_s,
        backlog,
        poison_dlq_s,
        rss_end: rss(pid),
        extra: peer.extra(poison > 0),
    };
    Ok(report(P::SYSTEM, &run, outcome))
}

/// Producer `index`: publishes its share with at most `in_flight` unconfirmed.
async fn produce<P: Peer>(conn: P::Conn, run: Arc<Run>, index: u32) -> Result<()> {
    let publisher = P::publisher(conn).await?;
    let mut inflight = FuturesUnordered::new();
    for seq in share(&run.spec, index) {
        let (body, sent_ns) = run.body(seq);
        let confirm = P::publish(&publisher, body).await?;
        inflight.push(async move { (sent_ns, confirm.await) });
        while inflight.len() >= run.spec.in_flight {
            let (sent_ns, confirmed) = inflight.next().await.unwrap();
            confirmed?;
            run.confirmed(sent_ns);
        }
    }
    while let Some((sent_ns, confirmed)) = inflight.next().await {
        confirmed?;
        run.confirmed(sent_ns);
    }
    Ok(())
}

/// A consumer's loop: every delivery is acked (good) or retried (poison) on its own,
/// with up to [`Peer::SETTLING`] of those outstanding. Returns only on an error: the
/// deliveries end when the broker ends the consumer.
pub async fn settle<P: Peer>(
    peer: &P,
    deliveries: impl Stream<Item = Result<P::Delivery>>,
    run: &Run,
) -> Result<()> {
    let mut deliveries = std::pin::pin!(deliveries);
    let mut settling = FuturesUnordered::new();
    loop {
        tokio::select! {
            Some((first, settled)) = settling.next(), if !settling.is_empty() => {
                settled?;
                if first {
                    run.acked_one();
                }
            }
            d = deliveries.next(), if settling.len() < P::SETTLING => {
                let Some(d) = d else { break };
                let d = d?;
                let Some((sent_ns, seq)) = body_fields(P::body(&d)) else { bail!("foreign message") };
                if run.spec.is_poison(seq) {
                    run.poison_deliveries.fetch_add(1, Ordering::Relaxed);
                    if let Some(retry) = peer.retry(d) {
                        settling.push(outcome(false, retry));
                    }
                } else {
                    let first = run.received(seq, sent_ns, P::redelivered(&d));
                    settling.push(outcome(first, P::ack(d)));
                }
            }
        }
    }
    bail!("the broker ended the consumer")
}

/// `pending`'s result, with whether it acks a good message's first receipt.
async fn outcome(first: bool, pending: Pending) -> (bool, Result<()>) {
    (first, pending.await)
}
