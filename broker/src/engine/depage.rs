//! A durable queue's depager: the task that reads its paged messages back into
//! memory (`queue/tail.rs` says what is paged and why).
//!
//! It sleeps until the queue's head falls below half its bound, or a consumer
//! with credit finds nothing ready while the head has room (the dispatcher
//! wakes it then), then reads the next paged messages in id order, enough to
//! fill the head again, in one
//! ordered read of the store (off the queue's lock, on a blocking thread), and
//! loads them. Reading at half the bound, a whole half-head at a time, keeps
//! the read ahead of a draining consumer. After a restart it first counts, a
//! chunk at a time, the paged messages start-up did not read, so that the
//! queue's figures become exact without delaying the start.
//!
//! It also keeps the queue's timeline bounded (`queue/far.rs`): after each
//! read, and whenever the timeline outgrows the head's bound, it moves the
//! latest-due scheduled messages out of memory into the store's due-time
//! index, and it wakes shortly before the earliest of those is due to load
//! them back.
//!
//! It holds the queue's [`Queue::tail`] lock while it reads, so management
//! operations that walk the paged messages never race it.
use std::sync::Arc;
use std::time::Duration;

use rebound_storage::{Due, Op};
use tracing::error;

use super::{Broker, blocking};
use crate::queue::{Entry, Queue, ReadLimit};
use crate::time::now_ms;

/// Paged messages counted per step after a restart.
const COUNT_CHUNK: usize = 200_000;

/// The most entries of one batch of the due-time index (a record of some
/// 20 bytes each, well within the store's 128 KiB).
const FAR_BATCH: usize = 2048;

/// Batches of an earlier serving's index read and deleted per commit: each
/// is read whole (up to [`FAR_BATCH`] entries) only for its key.
const CLEAR_BATCHES: usize = 64;

/// How long to wait before reading again when a read could load nothing (the
/// next paged message is still being committed).
const PENDING_BACKOFF: Duration = Duration::from_millis(1);

impl Broker {
    /// Bounds a queue's head as its address-settings say.
    pub(super) fn apply_read_limit(&self, queue: &Queue) {
        let settings = self.settings_for(&queue.address);
        queue.set_read_limit(ReadLimit {
            messages: settings.max_read_page_messages,
            bytes: settings.max_read_page_bytes,
        });
    }

    /// Starts a durable queue's depager as one of the engine's tasks.
    pub(super) fn spawn_depager(self: &Arc<Self>, queue: Arc<Queue>) {
        if queue.durable {
            self.spawn(run(self.clone(), queue));
        }
    }
}

async fn run(broker: Arc<Broker>, queue: Arc<Queue>) {
    loop {
        if queue.is_closed() || broker.is_shutting_down() {
            return;
        }
        if let Err(err) = step(&broker, &queue).await {
            error!(queue = %queue.name, %err, "reading paged messages failed; retrying in a second");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        if queue.to_count().is_some() {
            continue;
        }
        let far = queue
            .far_wake_ms()
            .map(|at_ms| Duration::from_millis(at_ms.saturating_sub(now_ms())));
        tokio::select! {
            _ = queue.depage.notified() => {}
            _ = tokio::time::sleep(far.unwrap_or(Duration::MAX)), if far.is_some() => {}
            _ = broker.shutdown().cancelled() => return,
        }
    }
}

/// Counts one chunk of what is left to count, then reads as long as the head
/// wants more.
async fn step(broker: &Arc<Broker>, queue: &Arc<Queue>) -> crate::error::Result<()> {
    let _tail = queue.tail.lock().await;
    if queue.take_index_to_clear()
        && let Err(err) = clear_index(broker, queue).await
    {
        queue.index_not_cleared();
        return Err(err);
    }
    if let Some((after, before)) = queue.start_count() {
        let store = broker.store.clone();
        let id = queue.id;
        let count = blocking(move || store.count_queue(id, after, before, COUNT_CHUNK)).await?;
        queue.counted(&count);
    }
    while let Some((after, messages, bytes)) = queue.start_read() {
        let store = broker.store.clone();
        let id = queue.id;
        let max = usize::try_from(messages).unwrap_or(usize::MAX);
        match blocking(move || store.scan_queue(id, after, max, bytes)).await {
            Ok(read) => {
                if queue.finish_read(read, now_ms()) == 0 {
                    tokio::time::sleep(PENDING_BACKOFF).await;
                }
            }
            Err(err) => {
                queue.abort_read();
                return Err(err);
            }
        }
        move_far(broker, queue).await?;
        if queue.is_closed() || broker.is_shutting_down() {
            break;
        }
    }
    move_far(broker, queue).await?;
    load_far(broker, queue).await
}

/// Deletes the batches of the queue's due-time index (an earlier serving's).
async fn clear_index(broker: &Broker, queue: &Queue) -> crate::error::Result<()> {
    loop {
        let store = broker.store.clone();
        let id = queue.id;
        let batches = blocking(move || store.scan_due(id, None, CLEAR_BATCHES)).await?;
        if batches.is_empty() {
            return Ok(());
        }
        let ops = batches
            .into_iter()
            .map(|batch| Op::RemoveDues {
                queue: id,
                first: batch.first,
            })
            .collect();
        broker.store.commit(ops).await?;
    }
}

/// Moves the latest-due part of an outgrown timeline out of memory, indexed.
async fn move_far(broker: &Broker, queue: &Queue) -> crate::error::Result<()> {
    let moved = queue.move_far(now_ms());
    if moved.is_empty() {
        return Ok(());
    }
    let dues: Vec<Due> = moved.iter().map(|&(due, _)| due).collect();
    let ops = dues
        .chunks(FAR_BATCH)
        .map(|entries| Op::PutDues {
            queue: queue.id,
            entries: entries.to_vec(),
        })
        .collect();
    if let Err(err) = broker.store.commit(ops).await {
        queue.far_failed(moved, now_ms());
        return Err(err.into());
    }
    Ok(())
}

/// Loads back the far messages due within the lookahead: the batch of the
/// earliest, whole, and again while the next batch's earliest is due within
/// it; entries that name no far message are dropped with their batch.
async fn load_far(broker: &Broker, queue: &Queue) -> crate::error::Result<()> {
    while queue.far_wake_ms().is_some_and(|at_ms| at_ms <= now_ms()) {
        let store = broker.store.clone();
        let id = queue.id;
        let mut read = blocking(move || store.scan_due(id, None, 2)).await?.into_iter();
        let Some(batch) = read.next() else {
            queue.load_far(Vec::new(), None, now_ms());
            break;
        };
        let next = read.next().map(|b| b.first);
        let far: Vec<Due> = batch.entries.into_iter().filter(|d| queue.is_far(d.id)).collect();
        let store = broker.store.clone();
        let loaded = blocking(move || {
            let mut loaded = Vec::with_capacity(far.len());
            for due in far {
                if let Some(record) = store.read_message(id, due.id)? {
                    loaded.push(Entry::read_back(record, store.read_state(id, due.id)?));
                }
            }
            Ok(loaded)
        })
        .await?;
        // Dropped from the index before they can be delivered (and acked, or
        // held for a transaction), so that an entry left never names them.
        broker
            .store
            .commit(vec![Op::RemoveDues {
                queue: id,
                first: batch.first,
            }])
            .await?;
        queue.load_far(loaded, next, now_ms());
    }
    Ok(())
}
