//! Large message bodies: one file per message reference under
//! `<dir>/large/`, outside sled (the Artemis "large message" scheme).
//!
//! sled 0.34.7 never fsyncs the blob files it writes for big log items
//! ([`sled_store`](crate::sled_store)), so a body that would make a record
//! bigger than [`MAX_INLINE_RECORD_BYTES`](crate::MAX_INLINE_RECORD_BYTES),
//! or any body above [`LARGE_BODY_THRESHOLD`](crate::LARGE_BODY_THRESHOLD),
//! is written to a file of its own by the committer, `sync_data`ed, and the
//! sled record keeps everything else plus a `LargeBody` marker (tag 100 of
//! the stored message, see [`records`](crate::records)).
//!
//! # File names
//!
//! `q<queue>-m<id>.body` for generation 0 and `q<queue>-m<id>.g<gen>.body`
//! after that, decimal. The generation, stored in the marker, changes every
//! time the same `(queue, id)` is written again with a large body, so the new
//! body never overwrites the file the durable record still points to: the old
//! file is unlinked only once the new record is durable.
//!
//! # Fan-out
//!
//! A multicast message is one record per queue. When one group writes the
//! same message id with an identical body to several queues, the body is
//! written and synced once and the other queues' names are hard links to it
//! (`std::fs::hard_link`): one data write and fsync per message instead of one
//! per subscription, and the file system counts the references, so removing
//! one queue's reference is still just an unlink of its name.
//!
//! # Ordering (who may crash where)
//!
//! 1. body files written and `sync_data`ed, then `large/` fsynced once per
//!    group (new names, link counts);
//! 2. the group's journal record appended and fdatasynced;
//! 3. files the group made obsolete (removed, overwritten, deleted queues)
//!    unlinked, then the waiters answered.
//!
//! A crash can therefore leave a file no record references (between 1 and 2,
//! or between 2 and 3), never a record without its file. The sweep
//! deletes such orphans when the store is opened.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Write as _};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;

use crate::error::StorageError;
use crate::{MessageId, QueueId};

/// Name of the body directory inside the store directory.
pub const LARGE_DIR: &str = "large";

/// Tag of the [`LargeBody`] marker in a stored message value. Tags up to 99
/// are [`MessageRecord`](crate::MessageRecord)'s; this one must never be given
/// to one of its fields.
pub(crate) const MARKER_TAG: u32 = 100;

/// Upper bound of the encoded marker field: tag (2) + length (1) + `len`
/// (1 + 10) + `generation` (1 + 5).
pub(crate) const MAX_MARKER_BYTES: usize = 20;

/// Where a message's body is when it is not inline: a file of `len` bytes of
/// the given generation.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LargeBody {
    /// Length of the body file in bytes.
    #[prost(uint64, tag = "1")]
    pub len: u64,
    /// Which file: see the module docs.
    #[prost(uint32, tag = "2")]
    pub generation: u32,
}

/// The marker field alone, to decode from (or append to) a stored message
/// value without touching its other fields.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct MarkerView {
    #[prost(message, optional, tag = "100")]
    pub large: Option<LargeBody>,
}

impl LargeBody {
    /// The bytes of the marker field, to append to an encoded record (protobuf
    /// concatenation is merge, and the record has no field 100).
    pub(crate) fn field_bytes(&self) -> Vec<u8> {
        prost::Message::encode_to_vec(&MarkerView {
            large: Some(self.clone()),
        })
    }

    /// How many more bytes the full record encodes to with the body inline
    /// instead of this marker (may be negative for tiny bodies).
    pub(crate) fn inline_size_delta(&self) -> i64 {
        let body_field =
            prost::encoding::key_len(3) + prost::encoding::encoded_len_varint(self.len) + self.len as usize;
        let marker_field = prost::encoding::message::encoded_len(MARKER_TAG, self);
        body_field as i64 - marker_field as i64
    }
}

/// The large-body marker of a stored message value. A value that does not
/// decode is treated as having none (with a warning): refusing would make the
/// key impossible to remove or replace, and at worst its file is left for the
/// sweep to keep.
pub(crate) fn stored_marker(key: &[u8], value: &[u8]) -> Option<LargeBody> {
    match <MarkerView as prost::Message>::decode(value) {
        Ok(view) => view.large,
        Err(e) => {
            tracing::warn!(key = %crate::keys::hex(key), error = %e, "stored message does not decode; any body file it has is left in place");
            None
        }
    }
}

/// The file name of a body.
pub(crate) fn file_name(queue: QueueId, id: MessageId, generation: u32) -> String {
    if generation == 0 {
        format!("q{queue}-m{id}.body")
    } else {
        format!("q{queue}-m{id}.g{generation}.body")
    }
}

/// Inverse of [`file_name`]; `None` for names the store does not write.
pub(crate) fn parse_file_name(name: &str) -> Option<(QueueId, MessageId, u32)> {
    let rest = name.strip_prefix('q')?.strip_suffix(".body")?;
    let (queue, rest) = rest.split_once("-m")?;
    let (id, generation) = match rest.split_once(".g") {
        Some((id, generation)) => (id, parse_decimal::<u32>(generation)?),
        None => (rest, 0),
    };
    let parsed = (parse_decimal(queue)?, parse_decimal(id)?, generation);
    // Only canonical spellings (no leading zeros, no ".g0").
    (file_name(parsed.0, parsed.1, parsed.2) == name).then_some(parsed)
}

fn parse_decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Whether two bodies are the same bytes (cheap when they share a buffer, as
/// the clones of one routed message do).
pub(crate) fn same_body(a: &Bytes, b: &Bytes) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// The `large/` directory: shared by the store (reads, stats) and the
/// committer (writes, unlinks).
pub(crate) struct LargeDir {
    path: PathBuf,
    /// Open handle for fsyncing the directory.
    dir: File,
    /// Bytes of body files on disk (hard links counted once).
    bytes: AtomicU64,
    /// Body file names on disk, at least: counted before a name is made and
    /// uncounted once it is unlinked, so never too low. While it is zero no
    /// record can point to a body file, and the committer skips looking for
    /// one ([`LargeDir::holds_bodies`]).
    names: AtomicUsize,
}

impl LargeDir {
    /// Creates `<store>/large` if needed. The caller fsyncs the store
    /// directory afterwards so that the new entry is durable.
    pub(crate) fn open(store_dir: &Path) -> Result<LargeDir, StorageError> {
        let path = store_dir.join(LARGE_DIR);
        fs::create_dir_all(&path).map_err(|e| StorageError::io("creating the large-message directory", e))?;
        let dir =
            File::open(&path).map_err(|e| StorageError::io("opening the large-message directory", e))?;
        Ok(LargeDir {
            path,
            dir,
            bytes: AtomicU64::new(0),
            names: AtomicUsize::new(0),
        })
    }

    /// The path of a body file.
    pub(crate) fn path(&self, queue: QueueId, id: MessageId, generation: u32) -> PathBuf {
        self.path.join(file_name(queue, id, generation))
    }

    /// Deletes every body file `referenced` does not claim and counts the
    /// bytes of the rest. Files with names the store never writes are left
    /// alone (with a warning). Not fsynced: an orphan that comes back after a
    /// crash is deleted by the next sweep.
    pub(crate) fn sweep(
        &self,
        mut referenced: impl FnMut(QueueId, MessageId, u32) -> bool,
    ) -> Result<Sweep, StorageError> {
        let context = "listing the large-message directory";
        let mut sweep = Sweep::default();
        let mut inodes = HashSet::new();
        for entry in fs::read_dir(&self.path).map_err(|e| StorageError::io(context, e))? {
            let entry = entry.map_err(|e| StorageError::io(context, e))?;
            let name = entry.file_name();
            let parsed = name.to_str().and_then(parse_file_name);
            let Some((queue, id, generation)) = parsed else {
                tracing::warn!(file = ?entry.path(), "unknown file in the large-message directory left alone");
                continue;
            };
            if referenced(queue, id, generation) {
                let meta = entry
                    .metadata()
                    .map_err(|e| StorageError::io("reading a large-message file's metadata", e))?;
                if inodes.insert((meta.dev(), meta.ino())) {
                    sweep.bytes += meta.len();
                }
                sweep.kept += 1;
            } else {
                tracing::info!(file = ?entry.path(), "deleting orphaned large-message body");
                match fs::remove_file(entry.path()) {
                    Ok(()) => sweep.deleted += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StorageError::io("deleting an orphaned body file", e)),
                }
            }
        }
        self.bytes.store(sweep.bytes, Ordering::Relaxed);
        self.names.store(sweep.kept, Ordering::Relaxed);
        Ok(sweep)
    }

    /// Writes `body` to `path` (replacing an unreferenced leftover) and
    /// `sync_data`s it. The directory entry is made durable by
    /// [`LargeDir::sync`].
    pub(crate) fn write(&self, path: &Path, body: &[u8]) -> io::Result<()> {
        self.names.fetch_add(1, Ordering::Relaxed);
        let mut file = File::create(path)?;
        file.write_all(body)?;
        file.sync_data()?;
        self.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Makes `to` a second name of the (already synced) file `from`.
    pub(crate) fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        match fs::remove_file(to) {
            Ok(()) => {
                self.names.fetch_sub(1, Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        self.names.fetch_add(1, Ordering::Relaxed);
        fs::hard_link(from, to)
    }

    /// fsyncs the directory: the names written or linked so far are durable.
    pub(crate) fn sync(&self) -> io::Result<()> {
        self.dir.sync_all()
    }

    /// Unlinks `path`; a missing file is fine, other failures are logged (the
    /// file is an orphan the next sweep deletes).
    pub(crate) fn remove(&self, path: &Path) {
        let last_link = fs::metadata(path).ok().filter(|m| m.nlink() <= 1);
        match fs::remove_file(path) {
            Ok(()) => {
                self.names.fetch_sub(1, Ordering::Relaxed);
                if let Some(meta) = last_link {
                    // Saturating: the counter is advisory.
                    let _ = self
                        .bytes
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                            Some(b.saturating_sub(meta.len()))
                        });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = ?path, error = %e, "could not delete a large-message body; the next open will");
            }
        }
    }

    /// Whether a body file may exist: if not, no record points to one that
    /// does, and the committer need not look up the records it replaces.
    pub(crate) fn holds_bodies(&self) -> bool {
        self.names.load(Ordering::Relaxed) > 0
    }

    /// Bytes of body files on disk, as far as this process knows.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// What [`LargeDir::sweep`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sweep {
    /// Referenced files kept.
    pub kept: usize,
    /// Orphans deleted.
    pub deleted: usize,
    /// Bytes of the kept files (each inode once).
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn file_names_round_trip_and_only_canonical_ones_parse() {
        for (q, id, g) in [(0, 0, 0), (7, 42, 0), (u32::MAX, u64::MAX, u32::MAX), (1, 2, 3)] {
            assert_eq!(parse_file_name(&file_name(q, id, g)), Some((q, id, g)));
        }
        for bad in [
            "q1-m2.g0.body",
            "q01-m2.body",
            "q1-m2.body.tmp",
            "q-m2.body",
            "q1-m.body",
            "q1-m2.g.body",
            "q1-m+2.body",
            "README",
            "q4294967296-m1.body",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn marker_fits_its_bound_and_merges_into_a_record() {
        let worst = LargeBody {
            len: u64::MAX,
            generation: u32::MAX,
        };
        assert!(worst.field_bytes().len() <= MAX_MARKER_BYTES);
        let record = crate::MessageRecord {
            message_id: 9,
            priority: 3,
            ..Default::default()
        };
        let mut value = record.encode_to_vec();
        let marker = LargeBody {
            len: 1 << 20,
            generation: 2,
        };
        value.extend(marker.field_bytes());
        assert_eq!(crate::MessageRecord::decode(&value[..]).unwrap(), record);
        assert_eq!(
            MarkerView::decode(&value[..]).unwrap().large,
            Some(marker.clone())
        );
        let full = crate::MessageRecord {
            body: vec![1; 1 << 20].into(),
            ..record
        };
        assert_eq!(
            value.len() as i64 + marker.inline_size_delta(),
            full.encoded_len() as i64
        );
    }
}
