//! RabbitMQ (AMQP 0-9-1 through lapin): a durable quorum queue, persistent messages,
//! publisher confirms within an in-flight window, manual acks under a prefetch window.
//!
//! Every workload uses one quorum queue `bench.q`, published to through the default
//! exchange; producers and consumers each have their own connection.
//! poison: `bench.q` also has `x-delivery-limit` (4 = 5 deliveries: quorum queues count
//! *returns*) and `x-dead-letter-exchange` = `bench.dlx` (fanout) → quorum queue
//! `bench.dlq`, with at-least-once dead-lettering (`x-dead-letter-strategy` =
//! at-least-once, which needs `x-overflow` = reject-publish). Poison messages are
//! `basic.nack`ed with requeue on every delivery; quorum queues requeue at once (they
//! have no redelivery delay, so the 10/20/40/80 ms backoff has no equivalent here). A
//! message counts as dead-lettered once `bench.dlq` holds it (its message count, polled
//! every 5 ms with a passive declare, as rebound perf polls its queue's
//! dead-lettered count).
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::{json, Map, Value};

use crate::common::{body_fields, report, rss, share, Outcome, Run, Workload, POLL};

const QUEUE: &str = "bench.q";
const DLX: &str = "bench.dlx";
const DLQ: &str = "bench.dlq";

fn s(x: &str) -> ShortString {
    x.into()
}

fn quorum_args() -> FieldTable {
    let mut t = FieldTable::default();
    t.insert(s("x-queue-type"), AMQPValue::LongString("quorum".into()));
    t
}

async fn connect(url: &str) -> Result<Connection> {
    Connection::connect(url, ConnectionProperties::default())
        .await
        .with_context(|| format!("connecting to {url}"))
}

async fn declare(ch: &Channel, spec: &Workload, delivery_limit: u32) -> Result<()> {
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for q in [QUEUE, DLQ] {
        let _ = ch.queue_delete(s(q), QueueDeleteOptions::default()).await;
    }
    if spec.poison_every.is_none() {
        ch.queue_declare(s(QUEUE), durable, quorum_args()).await?;
        return Ok(());
    }
    let ex = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(s(DLX), ExchangeKind::Fanout, ex, FieldTable::default())
        .await?;
    ch.queue_declare(s(DLQ), durable, quorum_args()).await?;
    ch.queue_bind(
        s(DLQ),
        s(DLX),
        s(""),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    let mut args = quorum_args();
    args.insert(s("x-delivery-limit"), AMQPValue::LongInt(delivery_limit as i32));
    args.insert(s("x-dead-letter-exchange"), AMQPValue::LongString(DLX.into()));
    args.insert(
        s("x-dead-letter-strategy"),
        AMQPValue::LongString("at-least-once".into()),
    );
    args.insert(s("x-overflow"), AMQPValue::LongString("reject-publish".into()));
    ch.queue_declare(s(QUEUE), durable, args).await?;
    Ok(())
}

async fn produce(conn: Connection, run: Arc<Run>, index: u32) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let props = BasicProperties::default().with_delivery_mode(2); // persistent
                                                                  // Up to in_flight publishes without their confirm. Each publish is its own future
                                                                  // (lapin hands every frame to its I/O thread and would otherwise make the producer
                                                                  // wait for that hand-off before writing the next one).
    let mut inflight = FuturesUnordered::new();
    let settle = |r: Result<(u64, bool)>| -> Result<()> {
        let (sent_ns, acked) = r?;
        if !acked {
            bail!("publish nacked by the broker");
        }
        run.confirmed(sent_ns);
        Ok(())
    };
    for seq in share(&run.spec, index) {
        let (body, sent_ns) = run.body(seq);
        let ch = ch.clone();
        let props = props.clone();
        inflight.push(async move {
            let confirm = ch
                .basic_publish(s(""), s(QUEUE), BasicPublishOptions::default(), &body, props)
                .await?;
            Ok::<_, anyhow::Error>((sent_ns, confirm.await?.is_ack()))
        });
        while inflight.len() >= run.spec.in_flight {
            settle(inflight.next().await.unwrap())?;
        }
    }
    while let Some(r) = inflight.next().await {
        settle(r)?;
    }
    Ok(())
}

async fn consume(conn: Connection, run: Arc<Run>, tag: String) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.basic_qos(
        run.spec.credit.min(u16::MAX as u32) as u16,
        BasicQosOptions::default(),
    )
    .await?;
    let mut deliveries = ch
        .basic_consume(
            s(QUEUE),
            s(&tag),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    // Every delivery gets its own basic.ack / basic.nack. AMQP acks have no reply, so
    // they are pipelined (as other AMQP clients write them without waiting): lapin's
    // ack future only reports that the frame was handed to its I/O thread, and awaiting
    // each one in turn would measure lapin's thread hand-off, not the broker.
    let mut settling = FuturesUnordered::new();
    loop {
        tokio::select! {
            Some(done) = settling.next(), if !settling.is_empty() => {
                let (good, r): (bool, lapin::Result<bool>) = done;
                r?;
                if good {
                    run.acked_one();
                }
            }
            d = deliveries.next(), if settling.len() < 4096 => {
                let Some(d) = d else { break };
                let d = d?;
                let Some((sent_ns, seq)) = body_fields(&d.data) else { bail!("foreign message") };
                let acker = d.acker.clone();
                if run.spec.is_poison(seq) {
                    run.poison_deliveries.fetch_add(1, Ordering::Relaxed);
                    settling.push(Box::pin(async move {
                        (false, acker.nack(BasicNackOptions { requeue: true, multiple: false }).await)
                    }) as std::pin::Pin<Box<dyn std::future::Future<Output = (bool, lapin::Result<bool>)> + Send>>);
                } else {
                    let first = run.received(seq, sent_ns, d.redelivered);
                    settling.push(Box::pin(async move { (first, acker.ack(BasicAckOptions::default()).await) }));
                }
            }
        }
    }
    bail!("the broker ended the consumer")
}

pub async fn run(
    url: &str,
    spec: Workload,
    pid: Option<u32>,
    deadline: Instant,
    delivery_limit: u32,
) -> Result<Value> {
    let admin = connect(url).await?;
    let ach = admin.create_channel().await?;
    declare(&ach, &spec, delivery_limit).await?;
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
    let spawn_consumers = |conns: Vec<Connection>| -> Vec<_> {
        conns
            .into_iter()
            .enumerate()
            .map(|(i, c)| tokio::spawn(consume(c, run.clone(), format!("c{i}"))))
            .collect()
    };
    let tasks: Vec<_> = producers
        .into_iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(produce(c, run.clone(), i as u32)))
        .collect();
    let mut backlog = None;
    let consumer_tasks = if spec.backlog {
        for t in tasks {
            t.await.context("producer")??;
        }
        let filled = rss(pid).0;
        let from = run.epoch.elapsed().as_secs_f64();
        backlog = Some((before, filled, from));
        spawn_consumers(consumers)
    } else {
        let c = spawn_consumers(consumers);
        for t in tasks {
            t.await.context("producer")??;
        }
        c
    };
    let waited = tokio::select! {
        r = run.wait_acked(deadline) => r,
        r = async {
            loop {
                if let Some(t) = consumer_tasks.iter().find(|t| t.is_finished()) {
                    let _ = t;
                    return Err(anyhow::anyhow!("a consumer stopped early"));
                }
                tokio::time::sleep(POLL).await;
            }
        } => r,
    };
    if let Err(e) = waited {
        for t in &consumer_tasks {
            t.abort();
        }
        return Err(e);
    }
    let mut poison_dlq_s = None;
    let poison = spec.poison_count();
    if poison > 0 {
        let passive = QueueDeclareOptions {
            passive: true,
            durable: true,
            ..Default::default()
        };
        loop {
            let q = ach.queue_declare(s(DLQ), passive, FieldTable::default()).await?;
            run.dead_lettered
                .store(q.message_count() as u64, Ordering::Relaxed);
            if q.message_count() as u64 >= poison {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "timed out: {} of {poison} poison messages dead-lettered",
                    q.message_count()
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
        json!("quorum queue: confirm after the Raft WAL is fdatasync'd (batched), persistent messages"),
    );
    if poison > 0 {
        extra.insert("x_delivery_limit".into(), json!(delivery_limit));
        extra.insert(
            "redelivery_delay".into(),
            json!("none: quorum queues requeue at once"),
        );
    }
    let outcome = Outcome {
        queue: QUEUE.into(),
        end_s,
        backlog,
        poison_dlq_s,
        rss_end: rss(pid),
        extra,
    };
    Ok(report("rabbitmq", &run, outcome))
}
