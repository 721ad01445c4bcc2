//! The checkpointer: the thread that moves journaled writes into the engine
//! and makes the engine durable now and then, so that journal segments can be
//! reused.
//!
//! Every commit is durable in the journal and readable from the memtable
//! before the engine sees it ([`crate::journal`], [`crate::memtable`]). When
//! the committer moves to a new journal segment it freezes the memtable and
//! hands both over here. The checkpointer applies the frozen table to the
//! engine, records "everything up to seq N is in the engine" in the engine
//! itself and makes the engine durable (for sled: a `flush()` and an
//! `fdatasync` of its log), which covers that segment and all before it; then
//! the segment becomes the spare (or is deleted, if there is one). Opening the
//! store replays the journal from the recorded seq on.
//!
//! This runs beside the committer, so a checkpoint never stalls a commit. A
//! failed checkpoint is fatal to the store, like a failed journal sync: the
//! committer refuses every later commit, since the journal could no longer be
//! reused safely.

use std::path::PathBuf;
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use crate::error::StorageError;
use crate::group_commit::Engine;
use crate::journal::{self, Completed};
use crate::memtable::{Memtable, Table};

/// One frozen memtable to apply, and the journal position it reaches.
pub(crate) struct Job<V> {
    pub(crate) table: Arc<Table<V>>,
    /// The seq of the last record the table (and every table before) holds.
    pub(crate) seq: u64,
    /// The segment this checkpoint frees, if any.
    pub(crate) segment: Option<Completed>,
    /// Who waits for the checkpoint.
    pub(crate) done: Vec<mpsc::Sender<Result<(), StorageError>>>,
}

/// Frozen tables waiting for the checkpointer before the committer waits too:
/// bounds the memtable's memory (a segment's worth of writes per table) when
/// the engine cannot keep up.
const MAX_QUEUED_JOBS: usize = 4;

/// The first fatal error of the store, shared by committer and checkpointer.
pub(crate) type Failure = Arc<OnceLock<StorageError>>;

/// Handle to the checkpointer thread.
pub(crate) struct Checkpointer<V> {
    jobs: SyncSender<Job<V>>,
    thread: JoinHandle<()>,
}

impl<V: Clone + Send + Sync + 'static> Checkpointer<V> {
    /// Starts the thread for the store in `store`; it first makes a spare
    /// segment if there is none.
    pub(crate) fn start<E: Engine<Value = V>>(
        engine: E,
        memtable: Arc<Memtable<V>>,
        store: PathBuf,
        segment_bytes: u64,
        failure: Failure,
    ) -> Result<Checkpointer<V>, StorageError> {
        let (jobs, queued) = mpsc::sync_channel::<Job<V>>(MAX_QUEUED_JOBS);
        let thread = std::thread::Builder::new()
            .name("rebound-checkpoint".into())
            .spawn(move || {
                spare(&store, segment_bytes);
                while let Ok(first) = queued.recv() {
                    // One checkpoint covers every job handed over meanwhile.
                    let mut jobs = vec![first];
                    jobs.extend(queued.try_iter());
                    let result = checkpoint(&engine, &memtable, &jobs);
                    for job in &jobs {
                        job.done.iter().for_each(|done| drop(done.send(result.clone())));
                    }
                    if let Err(e) = result {
                        tracing::error!(error = %e, "checkpoint failed; the store refuses all further commits");
                        let _ = failure.set(e);
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
        Ok(Checkpointer { jobs, thread })
    }

    /// Queues a frozen table (the committer froze tables in this order);
    /// blocks while [`MAX_QUEUED_JOBS`] are waiting.
    pub(crate) fn submit(&self, job: Job<V>) {
        // If the thread is gone it recorded why in the failure.
        let _ = self.jobs.send(job);
    }

    /// Lets the thread finish the checkpoints queued and waits for it.
    pub(crate) fn finish(self) {
        drop(self.jobs);
        if self.thread.join().is_err() {
            tracing::error!("the checkpointer thread panicked");
        }
    }
}

/// Applies the tables in order, each leaving the read path once applied,
/// then checkpoints at the last one's seq.
fn checkpoint<E: Engine>(
    engine: &E,
    memtable: &Memtable<E::Value>,
    jobs: &[Job<E::Value>],
) -> Result<(), StorageError> {
    for job in jobs {
        engine.apply(job.table.iter().map(|(k, v)| (k.clone(), v.clone())))?;
        memtable.release();
    }
    engine.checkpoint(jobs.last().map_or(0, |j| j.seq))
}

/// A missing spare only makes the next segment slower to sync into.
fn spare(store: &std::path::Path, segment_bytes: u64) {
    if let Err(e) = journal::prepare_spare(store, segment_bytes) {
        tracing::warn!(error = %e, "could not prepare a spare journal segment");
    }
}
