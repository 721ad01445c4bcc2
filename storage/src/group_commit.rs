//! The committer: the single thread that writes, and the only place that
//! decides when to sync.
//!
//! A durable commit costs one flush plus one `fdatasync`, a few milliseconds
//! on the project's virtio disk, whatever its size. Committing each request on
//! its own therefore caps throughput at roughly 1.5k commits/s however many
//! producers there are (reference §8.1). Instead one dedicated std thread owns
//! all writes (shape B of the reference, §1.4):
//!
//! 1. [`Committer::submit`] sends the staged request and a oneshot sender over
//!    an unbounded channel and returns at once: the caller's thread never
//!    blocks, it awaits the [`Commit`].
//! 2. The committer blocks for the first request, then drains whatever else is
//!    already queued, up to [`MAX_GROUP_REQUESTS`] requests or
//!    [`MAX_GROUP_BYTES`] bytes.
//! 3. It folds the group into one [`WriteSet`], writes and syncs the files of
//!    its large bodies and fsyncs `large/` once ([`crate::large`]), applies
//!    the set as one atomic engine batch, calls [`Journal::sync`] once,
//!    unlinks the body files the group made obsolete, and answers every
//!    waiter with the same result.
//!
//! While it syncs, new requests queue up and ride the next group, so the
//! number of syncs adapts to the load: one producer pays one sync per commit,
//! N concurrent producers share them. The reference (§8.1) measured sled at
//! about 1.5k msg/s for 1, 8 or 64 producers syncing on their own, and 14.8k
//! msg/s at 64 producers with this shape (sync_file_range only). Ours, with
//! the extra fdatasync, one 1 KiB message per commit, on the same machine
//! (`examples/commit_throughput.rs`): 1 committer ~1.6–1.9k msg/s at 1.00
//! syncs per commit, 8 committers ~6.7–7.3k at 0.21, 64 committers
//! ~31–33k at 0.03 (about 35 commits per sync).
//!
//! Failure handling: if writing a body file or applying the batch fails, every
//! waiter of that group gets the error, nothing of the group is visible (the
//! batch is atomic) and the group's new body files are deleted again.
//! If the *sync* fails, the kernel may already have dropped the dirty pages
//! (the "fsyncgate" lesson), so a later successful sync would prove nothing:
//! the committer stays failed and answers every later request with that error.
//! The same holds for a failed fsync of `large/`. After a failed journal sync
//! no body file is deleted, old or new: either may be what the records say
//! after a restart, and the sweep at open sorts it out.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::error::StorageError;
use crate::keys::{self, Key};
use crate::large::{LargeBody, LargeDir, MarkerView, same_body};
use crate::write_set::{Staged, WriteSet, stage};
use crate::{Commit, MessageId, Op};

/// Most requests folded into one group.
pub(crate) const MAX_GROUP_REQUESTS: usize = 4096;
/// A group stops taking requests once it holds this many encoded bytes
/// (large bodies included).
pub(crate) const MAX_GROUP_BYTES: usize = 16 << 20;

/// What the committer needs from an engine.
pub(crate) trait Journal: Send + 'static {
    /// The stored keys starting with `prefix`.
    fn keys_with_prefix(&self, prefix: &[u8]) -> Result<Vec<Vec<u8>>, StorageError>;
    /// The value stored under `key` (applied, not necessarily durable).
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;
    /// Applies all writes atomically (visible to readers, not yet durable).
    fn apply(&self, writes: WriteSet) -> Result<(), StorageError>;
    /// Makes everything applied so far durable.
    fn sync(&self) -> Result<(), StorageError>;
}

/// Counters shared between the committer thread and [`Committer::counters`].
#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    ops: AtomicU64,
    syncs: AtomicU64,
}

/// A snapshot of the committer's counters.
pub(crate) struct CommitCounters {
    pub(crate) commits: u64,
    pub(crate) ops: u64,
    pub(crate) syncs: u64,
}

struct Request {
    staged: Staged,
    reply: oneshot::Sender<Result<(), StorageError>>,
}

/// Handle to the committer thread.
pub(crate) struct Committer {
    /// `None` once closed.
    requests: Mutex<Option<Sender<Request>>>,
    thread: Mutex<Option<JoinHandle<Result<(), StorageError>>>>,
    counters: Arc<Counters>,
}

impl Committer {
    /// Starts the committer thread, which owns `journal` from now on and
    /// writes large bodies to `large`.
    pub(crate) fn start(journal: impl Journal, large: Arc<LargeDir>) -> Result<Committer, StorageError> {
        let (tx, rx) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let thread_counters = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("rebound-commit".into())
            .spawn(move || run(journal, &large, rx, &thread_counters))
            .map_err(|e| StorageError::io("spawning the committer thread", e))?;
        Ok(Committer {
            requests: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            counters,
        })
    }

    /// Queues `ops` for the next group; the returned future resolves once
    /// they are durable.
    pub(crate) fn submit(&self, ops: Vec<Op>) -> Commit {
        let staged = match stage(ops) {
            Ok(staged) => staged,
            Err(e) => return Commit::ready(Err(e)),
        };
        let (reply, done) = oneshot::channel();
        let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        match requests.as_ref().map(|tx| tx.send(Request { staged, reply })) {
            Some(Ok(())) => Commit::from(done),
            // Closed, or the thread is gone.
            Some(Err(_)) | None => Commit::ready(Err(StorageError::Closed)),
        }
    }

    /// Stops taking requests, lets the committer finish the queued ones and
    /// sync a last time, and waits for it. Idempotent.
    pub(crate) fn close(&self) -> Result<(), StorageError> {
        drop(
            self.requests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
        match thread {
            Some(thread) => thread.join().unwrap_or(Err(StorageError::CommitterPanicked)),
            None => Ok(()),
        }
    }

    /// The counters so far.
    pub(crate) fn counters(&self) -> CommitCounters {
        CommitCounters {
            commits: self.counters.commits.load(Ordering::Relaxed),
            ops: self.counters.ops.load(Ordering::Relaxed),
            syncs: self.counters.syncs.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!(error = %e, "closing the store on drop failed");
        }
    }
}

/// The committer thread's loop; returns the result of the final sync.
fn run(
    journal: impl Journal,
    large: &LargeDir,
    requests: Receiver<Request>,
    counters: &Counters,
) -> Result<(), StorageError> {
    let mut failed: Option<StorageError> = None;
    while let Ok(first) = requests.recv() {
        let mut bytes = first.staged.bytes;
        let mut group = vec![first];
        while group.len() < MAX_GROUP_REQUESTS && bytes < MAX_GROUP_BYTES {
            let Ok(next) = requests.try_recv() else { break };
            bytes += next.staged.bytes;
            group.push(next);
        }

        let ops: usize = group.iter().map(|r| r.staged.ops).sum();
        let (writes, replies): (Vec<_>, Vec<_>) = group.into_iter().map(|r| (r.staged, r.reply)).unzip();
        let result = match failed.clone() {
            Some(e) => Err(e),
            None => write_group(&journal, large, writes, counters, &mut failed),
        };
        if result.is_ok() {
            counters
                .commits
                .fetch_add(replies.len() as u64, Ordering::Relaxed);
            counters.ops.fetch_add(ops as u64, Ordering::Relaxed);
        }
        for reply in replies {
            // The caller may have stopped waiting; its commit is durable anyway.
            let _ = reply.send(result.clone());
        }
    }
    match failed {
        Some(e) => Err(e),
        None => journal.sync(),
    }
}

/// Applies one group as one batch and makes it durable, large bodies first,
/// obsolete body files last. A failed sync is recorded in `failed`.
fn write_group(
    journal: &impl Journal,
    large: &LargeDir,
    group: Vec<Staged>,
    counters: &Counters,
    failed: &mut Option<StorageError>,
) -> Result<(), StorageError> {
    let mut set = WriteSet::default();
    let mut existing = |prefix: &[u8]| journal.keys_with_prefix(prefix);
    for staged in group {
        set.add(staged, &mut existing)?;
    }
    let mut bodies = Bodies::default();
    if let Err(e) = bodies.place(&mut set, journal, large) {
        bodies.discard(large);
        if let StorageError::Io {
            context: DIR_SYNC, ..
        } = e
        {
            tracing::error!(error = %e, "fsync of the large-message directory failed; the store refuses all further commits");
            *failed = Some(e.clone());
        }
        return Err(e);
    }
    if let Err(e) = journal.apply(set) {
        bodies.discard(large);
        return Err(e);
    }
    journal.sync().inspect_err(|e| {
        tracing::error!(error = %e, "sync failed; the store refuses all further commits");
        *failed = Some(e.clone());
    })?;
    counters.syncs.fetch_add(1, Ordering::Relaxed);
    for path in &bodies.obsolete {
        large.remove(path);
    }
    Ok(())
}

const DIR_SYNC: &str = "fsync of the large-message directory";

/// The body files of one group.
#[derive(Default)]
struct Bodies {
    /// Files (or links) written for this group: garbage if it fails.
    written: Vec<PathBuf>,
    /// Files the records of this group's keys pointed to before it: garbage
    /// once it is durable.
    obsolete: Vec<PathBuf>,
}

impl Bodies {
    /// For every message key of `set`: notes the body file its stored value
    /// points to, if any; writes the body of its new value, if large, under a
    /// new generation (hard-linking bodies identical to one already written
    /// for the same message id in this group) and appends the marker. Then
    /// fsyncs the directory once.
    fn place(
        &mut self,
        set: &mut WriteSet,
        journal: &impl Journal,
        large: &LargeDir,
    ) -> Result<(), StorageError> {
        let mut by_id: HashMap<MessageId, (usize, Bytes)> = HashMap::new();
        for (key, value) in set.iter_mut() {
            let Ok(Key::Message { queue, id }) = Key::decode(key) else {
                continue;
            };
            let old = match journal.get(key)? {
                Some(stored) => stored_marker(key, &stored),
                None => None,
            };
            if let Some(old) = &old {
                self.obsolete.push(large.path(queue, id, old.generation));
            }
            let Some(body) = value.as_mut().and_then(|v| v.large.take()) else {
                continue;
            };
            let generation = old.map_or(0, |old| old.generation.wrapping_add(1));
            let path = large.path(queue, id, generation);
            match by_id.get(&id) {
                Some((first, first_body)) if same_body(first_body, &body) => large
                    .link(&self.written[*first], &path)
                    .map_err(|e| StorageError::io("linking a large-message body", e))?,
                _ => {
                    large
                        .write(&path, &body)
                        .map_err(|e| StorageError::io("writing a large-message body", e))?;
                    by_id.insert(id, (self.written.len(), body.clone()));
                }
            }
            self.written.push(path);
            let marker = LargeBody {
                len: body.len() as u64,
                generation,
            };
            if let Some(value) = value {
                value.inline.extend(marker.field_bytes());
            }
        }
        if !self.written.is_empty() {
            large.sync().map_err(|e| StorageError::io(DIR_SYNC, e))?;
        }
        Ok(())
    }

    /// Deletes the files written for a group that failed before its batch.
    fn discard(&mut self, large: &LargeDir) {
        for path in self.written.drain(..) {
            large.remove(&path);
        }
    }
}

/// The large-body marker of a stored message value. A value that does not
/// decode is treated as having none (with a warning): refusing would make the
/// key impossible to remove or replace, and at worst its file is left for the
/// sweep to keep.
fn stored_marker(key: &[u8], value: &[u8]) -> Option<LargeBody> {
    match <MarkerView as prost::Message>::decode(value) {
        Ok(view) => view.large,
        Err(e) => {
            tracing::warn!(key = %keys::hex(key), error = %e, "stored message does not decode; any body file it has is left in place");
            None
        }
    }
}
