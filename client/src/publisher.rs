//! A producer on one Publish stream, shared by every task that sends through it,
//! with natural batching.
//!
//! [`Publisher::send`] queues a message and waits for its own answer. A driver task
//! owns the stream: it sends a frame (one request: one storage commit on the
//! broker) as soon as fewer than [`PublisherOptions::max_frames_in_flight`] frames
//! are unanswered, so an idle publisher adds no delay; messages queued while the
//! window is full are coalesced into the next frame. [`PublisherOptions::linger`]
//! lets a frame wait for more messages, trading latency for throughput.
//!
//! The broker accepts or refuses a frame whole. When it refuses one that carries
//! several callers' messages for something a message can cause (INVALID_ARGUMENT,
//! NOT_FOUND, PERMISSION_DENIED, ...: nothing of it was stored), the driver sends
//! each of them again alone, so that every caller gets the answer to its own
//! message.
//!
//! Order: messages go on the stream in the order their sends were called, and the
//! broker stores a stream's frames in order; only the messages of a refused frame,
//! sent again alone, come after the frames sent meanwhile. (A task that waits for
//! each send before the next keeps its own order in any case.)
//!
//! When the stream breaks, each message sent on it and not yet answered fails
//! with [`Error::Unconfirmed`]: it may or may not have been stored. Messages not
//! yet sent go on a new stream, opened for the next frame; if that cannot be
//! opened, they fail with why.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prost::Message as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Streaming};

use crate::credentials::Transport;
use crate::proto::messaging_client::MessagingClient;
use crate::proto::publish_response::Result as Answer;
use crate::{Error, OutgoingMessage, Result, proto};

/// How a [`Publisher`] batches; [`PublisherOptions::default`] is no linger, two
/// frames in flight, frames of at most 256 messages or 1 MiB, and 10 000 messages
/// queued or in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherOptions {
    /// Frames sent and not yet answered, at most; more messages wait and are
    /// coalesced into the next frame.
    pub max_frames_in_flight: usize,
    /// Messages in one frame, at most.
    pub max_batch: usize,
    /// Encoded bytes of one frame's messages, at most (a larger message goes alone).
    pub max_batch_bytes: usize,
    /// How long a frame that is not full may wait for more messages. Zero: it goes
    /// as soon as the window allows.
    pub linger: Duration,
    /// Messages queued or in flight, at most; a send beyond waits for room.
    pub max_pending: usize,
}

impl Default for PublisherOptions {
    fn default() -> PublisherOptions {
        PublisherOptions {
            max_frames_in_flight: 2,
            max_batch: 256,
            max_batch_bytes: 1 << 20,
            linger: Duration::ZERO,
            max_pending: 10_000,
        }
    }
}

/// A producer whose concurrent sends share one Publish stream and are batched.
/// Cloning it is cheap; clones share the stream. The stream closes when the last
/// clone is dropped, after the messages already sent are answered.
#[derive(Debug, Clone)]
pub struct Publisher {
    queue: mpsc::UnboundedSender<Queued>,
    room: Arc<Semaphore>,
    counts: Arc<Counts>,
}

/// What a publisher has done, on all of its streams.
#[derive(Debug, Default)]
struct Counts {
    frames: AtomicU64,
    unrouted: AtomicU64,
    duplicates: AtomicU64,
}

/// A message waiting for its answer.
struct Queued {
    message: proto::OutgoingMessage,
    reply: oneshot::Sender<Result<u64>>,
    /// Its place in `max_pending`, given back with the answer.
    _room: OwnedSemaphorePermit,
}

impl Queued {
    fn answer(self, result: Result<u64>) {
        // A caller that stopped waiting does not want it.
        let _ = self.reply.send(result);
    }
}

impl Publisher {
    /// A publisher on the client's connection; its stream opens with the first send.
    /// Must be called within a Tokio runtime (it spawns the driver task).
    pub(crate) fn new(messaging: MessagingClient<Transport>, options: PublisherOptions) -> Publisher {
        let (queue, incoming) = mpsc::unbounded_channel();
        let room = Arc::new(Semaphore::new(
            options.max_pending.clamp(1, Semaphore::MAX_PERMITS),
        ));
        let counts = Arc::new(Counts::default());
        let driver = Driver {
            messaging,
            options,
            incoming,
            waiting: VecDeque::new(),
            alone: VecDeque::new(),
            stream: None,
            linger_until: None,
            counts: counts.clone(),
        };
        tokio::spawn(driver.run());
        Publisher { queue, room, counts }
    }

    /// Sends one message and returns the id the broker gave it, once it is on disk
    /// if it is durable. Concurrent sends share frames; each gets its own answer.
    ///
    /// Fails with [`Error::Status`] when the broker refuses the message (nothing
    /// stored), and with [`Error::Unconfirmed`] when the stream broke before the
    /// answer came (it may or may not have been stored).
    pub async fn send(&self, message: OutgoingMessage) -> Result<u64> {
        let closed = || Error::Unconfirmed("the publisher stopped".into());
        let room = self.room.clone().acquire_owned().await.map_err(|_| closed())?;
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Queued {
                message: message.into(),
                reply,
                _room: room,
            })
            .map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    /// Frames (Publish requests) sent so far, on every stream of this publisher.
    pub fn frames_sent(&self) -> u64 {
        self.counts.frames.load(Ordering::Relaxed)
    }

    /// Messages sent so far that found no queue on their address and were dropped
    /// (Artemis behaviour for an address with no bindings). Counted per frame, so
    /// it does not say whose they were.
    pub fn unrouted(&self) -> u64 {
        self.counts.unrouted.load(Ordering::Relaxed)
    }

    /// Messages sent so far that were duplicates ([`OutgoingMessage::duplicate_id`]):
    /// acknowledged, not stored again. Counted per frame, like [`unrouted`](Self::unrouted);
    /// [`Client::send_outcome`](crate::Client::send_outcome) says it of one message.
    pub fn duplicates(&self) -> u64 {
        self.counts.duplicates.load(Ordering::Relaxed)
    }
}

/// Owns the stream: sends frames, matches answers, fails what a broken stream held.
struct Driver {
    messaging: MessagingClient<Transport>,
    options: PublisherOptions,
    incoming: mpsc::UnboundedReceiver<Queued>,
    /// Queued, not yet sent.
    waiting: VecDeque<Queued>,
    /// From a refused frame, to be sent again one per frame (before `waiting`).
    alone: VecDeque<Queued>,
    stream: Option<Stream>,
    /// When a frame that is not full goes anyway (with a linger).
    linger_until: Option<Instant>,
    counts: Arc<Counts>,
}

/// One open Publish stream and its unanswered frames, oldest first.
struct Stream {
    requests: mpsc::Sender<proto::PublishRequest>,
    responses: Streaming<proto::PublishResponse>,
    in_flight: VecDeque<Frame>,
    next_sequence: u64,
}

struct Frame {
    sequence: u64,
    /// The messages, kept (cheap: bodies are shared) when there are several, to
    /// send them again alone if the frame is refused.
    items: Vec<Queued>,
}

/// Refusals that a single message can cause, all made before anything is stored.
fn refused_for_a_message(code: Code) -> bool {
    matches!(
        code,
        Code::InvalidArgument
            | Code::NotFound
            | Code::PermissionDenied
            | Code::ResourceExhausted
            | Code::FailedPrecondition
            | Code::AlreadyExists
            | Code::OutOfRange
    )
}

impl Driver {
    async fn run(mut self) {
        let mut open = true;
        loop {
            self.send_frames().await;
            if !open && self.waiting.is_empty() && self.alone.is_empty() && self.stream.is_none() {
                return;
            }
            let linger = self.linger_until;
            tokio::select! {
                item = self.incoming.recv(), if open => match item {
                    Some(item) => {
                        self.queue(item);
                        // Everything queued meanwhile joins the same frame.
                        while let Ok(item) = self.incoming.try_recv() {
                            self.queue(item);
                        }
                    }
                    None => open = false,
                },
                response = next_response(&mut self.stream) => self.answered(response),
                () = sleep_until(linger) => self.linger_until = None,
            }
            // Every clone is gone and nothing is left to answer: close the stream.
            if !open
                && self.waiting.is_empty()
                && self.alone.is_empty()
                && self.stream.as_ref().is_some_and(|s| s.in_flight.is_empty())
            {
                self.stream = None;
            }
        }
    }

    fn queue(&mut self, item: Queued) {
        if self.waiting.is_empty() && !self.options.linger.is_zero() {
            self.linger_until = Some(Instant::now() + self.options.linger);
        }
        self.waiting.push_back(item);
    }

    /// Sends frames while the window has room and something may go.
    async fn send_frames(&mut self) {
        loop {
            let in_flight = self.stream.as_ref().map_or(0, |s| s.in_flight.len());
            if in_flight >= self.options.max_frames_in_flight.max(1) {
                return;
            }
            let items = if let Some(item) = self.alone.pop_front() {
                vec![item]
            } else if self.waiting.is_empty()
                || (self.linger_until.is_some() && self.waiting.len() < self.options.max_batch)
            {
                return;
            } else {
                self.take_batch()
            };
            if self.stream.is_none() {
                match self.open().await {
                    Ok(stream) => self.stream = Some(stream),
                    Err(status) => {
                        // Not sent: the callers learn why at once.
                        let failed = items
                            .into_iter()
                            .chain(self.alone.drain(..))
                            .chain(self.waiting.drain(..));
                        for item in failed {
                            item.answer(Err(status.clone().into()));
                        }
                        self.linger_until = None;
                        return;
                    }
                }
            }
            let stream = self.stream.as_mut().expect("opened above");
            let sequence = stream.next_sequence;
            stream.next_sequence += 1;
            let mut items = items;
            let messages = match &mut items[..] {
                [only] => vec![std::mem::take(&mut only.message)],
                several => several.iter().map(|i| i.message.clone()).collect(),
            };
            let request = proto::PublishRequest { sequence, messages };
            // The channel holds at most the frames in flight, so there is room
            // unless the stream is gone (then its answers say so).
            let _ = stream.requests.try_send(request);
            stream.in_flight.push_back(Frame { sequence, items });
            self.counts.frames.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The next frame's messages from `waiting`, within the frame bounds.
    fn take_batch(&mut self) -> Vec<Queued> {
        let mut items = Vec::new();
        let mut bytes = 0;
        while let Some(next) = self.waiting.front() {
            let size = next.message.encoded_len();
            if !items.is_empty()
                && (items.len() >= self.options.max_batch || bytes + size > self.options.max_batch_bytes)
            {
                break;
            }
            bytes += size;
            items.push(self.waiting.pop_front().expect("front exists"));
        }
        self.linger_until = match self.waiting.is_empty() || self.options.linger.is_zero() {
            true => None,
            false => Some(Instant::now() + self.options.linger),
        };
        items
    }

    async fn open(&mut self) -> Result<Stream, tonic::Status> {
        let capacity = self.options.max_frames_in_flight.max(1);
        let (requests, rx) = mpsc::channel(capacity);
        let responses = self
            .messaging
            .publish(ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(Stream {
            requests,
            responses,
            in_flight: VecDeque::new(),
            next_sequence: 1,
        })
    }

    /// An answer from the stream, or its end.
    fn answered(&mut self, response: Result<Option<proto::PublishResponse>, tonic::Status>) {
        let stream = self.stream.as_mut().expect("answers come from an open stream");
        let broken = match response {
            Ok(Some(response)) => match stream.in_flight.pop_front() {
                Some(frame) if frame.sequence == response.sequence => {
                    match self.settle(frame, response.result) {
                        Ok(()) => return,
                        Err(why) => why,
                    }
                }
                _ => format!("an answer to request {} out of order", response.sequence),
            },
            Ok(None) => "the broker closed the stream".into(),
            Err(status) => Error::from(status).to_string(),
        };
        let stream = self.stream.take().expect("checked above");
        for frame in stream.in_flight {
            for item in frame.items {
                item.answer(Err(Error::Unconfirmed(broken.clone())));
            }
        }
    }

    /// Gives a frame's callers their answers; `Err` with why the stream must be
    /// dropped when the answer breaks the protocol.
    fn settle(&mut self, frame: Frame, result: Option<Answer>) -> Result<(), String> {
        match result {
            Some(Answer::Sent(sent)) if sent.message_ids.len() == frame.items.len() => {
                let unrouted = u64::from(sent.unrouted);
                self.counts.unrouted.fetch_add(unrouted, Ordering::Relaxed);
                let duplicates = sent.duplicates.iter().filter(|&&d| d).count() as u64;
                self.counts.duplicates.fetch_add(duplicates, Ordering::Relaxed);
                for (item, id) in frame.items.into_iter().zip(sent.message_ids) {
                    item.answer(Ok(id));
                }
                Ok(())
            }
            Some(Answer::Error(error)) => {
                let code = Code::from_i32(error.code);
                if frame.items.len() > 1 && refused_for_a_message(code) {
                    self.alone.extend(frame.items);
                } else {
                    for item in frame.items {
                        item.answer(Err(Error::Status {
                            code,
                            message: error.message.clone(),
                        }));
                    }
                }
                Ok(())
            }
            other => {
                let why = format!("a malformed answer to request {}: {other:?}", frame.sequence);
                for item in frame.items {
                    item.answer(Err(Error::Protocol(why.clone())));
                }
                Err(why)
            }
        }
    }
}

/// The next answer of the open stream; pending forever without one.
async fn next_response(stream: &mut Option<Stream>) -> Result<Option<proto::PublishResponse>, tonic::Status> {
    match stream {
        Some(stream) => stream.responses.message().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::Authorization;
    use tonic::transport::Channel;

    fn driver(options: PublisherOptions) -> Driver {
        let channel = Channel::from_static("http://127.0.0.1:1").connect_lazy();
        let (_queue, incoming) = mpsc::unbounded_channel();
        Driver {
            messaging: MessagingClient::with_interceptor(channel, Authorization(None)),
            options,
            incoming,
            waiting: VecDeque::new(),
            alone: VecDeque::new(),
            stream: None,
            linger_until: None,
            counts: Arc::default(),
        }
    }

    fn queued(body_len: usize) -> Queued {
        let room = Arc::new(Semaphore::new(1)).try_acquire_owned().unwrap();
        Queued {
            message: OutgoingMessage::new("a", vec![0u8; body_len]).into(),
            reply: oneshot::channel().0,
            _room: room,
        }
    }

    #[tokio::test]
    async fn frames_keep_to_their_bounds() {
        let mut d = driver(PublisherOptions {
            max_batch: 3,
            max_batch_bytes: 1000,
            ..PublisherOptions::default()
        });
        let sizes = [10, 10, 10, 10, 600, 600, 5000, 10];
        d.waiting.extend(sizes.map(queued));
        let mut frames = Vec::new();
        while !d.waiting.is_empty() {
            frames.push(d.take_batch().len());
        }
        // Three at most; two of 600 do not fit in 1000 bytes; 5000 goes alone.
        assert_eq!(frames, [3, 2, 1, 1, 1]);
    }
}
