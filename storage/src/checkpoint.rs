//! The checkpointer: the thread that moves journaled writes into the kv
//! and makes the kv durable now and then, so that journal segments can be
//! reused.
//!
//! Every commit is durable in the journal and readable from the memtable
//! before the kv sees it ([`crate::journal`], [`crate::memtable`]). When
//! the committer moves to a new journal segment, or the memtable's active
//! table reaches its size bound, it freezes the table and hands it over here.
//! The checkpointer applies the frozen table to the kv, which lets it
//! leave memory. After a table that ends a segment it also records
//! "everything up to seq N is in the kv" in the kv itself and makes
//! the kv durable (for sled: a `flush()` and an `fdatasync` of its log),
//! which covers that segment and all before it; then the segment becomes the
//! spare (or is deleted, if there is one). A table frozen at its bound needs
//! no checkpoint of its own: its records stay in the journal, which is
//! replayed from the recorded seq on when the store is opened.
//!
//! # One table behind
//!
//! A table is applied only once the next one is frozen too (or someone waits
//! for it: [`Job::done`], a drain or the close), and without the keys the
//! next table writes again. A message that lives a little longer than a
//! table, say one redelivered after a delay and then acked or
//! dead-lettered, therefore never reaches the kv either: in the `poison`
//! benchmark that kept some 1,500 puts (10–15 ms of sled's CPU and 3 ms of
//! its IO, each checkpoint) out of sled and halved the good messages' p99.
//! Leaving a key out of table N is safe because no checkpoint covers N + 1
//! before N + 1 is applied: after a crash the key's later value is replayed
//! from the journal. The price is one more table in memory.
//!
//! This runs beside the committer, so a checkpoint never stalls a commit. A
//! step of a checkpoint that fails on an error that clears by itself (out of
//! file handles, or of disk space for a write: [`StorageError::is_transient`])
//! is tried again, with a growing pause, until it goes through: each step can
//! be repeated (a table's writes are applied again whole; a run file that
//! could not be written is deleted and written anew), and the tables stay
//! in the journal and the memtable meanwhile. Commits go on until
//! [`MAX_QUEUED_JOBS`] tables wait, then wait too; [`Health`] tells the store's
//! owner (the broker reports itself not ready). Any other failed checkpoint is
//! fatal to the store, like a failed journal sync: the committer refuses
//! every later commit, since the journal could no longer be reused safely.
//!
//! # Deletes the kv never needs
//!
//! In a queue that keeps up, a message is put and acked within one table:
//! the frozen table holds only the deletes of its message and state keys,
//! which the kv never had. Applying them is no change but costs a lookup
//! each (about 15,000 per 8 MiB segment in the `durable` benchmark, 4–8 ms of
//! CPU, enough to stall the broker's other threads on a 2-core machine for a
//! few milliseconds). So the checkpointer keeps, per queue, the highest
//! message id under which the kv can hold a message or state key
//! ([`Highs`]), and drops deletes above it. Within one table every key occurs
//! once, so its deletes can go before its puts, which raise the mark.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::StorageError;
use crate::journal::{self, Completed};
use crate::keys::Key;
use crate::kv::OrderedKv;
use crate::memtable::{Memtable, Table};
use crate::{MessageId, QueueId};

/// One frozen memtable to apply, and the journal position it reaches.
pub(crate) struct Job<V> {
    pub(crate) table: Arc<Table<V>>,
    /// The seq of the last record the table (and every table before) holds.
    pub(crate) seq: u64,
    /// The segment this checkpoint frees, if any.
    pub(crate) segment: Option<Completed>,
    /// Who waits for the checkpoint.
    pub(crate) done: Vec<mpsc::Sender<Result<(), StorageError>>>,
    /// Whether this is the store's last job (it closes).
    pub(crate) last: bool,
}

impl<V> Job<V> {
    /// Whether the job may be kept back for the next one: nobody waits for it
    /// and it is not the last.
    fn can_wait(&self) -> bool {
        self.done.is_empty() && !self.last
    }

    /// Whether the kv must be made durable once the job is applied: it
    /// frees a segment, someone waits for it or the store closes. A table
    /// frozen at its size bound alone only needs to leave memory: its
    /// records stay in the journal until the checkpoint at its segment's end.
    fn needs_checkpoint(&self) -> bool {
        self.segment.is_some() || !self.done.is_empty() || self.last
    }
}

/// Frozen tables waiting for the checkpointer before the committer waits too:
/// bounds the memtable's memory (each table at most a segment's writes or
/// about [`crate::SledOptions::memtable_table_bytes`]) when the kv cannot
/// keep up.
const MAX_QUEUED_JOBS: usize = 4;

/// How long commits wait for the checkpointer before the log says so.
const STALL_WARNING: Duration = Duration::from_secs(10);

/// The first pause before a checkpoint step that failed on a transient error
/// is tried again; each later pause doubles, up to [`RETRY_AT_MOST`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_AT_MOST: Duration = Duration::from_secs(5);
/// Tries a step gets once the store is closing: a disk that stays full must
/// not hold up the shutdown for ever (the journal keeps what was committed).
const CLOSING_TRIES: u32 = 10;
/// At most one WARN line about a checkpoint being retried per this long.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// How the store's writing stands, shared by the committer, the
/// checkpointer and the store's owner.
#[derive(Default)]
pub(crate) struct Health {
    /// The first fatal error: every later commit is refused.
    failure: OnceLock<StorageError>,
    /// The transient error a checkpoint step is being tried again after.
    retrying: Mutex<Option<StorageError>>,
    /// The store is closing: a step failing on a transient error gives up
    /// after [`CLOSING_TRIES`].
    closing: AtomicBool,
}

impl Health {
    /// The fatal error, if there was one.
    pub(crate) fn failure(&self) -> Option<&StorageError> {
        self.failure.get()
    }

    /// Records a fatal error (the first one stays).
    pub(crate) fn fail(&self, error: StorageError) {
        let _ = self.failure.set(error);
    }

    /// What the store's owner sees.
    pub(crate) fn state(&self) -> crate::StoreHealth {
        if let Some(failure) = self.failure.get() {
            return crate::StoreHealth::Failed(failure.clone());
        }
        match &*self.retrying.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(error) => crate::StoreHealth::Retrying(error.clone()),
            None => crate::StoreHealth::Healthy,
        }
    }

    fn set_retrying(&self, error: Option<StorageError>) {
        *self.retrying.lock().unwrap_or_else(PoisonError::into_inner) = error;
    }

    /// Runs `step` until it succeeds, trying it again after a transient
    /// error (see the module docs); returns the error it gives up on.
    fn retry(&self, what: &str, step: impl FnMut() -> Result<(), StorageError>) -> Result<(), StorageError> {
        self.retry_pausing(what, RETRY_FIRST, step)
    }

    /// [`Health::retry`], pausing `first` after the first failure.
    fn retry_pausing(
        &self,
        what: &str,
        first: Duration,
        mut step: impl FnMut() -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let mut pause = first;
        let mut failed = 0u32;
        let mut warned: Option<Instant> = None;
        loop {
            let error = match step() {
                Ok(()) => {
                    if failed > 0 {
                        self.set_retrying(None);
                        tracing::warn!(
                            failed,
                            "{what} went through after {failed} failed tries; the store writes again"
                        );
                    }
                    return Ok(());
                }
                Err(error) => error,
            };
            let closing = self.closing.load(Ordering::Relaxed);
            if !error.is_transient() || (closing && failed >= CLOSING_TRIES) {
                self.set_retrying(None);
                return Err(error);
            }
            failed += 1;
            if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                tracing::error!(%error, failed, "{what} failed; trying again until it goes through (commits wait once 4 tables do)");
                warned = Some(Instant::now());
            }
            self.set_retrying(Some(error));
            std::thread::sleep(pause);
            pause = (pause * 2).min(RETRY_AT_MOST);
        }
    }
}

/// Handle to the checkpointer thread.
pub(crate) struct Checkpointer<V> {
    jobs: SyncSender<Job<V>>,
    thread: JoinHandle<()>,
    health: Arc<Health>,
}

impl<V: Clone + Send + Sync + 'static> Checkpointer<V> {
    /// Starts the thread for the store in `store`; it first makes a spare
    /// segment if there is none.
    pub(crate) fn start<K: OrderedKv<Value = V>>(
        kv: K,
        memtable: Arc<Memtable<V>>,
        store: PathBuf,
        segment_bytes: u64,
        health: Arc<Health>,
    ) -> Result<Checkpointer<V>, StorageError> {
        let thread_health = Arc::clone(&health);
        let (jobs, queued) = mpsc::sync_channel::<Job<V>>(MAX_QUEUED_JOBS);
        let thread = std::thread::Builder::new()
            .name("rebound-checkpoint".into())
            .spawn(move || {
                spare(&store, segment_bytes);
                let mut highs = Highs::default();
                // The newest job, kept back until the next one comes.
                let mut held: Option<Job<V>> = None;
                while let Ok(first) = queued.recv() {
                    // One checkpoint covers every job handed over meanwhile.
                    let mut jobs: Vec<Job<V>> = held.take().into_iter().chain([first]).collect();
                    jobs.extend(queued.try_iter());
                    if jobs.last().is_some_and(Job::can_wait) {
                        held = jobs.pop();
                    }
                    if jobs.is_empty() {
                        continue;
                    }
                    let next = held.as_ref().map(|job| &*job.table);
                    let started = Instant::now();
                    let result = checkpoint(&kv, &memtable, &mut highs, &jobs, next, &thread_health);
                    tracing::debug!(
                        tables = jobs.len(),
                        writes = jobs.iter().map(|j| j.table.len()).sum::<usize>(),
                        ms = started.elapsed().as_millis() as u64,
                        "checkpointer applied tables"
                    );
                    for job in &jobs {
                        job.done.iter().for_each(|done| drop(done.send(result.clone())));
                    }
                    if let Err(e) = result {
                        tracing::error!(error = %e, "checkpoint failed; the store refuses all further commits");
                        thread_health.fail(e);
                        return;
                    }
                    for segment in jobs.into_iter().filter_map(|j| j.segment) {
                        if let Err(e) = journal::recycle(&store, &segment.path) {
                            tracing::warn!(error = %e, "could not recycle a journal segment");
                        }
                    }
                    spare(&store, segment_bytes);
                }
            })
            .map_err(|e| StorageError::io("spawning the checkpointer thread", e))?;
        Ok(Checkpointer { jobs, thread, health })
    }

    /// Queues a frozen table (the committer froze tables in this order);
    /// waits while [`MAX_QUEUED_JOBS`] are waiting, and says so in the log
    /// if that lasts (a checkpoint that never ends stalls every commit).
    pub(crate) fn submit(&self, mut job: Job<V>) {
        let mut waiting: Option<Instant> = None;
        let mut warned = false;
        loop {
            job = match self.jobs.try_send(job) {
                Err(TrySendError::Full(job)) => job,
                // If the thread is gone it recorded why in the failure.
                Ok(()) | Err(TrySendError::Disconnected(_)) => break,
            };
            let since = *waiting.get_or_insert_with(Instant::now);
            if !warned && since.elapsed() > STALL_WARNING {
                tracing::error!(
                    waited_s = since.elapsed().as_secs(),
                    "commits are waiting for a checkpoint that does not finish"
                );
                warned = true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(since) = waiting.filter(|_| warned) {
            tracing::warn!(
                waited_s = since.elapsed().as_secs(),
                "the checkpoint finished; commits go on"
            );
        }
    }

    /// Lets the thread finish the checkpoints queued and waits for it.
    pub(crate) fn finish(self) {
        self.health.closing.store(true, Ordering::Relaxed);
        drop(self.jobs);
        if self.thread.join().is_err() {
            tracing::error!("the checkpointer thread panicked");
        }
    }
}

/// Applies the tables in order, each leaving the read path once applied,
/// then checkpoints at the last one's seq if a job needs it. `next` is the
/// table that follows the last one, if it is already frozen. Each step is
/// tried again while it fails on a transient error (see the module docs):
/// a table leaves the read path only once it is applied whole.
fn checkpoint<K: OrderedKv>(
    kv: &K,
    memtable: &Memtable<K::Value>,
    highs: &mut Highs,
    jobs: &[Job<K::Value>],
    next: Option<&Table<K::Value>>,
    health: &Health,
) -> Result<(), StorageError> {
    for (i, job) in jobs.iter().enumerate() {
        let next = jobs.get(i + 1).map(|j| &*j.table).or(next);
        health.retry("applying a table to the store", || {
            apply(kv, highs, &job.table, next)
        })?;
        memtable.release();
    }
    match jobs.last() {
        Some(last) if jobs.iter().any(Job::needs_checkpoint) => {
            health.retry("a checkpoint", || kv.checkpoint(last.seq))
        }
        _ => Ok(()),
    }
}

/// Applies one table, leaving out the keys `next` writes again: the deletes
/// the kv may need, then the puts.
fn apply<K: OrderedKv>(
    kv: &K,
    highs: &mut Highs,
    table: &Table<K::Value>,
    next: Option<&Table<K::Value>>,
) -> Result<(), StorageError> {
    // The puts (or the deletes) `next` does not write again; each pass looks
    // up in `next` only the keys it applies.
    let current = |puts: bool| {
        table
            .iter()
            .filter(move |(_, v)| v.is_some() == puts)
            .filter(move |(key, _)| next.is_none_or(|next| !next.contains_key(*key)))
    };
    let mut deletes = Vec::new();
    for (key, _) in current(false) {
        if highs.may_hold(kv, key)? {
            deletes.push((key.clone(), None));
        }
    }
    kv.apply(deletes.into_iter())?;
    for (key, _) in current(true) {
        highs.raise(kv, key)?;
    }
    kv.apply(current(true).map(|(k, v)| (k.clone(), v.clone())))
}

/// Per queue, a message id that no message or state key in the kv
/// exceeds; learned from the kv the first time a queue is seen, then
/// raised by every put the checkpointer applies (the only writer of the
/// kv once the store is open).
#[derive(Default)]
struct Highs(HashMap<QueueId, MessageId>);

impl Highs {
    /// Whether the kv may hold `key`: false only for a message or state
    /// key above its queue's mark.
    fn may_hold<K: OrderedKv>(&mut self, kv: &K, key: &[u8]) -> Result<bool, StorageError> {
        match Key::decode(key) {
            Ok(Key::Message { queue, id } | Key::State { queue, id }) => Ok(id <= self.high(kv, queue)?),
            _ => Ok(true),
        }
    }

    /// Records that a put of `key` is about to reach the kv.
    fn raise<K: OrderedKv>(&mut self, kv: &K, key: &[u8]) -> Result<(), StorageError> {
        if let Ok(Key::Message { queue, id } | Key::State { queue, id }) = Key::decode(key) {
            let high = self.high(kv, queue)?;
            self.0.insert(queue, high.max(id));
        }
        Ok(())
    }

    fn high<K: OrderedKv>(&mut self, kv: &K, queue: QueueId) -> Result<MessageId, StorageError> {
        if let Some(high) = self.0.get(&queue) {
            return Ok(*high);
        }
        let high = kv.highest_id(queue)?.unwrap_or(0);
        self.0.insert(queue, high);
        Ok(high)
    }
}

/// A missing spare only makes the next segment slower to sync into.
fn spare(store: &std::path::Path, segment_bytes: u64) {
    if let Err(e) = journal::prepare_spare(store, segment_bytes) {
        tracing::warn!(error = %e, "could not prepare a spare journal segment");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use proptest::prelude::*;

    use super::*;
    use crate::keys;
    use crate::large::LargeBody;

    /// A kv in a map, counting the deletes it is asked for.
    #[derive(Clone, Default)]
    struct MapKv {
        map: Arc<Mutex<BTreeMap<Vec<u8>, Vec<u8>>>>,
        deletes: Arc<Mutex<usize>>,
        checkpoints: Arc<Mutex<Vec<u64>>>,
    }

    impl OrderedKv for MapKv {
        type Value = Vec<u8>;

        fn keys_with_prefix(&self, prefix: &[u8]) -> Result<Vec<Vec<u8>>, StorageError> {
            let map = self.map.lock().unwrap();
            Ok(map.keys().filter(|k| k.starts_with(prefix)).cloned().collect())
        }

        fn marker(&self, _key: &[u8]) -> Result<Option<LargeBody>, StorageError> {
            Ok(None)
        }

        fn highest_id(&self, queue: QueueId) -> Result<Option<MessageId>, StorageError> {
            let mut keys = self.keys_with_prefix(&keys::queue_messages(queue))?;
            keys.extend(self.keys_with_prefix(&keys::queue_states(queue))?);
            Ok(keys
                .iter()
                .filter_map(|k| match Key::decode(k) {
                    Ok(Key::Message { id, .. } | Key::State { id, .. }) => Some(id),
                    _ => None,
                })
                .max())
        }

        fn apply(
            &self,
            writes: impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)>,
        ) -> Result<(), StorageError> {
            let mut map = self.map.lock().unwrap();
            for (key, value) in writes {
                match value {
                    Some(value) => map.insert(key, value),
                    None => {
                        *self.deletes.lock().unwrap() += 1;
                        map.remove(&key)
                    }
                };
            }
            Ok(())
        }

        fn checkpoint(&self, seq: u64) -> Result<(), StorageError> {
            self.checkpoints.lock().unwrap().push(seq);
            Ok(())
        }
    }

    /// A message or state key of queue 1 or 2, or a queue record key.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (1..3u32, 0..40u64).prop_map(|(q, id)| keys::message(q, id).to_vec()),
            (1..3u32, 0..40u64).prop_map(|(q, id)| keys::state(q, id).to_vec()),
            (1..3u32).prop_map(|q| keys::queue(q).to_vec()),
        ]
    }

    fn table() -> impl Strategy<Value = Table<Vec<u8>>> {
        prop::collection::btree_map(key(), prop::option::of(Just(vec![1u8])), 0..30)
    }

    proptest! {
        /// Skipping deletes and leaving out what the next table writes again
        /// never changes what the kv ends up holding, whatever it held
        /// before; in between, only the keys of the next table may differ.
        #[test]
        fn skipped_writes_change_nothing(
            before in prop::collection::btree_map(key(), Just(vec![0u8]), 0..20),
            tables in prop::collection::vec(table(), 1..6),
        ) {
            let kv = MapKv::default();
            *kv.map.lock().unwrap() = before.clone();
            let mut expected = before;
            let mut highs = Highs::default();
            for (i, table) in tables.iter().enumerate() {
                let next = tables.get(i + 1);
                apply(&kv, &mut highs, table, next).unwrap();
                for (k, v) in table {
                    match v {
                        Some(v) => expected.insert(k.clone(), v.clone()),
                        None => expected.remove(k),
                    };
                }
                let held = kv.map.lock().unwrap().clone();
                let outside = |map: &BTreeMap<Vec<u8>, Vec<u8>>| -> BTreeMap<Vec<u8>, Vec<u8>> {
                    map.iter()
                        .filter(|(k, _)| next.is_none_or(|n| !n.contains_key(*k)))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                };
                prop_assert_eq!(outside(&held), outside(&expected));
            }
            prop_assert_eq!(&*kv.map.lock().unwrap(), &expected);
        }
    }

    #[test]
    fn a_message_acked_in_the_next_table_never_reaches_the_kv() {
        let kv = MapKv::default();
        let mut highs = Highs::default();
        let first = Table::from([
            (keys::message(1, 5).to_vec(), Some(vec![5])),
            (keys::message(1, 6).to_vec(), Some(vec![6])),
        ]);
        let second = Table::from([(keys::message(1, 5).to_vec(), None)]);
        apply(&kv, &mut highs, &first, Some(&second)).unwrap();
        let keys: Vec<_> = kv.map.lock().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            vec![keys::message(1, 6).to_vec()],
            "message 5 never went in"
        );
        apply(&kv, &mut highs, &second, None).unwrap();
        let keys: Vec<_> = kv.map.lock().unwrap().keys().cloned().collect();
        assert_eq!(keys, vec![keys::message(1, 6).to_vec()]);
    }

    #[test]
    fn a_message_put_and_acked_within_a_table_costs_the_kv_nothing() {
        let kv = MapKv::default();
        let mut highs = Highs::default();
        // Message 5 reaches the kv; 6 to 9 are acked within the next table.
        let first = Table::from([(keys::message(1, 5).to_vec(), Some(vec![5]))]);
        apply(&kv, &mut highs, &first, None).unwrap();
        let mut second = Table::new();
        for id in 5..10 {
            second.insert(keys::message(1, id).to_vec(), None);
            second.insert(keys::state(1, id).to_vec(), None);
        }
        apply(&kv, &mut highs, &second, None).unwrap();
        assert!(kv.map.lock().unwrap().is_empty());
        // Only message 5's two keys could be in the kv.
        assert_eq!(*kv.deletes.lock().unwrap(), 2);
    }

    /// Tables frozen at their size bound (no segment, nobody waiting) reach
    /// the kv in order and leave the memtable, but only a job that frees
    /// a segment, is waited for or is the last makes the kv durable.
    #[test]
    fn a_step_failing_on_a_transient_error_is_tried_again_until_it_goes_through() {
        let health = Health::default();
        let out_of_handles = || {
            StorageError::io(
                "writing a run file",
                std::io::Error::from_raw_os_error(libc::EMFILE),
            )
        };
        let mut tries = 0;
        let result = health.retry_pausing("a test step", Duration::from_millis(1), || {
            tries += 1;
            if tries < 3 {
                // While it is tried again, the store's owner hears so.
                assert!(tries == 1 || matches!(health.state(), crate::StoreHealth::Retrying(_)));
                return Err(out_of_handles());
            }
            Ok(())
        });
        assert!(result.is_ok());
        assert_eq!(tries, 3);
        assert!(matches!(health.state(), crate::StoreHealth::Healthy));

        // Any other error ends it at once; the caller makes it fatal.
        let mut tries = 0;
        let result = health.retry_pausing("a test step", Duration::from_millis(1), || {
            tries += 1;
            Err(StorageError::io(
                "syncing a run file",
                std::io::Error::from_raw_os_error(libc::EIO),
            ))
        });
        assert!(result.is_err());
        assert_eq!(tries, 1);

        // A closing store gives up after a few tries.
        health.closing.store(true, Ordering::Relaxed);
        let mut tries = 0;
        let result = health.retry_pausing("a test step", Duration::from_millis(1), || {
            tries += 1;
            Err(out_of_handles())
        });
        assert!(result.is_err());
        assert_eq!(tries, CLOSING_TRIES + 1);
    }

    #[test]
    fn tables_frozen_at_their_bound_are_applied_in_order_and_checkpointed_only_when_needed() {
        let store = tempfile::tempdir().unwrap();
        let segment = journal::dir(store.path()).join("00000000000000000001.wal");
        std::fs::create_dir_all(segment.parent().unwrap()).unwrap();
        std::fs::write(&segment, b"").unwrap();
        let kv = MapKv::default();
        let memtable = Arc::new(Memtable::new(crate::memtable::TABLE_BYTES));
        let checkpointer = Checkpointer::start(
            kv.clone(),
            Arc::clone(&memtable),
            store.path().to_path_buf(),
            4096,
            Arc::default(),
        )
        .unwrap();
        let (k1, k2) = (keys::message(1, 1).to_vec(), keys::message(1, 2).to_vec());
        let job = |seq, writes: Vec<(Vec<u8>, Option<Vec<u8>>)>, segment, last| {
            memtable.merge(writes.into_iter());
            Job {
                table: memtable.freeze(),
                seq,
                segment,
                done: Vec::new(),
                last,
            }
        };
        checkpointer.submit(job(
            1,
            vec![(k1.clone(), Some(vec![1])), (k2.clone(), Some(vec![2]))],
            None,
            false,
        ));
        checkpointer.submit(job(2, vec![(k1.clone(), None)], None, false));
        let completed = Completed {
            path: segment.clone(),
            last_seq: 3,
        };
        checkpointer.submit(job(3, vec![(k1.clone(), Some(vec![3]))], Some(completed), false));
        checkpointer.submit(job(4, vec![(k2.clone(), None)], None, false));
        checkpointer.submit(job(5, Vec::new(), None, true));
        checkpointer.finish();
        assert_eq!(
            *kv.map.lock().unwrap(),
            BTreeMap::from([(k1, vec![3])]),
            "the newest write of every key, whatever the batches"
        );
        assert!(memtable.is_empty());
        assert!(!segment.exists(), "the segment was recycled");
        let checkpoints = kv.checkpoints.lock().unwrap().clone();
        assert_eq!(checkpoints.last(), Some(&5));
        assert!(
            checkpoints.iter().all(|seq| *seq == 3 || *seq == 5),
            "checkpoints only at the segment's job or later, and at the last: {checkpoints:?}"
        );
    }
}
