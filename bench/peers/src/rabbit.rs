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
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::{json, Map, Value};

use crate::common::{Run, Workload};
use crate::driver::{settle, Peer, Pending};

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

/// A RabbitMQ broker set up for one run.
pub struct Rabbit {
    /// The admin connection's channel, for the passive declares of `bench.dlq`.
    admin: Channel,
    delivery_limit: u32,
}

impl Rabbit {
    /// Recreates `bench.q` (and, for poison, its dead-letter route) for `spec`.
    pub async fn setup(url: &str, spec: &Workload, delivery_limit: u32) -> Result<Rabbit> {
        let admin = Self::connect(url).await?.create_channel().await?;
        declare(&admin, spec, delivery_limit).await?;
        Ok(Rabbit {
            admin,
            delivery_limit,
        })
    }
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

impl Peer for Rabbit {
    type Conn = Connection;
    /// A confirm-mode channel and the persistent messages' properties.
    type Publisher = (Channel, BasicProperties);
    type Delivery = Delivery;
    const SYSTEM: &'static str = "rabbitmq";
    const QUEUE: &'static str = QUEUE;
    // AMQP acks have no reply, so they are pipelined (as other AMQP clients write them
    // without waiting): lapin's ack future only reports that the frame was handed to
    // its I/O thread, and awaiting each one in turn would measure lapin's thread
    // hand-off, not the broker.
    const SETTLING: usize = 4096;

    async fn connect(url: &str) -> Result<Connection> {
        Connection::connect(url, ConnectionProperties::default())
            .await
            .with_context(|| format!("connecting to {url}"))
    }

    async fn publisher(conn: Connection) -> Result<(Channel, BasicProperties)> {
        let ch = conn.create_channel().await?;
        ch.confirm_select(ConfirmSelectOptions::default()).await?;
        Ok((ch, BasicProperties::default().with_delivery_mode(2))) // persistent
    }

    // The publish itself is part of the pending future: lapin hands every frame to its
    // I/O thread and would otherwise make the producer wait for that hand-off before
    // writing the next one.
    async fn publish((ch, props): &(Channel, BasicProperties), body: Vec<u8>) -> Result<Pending> {
        let (ch, props) = (ch.clone(), props.clone());
        Ok(Box::pin(async move {
            let confirm = ch
                .basic_publish(s(""), s(QUEUE), BasicPublishOptions::default(), &body, props)
                .await?;
            if !confirm.await?.is_ack() {
                bail!("publish nacked by the broker");
            }
            Ok(())
        }))
    }

    async fn consume(self: Arc<Self>, conn: Connection, run: Arc<Run>, index: u32) -> Result<()> {
        let ch = conn.create_channel().await?;
        ch.basic_qos(
            run.spec.credit.min(u16::MAX as u32) as u16,
            BasicQosOptions::default(),
        )
        .await?;
        let deliveries = ch
            .basic_consume(
                s(QUEUE),
                s(&format!("c{index}")),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        settle(&*self, deliveries.map(|d| Ok(d?)), &run).await
    }

    fn body(d: &Delivery) -> &[u8] {
        &d.data
    }

    fn redelivered(d: &Delivery) -> bool {
        d.redelivered
    }

    fn ack(d: Delivery) -> Pending {
        Box::pin(async move {
            d.acker.ack(BasicAckOptions::default()).await?;
            Ok(())
        })
    }

    fn retry(&self, d: Delivery) -> Option<Pending> {
        let requeue = BasicNackOptions {
            requeue: true,
            multiple: false,
        };
        Some(Box::pin(async move {
            d.acker.nack(requeue).await?;
            Ok(())
        }))
    }

    async fn dead_lettered(&self) -> Result<u64> {
        let passive = QueueDeclareOptions {
            passive: true,
            durable: true,
            ..Default::default()
        };
        let q = self
            .admin
            .queue_declare(s(DLQ), passive, FieldTable::default())
            .await?;
        Ok(q.message_count() as u64)
    }

    fn extra(&self, poison: bool) -> Map<String, Value> {
        let mut extra = Map::new();
        extra.insert(
            "durability".into(),
            json!("quorum queue: confirm after the Raft WAL is fdatasync'd (batched), persistent messages"),
        );
        if poison {
            extra.insert("x_delivery_limit".into(), json!(self.delivery_limit));
            extra.insert(
                "redelivery_delay".into(),
                json!("none: quorum queues requeue at once"),
            );
        }
        extra
    }
}
