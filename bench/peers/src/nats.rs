//! NATS JetStream (async-nats): a file-storage stream, publish acks within an in-flight
//! window, a durable pull consumer with explicit acks.
//!
//! Every workload uses stream `BENCH` (subject `bench.q`, work-queue retention, so an
//! acked message is removed as from a queue) and one durable pull consumer `work`,
//! shared by `--consumers` pullers, each on its own connection and pulling batches of
//! `credit` (max_ack_pending = credit × consumers).
//!
//! poison: `work` has `MaxDeliver` 5. JetStream has no dead-letter queue; the
//! equivalent built here is the one its docs suggest: a task subscribed to the
//! `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.BENCH.work` advisory fetches the
//! exhausted message by stream sequence, publishes it to a second file stream
//! `BENCHDLQ` (publish ack awaited) and deletes it from `BENCH` — a move. A message is
//! on the DLQ once that publish is acked; poison_dlq_s is when the last one was.
//! Retry delays: in `nak-delay` mode (default) the consumer naks a poison message with
//! the backoff delay for its delivery count (`Nak(10ms)`, … `Nak(80ms)`) and plainly
//! on the 5th delivery, so the server finds MaxDeliver reached at once. In `ack-wait`
//! mode the consumer's `BackOff` = [10,20,40,80 ms] is set and poison messages are left
//! unacked: BackOff only paces ack-wait timeouts (nats-server redelivers a plain Nak at
//! once), and it replaces AckWait for *every* message, so a good message not acked
//! within 10 ms is redelivered too (`redelivered_good`).
use std::future::IntoFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use async_nats::jetstream::{self, consumer, stream, AckKind};
use futures::StreamExt;
use serde_json::{json, Map, Value};
use tokio::task::JoinHandle;

use crate::common::{backoff_after, Run, Workload, BACKOFF_MS, MAX_DELIVERIES};
use crate::driver::{settle, Peer, Pending};

const STREAM: &str = "BENCH";
const SUBJECT: &str = "bench.q";
const CONSUMER: &str = "work";
const DLQ_STREAM: &str = "BENCHDLQ";
const DLQ_SUBJECT: &str = "bench.dlq";

fn e<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> anyhow::Error {
    move |err| anyhow::anyhow!("{what}: {err}")
}

/// A JetStream server set up for one run.
pub struct Nats {
    js: jetstream::Context,
    /// `nak-delay` or `ack-wait`.
    mode: String,
    /// The MAX_DELIVERIES advisories, until the dead-letter mover takes them.
    advisories: Option<async_nats::Subscriber>,
    /// Messages the mover has put on `BENCHDLQ`.
    dead_lettered: Arc<AtomicU64>,
}

impl Nats {
    /// Recreates `BENCH` (and `BENCHDLQ`) and the consumer `work` for `spec`.
    pub async fn setup(url: &str, spec: &Workload, mode: &str) -> Result<Nats> {
        if mode != "nak-delay" && mode != "ack-wait" {
            bail!("--nats-retry must be nak-delay or ack-wait");
        }
        let admin = Self::connect(url).await?;
        let js = jetstream::new(admin.clone());
        declare(&js, spec, mode).await?;
        let advisories = if spec.poison_every.is_some() {
            let subject = format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{STREAM}.{CONSUMER}");
            Some(admin.subscribe(subject).await?)
        } else {
            None
        };
        admin.flush().await?;
        Ok(Nats {
            js,
            mode: mode.to_string(),
            advisories,
            dead_lettered: Arc::default(),
        })
    }
}

async fn declare(js: &jetstream::Context, spec: &Workload, mode: &str) -> Result<()> {
    for s in [STREAM, DLQ_STREAM] {
        let _ = js.delete_stream(s).await;
    }
    let st = js
        .create_stream(stream::Config {
            name: STREAM.to_string(),
            subjects: vec![SUBJECT.to_string()],
            storage: stream::StorageType::File,
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await
        .map_err(e("create stream"))?;
    let mut c = consumer::pull::Config {
        durable_name: Some(CONSUMER.to_string()),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: Duration::from_secs(30),
        max_ack_pending: (spec.credit * spec.consumers) as i64,
        ..Default::default()
    };
    if spec.poison_every.is_some() {
        js.create_stream(stream::Config {
            name: DLQ_STREAM.to_string(),
            subjects: vec![DLQ_SUBJECT.to_string()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(e("create DLQ stream"))?;
        c.max_deliver = MAX_DELIVERIES as i64;
        if mode == "ack-wait" {
            c.backoff = BACKOFF_MS.iter().map(|ms| Duration::from_millis(*ms)).collect();
        }
    }
    st.create_consumer(c).await.map_err(e("create consumer"))?;
    Ok(())
}

/// JetStream's count of deliveries of `m`, this one included.
fn delivered(m: &jetstream::Message) -> u32 {
    m.info().map(|i| i.delivered).unwrap_or(1).max(1) as u32
}

impl Peer for Nats {
    type Conn = async_nats::Client;
    type Publisher = jetstream::Context;
    type Delivery = jetstream::Message;
    const SYSTEM: &'static str = "nats";
    const QUEUE: &'static str = STREAM;
    // Each ack is awaited before the next delivery is taken.
    const SETTLING: usize = 1;

    async fn connect(url: &str) -> Result<async_nats::Client> {
        async_nats::connect(url)
            .await
            .with_context(|| format!("connecting to {url}"))
    }

    async fn publisher(conn: async_nats::Client) -> Result<jetstream::Context> {
        Ok(jetstream::new(conn))
    }

    async fn publish(js: &jetstream::Context, body: Vec<u8>) -> Result<Pending> {
        let ack = js.publish(SUBJECT, body.into()).await.map_err(e("publish"))?;
        let ack = ack.into_future();
        Ok(Box::pin(async move {
            ack.await.map_err(e("publish ack"))?;
            Ok(())
        }))
    }

    async fn consume(self: Arc<Self>, conn: async_nats::Client, run: Arc<Run>, _index: u32) -> Result<()> {
        let js = jetstream::new(conn);
        let st = js.get_stream(STREAM).await.map_err(e("get stream"))?;
        let c: consumer::PullConsumer = st.get_consumer(CONSUMER).await.map_err(e("get consumer"))?;
        let msgs = c
            .stream()
            .max_messages_per_batch(run.spec.credit as usize)
            .messages()
            .await
            .map_err(e("messages"))?;
        settle(&*self, msgs.map(|m| m.map_err(e("pull"))), &run).await
    }

    fn body(m: &jetstream::Message) -> &[u8] {
        &m.payload
    }

    fn redelivered(m: &jetstream::Message) -> bool {
        delivered(m) > 1
    }

    fn ack(m: jetstream::Message) -> Pending {
        Box::pin(async move { m.ack().await.map_err(e("ack")) })
    }

    fn retry(&self, m: jetstream::Message) -> Option<Pending> {
        if self.mode == "ack-wait" {
            return None; // left unacked: the consumer's BackOff times it out
        }
        let delivered = delivered(&m);
        let kind = if delivered < MAX_DELIVERIES {
            AckKind::Nak(Some(backoff_after(delivered)))
        } else {
            AckKind::Nak(None)
        };
        Some(Box::pin(async move { m.ack_with(kind).await.map_err(e("nak")) }))
    }

    fn side_tasks(&mut self) -> Vec<JoinHandle<Result<()>>> {
        let mover = |sub| tokio::spawn(dlq_mover(sub, self.js.clone(), self.dead_lettered.clone()));
        self.advisories.take().map(mover).into_iter().collect()
    }

    async fn dead_lettered(&self) -> Result<u64> {
        Ok(self.dead_lettered.load(Ordering::Relaxed))
    }

    fn extra(&self, poison: bool) -> Map<String, Value> {
        let mut extra = Map::new();
        extra.insert(
            "durability".into(),
            json!("file storage; a publish is acked once written, fsync'd per write only with sync_interval: always (nats-server 2.10+; bench/compare.sh sets it when available)"),
        );
        if poison {
            extra.insert("nats_retry".into(), json!(self.mode));
            extra.insert(
                "dlq".into(),
                json!(
                    "MAX_DELIVERIES advisory -> get msg -> publish to BENCHDLQ (acked) -> delete from BENCH"
                ),
            );
        }
        extra
    }
}

/// The dead-letter "queue": moves messages that exhausted MaxDeliver to `BENCHDLQ`.
async fn dlq_mover(
    mut advisories: async_nats::Subscriber,
    js: jetstream::Context,
    dead_lettered: Arc<AtomicU64>,
) -> Result<()> {
    let st = js.get_stream(STREAM).await.map_err(e("get stream"))?;
    while let Some(a) = advisories.next().await {
        let v: Value = serde_json::from_slice(&a.payload)?;
        let Some(seq) = v.get("stream_seq").and_then(Value::as_u64) else {
            continue;
        };
        let msg = match st.get_raw_message(seq).await {
            Ok(m) => m,
            Err(err) => {
                eprintln!("nats: get msg {seq}: {err}");
                continue;
            }
        };
        js.publish(DLQ_SUBJECT, msg.payload.clone())
            .await
            .map_err(e("dlq publish"))?
            .await
            .map_err(e("dlq publish ack"))?;
        dead_lettered.fetch_add(1, Ordering::Relaxed);
        let _ = st.delete_message(seq).await;
    }
    Ok(())
}
