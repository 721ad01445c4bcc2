//! Heartbeats of the Consume streams one node forwards to another.
//!
//! A node that stalls (stopped, or starved of CPU) keeps its connections open,
//! and the serving node would go on delivering to the streams it forwards
//! until the connection's keepalive gave up, tens of seconds later; the
//! stalled node would then pass those deliveries on, long after the queue's
//! other consumers took the later messages. So the forwarding node beats on
//! each stream it forwards (`credit {0}`) every quarter lease ([`Beat`]), and
//! the serving node ends a forwarded stream that stays silent for a lease
//! ([`Silence`]): what it held goes back to the queue, counted as a failed
//! attempt, as for any consumer that goes away.
//!
//! The forwarding node, for its part, knows when it could not beat for half a
//! lease: by then the serving node may have ended the stream, so what the
//! stream still brings was taken back already. It treats the stream as ended
//! ([`Beat::lapsed`]): voids what the client holds of it and follows the queue,
//! rather than pass stale deliveries on. Beats go out from a task of their
//! own, so a client slow to read (which holds up the stream's forwarding)
//! does not silence them.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_protocol::v1::{self as pb, consume_request};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard, WaitForCancellationFutureOwned};

/// The beats of one forwarded stream; they stop when it is dropped.
pub(super) struct Beat {
    shared: Arc<Shared>,
    _stop: DropGuard,
}

struct Shared {
    lease: Duration,
    /// When the last beat went out.
    last: Mutex<Instant>,
    /// Cancelled once a beat came late.
    lapsed: CancellationToken,
}

impl Beat {
    /// Beats on `requests`, a stream forwarded to a node of a cluster with
    /// leases of `lease`, until the beat is dropped or the stream ends.
    pub(super) fn start(lease: Duration, requests: &mpsc::Sender<pb::ConsumeRequest>) -> Beat {
        let shared = Arc::new(Shared {
            lease,
            last: Mutex::new(Instant::now()),
            lapsed: CancellationToken::new(),
        });
        let stop = CancellationToken::new();
        tokio::spawn(beat(shared.clone(), requests.downgrade(), stop.clone()));
        Beat {
            shared,
            _stop: stop.drop_guard(),
        }
    }

    /// Whether this node could not beat for half a lease: the stream may
    /// have been ended by the serving node, and what it brings is stale.
    pub(super) fn lapsed(&self) -> bool {
        self.shared.lapsed()
    }

    /// Resolves once the stream lapsed.
    pub(super) fn lapses(&self) -> WaitForCancellationFutureOwned {
        self.shared.lapsed.clone().cancelled_owned()
    }
}

impl Shared {
    fn lapsed(&self) -> bool {
        if self.lapsed.is_cancelled() {
            return true;
        }
        let last = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        let late = last.elapsed() > self.lease / 2;
        if late {
            self.lapsed.cancel();
        }
        late
    }
}

async fn beat(shared: Arc<Shared>, requests: mpsc::WeakSender<pb::ConsumeRequest>, stop: CancellationToken) {
    let mut every = tokio::time::interval(shared.lease / 4);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.cancelled() => return,
        }
        if shared.lapsed() {
            return;
        }
        let Some(requests) = requests.upgrade() else {
            return;
        };
        // A full buffer means the serving node reads no request now (its
        // client is slow to read): it does not count that as silence.
        let _ = requests.try_send(pb::ConsumeRequest {
            kind: Some(consume_request::Kind::Credit(pb::Credit { credit: 0 })),
        });
        *shared.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }
}

/// How the serving node watches a stream another node forwards for beats.
#[derive(Debug)]
pub(in crate::grpc) struct Silence {
    lease: Duration,
    heard: Instant,
}

impl Silence {
    /// Watching a stream forwarded within a cluster with leases of `lease`.
    pub(in crate::grpc) fn new(lease: Duration) -> Silence {
        Silence {
            lease,
            heard: Instant::now(),
        }
    }

    /// The forwarding node was heard from, or could not be (this node waited
    /// for it to read).
    pub(in crate::grpc) fn heard(&mut self) {
        self.heard = Instant::now();
    }

    /// Resolves once the stream has been silent for a lease, unless heard
    /// from before.
    pub(in crate::grpc) fn too_long(&self) -> tokio::time::Sleep {
        tokio::time::sleep_until(self.heard + self.lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stream_beats_every_quarter_lease_and_lapses_when_a_beat_comes_late() {
        let lease = Duration::from_secs(2);
        let (tx, mut rx) = mpsc::channel(16);
        let beat = Beat::start(lease, &tx);
        for _ in 0..3 {
            let request = rx.recv().await.expect("a beat");
            assert!(matches!(
                request.kind,
                Some(consume_request::Kind::Credit(pb::Credit { credit: 0 }))
            ));
        }
        assert!(!beat.lapsed());
        // The node stalls: no task runs while the clock moves on.
        *beat.shared.last.lock().unwrap() -= lease;
        assert!(beat.lapsed(), "a beat more than half a lease late");
        tokio::time::timeout(Duration::from_secs(1), beat.lapses())
            .await
            .expect("lapses resolves");
        tokio::time::sleep(lease * 2).await;
        assert!(rx.try_recv().is_err(), "no beat once lapsed");
    }

    #[tokio::test(start_paused = true)]
    async fn beats_stop_with_the_stream() {
        let (tx, mut rx) = mpsc::channel(16);
        let beat = Beat::start(Duration::from_secs(2), &tx);
        rx.recv().await.expect("a beat");
        drop(beat);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(rx.try_recv().is_err(), "no beat once the beat is dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn a_forwarded_stream_is_too_long_silent_after_a_lease_from_when_it_was_last_heard() {
        let mut silence = Silence::new(Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        silence.heard();
        let started = Instant::now();
        silence.too_long().await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
