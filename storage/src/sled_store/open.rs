//! Opening a [`SledStore`]: sled once its lock is free, the journal replayed
//! after the last checkpoint, then a checkpoint and the sweep of body files
//! no record references, before the committer starts.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::kv::SledKv;
use super::{SEGMENT_SIZE, SledOptions, SledStore};
use crate::error::StorageError;
use crate::group_commit::Committer;
use crate::journal::{self, Journal};
use crate::keys;
use crate::kv::OrderedKv;
use crate::large::{LargeDir, MarkerView};
use crate::memtable::{Memtable, Table};
use crate::runs::Runs;

/// How long opening waits for sled's file lock before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Opens sled, waiting (up to [`LOCK_WAIT`]) while its file lock is still held.
///
/// sled releases the lock only when its background threads have let go of the
/// database, a moment after the last handle is dropped, so a store reopened at once in
/// the same process, or by a broker started while the previous one is exiting, can
/// find it still taken. Another live process holding it still fails, after the wait.
fn open_when_unlocked(config: &sled::Config) -> sled::Result<sled::Db> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match config.open() {
            // sled 0.34.7 reports a held lock only through this message.
            Err(sled::Error::Io(e))
                if e.to_string().starts_with("could not acquire lock") && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

impl SledStore {
    /// Opens (or creates) the store in `dir` with default options.
    pub fn open(dir: &Path) -> Result<SledStore, StorageError> {
        SledStore::open_with(dir, SledOptions::default())
    }

    /// Opens (or creates) the store in `dir`: replays the journal into sled,
    /// checkpoints, and deletes large-message body files that no record
    /// references (left by a crash).
    pub fn open_with(dir: &Path, options: SledOptions) -> Result<SledStore, StorageError> {
        journal::check_segment_bytes(options.journal_segment_bytes)?;
        let db = open_when_unlocked(
            &sled::Config::new()
                .path(dir)
                .segment_size(SEGMENT_SIZE)
                .cache_capacity(options.cache_capacity)
                .flush_every_ms(None),
        )?;
        let log = File::open(dir.join("db"))
            .map_err(|e| StorageError::io("opening the sled log for fdatasync", e))?;
        let runs = Arc::new(Runs::open(dir)?);
        let kv = SledKv {
            db: db.clone(),
            log: Arc::new(log),
            runs: Arc::clone(&runs),
        };
        kv.move_messages_to_runs()?;
        let checkpoint = kv.checkpointed()?;
        // Replayed records are gathered into tables, as the memtable gathers
        // commits, so that runs are a few MiB each, not one per record.
        let mut table = Table::new();
        let mut table_bytes = 0;
        let replayed = journal::replay(dir, checkpoint, |writes| {
            for (key, value) in writes {
                table_bytes += key.len() + value.as_ref().map_or(0, Vec::len);
                table.insert(key, value.map(Bytes::from));
            }
            if table_bytes >= options.memtable_table_bytes {
                table_bytes = 0;
                kv.apply(std::mem::take(&mut table).into_iter())?;
            }
            Ok(())
        })?;
        kv.apply(table.into_iter())?;
        if replayed.records > 0 {
            tracing::info!(records = replayed.records, "replayed the journal");
        }
        // After a restart sled hands out ids from its last persisted counter plus
        // two intervals, and persists the new counter only with the next flush:
        // without one, a second crash would hand out the same ids again. Drawing
        // an id now puts that counter update before the checkpoint's flush.
        db.generate_id()?;
        kv.checkpoint(replayed.last_seq)?;
        let journal = Journal::start(dir, replayed, options.journal_segment_bytes)?;
        let large = Arc::new(LargeDir::open(dir)?);
        // Make the directory entries of the files sled created (and of
        // `large/`) durable ourselves rather than rely on sled having done it.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StorageError::io("syncing the store directory", e))?;
        let sweep = large.sweep(|queue, id, generation| {
            let key = keys::message(queue, id);
            match kv.get(&key) {
                Ok(Some(value)) => match <MarkerView as prost::Message>::decode(&value[..]) {
                    Ok(view) => view.large.is_some_and(|m| m.generation == generation),
                    // Cannot tell which file a corrupt record means: keep.
                    Err(_) => true,
                },
                Ok(None) => false,
                Err(e) => {
                    tracing::warn!(error = %e, "reading a record during the sweep failed; keeping its file");
                    true
                }
            }
        })?;
        if sweep.deleted > 0 {
            tracing::info!(
                deleted = sweep.deleted,
                kept = sweep.kept,
                "deleted orphaned large-message bodies"
            );
        }
        let memtable = Arc::new(Memtable::new(options.memtable_table_bytes));
        let committer = Committer::start(
            kv,
            journal,
            Arc::clone(&memtable),
            Arc::clone(&large),
            dir.to_path_buf(),
        )?;
        Ok(SledStore {
            committer,
            db,
            runs,
            memtable,
            large,
            dir: dir.to_path_buf(),
        })
    }
}
