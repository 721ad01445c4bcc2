//! The checker: what a drained run's ledger must show. RELIABILITY.md explains
//! each check; in short:
//!
//! - **lost**: a send acknowledged to its producer never delivered;
//! - **unexpected**: a delivery of a message never sent, or only refused;
//! - **resurrected**: a delivery after an ack of the message was confirmed;
//! - **concurrent**: a delivery to one stream while another stream held the
//!   message and then had its ack confirmed (two consumers at once);
//! - **reordered**: one producer's messages to one queue (neither grouped nor
//!   scheduled) delivered for the first time out of send order;
//! - **group order**: a group's messages delivered for the first time out of
//!   send order;
//! - **count decreased**: a message's delivery count going down;
//! - **scheduled early**: a scheduled message delivered before its time;
//! - **stored twice**: one send delivered as two broker messages (two ids),
//!   although each attempt carried the same duplicate id;
//! - **stranded**: messages still in a queue once the run was drained (an
//!   ack whose confirmation was lost leaves the ledger unsure whether the
//!   message is gone; the queue's depth says).
//!
//! Only first deliveries are held to order, and only of sends the broker
//! acknowledged (an unconfirmed send may be stored late, after its producer
//! moved on). Outside groups a redelivery may come after later messages, so
//! a message whose first delivery the ledger saw has a count above 1 (the
//! earlier one was lost with its stream before the consumer saw it) is not
//! held to its producer's order either; a group holds its order across
//! redeliveries.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::ledger::{Entry, Event, MessageRef, Outcome, fault_counts};

/// Two first deliveries of one producer's messages to one queue on different
/// streams count as reordered only when the later-sent one came this much
/// earlier: consumers log receipts independently, so closer ones may be a
/// scheduling race in the harness rather than the broker's order.
pub const CROSS_STREAM_SLACK_US: u64 = 1_000_000;

/// A kind of anomaly; the report counts each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Lost,
    Unexpected,
    Resurrected,
    Concurrent,
    Reordered,
    GroupOrder,
    CountDecreased,
    ScheduledEarly,
    Stranded,
    StoredTwice,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Lost,
        Kind::Unexpected,
        Kind::Resurrected,
        Kind::Concurrent,
        Kind::Reordered,
        Kind::GroupOrder,
        Kind::CountDecreased,
        Kind::ScheduledEarly,
        Kind::Stranded,
        Kind::StoredTwice,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Lost => "lost",
            Kind::Unexpected => "unexpected",
            Kind::Resurrected => "resurrected",
            Kind::Concurrent => "concurrent",
            Kind::Reordered => "reordered",
            Kind::GroupOrder => "group order",
            Kind::CountDecreased => "count decreased",
            Kind::ScheduledEarly => "scheduled early",
            Kind::Stranded => "stranded",
            Kind::StoredTwice => "stored twice",
        }
    }
}

/// One violation, naming the message and what it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anomaly {
    Lost {
        msg: MessageRef,
        queue: String,
    },
    Unexpected {
        msg: MessageRef,
        why: &'static str,
    },
    Resurrected {
        msg: MessageRef,
        stream: u64,
        delivery_count: u32,
        after_ack_ms: u64,
    },
    Concurrent {
        msg: MessageRef,
        streams: [u64; 2],
    },
    Reordered {
        msg: MessageRef,
        queue: String,
        after: MessageRef,
    },
    GroupOrder {
        msg: MessageRef,
        queue: String,
        group: String,
        after: MessageRef,
    },
    CountDecreased {
        msg: MessageRef,
        from: u32,
        to: u32,
    },
    ScheduledEarly {
        msg: MessageRef,
        early_by_ms: u64,
    },
    Stranded {
        queue: String,
        messages: u64,
    },
    StoredTwice {
        msg: MessageRef,
        ids: [u64; 2],
    },
}

impl Anomaly {
    pub fn kind(&self) -> Kind {
        match self {
            Anomaly::Lost { .. } => Kind::Lost,
            Anomaly::Unexpected { .. } => Kind::Unexpected,
            Anomaly::Resurrected { .. } => Kind::Resurrected,
            Anomaly::Concurrent { .. } => Kind::Concurrent,
            Anomaly::Reordered { .. } => Kind::Reordered,
            Anomaly::GroupOrder { .. } => Kind::GroupOrder,
            Anomaly::CountDecreased { .. } => Kind::CountDecreased,
            Anomaly::ScheduledEarly { .. } => Kind::ScheduledEarly,
            Anomaly::Stranded { .. } => Kind::Stranded,
            Anomaly::StoredTwice { .. } => Kind::StoredTwice,
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::Lost { msg, queue } => {
                write!(f, "lost: {msg} on {queue} was acknowledged and never delivered")
            }
            Anomaly::Unexpected { msg, why } => write!(f, "unexpected: {msg} was delivered, {why}"),
            Anomaly::Resurrected {
                msg,
                stream,
                delivery_count,
                after_ack_ms,
            } => write!(
                f,
                "resurrected: {msg} delivered again (stream {stream}, count {delivery_count}) {after_ack_ms} ms after its ack was confirmed"
            ),
            Anomaly::Concurrent { msg, streams: [a, b] } => write!(
                f,
                "concurrent: {msg} held by streams {a} and {b} at once, and an ack of it confirmed"
            ),
            Anomaly::Reordered { msg, queue, after } => {
                write!(f, "reordered: {msg} first delivered from {queue} after {after}")
            }
            Anomaly::GroupOrder {
                msg,
                queue,
                group,
                after,
            } => write!(
                f,
                "group order: {msg} of group {group} first delivered from {queue} after {after}"
            ),
            Anomaly::CountDecreased { msg, from, to } => {
                write!(
                    f,
                    "count decreased: {msg} delivered with count {to} after count {from}"
                )
            }
            Anomaly::ScheduledEarly { msg, early_by_ms } => {
                write!(
                    f,
                    "scheduled early: {msg} delivered {early_by_ms} ms before its time"
                )
            }
            Anomaly::StoredTwice { msg, ids: [a, b] } => {
                write!(
                    f,
                    "stored twice: {msg} was delivered as broker messages {a} and {b}"
                )
            }
            Anomaly::Stranded { queue, messages } => {
                write!(
                    f,
                    "stranded: {queue} still held {messages} messages after the drain"
                )
            }
        }
    }
}

/// What a ledger shows: its counts and every anomaly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Messages sent (each counted once, however many attempts).
    pub sent: usize,
    /// Send attempts, retries with the same duplicate id included.
    pub attempts: usize,
    /// Messages whose send the broker acknowledged.
    pub acked: usize,
    /// Messages every attempt of which was refused.
    pub failed: usize,
    /// Messages never acknowledged, at least one attempt unanswered.
    pub unconfirmed: usize,
    /// Unconfirmed messages that were delivered (they had been stored).
    pub recovered: usize,
    /// Deliveries, redeliveries included.
    pub deliveries: usize,
    /// Messages delivered more than once.
    pub redelivered: usize,
    /// Faults injected, by type.
    pub faults: BTreeMap<String, u32>,
    /// Consumer streams that ended with an error (each attached again).
    pub streams_ended: usize,
    /// Longest time one queue went without an acknowledged send during the workload.
    pub longest_send_gap_ms: u64,
    /// Longest time one queue went without a delivery during the workload.
    pub longest_delivery_gap_ms: u64,
    pub anomalies: Vec<Anomaly>,
}

impl Report {
    pub fn count(&self, kind: Kind) -> usize {
        self.anomalies.iter().filter(|a| a.kind() == kind).count()
    }

    pub fn passed(&self) -> bool {
        self.anomalies.is_empty()
    }

    /// Whether every anomaly is of a kind in `known` (defects known and
    /// still open, reported but not failing a run).
    pub fn passed_but(&self, known: &[Kind]) -> bool {
        self.anomalies.iter().all(|a| known.contains(&a.kind()))
    }
}

/// What the ledger says of one message's send.
#[derive(Debug, Default)]
struct Sent {
    queue: String,
    group: Option<String>,
    deliver_at_ms: Option<u64>,
    acked: bool,
    unconfirmed: bool,
    failed: bool,
}

impl Sent {
    /// Held to send order: acknowledged, neither grouped nor scheduled.
    fn ordered(&self) -> bool {
        self.acked && self.group.is_none() && self.deliver_at_ms.is_none()
    }
}

#[derive(Debug, Clone)]
struct Delivery {
    t_us: u64,
    stream: u64,
    msg: MessageRef,
    message_id: u64,
    queue: String,
    count: u32,
    wall_ms: u64,
}

/// A confirmed ack: which delivery, and when it was confirmed.
#[derive(Debug)]
struct Ack {
    stream: u64,
    message_id: u64,
    count: u32,
    delivered_us: u64,
    confirmed_us: u64,
}

/// Checks a drained run's ledger.
pub fn check(entries: &[Entry]) -> Report {
    let mut sends: BTreeMap<MessageRef, Sent> = BTreeMap::new();
    let mut deliveries: Vec<Delivery> = Vec::new();
    let mut acks: HashMap<MessageRef, Vec<Ack>> = HashMap::new();
    let mut report = Report {
        faults: fault_counts(entries),
        ..Report::default()
    };
    for entry in entries {
        match &entry.event {
            Event::SendAttempted {
                msg,
                queue,
                group,
                deliver_at_ms,
                ..
            } => {
                report.attempts += 1;
                let sent = sends.entry(*msg).or_default();
                sent.queue.clone_from(queue);
                sent.group.clone_from(group);
                sent.deliver_at_ms = *deliver_at_ms;
            }
            Event::SendAcked { msg, .. } => sends.entry(*msg).or_default().acked = true,
            Event::SendUnconfirmed { msg, .. } => sends.entry(*msg).or_default().unconfirmed = true,
            Event::SendFailed { msg, .. } => sends.entry(*msg).or_default().failed = true,
            Event::Delivered {
                stream,
                msg,
                queue,
                message_id,
                delivery_count,
                wall_ms,
                ..
            } => {
                deliveries.push(Delivery {
                    t_us: entry.t_us,
                    stream: *stream,
                    msg: *msg,
                    message_id: *message_id,
                    queue: queue.clone(),
                    count: *delivery_count,
                    wall_ms: *wall_ms,
                });
            }
            Event::SettleConfirmed {
                stream,
                msg,
                delivery_count,
                outcome: Outcome::Ack,
            } => {
                let acked = deliveries
                    .iter()
                    .rev()
                    .find(|d| d.stream == *stream && d.msg == *msg && d.count == *delivery_count);
                if let Some(acked) = acked {
                    acks.entry(*msg).or_default().push(Ack {
                        stream: *stream,
                        message_id: acked.message_id,
                        count: *delivery_count,
                        delivered_us: acked.t_us,
                        confirmed_us: entry.t_us,
                    });
                }
            }
            Event::StreamEnded { .. } => report.streams_ended += 1,
            Event::QueueDepth {
                queue,
                messages,
                scheduled,
                ..
            } if messages + scheduled > 0 => {
                report.anomalies.push(Anomaly::Stranded {
                    queue: queue.clone(),
                    messages: messages + scheduled,
                });
            }
            _ => {}
        }
    }
    report.sent = sends.values().filter(|s| !s.queue.is_empty()).count();
    report.acked = sends.values().filter(|s| s.acked).count();
    report.failed = sends
        .values()
        .filter(|s| s.failed && !s.acked && !s.unconfirmed)
        .count();
    report.unconfirmed = sends.values().filter(|s| s.unconfirmed && !s.acked).count();
    report.deliveries = deliveries.len();

    let mut by_message: BTreeMap<MessageRef, Vec<&Delivery>> = BTreeMap::new();
    for d in &deliveries {
        by_message.entry(d.msg).or_default().push(d);
    }
    report.redelivered = by_message.values().filter(|ds| ds.len() > 1).count();
    report.recovered = by_message
        .keys()
        .filter(|m| sends.get(m).is_some_and(|s| s.unconfirmed && !s.acked))
        .count();

    let anomalies = &mut report.anomalies;
    for (msg, sent) in &sends {
        if sent.acked && !by_message.contains_key(msg) {
            anomalies.push(Anomaly::Lost {
                msg: *msg,
                queue: sent.queue.clone(),
            });
        }
    }
    for (msg, ds) in &by_message {
        match sends.get(msg) {
            None => anomalies.push(Anomaly::Unexpected {
                msg: *msg,
                why: "never sent",
            }),
            Some(s) if s.queue.is_empty() => anomalies.push(Anomaly::Unexpected {
                msg: *msg,
                why: "never sent",
            }),
            Some(s) if !s.acked && !s.unconfirmed => anomalies.push(Anomaly::Unexpected {
                msg: *msg,
                why: "every send of it refused",
            }),
            Some(_) => {}
        }
        let mut ids: Vec<u64> = ds.iter().map(|d| d.message_id).collect();
        ids.sort_unstable();
        ids.dedup();
        if let [first, second, ..] = ids[..] {
            anomalies.push(Anomaly::StoredTwice {
                msg: *msg,
                ids: [first, second],
            });
        }
        // Each stored copy is a message of its own to the broker.
        for id in ids {
            let copy: Vec<&Delivery> = ds.iter().copied().filter(|d| d.message_id == id).collect();
            let acks: Vec<&Ack> = acks
                .get(msg)
                .into_iter()
                .flatten()
                .filter(|a| a.message_id == id)
                .collect();
            check_after_acks(*msg, &copy, &acks, anomalies);
            for pair in copy.windows(2) {
                if pair[1].count < pair[0].count {
                    anomalies.push(Anomaly::CountDecreased {
                        msg: *msg,
                        from: pair[0].count,
                        to: pair[1].count,
                    });
                }
            }
        }
        if let Some(at) = sends.get(msg).and_then(|s| s.deliver_at_ms)
            && let Some(early) = ds.iter().find(|d| d.wall_ms < at)
        {
            anomalies.push(Anomaly::ScheduledEarly {
                msg: *msg,
                early_by_ms: at - early.wall_ms,
            });
        }
    }

    // First deliveries, in the order they came.
    let mut firsts: Vec<&Delivery> = by_message.values().map(|ds| ds[0]).collect();
    firsts.sort_by_key(|d| d.t_us);
    check_producer_order(&firsts, &sends, anomalies);
    check_group_order(&firsts, &sends, anomalies);

    let (send_gap, delivery_gap) = availability_gaps(entries);
    report.longest_send_gap_ms = send_gap / 1000;
    report.longest_delivery_gap_ms = delivery_gap / 1000;
    report
}

/// Deliveries of `msg` that a confirmed ack should have ruled out.
fn check_after_acks(msg: MessageRef, deliveries: &[&Delivery], acks: &[&Ack], anomalies: &mut Vec<Anomaly>) {
    for d in deliveries {
        let itself = |a: &&&Ack| a.stream == d.stream && a.count == d.count;
        let after = acks
            .iter()
            .filter(|a| !itself(a))
            .find(|a| a.confirmed_us < d.t_us);
        if let Some(ack) = after {
            // Counted past the acked delivery: the broker forgot the ack. Not
            // counted past it: it was out while that delivery was.
            anomalies.push(if d.count > ack.count {
                Anomaly::Resurrected {
                    msg,
                    stream: d.stream,
                    delivery_count: d.count,
                    after_ack_ms: (d.t_us - ack.confirmed_us) / 1000,
                }
            } else {
                Anomaly::Concurrent {
                    msg,
                    streams: [ack.stream, d.stream],
                }
            });
            continue;
        }
        let overlapping = acks
            .iter()
            .find(|a| a.stream != d.stream && a.delivered_us < d.t_us && d.t_us < a.confirmed_us);
        if let Some(ack) = overlapping {
            anomalies.push(Anomaly::Concurrent {
                msg,
                streams: [ack.stream, d.stream],
            });
        }
    }
}

/// Per producer and queue, first deliveries of ordered messages follow send
/// order: on one stream strictly, across streams beyond [`CROSS_STREAM_SLACK_US`].
fn check_producer_order(
    firsts: &[&Delivery],
    sends: &BTreeMap<MessageRef, Sent>,
    anomalies: &mut Vec<Anomaly>,
) {
    let mut lanes: BTreeMap<(u32, &str), Vec<&Delivery>> = BTreeMap::new();
    for d in firsts {
        if d.count == 1 && sends.get(&d.msg).is_some_and(Sent::ordered) {
            lanes
                .entry((d.msg.producer, d.queue.as_str()))
                .or_default()
                .push(d);
        }
    }
    for lane in lanes.values() {
        let mut stream_max: HashMap<u64, MessageRef> = HashMap::new();
        let mut settled_max: Option<MessageRef> = None;
        let mut settled = 0;
        for d in lane {
            while settled < lane.len() && lane[settled].t_us + CROSS_STREAM_SLACK_US <= d.t_us {
                settled_max = settled_max.max(Some(lane[settled].msg));
                settled += 1;
            }
            let before = stream_max.get(&d.stream).copied().max(settled_max);
            if let Some(after) = before.filter(|b| b.seq > d.msg.seq) {
                anomalies.push(Anomaly::Reordered {
                    msg: d.msg,
                    queue: d.queue.clone(),
                    after,
                });
            }
            let max = stream_max.entry(d.stream).or_insert(d.msg);
            *max = (*max).max(d.msg);
        }
    }
}

/// Per queue and group, first deliveries of acknowledged messages follow send order
/// (a group is delivered one message at a time, so strictly).
fn check_group_order(firsts: &[&Delivery], sends: &BTreeMap<MessageRef, Sent>, anomalies: &mut Vec<Anomaly>) {
    // A group is a queue's: the same group id on two queues is two groups.
    let mut max: HashMap<(&str, &str), MessageRef> = HashMap::new();
    for d in firsts {
        let Some(sent) = sends.get(&d.msg).filter(|s| s.acked) else {
            continue;
        };
        let Some(group) = sent.group.as_deref() else {
            continue;
        };
        match max.get(&(d.queue.as_str(), group)) {
            Some(after) if after.seq > d.msg.seq => anomalies.push(Anomaly::GroupOrder {
                msg: d.msg,
                queue: d.queue.clone(),
                group: group.to_owned(),
                after: *after,
            }),
            _ => {
                max.insert((d.queue.as_str(), group), d.msg);
            }
        }
    }
}

/// The longest stretches (µs) one queue went without an acknowledged send
/// and without a delivery, from the `workload` phase to the `drain` phase
/// (the whole ledger without them).
fn availability_gaps(entries: &[Entry]) -> (u64, u64) {
    let phase = |name: &str| {
        entries.iter().find_map(|e| match &e.event {
            Event::Phase { name: n } if n == name => Some(e.t_us),
            _ => None,
        })
    };
    let from = phase("workload").or(entries.first().map(|e| e.t_us)).unwrap_or(0);
    let to = phase("drain").or(entries.last().map(|e| e.t_us)).unwrap_or(0);
    let mut queue_of: HashMap<MessageRef, &str> = HashMap::new();
    let mut sends: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut deliveries: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.t_us >= from && e.t_us <= to) {
        match &e.event {
            Event::SendAttempted { msg, queue, .. } => {
                queue_of.insert(*msg, queue);
            }
            Event::SendAcked { msg, .. } => {
                if let Some(queue) = queue_of.get(msg) {
                    sends.entry(queue).or_default().push(e.t_us);
                }
            }
            Event::Delivered { queue, .. } => deliveries.entry(queue).or_default().push(e.t_us),
            _ => {}
        }
    }
    let longest = |per_queue: &BTreeMap<&str, Vec<u64>>| {
        let gap = |times: &Vec<u64>| {
            let mut last = from;
            let mut longest = 0;
            for &t in times {
                longest = longest.max(t - last);
                last = t;
            }
            longest.max(to - last)
        };
        per_queue.values().map(gap).max().unwrap_or(to - from)
    };
    (longest(&sends), longest(&deliveries))
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: &str = "chaos.a";

    fn msg(producer: u32, seq: u64) -> MessageRef {
        MessageRef { producer, seq }
    }

    /// Builds ledgers by hand: each event 10 ms after the previous, unless
    /// told to wait.
    #[derive(Default)]
    struct Script {
        entries: Vec<Entry>,
        wait_us: u64,
    }

    impl Script {
        fn at(&mut self, event: Event) -> &mut Self {
            let t_us = self.entries.last().map_or(0, |e| e.t_us + 10_000) + std::mem::take(&mut self.wait_us);
            self.entries.push(Entry { t_us, event });
            self
        }

        /// The next event comes `ms` later.
        fn wait_ms(&mut self, ms: u64) -> &mut Self {
            self.wait_us += ms * 1000;
            self
        }

        fn send(&mut self, m: MessageRef) -> &mut Self {
            self.send_with(m, None, None)
        }

        fn send_with(&mut self, m: MessageRef, group: Option<&str>, deliver_at_ms: Option<u64>) -> &mut Self {
            self.at(Event::SendAttempted {
                msg: m,
                queue: Q.into(),
                node: "n1".into(),
                group: group.map(Into::into),
                deliver_at_ms,
            })
            .at(Event::SendAcked {
                msg: m,
                message_id: m.seq,
                duplicate: false,
            })
        }

        fn deliver(&mut self, stream: u64, m: MessageRef, count: u32) -> &mut Self {
            self.deliver_at(stream, m, count, 0)
        }

        fn deliver_at(&mut self, stream: u64, m: MessageRef, count: u32, wall_ms: u64) -> &mut Self {
            self.deliver_copy(stream, m, count, wall_ms, m.seq)
        }

        /// A delivery of the copy of `m` the broker stored as `message_id`.
        fn deliver_copy(
            &mut self,
            stream: u64,
            m: MessageRef,
            count: u32,
            wall_ms: u64,
            message_id: u64,
        ) -> &mut Self {
            self.at(Event::Delivered {
                consumer: 0,
                stream,
                msg: m,
                queue: Q.into(),
                message_id,
                delivery_count: count,
                node: "n1".into(),
                wall_ms,
            })
        }

        fn ack(&mut self, stream: u64, m: MessageRef, count: u32) -> &mut Self {
            self.at(Event::SettleSent {
                stream,
                msg: m,
                delivery_count: count,
                outcome: Outcome::Ack,
            })
            .at(Event::SettleConfirmed {
                stream,
                msg: m,
                delivery_count: count,
                outcome: Outcome::Ack,
            })
        }

        /// Delivered on `stream` and acked.
        fn consume(&mut self, stream: u64, m: MessageRef) -> &mut Self {
            self.deliver(stream, m, 1).ack(stream, m, 1)
        }

        fn check(&self) -> Report {
            check(&self.entries)
        }
    }

    /// Only the anomalies of `kind`, and that there are no others.
    fn only(report: &Report, kind: Kind) -> Vec<Anomaly> {
        let (of_kind, others): (Vec<_>, Vec<_>) =
            report.anomalies.iter().cloned().partition(|a| a.kind() == kind);
        assert!(others.is_empty(), "other anomalies than {kind:?}: {others:?}");
        of_kind
    }

    /// A clean run: two producers, two streams, a nack and its redelivery, a
    /// group, a scheduled message on time, an unconfirmed send delivered.
    fn clean() -> Script {
        let mut s = Script::default();
        s.at(Event::Phase {
            name: "workload".into(),
        })
        .send(msg(1, 1))
        .send(msg(2, 1))
        .send(msg(1, 2))
        .send_with(msg(1, 3), Some("g"), None)
        .send_with(msg(1, 4), Some("g"), None)
        .send_with(msg(2, 2), None, Some(1_000))
        .at(Event::SendAttempted {
            msg: msg(2, 3),
            queue: Q.into(),
            node: "n2".into(),
            group: None,
            deliver_at_ms: None,
        })
        .at(Event::SendUnconfirmed {
            msg: msg(2, 3),
            error: "UNAVAILABLE".into(),
        })
        .consume(1, msg(1, 1))
        .consume(2, msg(2, 1))
        .deliver(1, msg(1, 2), 1)
        .at(Event::SettleSent {
            stream: 1,
            msg: msg(1, 2),
            delivery_count: 1,
            outcome: Outcome::Nack,
        })
        .at(Event::SettleConfirmed {
            stream: 1,
            msg: msg(1, 2),
            delivery_count: 1,
            outcome: Outcome::Nack,
        })
        .consume(2, msg(1, 3))
        .deliver(2, msg(1, 2), 2)
        .ack(2, msg(1, 2), 2)
        .consume(1, msg(1, 4))
        .deliver_at(1, msg(2, 2), 1, 1_000)
        .ack(1, msg(2, 2), 1)
        .consume(2, msg(2, 3))
        .at(Event::FaultStarted {
            fault: "kill".into(),
            target: "n1".into(),
        })
        .at(Event::StreamEnded {
            consumer: 0,
            stream: 1,
            node: "n1".into(),
            error: "UNAVAILABLE".into(),
        })
        .at(Event::Phase { name: "drain".into() });
        s
    }

    #[test]
    fn known_kinds_pass_a_run_and_the_others_still_fail_it() {
        let report = Report {
            anomalies: vec![Anomaly::Stranded {
                queue: "q".into(),
                messages: 1,
            }],
            ..Report::default()
        };
        assert!(!report.passed());
        assert!(report.passed_but(&[Kind::Stranded]));
        assert!(!report.passed_but(&[Kind::Reordered, Kind::StoredTwice]));
    }

    #[test]
    fn a_clean_run_passes_with_its_counts() {
        let report = clean().check();
        assert!(report.passed(), "{:?}", report.anomalies);
        assert_eq!(
            (report.sent, report.acked, report.unconfirmed, report.recovered),
            (7, 6, 1, 1)
        );
        assert_eq!(
            (report.deliveries, report.redelivered, report.streams_ended),
            (8, 1, 1)
        );
        assert_eq!(report.faults.get("kill"), Some(&1));
    }

    #[test]
    fn an_acknowledged_message_never_delivered_is_lost() {
        let mut s = clean();
        s.send(msg(3, 1));
        let lost = only(&s.check(), Kind::Lost);
        assert_eq!(
            lost,
            [Anomaly::Lost {
                msg: msg(3, 1),
                queue: Q.into()
            }]
        );
    }

    #[test]
    fn an_unconfirmed_message_never_delivered_is_not_lost() {
        let mut s = clean();
        s.at(Event::SendAttempted {
            msg: msg(3, 1),
            queue: Q.into(),
            node: "n1".into(),
            group: None,
            deliver_at_ms: None,
        })
        .at(Event::SendUnconfirmed {
            msg: msg(3, 1),
            error: "timeout".into(),
        });
        assert!(s.check().passed());
    }

    #[test]
    fn a_delivery_of_a_refused_or_unknown_message_is_unexpected() {
        let mut s = clean();
        s.at(Event::SendAttempted {
            msg: msg(3, 1),
            queue: Q.into(),
            node: "n1".into(),
            group: None,
            deliver_at_ms: None,
        })
        .at(Event::SendFailed {
            msg: msg(3, 1),
            error: "INVALID_ARGUMENT".into(),
        })
        .consume(1, msg(3, 1))
        .consume(1, msg(9, 9));
        assert_eq!(only(&s.check(), Kind::Unexpected).len(), 2);
    }

    #[test]
    fn a_delivery_after_a_confirmed_ack_is_resurrected() {
        let mut s = clean();
        s.deliver(2, msg(1, 1), 2);
        let found = only(&s.check(), Kind::Resurrected);
        assert!(
            matches!(
                found[..],
                [Anomaly::Resurrected {
                    stream: 2,
                    delivery_count: 2,
                    ..
                }]
            ),
            "{found:?}"
        );
    }

    #[test]
    fn two_streams_holding_a_message_at_once_are_concurrent() {
        // Stream 2 gets p1:1 between stream 1's delivery and its confirmed ack.
        let mut s = Script::default();
        s.send(msg(1, 1))
            .deliver(1, msg(1, 1), 1)
            .deliver(2, msg(1, 1), 1)
            .ack(1, msg(1, 1), 1);
        let found = only(&s.check(), Kind::Concurrent);
        assert_eq!(
            found,
            [Anomaly::Concurrent {
                msg: msg(1, 1),
                streams: [1, 2]
            }]
        );
        // Without the ack confirmed, the second delivery is a redelivery.
        let mut s = Script::default();
        s.send(msg(1, 1))
            .deliver(1, msg(1, 1), 1)
            .deliver(2, msg(1, 1), 2)
            .ack(2, msg(1, 1), 2);
        assert!(s.check().passed());
    }

    #[test]
    fn one_send_delivered_as_two_broker_messages_is_stored_twice() {
        let mut s = Script::default();
        s.send(msg(1, 1))
            .consume(1, msg(1, 1))
            .deliver_copy(2, msg(1, 1), 1, 0, 99)
            .ack(2, msg(1, 1), 1);
        let found = only(&s.check(), Kind::StoredTwice);
        assert_eq!(
            found,
            [Anomaly::StoredTwice {
                msg: msg(1, 1),
                ids: [1, 99]
            }]
        );
    }

    #[test]
    fn a_later_message_first_on_one_stream_is_reordered() {
        let mut s = Script::default();
        s.send(msg(1, 1))
            .send(msg(1, 2))
            .consume(1, msg(1, 2))
            .consume(1, msg(1, 1));
        let found = only(&s.check(), Kind::Reordered);
        assert_eq!(
            found,
            [Anomaly::Reordered {
                msg: msg(1, 1),
                queue: Q.into(),
                after: msg(1, 2)
            }]
        );
    }

    #[test]
    fn across_streams_only_a_reorder_beyond_the_slack_counts() {
        let mut near = Script::default();
        near.send(msg(1, 1))
            .send(msg(1, 2))
            .consume(2, msg(1, 2))
            .consume(1, msg(1, 1));
        assert!(near.check().passed());
        let mut far = Script::default();
        far.send(msg(1, 1))
            .send(msg(1, 2))
            .consume(2, msg(1, 2))
            .wait_ms(2_000)
            .consume(1, msg(1, 1));
        assert_eq!(only(&far.check(), Kind::Reordered).len(), 1);
    }

    #[test]
    fn a_redelivery_after_later_messages_is_not_reordered() {
        let mut s = Script::default();
        s.send(msg(1, 1))
            .send(msg(1, 2))
            .deliver(1, msg(1, 1), 1)
            .consume(2, msg(1, 2))
            .wait_ms(2_000);
        s.deliver(2, msg(1, 1), 2).ack(2, msg(1, 1), 2);
        assert!(s.check().passed());
        // Its first delivery never reached the consumer: the count says so.
        let mut s = Script::default();
        s.send(msg(1, 1))
            .send(msg(1, 2))
            .consume(2, msg(1, 2))
            .wait_ms(2_000);
        s.deliver(2, msg(1, 1), 2).ack(2, msg(1, 1), 2);
        assert!(s.check().passed());
    }

    #[test]
    fn one_group_id_on_two_queues_is_two_groups() {
        let other = "chaos.b";
        let mut s = Script::default();
        s.send_with(msg(1, 1), Some("g"), None)
            .at(Event::SendAttempted {
                msg: msg(1, 2),
                queue: other.into(),
                node: "n1".into(),
                group: Some("g".into()),
                deliver_at_ms: None,
            })
            .at(Event::SendAcked {
                msg: msg(1, 2),
                message_id: 2,
                duplicate: false,
            })
            .at(Event::Delivered {
                consumer: 0,
                stream: 2,
                msg: msg(1, 2),
                queue: other.into(),
                message_id: 2,
                delivery_count: 1,
                node: "n1".into(),
                wall_ms: 0,
            })
            .ack(2, msg(1, 2), 1)
            .consume(1, msg(1, 1));
        let report = s.check();
        assert!(report.passed(), "{:?}", report.anomalies);
    }

    #[test]
    fn a_group_holds_its_order_across_redeliveries() {
        let mut s = Script::default();
        s.send_with(msg(1, 1), Some("g"), None)
            .send_with(msg(1, 2), Some("g"), None)
            .consume(1, msg(1, 2))
            .deliver(2, msg(1, 1), 2)
            .ack(2, msg(1, 1), 2);
        assert_eq!(only(&s.check(), Kind::GroupOrder).len(), 1);
    }

    #[test]
    fn a_group_out_of_send_order_is_caught() {
        let mut s = Script::default();
        s.send_with(msg(1, 1), Some("g"), None)
            .send_with(msg(1, 2), Some("g"), None)
            .consume(1, msg(1, 2))
            .consume(2, msg(1, 1));
        let found = only(&s.check(), Kind::GroupOrder);
        assert_eq!(
            found,
            [Anomaly::GroupOrder {
                msg: msg(1, 1),
                queue: Q.into(),
                group: "g".into(),
                after: msg(1, 2)
            }]
        );
    }

    #[test]
    fn a_delivery_count_going_down_is_caught() {
        let mut s = Script::default();
        s.send(msg(1, 1))
            .deliver(1, msg(1, 1), 2)
            .deliver(2, msg(1, 1), 1)
            .ack(2, msg(1, 1), 1);
        let found = only(&s.check(), Kind::CountDecreased);
        assert_eq!(
            found,
            [Anomaly::CountDecreased {
                msg: msg(1, 1),
                from: 2,
                to: 1
            }]
        );
    }

    #[test]
    fn a_scheduled_message_delivered_early_is_caught() {
        let mut s = Script::default();
        s.send_with(msg(1, 1), None, Some(5_000))
            .deliver_at(1, msg(1, 1), 1, 4_200)
            .ack(1, msg(1, 1), 1);
        let found = only(&s.check(), Kind::ScheduledEarly);
        assert_eq!(
            found,
            [Anomaly::ScheduledEarly {
                msg: msg(1, 1),
                early_by_ms: 800
            }]
        );
    }

    #[test]
    fn a_queue_not_empty_after_the_drain_is_stranded() {
        let mut s = clean();
        s.at(Event::QueueDepth {
            queue: "chaos.b".into(),
            messages: 0,
            scheduled: 0,
            served_by: "n1".into(),
        })
        .at(Event::QueueDepth {
            queue: Q.into(),
            messages: 2,
            scheduled: 1,
            served_by: "n2".into(),
        });
        let found = only(&s.check(), Kind::Stranded);
        assert_eq!(
            found,
            [Anomaly::Stranded {
                queue: Q.into(),
                messages: 3
            }]
        );
    }

    #[test]
    fn availability_gaps_span_the_workload_only() {
        let mut s = Script::default();
        s.at(Event::Phase {
            name: "workload".into(),
        })
        .send(msg(1, 1))
        .wait_ms(3_000)
        .send(msg(1, 2))
        .consume(1, msg(1, 1))
        .consume(1, msg(1, 2))
        .at(Event::Phase { name: "drain".into() })
        .wait_ms(60_000)
        .send(msg(1, 3))
        .consume(1, msg(1, 3));
        let report = s.check();
        assert!(report.passed(), "{:?}", report.anomalies);
        assert_eq!(report.longest_send_gap_ms, 3_020);
        assert!(report.longest_delivery_gap_ms >= 3_020, "{report:?}");
    }
}
