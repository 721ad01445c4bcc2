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
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use async_nats::jetstream::{self, consumer, stream, AckKind};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use serde_json::{json, Map, Value};

use crate::common::{
    backoff_after, body_fields, report, rss, share, Outcome, Run, Workload, BACKOFF_MS, MAX_DELIVERIES,
    POLL,
};

const STREAM: &str = "BENCH";
const SUBJECT: &str = "bench.q";
const CONSUMER: &str = "work";
const DLQ_STREAM: &str = "BENCHDLQ";
const DLQ_SUBJECT: &str = "bench.dlq";

async fn connect(url: &str) -> Result<async_nats::Client> {
    async_nats::connect(url)
        .await
        .with_context(|| format!("connecting to {url}"))
}

fn e<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> anyhow::Error {
    move |err| anyhow::anyhow!("{what}: {err}")
}

async fn setup(js: &jetstream::Context, spec: &Workload, mode: &str) -> Result<()> {
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

async fn produce(client: async_nats::Client, run: Arc<Run>, index: u32) -> Result<()> {
    let js = jetstream::new(client);
    let mut inflight = FuturesUnordered::new();
    for seq in share(&run.spec, index) {
        let (body, sent_ns) = run.body(seq);
        let ack = js.publish(SUBJECT, body.into()).await.map_err(e("publish"))?;
        let ack = ack.into_future();
        inflight.push(async move { (sent_ns, ack.await) });
        while inflight.len() >= run.spec.in_flight {
            let (sent_ns, a) = inflight.next().await.unwrap();
            a.map_err(e("publish ack"))?;
            run.confirmed(sent_ns);
        }
    }
    while let Some((sent_ns, a)) = inflight.next().await {
        a.map_err(e("publish ack"))?;
        run.confirmed(sent_ns);
    }
    Ok(())
}

async fn consume(client: async_nats::Client, run: Arc<Run>, mode: String) -> Result<()> {
    let js = jetstream::new(client);
    let st = js.get_stream(STREAM).await.map_err(e("get stream"))?;
    let c: consumer::PullConsumer = st.get_consumer(CONSUMER).await.map_err(e("get consumer"))?;
    let mut msgs = c
        .stream()
        .max_messages_per_batch(run.spec.credit as usize)
        .messages()
        .await
        .map_err(e("messages"))?;
    while let Some(m) = msgs.next().await {
        let m = m.map_err(e("pull"))?;
        let Some((sent_ns, seq)) = body_fields(&m.payload) else {
            bail!("foreign message")
        };
        let delivered = m.info().map(|i| i.delivered).unwrap_or(1).max(1) as u32;
        if run.spec.is_poison(seq) {
            run.poison_deliveries.fetch_add(1, Ordering::Relaxed);
            if mode == "ack-wait" {
                continue; // left unacked: the consumer's BackOff times it out
            }
            let kind = if delivered < MAX_DELIVERIES {
                AckKind::Nak(Some(backoff_after(delivered)))
            } else {
                AckKind::Nak(None)
            };
            m.ack_with(kind).await.map_err(e("nak"))?;
        } else {
            let first = run.received(seq, sent_ns, delivered > 1);
            m.ack().await.map_err(e("ack"))?;
            if first {
                run.acked_one();
            }
        }
    }
    bail!("the consumer stream ended")
}

/// The dead-letter "queue": moves messages that exhausted MaxDeliver to `BENCHDLQ`.
async fn dlq_mover(
    mut advisories: async_nats::Subscriber,
    js: jetstream::Context,
    run: Arc<Run>,
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
        run.dead_lettered.fetch_add(1, Ordering::Relaxed);
        let _ = st.delete_message(seq).await;
    }
    Ok(())
}

pub async fn run(
    url: &str,
    spec: Workload,
    pid: Option<u32>,
    deadline: Instant,
    mode: &str,
) -> Result<Value> {
    if mode != "nak-delay" && mode != "ack-wait" {
        bail!("--nats-retry must be nak-delay or ack-wait");
    }
    let admin = connect(url).await?;
    let js = jetstream::new(admin.clone());
    setup(&js, &spec, mode).await?;
    let advisories = if spec.poison_every.is_some() {
        let subject = format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{STREAM}.{CONSUMER}");
        Some(admin.subscribe(subject).await?)
    } else {
        None
    };
    admin.flush().await?;
    let mut producers = vec![];
    for _ in 0..spec.producers {
        producers.push(connect(url).await?);
    }
    let mut consumers = vec![];
    for _ in 0..spec.consumers {
        consumers.push(connect(url).await?);
    }
    let before = rss(pid).0;
    let run = Run::new(spec.clone());
    let mut consumer_tasks = vec![];
    if let Some(sub) = advisories {
        consumer_tasks.push(tokio::spawn(dlq_mover(sub, js.clone(), run.clone())));
    }
    let spawn_consumers = |conns: Vec<async_nats::Client>,
                           tasks: &mut Vec<tokio::task::JoinHandle<Result<()>>>| {
        for c in conns {
            tasks.push(tokio::spawn(consume(c, run.clone(), mode.to_string())));
        }
    };
    let tasks: Vec<_> = producers
        .into_iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(produce(c, run.clone(), i as u32)))
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
        while run.dead_lettered.load(Ordering::Relaxed) < poison {
            if Instant::now() > deadline {
                bail!(
                    "timed out: {} of {poison} poison messages dead-lettered",
                    run.dead_lettered.load(Ordering::Relaxed)
                );
            }
            tokio::time::sleep(POLL).await;
        }
        poison_dlq_s = Some(run.epoch.elapsed().as_secs_f64());
    }
    let end_s = run.epoch.elapsed().as_secs_f64();
    for t in &consumer_tasks {
        t.abort();
    }
    let mut extra = Map::new();
    extra.insert(
        "durability".into(),
        json!("file storage; a publish is acked once written, fsync'd per write only with sync_interval: always (nats-server 2.10+; bench/compare.sh sets it when available)"),
    );
    if poison > 0 {
        extra.insert("nats_retry".into(), json!(mode));
        extra.insert(
            "dlq".into(),
            json!("MAX_DELIVERIES advisory -> get msg -> publish to BENCHDLQ (acked) -> delete from BENCH"),
        );
    }
    let outcome = Outcome {
        queue: STREAM.into(),
        end_s,
        backlog,
        poison_dlq_s,
        rss_end: rss(pid),
        extra,
    };
    Ok(report("nats", &run, outcome))
}
