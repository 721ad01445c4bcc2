//! The committer: the single thread that writes, and the only place that
//! decides when to sync.
//!
//! A durable commit costs one `fdatasync` of the journal, whatever its size.
//! Committing each request on its own therefore caps throughput at the disk's
//! sync rate (a few thousand a second on the project's virtio disk, a few
//! hundred when it is busy) however many producers there are. Instead one
//! dedicated std thread owns all writes:
//!
//! 1. [`Committer::submit`] sends the staged request and a oneshot sender over
//!    an unbounded channel and returns at once: the caller's thread never
//!    blocks, it awaits the [`Commit`].
//! 2. The committer blocks for the first request, then drains whatever else is
//!    already queued, up to [`MAX_GROUP_REQUESTS`] requests or
//!    [`MAX_GROUP_BYTES`] bytes. A group made only of patient requests
//!    ([`crate::Store::commit_patient`]) first waits up to [`PATIENCE`] for
//!    one more ([`gather`]).
//! 3. It folds the group into one [`WriteSet`], writes and syncs the files of
//!    its large bodies and fsyncs `large/` once ([`crate::large`]), appends
//!    the set as one record to the journal ([`crate::journal`], which starts
//!    writing it to the disk), merges the set into the memtable while the
//!    disk works (it reaches the kv once its table is frozen, at the end
//!    of the segment or at the table's size bound, [`crate::checkpoint`]),
//!    `fdatasync`s the journal once, unlinks the body files the group made
//!    obsolete, and answers every waiter with the same result. Merging
//!    before the sync takes it off the path from the sync to the answers;
//!    the group is readable a sync early, which no reader can tell apart
//!    from reading just after the sync, except after a failed sync (below).
//!
//! While it syncs, new requests queue up and ride the next group, so the
//! number of syncs adapts to the load: one producer pays one sync per commit,
//! N concurrent producers share them. `docs/storage.md` has the figures.
//!
//! Failure handling: if writing a body file or the journal record fails, every
//! waiter of that group gets the error, nothing of the group is visible and
//! the group's new body files are deleted again (the next record overwrites
//! the failed one). If the *sync* fails, the kernel may already have dropped
//! the dirty pages (the "fsyncgate" lesson), so a later successful sync would
//! prove nothing: the committer stays failed and answers every later request
//! with that error. The failed group stays readable until a restart, which
//! finds its record in the journal or not: either may be what the disk holds. The same holds for a failed fsync of `large/` and a
//! failed checkpoint (the journal could no longer be reused safely). After a
//! failed journal sync no body file is deleted, old or new: either may be
//! what the records say after a restart, and the sweep at open sorts it out.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::checkpoint::{Checkpointer, Health, Job};
use crate::error::StorageError;
use crate::journal::Journal;
use crate::keys::Key;
use crate::kv::OrderedKv;
use crate::large::{LargeBody, LargeDir, same_body, stored_marker};
use crate::memtable::Memtable;
use crate::write_set::{Staged, WriteSet, stage};
use crate::{Commit, MessageId, Op};

/// Most requests folded into one group.
pub(crate) const MAX_GROUP_REQUESTS: usize = 4096;
/// A group stops taking requests once it holds this many encoded bytes
/// (large bodies included).
pub(crate) const MAX_GROUP_BYTES: usize = 16 << 20;
/// How long a group of patient requests waits for company. A commit's
/// deliveries and its answer to the producer go out together, so the
/// consumer's acks reach the broker just before the producer's next messages;
/// an ack synced alone makes those wait a whole sync behind it. A millisecond
/// covers that gap on this project's machines.
pub(crate) const PATIENCE: Duration = Duration::from_millis(1);

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
    reply: Reply,
    /// May wait for company ([`PATIENCE`]).
    patient: bool,
}

/// Who waits for a request, and for what.
enum Reply {
    /// A commit: answered once durable.
    Commit(oneshot::Sender<Result<(), StorageError>>),
    /// [`Committer::drain`]: answered once the kv holds everything
    /// committed before (blocking, hence a std channel).
    Drain(mpsc::Sender<Result<(), StorageError>>),
}

/// Handle to the committer thread.
pub(crate) struct Committer {
    /// `None` once closed.
    requests: Mutex<Option<Sender<Request>>>,
    thread: Mutex<Option<JoinHandle<Result<(), StorageError>>>>,
    counters: Arc<Counters>,
    health: Arc<Health>,
}

impl Committer {
    /// Starts the committer thread, which owns `journal` from now on, applies
    /// to `kv`, writes large bodies to `large` and hands finished journal
    /// segments to a checkpointer of the store in `store`.
    pub(crate) fn start<K: OrderedKv>(
        kv: K,
        journal: Journal,
        memtable: Arc<Memtable<K::Value>>,
        large: Arc<LargeDir>,
        store: PathBuf,
    ) -> Result<Committer, StorageError> {
        let (tx, rx) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let thread_counters = Arc::clone(&counters);
        let health = Arc::new(Health::default());
        let checkpointer = Checkpointer::start(
            kv.clone(),
            Arc::clone(&memtable),
            store,
            journal.segment_bytes(),
            Arc::clone(&health),
        )?;
        let thread_health = Arc::clone(&health);
        let thread = std::thread::Builder::new()
            .name("rebound-commit".into())
            .spawn(move || {
                let committer = Thread {
                    kv,
                    journal,
                    memtable,
                    large,
                    checkpointer,
                    health: thread_health,
                    counters: thread_counters,
                };
                committer.run(rx)
            })
            .map_err(|e| StorageError::io("spawning the committer thread", e))?;
        Ok(Committer {
            requests: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            counters,
            health,
        })
    }

    /// Queues `ops` for the next group; the returned future resolves once
    /// they are durable. `patient`: see [`crate::Store::commit_patient`].
    pub(crate) fn submit(&self, ops: Vec<Op>, patient: bool) -> Commit {
        let staged = match stage(ops) {
            Ok(staged) => staged,
            Err(e) => return Commit::ready(Err(e)),
        };
        let (reply, done) = oneshot::channel();
        match self.send(Request {
            staged,
            reply: Reply::Commit(reply),
            patient,
        }) {
            Ok(()) => Commit::from(done),
            Err(e) => Commit::ready(Err(e)),
        }
    }

    /// Blocks until the kv itself holds every commit made before, so that
    /// reading the kv alone sees them all (for [`crate::Store::recover`]).
    pub(crate) fn drain(&self) -> Result<(), StorageError> {
        let (reply, done) = mpsc::channel();
        self.send(Request {
            staged: stage(Vec::new())?,
            reply: Reply::Drain(reply),
            patient: false,
        })?;
        // A dropped sender means the checkpointer stopped on a failure.
        done.recv().unwrap_or(Err(StorageError::Closed))
    }

    fn send(&self, request: Request) -> Result<(), StorageError> {
        let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        match requests.as_ref().map(|tx| tx.send(request)) {
            Some(Ok(())) => Ok(()),
            // Closed, or the thread is gone.
            Some(Err(_)) | None => Err(StorageError::Closed),
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

    /// Whether the store writes: see [`crate::Store::health`].
    pub(crate) fn health(&self) -> crate::StoreHealth {
        self.health.state()
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

/// What the committer thread owns.
struct Thread<K: OrderedKv> {
    kv: K,
    journal: Journal,
    memtable: Arc<Memtable<K::Value>>,
    large: Arc<LargeDir>,
    checkpointer: Checkpointer<K::Value>,
    health: Arc<Health>,
    counters: Arc<Counters>,
}

impl<K: OrderedKv> Thread<K> {
    /// The loop; after the last request, has everything applied and
    /// checkpointed and removes the journal (so the next open has nothing to
    /// replay), returning the result of that.
    fn run(mut self, requests: Receiver<Request>) -> Result<(), StorageError> {
        while let Ok(first) = requests.recv() {
            let group = gather(first, &requests, PATIENCE);
            let ops: usize = group.iter().map(|r| r.staged.ops).sum();
            let (writes, replies): (Vec<_>, Vec<_>) = group.into_iter().map(|r| (r.staged, r.reply)).unzip();
            let result = match self.health.failure() {
                Some(e) => Err(e.clone()),
                None if ops == 0 => Ok(()),
                None => self.write_group(writes),
            };
            if result.is_ok() {
                let counters = &self.counters;
                let commits = replies.iter().filter(|r| matches!(r, Reply::Commit(_))).count();
                counters.commits.fetch_add(commits as u64, Ordering::Relaxed);
                counters.ops.fetch_add(ops as u64, Ordering::Relaxed);
            }
            let mut drains = Vec::new();
            for reply in replies {
                match reply {
                    // The caller may have stopped waiting; its commit is durable anyway.
                    Reply::Commit(reply) => {
                        let _ = reply.send(result.clone());
                    }
                    Reply::Drain(reply) => drains.push(reply),
                }
            }
            if !drains.is_empty() {
                self.checkpointer.submit(self.frozen(drains, false));
            }
        }
        let last = self.frozen(Vec::new(), true);
        let Thread {
            journal,
            checkpointer,
            health,
            ..
        } = self;
        checkpointer.submit(last);
        checkpointer.finish();
        if let Some(e) = health.failure() {
            return Err(e.clone());
        }
        journal.remove()
    }

    /// The active table frozen, as a job that reaches the last record
    /// written, for `done` to wait on; `last` when the store closes.
    fn frozen(&self, done: Vec<mpsc::Sender<Result<(), StorageError>>>, last: bool) -> Job<K::Value> {
        Job {
            table: self.memtable.freeze(),
            seq: self.journal.last_seq(),
            segment: None,
            done,
            last,
        }
    }

    /// Makes one group durable in the journal and readable from the
    /// memtable, large bodies first, obsolete body files last (see the module
    /// docs for the order). A fatal error is recorded in `health`.
    fn write_group(&mut self, group: Vec<Staged>) -> Result<(), StorageError> {
        let mut existing = |prefix: &[u8]| {
            self.memtable
                .keys_with_prefix(prefix, || self.kv.keys_with_prefix(prefix))
        };
        let mut set = WriteSet::fold(group, &mut existing)?;
        let mut bodies = Bodies::default();
        let marker = |key: &[u8]| match self.memtable.get(key) {
            Some(value) => Ok(value.and_then(|v| stored_marker(key, v.as_ref()))),
            None => self.kv.marker(key),
        };
        if let Err(e) = bodies.place(&mut set, marker, &self.large) {
            bodies.discard(&self.large);
            if let StorageError::Io {
                context: DIR_SYNC, ..
            } = e
            {
                tracing::error!(error = %e, "fsync of the large-message directory failed; the store refuses all further commits");
                self.health.fail(e.clone());
            }
            return Err(e);
        }
        if let Err(e) = self.journal.append(set.writes()) {
            bodies.discard(&self.large);
            return Err(e);
        }
        // The tables a segment's records went to are frozen before the first
        // record of the next segment joins the active one (the old segment's
        // records were synced by the groups that wrote them).
        if let Some(segment) = self.journal.take_completed() {
            self.checkpointer.submit(Job {
                table: self.memtable.freeze(),
                seq: segment.last_seq,
                segment: Some(segment),
                done: Vec::new(),
                last: false,
            });
        }
        let full = self
            .memtable
            .merge(set.into_writes().map(|(k, v)| (k, v.map(K::Value::from))));
        self.journal.sync().inspect_err(|e| {
            tracing::error!(error = %e, "journal sync failed; the store refuses all further commits");
            self.health.fail(e.clone());
        })?;
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        // A full table goes to the checkpointer only once durable.
        if full {
            self.checkpointer.submit(self.frozen(Vec::new(), false));
        }
        for path in &bodies.obsolete {
            self.large.remove(path);
        }
        Ok(())
    }
}

const DIR_SYNC: &str = "fsync of the large-message directory";

/// A group: `first` and what is queued behind it, within the group bounds.
/// Only a group made of patient requests first waits, up to `patience`, for
/// one more request (any: the first to come ends the wait), and then takes
/// what queued meanwhile.
fn gather(first: Request, requests: &Receiver<Request>, patience: Duration) -> Vec<Request> {
    let mut bytes = first.staged.bytes;
    let mut group = vec![first];
    let mut waited = false;
    loop {
        while group.len() < MAX_GROUP_REQUESTS && bytes < MAX_GROUP_BYTES {
            let Ok(next) = requests.try_recv() else { break };
            bytes += next.staged.bytes;
            group.push(next);
        }
        let full = group.len() >= MAX_GROUP_REQUESTS || bytes >= MAX_GROUP_BYTES;
        if waited || full || !group.iter().all(|r| r.patient) {
            return group;
        }
        waited = true;
        // Timed out, or closed (the group then goes at once).
        let Ok(next) = requests.recv_timeout(patience) else {
            return group;
        };
        bytes += next.staged.bytes;
        group.push(next);
    }
}

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
    /// points to, if any (looked up only while `large` may hold one); writes
    /// the body of its new value, if large, under a new generation
    /// (hard-linking bodies identical to one already written for the same
    /// message id in this group) and appends the marker. Then fsyncs the
    /// directory once.
    fn place(
        &mut self,
        set: &mut WriteSet,
        marker: impl Fn(&[u8]) -> Result<Option<LargeBody>, StorageError>,
        large: &LargeDir,
    ) -> Result<(), StorageError> {
        let mut by_id: HashMap<MessageId, (usize, Bytes)> = HashMap::new();
        // Without body files no stored record points to one: most groups skip
        // a lookup per message.
        let stored_bodies = large.holds_bodies();
        for (key, value) in set.iter_mut() {
            let Ok(Key::Message { queue, id }) = Key::decode(key) else {
                continue;
            };
            let old = if stored_bodies { marker(key)? } else { None };
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn request(patient: bool) -> Request {
        Request {
            staged: stage(Vec::new()).unwrap(),
            reply: Reply::Commit(oneshot::channel().0),
            patient,
        }
    }

    /// Longer than any scheduling delay: a test that waits it out fails.
    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn a_group_with_an_impatient_request_goes_at_once() {
        let (tx, rx) = mpsc::channel();
        tx.send(request(true)).unwrap();
        let started = Instant::now();
        let group = gather(request(false), &rx, LONG);
        assert_eq!(group.len(), 2);
        let group = gather(request(false), &rx, LONG);
        assert_eq!(group.len(), 1);
        assert!(started.elapsed() < LONG / 2);
    }

    #[test]
    fn patient_requests_wait_for_the_next_one_and_no_longer() {
        let (tx, rx) = mpsc::channel();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.send(request(false)).unwrap();
            tx.send(request(true)).unwrap();
            tx
        });
        let started = Instant::now();
        let group = gather(request(true), &rx, LONG);
        assert!(group.len() >= 2, "the request that came ends the wait and joins");
        assert!(!group[1].patient);
        assert!(started.elapsed() < LONG / 2);
        let _tx = sender.join().unwrap();
    }

    #[test]
    fn a_patient_request_alone_waits_its_patience_then_goes() {
        let (tx, rx) = mpsc::channel::<Request>();
        let patience = Duration::from_millis(20);
        let started = Instant::now();
        assert_eq!(gather(request(true), &rx, patience).len(), 1);
        assert!(started.elapsed() >= patience);
        // Closed: nothing more can come, so no wait.
        drop(tx);
        let started = Instant::now();
        assert_eq!(gather(request(true), &rx, LONG).len(), 1);
        assert!(started.elapsed() < LONG / 2);
    }
}
