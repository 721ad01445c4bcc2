//! Runs: where queued messages (the `0x01` message records) live once they
//! leave the memtable, in place of one sled key per message.
//!
//! | file | what |
//! |---|---|
//! | `run.rs` | one run: an immutable file of message records sorted by (queue, id); its format |
//! | `live.rs` | the live ids of one queue in one run: a span, or a roaring bitmap |
//! | `manifest.rs` | which runs exist and which of their messages are live, as of the last checkpoint |
//! | `range.rs` | a range of one queue's records in id order, merged across runs |
//!
//! # Why
//!
//! In sled every queued message cost a tree insert on the way in and a tree
//! delete on the way out, and memory that grew with the backlog (cached
//! nodes, its page table, and most of all the pages its deletes free only
//! through epoch-based reclamation): 420 MiB of RSS and a drain at sled's
//! delete rate for a backlog of 5,000,000 (BENCHMARKS.md, "Deep backlogs").
//! Messages are written once, read back in order and deleted in order, which
//! is what append-only files do best; NATS JetStream's file store and Kafka's
//! logs are built the same way.
//!
//! # How
//!
//! - When the checkpointer applies a memtable table, the message records it
//!   puts are written, sorted by (queue, id), to one new immutable file, a
//!   **run** ([`run`] has the format), synced at the next checkpoint if any
//!   of it is still live then. A table holds at most about 1 MiB of
//!   unacked messages ([`crate::memtable`]), so a backlog of 5,000,000 small
//!   messages is about a thousand runs.
//! - Per queue and run, memory holds the run's **live** ids, as a span of
//!   ids while they are consecutive, else as a roaring bitmap ([`live`]),
//!   and each run's block index (one entry per 16 KiB of records). Nothing
//!   is held per message beyond that.
//! - An ack's delete removes the id from its run's bitmap; a message written
//!   again is live only in its newest run. A run none of whose ids is live is
//!   deleted at the next checkpoint: a drained backlog leaves the disk run by
//!   run, without a delete per message.
//! - A checkpoint writes the **manifest** ([`manifest`]): the runs and their
//!   live bitmaps, replaced atomically. It is written before sled records the
//!   checkpoint's journal position, so what the journal replays after a crash
//!   is always a suffix of what the runs already hold; replaying blind puts
//!   and deletes again ends in the same state. Run files the manifest does
//!   not name (written after it, before a crash) are deleted when the store
//!   opens, and the journal writes them again.
//! - A run that keeps a few live messages keeps its whole file: when fewer
//!   than a quarter of its entries are live, the checkpointer copies them
//!   into the next run ([`Runs::compact`]), so disk use follows the live
//!   data.
//!
//! Reads (by key, and ranges in id order merged across runs) look at the
//! memtable first, as they do for sled, and take this state's lock only to
//! find runs and test bitmaps, never while reading a file. A run's file is
//! opened for each read, not held open (a deep backlog has a thousand runs);
//! a reader that finds it deleted meanwhile knows nothing in it was live, and
//! one missing while its run is listed is reported as corrupt.

mod live;
pub(crate) mod manifest;
mod range;
pub(crate) mod run;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use self::live::Live;
use self::manifest::{Manifest, RunLive};
pub(crate) use self::range::Range;
use self::run::{Run, RunKey};
use crate::error::StorageError;
use crate::{MessageId, QueueId};
use bytes::Bytes;

/// The directory of the runs, in the store's directory. Named "pages", as
/// when runs were called so, and kept: stores written then stay readable.
const DIR: &str = "pages";

/// A run is compacted once fewer than 1 in this many of its entries is live.
const COMPACT_BELOW: u64 = 4;

/// Blocks [`Runs::get`] keeps decoded, the newest last.
const RECENT_BLOCKS: usize = 4;

/// A block's entries, decoded.
type Block = Arc<Vec<(RunKey, Bytes)>>;

/// The message records that have left the memtable.
pub(crate) struct Runs {
    dir: PathBuf,
    state: RwLock<State>,
    /// The last blocks `get` read, by run and block number. Lookups come in
    /// id order (the committer looks up the large-body marker of every
    /// message it deletes while large messages are stored, and a drain
    /// deletes in order): without it each would read and check a block.
    /// Runs never change, so an entry is never stale.
    recent: Mutex<VecDeque<(u64, usize, Block)>>,
}

#[derive(Default)]
struct State {
    queues: HashMap<QueueId, QueueParts>,
    /// Every run, by number.
    runs: BTreeMap<u64, RunState>,
    next_run: u64,
}

/// Where one queue's messages are.
#[derive(Default)]
struct QueueParts {
    /// Its share of each run that has live messages of it, oldest run first.
    parts: Vec<Part>,
    /// No id here is above this: a put above it needs no look for an older copy.
    max: MessageId,
}

/// One queue's share of one run.
struct Part {
    run: u64,
    /// The lowest and highest id the run holds for the queue, live or not.
    min: MessageId,
    max: MessageId,
    live: Live,
}

struct RunState {
    file: Arc<Run>,
    /// Entries written.
    entries: u64,
    /// Entries still live.
    live: u64,
    /// `live` at the last checkpoint: a run that did not change between two
    /// checkpoints is no longer being drained, and may be compacted.
    live_at_checkpoint: u64,
    /// Whether the file is durable. A run is synced only by the checkpoint
    /// that first names it in the manifest: one that dies before (the
    /// messages of a queue that keeps up, acked a table later) never is.
    synced: bool,
}

impl Part {
    fn covers(&self, id: MessageId) -> bool {
        self.min <= id && id <= self.max
    }
}

impl Runs {
    /// Opens the runs of the store in `store`: the runs the manifest names,
    /// deleting any other run file (written after the last checkpoint).
    pub(crate) fn open(store: &Path) -> Result<Runs, StorageError> {
        let dir = store.join(DIR);
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::io("creating the runs' directory", e))?;
        let manifest = manifest::read(&dir)?;
        let mut state = State::default();
        for listed in manifest.runs {
            let path = run_path(&dir, listed.number);
            if !path.exists() {
                return Err(StorageError::CorruptPage {
                    file: dir.join(manifest::FILE).display().to_string(),
                    offset: 0,
                    reason: format!("it lists {}, which is missing", path.display()),
                });
            }
            let file = Arc::new(Run::open(&path)?);
            let mut live = 0;
            for stored in &listed.queues {
                let queue = stored.queue;
                let ids = Live::decode(stored).map_err(|e| StorageError::CorruptPage {
                    file: dir.join(manifest::FILE).display().to_string(),
                    offset: 0,
                    reason: format!("the live ids of queue {queue} in run {}: {e}", listed.number),
                })?;
                live += ids.len();
                let Some((min, max)) = ids.bounds() else {
                    continue;
                };
                let parts = state.queues.entry(queue).or_default();
                parts.max = parts.max.max(max);
                parts.parts.push(Part {
                    run: listed.number,
                    min,
                    max,
                    live: ids,
                });
            }
            state.runs.insert(
                listed.number,
                RunState {
                    file,
                    entries: listed.entries,
                    live,
                    live_at_checkpoint: live,
                    synced: true,
                },
            );
            state.next_run = state.next_run.max(listed.number + 1);
        }
        for parts in state.queues.values_mut() {
            parts.parts.sort_by_key(|p| p.run);
        }
        // Files of runs not listed: written after the manifest, or deleted
        // before a crash could say so. The journal has what they held.
        for entry in
            std::fs::read_dir(&dir).map_err(|e| StorageError::io("listing the runs' directory", e))?
        {
            let entry = entry.map_err(|e| StorageError::io("listing the runs' directory", e))?;
            let Some(number) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".run"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if !state.runs.contains_key(&number) {
                std::fs::remove_file(entry.path())
                    .map_err(|e| StorageError::io("deleting an unlisted run file", e))?;
                state.next_run = state.next_run.max(number + 1);
            }
        }
        Ok(Runs {
            dir,
            state: RwLock::new(state),
            recent: Mutex::new(VecDeque::with_capacity(RECENT_BLOCKS)),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The record of message `id` in `queue`, if it is here.
    pub(crate) fn get(&self, queue: QueueId, id: MessageId) -> Result<Option<Bytes>, StorageError> {
        let (number, file) = {
            let state = self.read();
            let Some(part) = state
                .queues
                .get(&queue)
                .and_then(|q| q.parts.iter().find(|p| p.covers(id) && p.live.contains(id)))
            else {
                return Ok(None);
            };
            (part.run, Arc::clone(&state.runs[&part.run].file))
        };
        if file.block_count() == 0 {
            return Ok(None);
        }
        let Some(entries) = self.block(number, &file, file.block_of((queue, id)))? else {
            return Ok(None);
        };
        Ok(Run::find(&entries, (queue, id)))
    }

    /// Block `i` of run `number`, from the recent blocks or read; `None`
    /// if the run was deleted meanwhile.
    fn block(&self, number: u64, file: &Run, i: usize) -> Result<Option<Block>, StorageError> {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((.., block)) = recent.iter().find(|(n, b, _)| *n == number && *b == i) {
            return Ok(Some(Arc::clone(block)));
        }
        drop(recent);
        let Some(block) = self.read_block(number, file, i)? else {
            return Ok(None);
        };
        let block = Arc::new(block);
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.len() == RECENT_BLOCKS {
            recent.pop_front();
        }
        recent.push_back((number, i, Arc::clone(&block)));
        Ok(Some(block))
    }

    /// Block `i` of run `number`, read; `None` if the run was deleted
    /// meanwhile (so nothing in it was live). A file missing while its run is
    /// still listed is corrupt.
    fn read_block(
        &self,
        number: u64,
        file: &Run,
        i: usize,
    ) -> Result<Option<Vec<(RunKey, Bytes)>>, StorageError> {
        match file.block(i)? {
            Some(entries) => Ok(Some(entries)),
            None if self.read().runs.contains_key(&number) => Err(StorageError::CorruptPage {
                file: file.path().display().to_string(),
                offset: 0,
                reason: "the file is missing while messages in it are live".into(),
            }),
            None => Ok(None),
        }
    }

    /// The records of `queue` with ids in `first..=last`, ascending.
    pub(crate) fn range(&self, queue: QueueId, first: MessageId, last: MessageId) -> Range<'_> {
        Range::new(self, queue, first, last)
    }

    /// The live ids of `queue`, ascending.
    pub(crate) fn ids(&self, queue: QueueId) -> Vec<MessageId> {
        let state = self.read();
        let mut ids: Vec<MessageId> = state
            .queues
            .get(&queue)
            .into_iter()
            .flat_map(|q| &q.parts)
            .flat_map(|p| p.live.iter())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The queues that have live messages here.
    pub(crate) fn queues(&self) -> Vec<QueueId> {
        self.read().queues.keys().copied().collect()
    }

    /// An id no live message of `queue` here is above.
    pub(crate) fn highest(&self, queue: QueueId) -> Option<MessageId> {
        self.read().queues.get(&queue).map(|q| q.max)
    }

    /// What the runs take on disk.
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.read().runs.values().map(|r| r.file.bytes()).sum()
    }

    /// Applies writes in order: a delete takes the id out of the run that has
    /// it; the puts are written to one new run (the last put of a key wins),
    /// and a key put again is no longer live in its older run. Visible at
    /// once, durable at the next [`Runs::checkpoint`].
    pub(crate) fn apply(
        &self,
        writes: impl IntoIterator<Item = (RunKey, Option<Bytes>)>,
    ) -> Result<(), StorageError> {
        let mut puts: BTreeMap<RunKey, Bytes> = BTreeMap::new();
        let mut deletes = Vec::new();
        for (key, value) in writes {
            match value {
                Some(value) => {
                    puts.insert(key, value);
                }
                None => {
                    puts.remove(&key);
                    deletes.push(key);
                }
            }
        }
        let run = if puts.is_empty() {
            None
        } else {
            Some(self.write_run(puts.iter().map(|(k, v)| (*k, &v[..])))?)
        };
        let mut state = self.write();
        for key in deletes {
            state.kill(key);
        }
        if let Some((number, file)) = run {
            for key in puts.keys() {
                state.kill(*key);
            }
            state.add(number, file, puts.len() as u64, puts.keys().copied());
        }
        Ok(())
    }

    /// Writes `entries` (ascending) to a new run, not yet in the state. The
    /// file is written without the lock: nobody reads a run before it is.
    fn write_run<'a>(
        &self,
        entries: impl Iterator<Item = (RunKey, &'a [u8])>,
    ) -> Result<(u64, Arc<Run>), StorageError> {
        let number = {
            let mut state = self.write();
            state.next_run += 1;
            state.next_run - 1
        };
        Ok((
            number,
            Arc::new(Run::write(&run_path(&self.dir, number), entries)?),
        ))
    }

    /// Rewrites the live entries of runs mostly dead, and unchanged since
    /// the last checkpoint, into a new run, so that their files can go at the
    /// next checkpoint. (A run being drained changes between checkpoints:
    /// copying what is left of it would only make the drain write.)
    fn compact(&self) -> Result<(), StorageError> {
        let sparse: Vec<(u64, Arc<Run>)> = {
            let state = self.read();
            state
                .runs
                .iter()
                .filter(|(_, r)| {
                    r.live > 0 && r.live == r.live_at_checkpoint && r.live * COMPACT_BELOW < r.entries
                })
                .map(|(n, r)| (*n, Arc::clone(&r.file)))
                .collect()
        };
        for (number, file) in sparse {
            let mut live = Vec::new();
            for i in 0..file.block_count() {
                // Compaction runs on the thread that deletes runs: the file is there.
                let entries = self.read_block(number, &file, i)?.unwrap_or_default();
                let state = self.read();
                live.extend(entries.into_iter().filter(|key| state.is_live_in(number, key.0)));
            }
            tracing::debug!(run = number, live = live.len(), "compacting a run file");
            // A key deleted or put again meanwhile is not live in the old
            // run, and `apply`'s put makes it live in the new one only if it
            // was: so only keys still live in `number` are carried over.
            self.carry(number, live)?;
        }
        Ok(())
    }

    /// Writes `entries`, read live from run `from`, to a new run, keeping
    /// those that are still live there.
    fn carry(&self, from: u64, entries: Vec<(RunKey, Bytes)>) -> Result<(), StorageError> {
        if entries.is_empty() {
            return Ok(());
        }
        let (number, file) = self.write_run(entries.iter().map(|(k, v)| (*k, &v[..])))?;
        let mut state = self.write();
        let still: Vec<RunKey> = entries
            .iter()
            .map(|(k, _)| *k)
            .filter(|key| state.is_live_in(from, *key))
            .collect();
        for key in &still {
            state.kill(*key);
        }
        state.add(number, file, entries.len() as u64, still.into_iter());
        Ok(())
    }

    /// Makes everything applied so far durable: compacts, syncs the runs
    /// the manifest will name for the first time, writes the manifest, then
    /// deletes the files of runs with nothing live.
    ///
    /// `apply` and `checkpoint` are called from one thread (the
    /// checkpointer's, or the one opening the store), so no run is added
    /// between the syncs and the manifest.
    pub(crate) fn checkpoint(&self) -> Result<(), StorageError> {
        self.compact()?;
        let unsynced: Vec<(u64, Arc<Run>)> = {
            let state = self.read();
            state
                .runs
                .iter()
                .filter(|(_, r)| !r.synced && r.live > 0)
                .map(|(n, r)| (*n, Arc::clone(&r.file)))
                .collect()
        };
        for (_, file) in &unsynced {
            file.sync()?;
        }
        let (manifest, dead) = {
            let mut state = self.write();
            let dead: Vec<u64> = state
                .runs
                .iter()
                .filter(|(_, r)| r.live == 0)
                .map(|(n, _)| *n)
                .collect();
            for number in &dead {
                state.runs.remove(number);
            }
            for (number, _) in &unsynced {
                if let Some(run) = state.runs.get_mut(number) {
                    run.synced = true;
                }
            }
            for run in state.runs.values_mut() {
                run.live_at_checkpoint = run.live;
            }
            let mut runs: BTreeMap<u64, RunLive> = BTreeMap::new();
            for (queue, parts) in &state.queues {
                for part in &parts.parts {
                    let live = part
                        .live
                        .encode(*queue)
                        .map_err(|e| StorageError::io("encoding a live bitmap", e))?;
                    runs.entry(part.run)
                        .or_insert_with(|| RunLive {
                            number: part.run,
                            queues: Vec::new(),
                            entries: state.runs[&part.run].entries,
                        })
                        .queues
                        .push(live);
                }
            }
            (
                Manifest {
                    runs: runs.into_values().collect(),
                },
                dead,
            )
        };
        manifest::write(&self.dir, &manifest)?;
        for number in dead {
            if let Err(e) = std::fs::remove_file(run_path(&self.dir, number)) {
                tracing::warn!(run = number, error = %e, "could not delete a drained run file");
            }
        }
        Ok(())
    }
}

impl State {
    /// Whether `key` is live in run `number`.
    fn is_live_in(&self, number: u64, (queue, id): RunKey) -> bool {
        self.queues
            .get(&queue)
            .is_some_and(|q| q.parts.iter().any(|p| p.run == number && p.live.contains(id)))
    }

    /// Takes `key` out of the run that has it live, if any.
    fn kill(&mut self, (queue, id): RunKey) {
        let Some(q) = self.queues.get_mut(&queue) else {
            return;
        };
        if id > q.max {
            return;
        }
        let Some(at) = q.parts.iter().position(|p| p.covers(id) && p.live.contains(id)) else {
            return;
        };
        let part = &mut q.parts[at];
        part.live.remove(id);
        if let Some(run) = self.runs.get_mut(&part.run) {
            run.live -= 1;
        }
        if part.live.is_empty() {
            q.parts.remove(at);
            if q.parts.is_empty() {
                self.queues.remove(&queue);
            }
        }
    }

    /// Adds run `number` of `entries` entries, of which `live` (ascending) are live.
    fn add(&mut self, number: u64, file: Arc<Run>, entries: u64, live: impl Iterator<Item = RunKey>) {
        let mut count = 0;
        let mut per_queue: Vec<(QueueId, Vec<MessageId>)> = Vec::new();
        for (queue, id) in live {
            count += 1;
            match per_queue.last_mut() {
                Some((q, ids)) if *q == queue => ids.push(id),
                _ => per_queue.push((queue, vec![id])),
            }
        }
        for (queue, ids) in per_queue {
            let (min, max) = (ids[0], ids[ids.len() - 1]);
            let live = Live::from_sorted(&ids);
            let parts = self.queues.entry(queue).or_default();
            parts.max = parts.max.max(max);
            parts.parts.push(Part {
                run: number,
                min,
                max,
                live,
            });
        }
        self.runs.insert(
            number,
            RunState {
                file,
                entries,
                live: count,
                live_at_checkpoint: count,
                synced: false,
            },
        );
    }
}

fn run_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:020}.run"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Step {
        /// Puts and deletes, applied as one table.
        Apply(Vec<(RunKey, Option<u8>)>),
        Checkpoint,
        /// A checkpoint, then the store opened again.
        Reopen,
    }

    fn step() -> impl Strategy<Value = Step> {
        let write = ((1..4u32, 0..300u64), prop::option::weighted(0.6, any::<u8>()));
        prop_oneof![
            6 => prop::collection::vec(write, 0..120).prop_map(Step::Apply),
            2 => Just(Step::Checkpoint),
            1 => Just(Step::Reopen),
        ]
    }

    fn value(key: RunKey, byte: u8) -> Bytes {
        // Sizes vary so that runs have several blocks.
        Bytes::from(vec![byte; (key.1 % 7) as usize * 100])
    }

    /// Everything the runs say of `queue`: by range, by key, and its ids.
    fn held(runs: &Runs, queue: QueueId) -> Vec<(MessageId, Bytes)> {
        let ranged: Vec<_> = runs.range(queue, 0, MessageId::MAX).map(Result::unwrap).collect();
        let ids: Vec<_> = ranged.iter().map(|(id, _)| *id).collect();
        assert_eq!(runs.ids(queue), ids);
        for (id, value) in &ranged {
            assert_eq!(runs.get(queue, *id).unwrap().as_ref(), Some(value));
        }
        ranged
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The runs hold what a map would, through checkpoints, compaction
        /// and reopening; ranges inside the bounds agree too; no file is left
        /// of a run with nothing live.
        #[test]
        fn the_runs_hold_what_a_map_would(steps in prop::collection::vec(step(), 1..30), lo in 0..300u64, span in 0..300u64) {
            let dir = tempfile::tempdir().unwrap();
            let mut runs = Runs::open(dir.path()).unwrap();
            let mut model: BTreeMap<RunKey, Bytes> = BTreeMap::new();
            for step in steps {
                match step {
                    Step::Apply(writes) => {
                        let writes: Vec<_> = writes.into_iter().map(|(k, v)| (k, v.map(|b| value(k, b)))).collect();
                        for (key, value) in &writes {
                            match value {
                                Some(value) => model.insert(*key, value.clone()),
                                None => model.remove(key),
                            };
                        }
                        runs.apply(writes).unwrap();
                    }
                    Step::Checkpoint => runs.checkpoint().unwrap(),
                    Step::Reopen => {
                        runs.checkpoint().unwrap();
                        drop(runs);
                        runs = Runs::open(dir.path()).unwrap();
                    }
                }
                for queue in 1..4 {
                    let expected: Vec<_> = model.range((queue, 0)..=(queue, MessageId::MAX)).map(|(k, v)| (k.1, v.clone())).collect();
                    prop_assert_eq!(held(&runs, queue), expected);
                    let (first, last) = (lo, lo + span);
                    let expected: Vec<_> = model.range((queue, first)..=(queue, last)).map(|(k, v)| (k.1, v.clone())).collect();
                    let ranged: Vec<_> = runs.range(queue, first, last).map(Result::unwrap).collect();
                    prop_assert_eq!(ranged, expected);
                }
            }
            runs.checkpoint().unwrap();
            let files = std::fs::read_dir(dir.path().join(DIR)).unwrap().filter(|e| {
                e.as_ref().unwrap().file_name().to_str().unwrap().ends_with(".run")
            }).count();
            prop_assert_eq!(files, runs.read().runs.len());
            prop_assert!(runs.read().runs.values().all(|r| r.live > 0));
        }
    }

    /// A run file that disappears while messages in it are live is
    /// corrupt, named in the error, not an empty queue.
    #[test]
    fn a_missing_run_with_live_messages_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let runs = Runs::open(dir.path()).unwrap();
        runs.apply((0..10u64).map(|id| ((1, id), Some(Bytes::from_static(b"x")))))
            .unwrap();
        runs.checkpoint().unwrap();
        let run = std::fs::read_dir(dir.path().join(DIR))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "run"))
            .unwrap();
        std::fs::remove_file(&run).unwrap();
        let corrupt = |e: StorageError| matches!(e, StorageError::CorruptPage { file, .. } if file == run.display().to_string());
        assert!(corrupt(runs.get(1, 3).unwrap_err()));
        assert!(corrupt(runs.range(1, 0, 9).next().unwrap().unwrap_err()));
        drop(runs);
        assert!(matches!(
            Runs::open(dir.path()),
            Err(StorageError::CorruptPage { .. })
        ));
    }

    /// A run drained to a few stragglers and then left alone is compacted:
    /// its stragglers move to a new run and its file goes.
    #[test]
    fn a_run_left_with_a_few_live_messages_is_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let runs = Runs::open(dir.path()).unwrap();
        runs.apply((0..1000u64).map(|id| ((1, id), Some(Bytes::from(vec![1u8; 200])))))
            .unwrap();
        runs.checkpoint().unwrap();
        runs.apply((0..990u64).map(|id| ((1, id), None))).unwrap();
        // Drained since the last checkpoint: not compacted yet.
        runs.checkpoint().unwrap();
        let before = runs.disk_bytes();
        assert!(before > 150_000, "{before}");
        // Unchanged since: compacted, and the old file goes.
        runs.checkpoint().unwrap();
        assert!(runs.disk_bytes() < 10_000, "{}", runs.disk_bytes());
        assert_eq!(runs.ids(1), (990..1000).collect::<Vec<_>>());
        drop(runs);
        let runs = Runs::open(dir.path()).unwrap();
        assert_eq!(runs.ids(1), (990..1000).collect::<Vec<_>>());
        assert_eq!(runs.get(1, 995).unwrap(), Some(Bytes::from(vec![1u8; 200])));
    }
}
