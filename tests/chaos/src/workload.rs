//! The workload: producers that send through random nodes, each message with
//! its own sequence number and duplicate id (some grouped, some scheduled a
//! little ahead), and consumers that attach through random nodes and ack
//! (or now and then nack) every delivery, one at a time, waiting for the
//! broker to confirm each settle. Everything goes to the ledger.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rebound_client::{Client, Code, Consumer, Delivery, Error, OutgoingMessage};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::topology::QUEUES;
use rebound_chaos::ledger::{Event, Ledger, MessageRef, Outcome, wall_ms};

/// Producers of the run.
const PRODUCERS: u32 = 3;
/// Consumers of each queue.
const CONSUMERS_PER_QUEUE: u32 = 2;
/// Between two sends of one producer: about 60 messages a second in all,
/// which two cores shared with PostgreSQL and three nodes keep up with.
const SEND_INTERVAL: Duration = Duration::from_millis(50);
/// One send attempt, at most (a stalled node answers nothing).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts of one message before its producer moves on.
const SEND_ATTEMPTS: u32 = 30;
/// Connecting to a node, at most.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Subscribing, at most (a node waits up to 5 s for a queue's owner).
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Waiting for a settle's confirmation, at most.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// While draining, a consumer that received nothing for this long attaches
/// again (through another random node).
const DRAIN_IDLE: Duration = Duration::from_secs(10);
/// Share of first and second deliveries nacked, to exercise redelivery.
const NACK_RATE: f64 = 0.05;

/// Where the workload stands; the run flips these.
#[derive(Debug, Default)]
pub struct Control {
    /// Producers stop sending (a message being retried is given up).
    pub stop_sending: AtomicBool,
    /// Consumers that sit idle attach again.
    pub draining: AtomicBool,
    /// Consumers leave.
    pub done: AtomicBool,
}

/// The nodes, as `(name, url)`.
type Nodes = Arc<Vec<(String, String)>>;

/// Starts the producers and consumers; they run until `control` says.
pub fn start(
    nodes: Vec<(String, String)>,
    ledger: Arc<Ledger>,
    control: Arc<Control>,
    seed: u64,
) -> JoinSet<()> {
    let nodes: Nodes = Arc::new(nodes);
    let mut tasks = JoinSet::new();
    for producer in 1..=PRODUCERS {
        let rng = StdRng::seed_from_u64(seed ^ u64::from(producer) << 32);
        tasks.spawn(produce(
            producer,
            nodes.clone(),
            ledger.clone(),
            control.clone(),
            rng,
        ));
    }
    let mut consumer = 0;
    for queue in QUEUES {
        for _ in 0..CONSUMERS_PER_QUEUE {
            consumer += 1;
            let rng = StdRng::seed_from_u64(seed ^ u64::from(consumer) << 40);
            tasks.spawn(consume(
                consumer,
                queue,
                nodes.clone(),
                ledger.clone(),
                control.clone(),
                rng,
            ));
        }
    }
    tasks
}

/// A random node: its name and a new connection to it, or `None` when it
/// cannot be reached now.
async fn connect(nodes: &Nodes, rng: &mut StdRng) -> Option<(String, Client)> {
    let (name, url) = &nodes[rng.random_range(0..nodes.len())];
    match tokio::time::timeout(CONNECT_TIMEOUT, Client::connect(url)).await {
        Ok(Ok(client)) => Some((name.clone(), client)),
        _ => None,
    }
}

/// A producer's connections, one per node, made when first needed and
/// dropped when a send through them went unanswered.
struct Links {
    nodes: Nodes,
    clients: Vec<Option<Client>>,
}

impl Links {
    /// A random node's index, name and connection.
    async fn pick(&mut self, rng: &mut StdRng) -> Option<(usize, String, Client)> {
        let i = rng.random_range(0..self.nodes.len());
        let (name, url) = &self.nodes[i];
        if self.clients[i].is_none() {
            let connected = tokio::time::timeout(CONNECT_TIMEOUT, Client::connect(url)).await;
            self.clients[i] = connected.ok()?.ok();
        }
        Some((i, name.clone(), self.clients[i].clone()?))
    }

    fn forget(&mut self, i: usize) {
        self.clients[i] = None;
    }
}

/// Refusals that store nothing; any other failure may have stored the message.
fn refused(error: &Error) -> bool {
    matches!(
        error.code(),
        Some(
            Code::InvalidArgument
                | Code::NotFound
                | Code::AlreadyExists
                | Code::PermissionDenied
                | Code::Unauthenticated
                | Code::FailedPrecondition
                | Code::OutOfRange
                | Code::ResourceExhausted
        )
    )
}

async fn produce(producer: u32, nodes: Nodes, ledger: Arc<Ledger>, control: Arc<Control>, mut rng: StdRng) {
    let mut links = Links {
        clients: vec![None; nodes.len()],
        nodes,
    };
    let mut seq = 0;
    while !control.stop_sending.load(Ordering::Relaxed) {
        seq += 1;
        let msg = MessageRef { producer, seq };
        let queue = QUEUES[rng.random_range(0..QUEUES.len())];
        let mut message = OutgoingMessage::new(queue, msg.body()).duplicate_id(msg.body());
        let (mut group, mut deliver_at_ms) = (None, None);
        match rng.random_range(0..10) {
            0 => deliver_at_ms = Some(wall_ms() + rng.random_range(300..2_000)),
            1 | 2 => group = Some(format!("p{producer}-g{}", rng.random_range(0..3))),
            _ => {}
        }
        if let Some(at) = deliver_at_ms {
            message = message.deliver_at_ms(at);
        }
        if let Some(group) = &group {
            message = message.group(group.clone());
        }
        for _ in 0..SEND_ATTEMPTS {
            let Some((i, node, client)) = links.pick(&mut rng).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            ledger.record(Event::SendAttempted {
                msg,
                queue: queue.into(),
                node,
                group: group.clone(),
                deliver_at_ms,
            });
            let outcome = tokio::time::timeout(SEND_TIMEOUT, client.send_outcome(message.clone())).await;
            match outcome {
                Ok(Ok(sent)) => {
                    ledger.record(Event::SendAcked {
                        msg,
                        message_id: sent.id,
                        duplicate: sent.duplicate,
                    });
                    break;
                }
                Ok(Err(e)) if refused(&e) => ledger.record(Event::SendFailed {
                    msg,
                    error: e.to_string(),
                }),
                Ok(Err(e)) => {
                    ledger.record(Event::SendUnconfirmed {
                        msg,
                        error: e.to_string(),
                    });
                    links.forget(i);
                }
                Err(_) => {
                    ledger.record(Event::SendUnconfirmed {
                        msg,
                        error: format!("no answer within {SEND_TIMEOUT:?}"),
                    });
                    links.forget(i);
                }
            }
            if control.stop_sending.load(Ordering::Relaxed) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(SEND_INTERVAL).await;
    }
}

async fn consume(
    consumer: u32,
    queue: &'static str,
    nodes: Nodes,
    ledger: Arc<Ledger>,
    control: Arc<Control>,
    mut rng: StdRng,
) {
    while !control.done.load(Ordering::Relaxed) {
        let Some((node, client)) = connect(&nodes, &mut rng).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let opened = tokio::time::timeout(SUBSCRIBE_TIMEOUT, client.consume(queue, 10)).await;
        let Ok(Ok(mut stream)) = opened else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let id = ledger.next_stream();
        let ended = Attached {
            consumer,
            stream: id,
            queue,
            node: &node,
            ledger: &ledger,
            control: &control,
        }
        .run(&mut stream, &mut rng)
        .await;
        if let Some(error) = ended {
            ledger.record(Event::StreamEnded {
                consumer,
                stream: id,
                node,
                error,
            });
        }
    }
}

/// One stream of a consumer.
struct Attached<'a> {
    consumer: u32,
    stream: u64,
    queue: &'static str,
    node: &'a str,
    ledger: &'a Ledger,
    control: &'a Control,
}

impl Attached<'_> {
    /// Receives and settles until the run is done (`None`) or the stream
    /// fails (why).
    async fn run(&self, stream: &mut Consumer, rng: &mut StdRng) -> Option<String> {
        let mut last = Instant::now();
        loop {
            if self.control.done.load(Ordering::Relaxed) {
                return None;
            }
            match stream.next_timeout(Duration::from_millis(500)).await {
                Ok(Some(delivery)) => {
                    last = Instant::now();
                    if let Err(why) = self.settle(stream, &delivery, rng).await {
                        return Some(why);
                    }
                }
                Ok(None) if self.control.draining.load(Ordering::Relaxed) && last.elapsed() > DRAIN_IDLE => {
                    return Some(format!("nothing received for {DRAIN_IDLE:?} while draining"));
                }
                Ok(None) => {}
                Err(e) => return Some(e.to_string()),
            }
        }
    }

    /// Logs a delivery, settles it and waits for the confirmation.
    async fn settle(
        &self,
        stream: &mut Consumer,
        delivery: &Delivery,
        rng: &mut StdRng,
    ) -> Result<(), String> {
        let Some(msg) = MessageRef::parse(&delivery.message.body) else {
            return Err(format!(
                "a message the harness did not send: {:?}",
                delivery.message.body
            ));
        };
        let count = delivery.delivery_count;
        self.ledger.record(Event::Delivered {
            consumer: self.consumer,
            stream: self.stream,
            msg,
            queue: self.queue.into(),
            message_id: delivery.message.message_id,
            delivery_count: count,
            node: self.node.into(),
            wall_ms: wall_ms(),
        });
        let outcome = if count < 3 && rng.random_bool(NACK_RATE) {
            Outcome::Nack
        } else {
            Outcome::Ack
        };
        self.ledger.record(Event::SettleSent {
            stream: self.stream,
            msg,
            delivery_count: count,
            outcome,
        });
        let failed = |error: String| Event::SettleFailed {
            stream: self.stream,
            msg,
            outcome,
            error,
        };
        let sent = match outcome {
            Outcome::Ack => stream.ack(&[delivery.id]).await,
            Outcome::Nack => stream.nack(&[delivery.id], "rebound-chaos").await,
        };
        if let Err(e) = sent {
            self.ledger.record(failed(e.to_string()));
            return Err(e.to_string());
        }
        match tokio::time::timeout(SETTLE_TIMEOUT, stream.flush()).await {
            Ok(Ok(unknown)) if unknown.contains(&delivery.id) => {
                self.ledger
                    .record(failed("the broker did not know the delivery".into()));
                Ok(())
            }
            Ok(Ok(_)) => {
                self.ledger.record(Event::SettleConfirmed {
                    stream: self.stream,
                    msg,
                    delivery_count: count,
                    outcome,
                });
                Ok(())
            }
            Ok(Err(e)) => {
                self.ledger.record(failed(e.to_string()));
                Err(e.to_string())
            }
            Err(_) => {
                let why = format!("no confirmation within {SETTLE_TIMEOUT:?}");
                self.ledger.record(failed(why.clone()));
                Err(why)
            }
        }
    }
}
