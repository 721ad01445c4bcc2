//! The ledger: every send attempt, delivery and settle of a run, and every
//! fault, in the order the harness saw them, timed by the harness's own
//! monotonic clock (brokers' clocks are among the things a run falsifies).
//!
//! A message is named by its producer and that producer's sequence number;
//! the body carries both (`p3:17`), so a delivery names its message without
//! the broker's help.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A message: its producer and its place in that producer's sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MessageRef {
    pub producer: u32,
    pub seq: u64,
}

impl MessageRef {
    /// The body the message is sent with.
    pub fn body(&self) -> String {
        format!("p{}:{}", self.producer, self.seq)
    }

    /// The message a body names, if it is one of the harness's.
    pub fn parse(body: &[u8]) -> Option<MessageRef> {
        let text = std::str::from_utf8(body).ok()?;
        let (producer, seq) = text.strip_prefix('p')?.split_once(':')?;
        Some(MessageRef {
            producer: producer.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

impl std::fmt::Display for MessageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p{}:{}", self.producer, self.seq)
    }
}

/// How a consumer settled a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ack,
    Nack,
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A producer sends (or sends again, with the same duplicate id) a message.
    SendAttempted {
        msg: MessageRef,
        queue: String,
        node: String,
        /// Its group, if any: delivered one at a time, in send order.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        /// Not to be delivered before this wall-clock time (ms since the epoch).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deliver_at_ms: Option<u64>,
    },
    /// The broker acknowledged the send: it must be delivered.
    SendAcked {
        msg: MessageRef,
        message_id: u64,
        duplicate: bool,
    },
    /// The broker refused it: nothing was stored.
    SendFailed { msg: MessageRef, error: String },
    /// No answer (a broken stream, a timeout, `UNAVAILABLE`): it may or may not
    /// have been stored.
    SendUnconfirmed { msg: MessageRef, error: String },
    /// A consumer received a message on one of its streams.
    Delivered {
        consumer: u32,
        stream: u64,
        msg: MessageRef,
        queue: String,
        message_id: u64,
        delivery_count: u32,
        node: String,
        /// The harness's wall clock at receipt, for scheduled messages.
        wall_ms: u64,
    },
    /// The consumer sent its settle of that delivery.
    SettleSent {
        stream: u64,
        msg: MessageRef,
        delivery_count: u32,
        outcome: Outcome,
    },
    /// The broker confirmed the settle durable.
    SettleConfirmed {
        stream: u64,
        msg: MessageRef,
        delivery_count: u32,
        outcome: Outcome,
    },
    /// The settle was refused or its confirmation never came.
    SettleFailed {
        stream: u64,
        msg: MessageRef,
        outcome: Outcome,
        error: String,
    },
    /// A consumer's stream ended (it attaches again, maybe through another node).
    StreamEnded {
        consumer: u32,
        stream: u64,
        node: String,
        error: String,
    },
    /// What a queue held once the run was drained and its consumers gone,
    /// as the node serving it said.
    QueueDepth {
        queue: String,
        messages: u64,
        scheduled: u64,
        /// Empty in ledgers written before it was recorded.
        #[serde(default)]
        served_by: String,
    },
    /// A fault began.
    FaultStarted { fault: String, target: String },
    /// A fault was healed.
    FaultHealed { fault: String, target: String },
    /// The run entered a phase: `workload`, `heal`, `drain`, `done`.
    Phase { name: String },
}

/// An event and when it happened: microseconds since the run began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub t_us: u64,
    #[serde(flatten)]
    pub event: Event,
}

/// The run's events, appended by every task of the harness.
#[derive(Debug)]
pub struct Ledger {
    start: Instant,
    entries: Mutex<Vec<Entry>>,
    next_stream: AtomicU64,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new()
    }
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger {
            start: Instant::now(),
            entries: Mutex::new(Vec::new()),
            next_stream: AtomicU64::new(1),
        }
    }

    /// Appends `event`, timed under the lock so the ledger's order is its time order.
    pub fn record(&self, event: Event) {
        let mut entries = self.entries.lock().expect("ledger lock");
        let t_us = self.now_us();
        entries.push(Entry { t_us, event });
    }

    /// The ledger's clock: microseconds since the run began.
    pub fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// A new consumer stream's id, unique in the run.
    pub fn next_stream(&self) -> u64 {
        self.next_stream.fetch_add(1, Ordering::Relaxed)
    }

    /// A copy of the events so far.
    pub fn snapshot(&self) -> Vec<Entry> {
        self.entries.lock().expect("ledger lock").clone()
    }

    /// How many faults of each type were injected so far.
    pub fn faults(&self) -> BTreeMap<String, u32> {
        fault_counts(&self.entries.lock().expect("ledger lock"))
    }
}

/// How many faults of each type `entries` record.
pub fn fault_counts(entries: &[Entry]) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    for entry in entries {
        if let Event::FaultStarted { fault, .. } = &entry.event {
            *counts.entry(fault.clone()).or_default() += 1;
        }
    }
    counts
}

/// The wall clock now, ms since the epoch.
pub fn wall_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// Writes `entries` as JSON lines.
pub fn write_jsonl(entries: &[Entry], mut out: impl Write) -> io::Result<()> {
    for entry in entries {
        serde_json::to_writer(&mut out, entry)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Reads a ledger written by [`write_jsonl`].
pub fn read_jsonl(input: impl BufRead) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str(&line)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("ledger line {}: {e}", n + 1)))?;
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_name_their_message() {
        let msg = MessageRef { producer: 3, seq: 17 };
        assert_eq!(msg.body(), "p3:17");
        assert_eq!(MessageRef::parse(msg.body().as_bytes()), Some(msg));
        assert_eq!(MessageRef::parse(b"hello"), None);
    }

    #[test]
    fn a_ledger_survives_its_json_lines() {
        let ledger = Ledger::new();
        let msg = MessageRef { producer: 1, seq: 2 };
        ledger.record(Event::SendAttempted {
            msg,
            queue: "q".into(),
            node: "n1".into(),
            group: Some("g".into()),
            deliver_at_ms: None,
        });
        ledger.record(Event::SendAcked {
            msg,
            message_id: 9,
            duplicate: false,
        });
        let mut out = Vec::new();
        write_jsonl(&ledger.snapshot(), &mut out).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with(r#"{"t_us":"#), "{text}");
        assert!(text.contains(r#""event":"send_attempted""#), "{text}");
        assert_eq!(read_jsonl(&out[..]).unwrap(), ledger.snapshot());
    }
}
