//! The journal: the write-ahead log that makes a commit durable.
//!
//! Why it exists: making sled itself durable per group costs a `flush()`
//! (sled hands the write to its IO thread pool, whose `notify_all` wakes all
//! seven of its threads for every buffer) plus an `fdatasync` of a file that
//! grows with every write, so the sync also commits file-system metadata. Both
//! together were about 60 % of the broker's CPU and of a group's latency in
//! the `durable` benchmark. Instead the committer appends each group's writes
//! here, to a preallocated file, with one `pwrite` and one `fdatasync` of its
//! own, and only then applies them to sled, which is made durable rarely, at a
//! *checkpoint* ([`crate::checkpoint`]). Artemis's journal works the same way
//! (pre-filled, reused files).
//!
//! # Files
//!
//! ```text
//! <store>/journal/<seq, 20 digits>.wal   a segment; the name is the seq of its first record
//! <store>/journal/spare.wal              zero-filled or recycled, the next segment to use
//! ```
//!
//! A segment is `segment_bytes` long from the start ([`crate::JOURNAL_SEGMENT_BYTES`] unless
//! the store was opened with another size; written with zeros, or a recycled
//! segment), so an `fdatasync` after a write inside it has no file
//! size to commit. A record that does not fit in what is left starts the next
//! segment; one larger than a whole segment gets a fresh segment to itself,
//! which then grows past the nominal size.
//!
//! # Record format
//!
//! ```text
//! len u32 LE | crc32 u32 LE | seq u64 LE | payload (len bytes)
//! payload = write*, write = 1 | key_len u32 LE | key | value_len u32 LE | value   (put)
//!                         | 0 | key_len u32 LE | key                              (delete)
//! ```
//!
//! The crc covers seq and payload. Each record carries the net writes of one
//! group (the final value of every key it touched, see [`crate::write_set`]),
//! so replaying a record is idempotent, and replaying a run of records over
//! any kv state that lies between the run's start and its end yields the
//! run's end state.
//!
//! # Where the log ends
//!
//! Records are read from the start of each segment until the first one that is
//! not whole: zero length (never written), a length beyond the file, a crc
//! mismatch (a torn write, or old contents of a recycled file) or a seq that is
//! not the next one (a recycled file's old records all have lower seqs). Only
//! the newest segment may end that way before its end of data; every older one
//! must be followed by a segment named with the next seq, or opening fails with
//! [`StorageError::CorruptJournal`] naming the file and offset, rather than
//! silently dropping acknowledged commits.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::StorageError;

/// Bytes before a record's payload: len, crc, seq.
const HEADER_BYTES: usize = 16;

/// Bytes of the smallest write: a delete (kind, key_len) of an empty key.
const SMALLEST_WRITE_BYTES: usize = 1 + 4;

/// The smallest segment the journal can use: one that holds the smallest
/// record, a header and one write (every record has at least one). Below
/// that a segment could hold no record at all. How big segments *should* be
/// is policy, the configuration's (`journal-file-size`), not the journal's.
pub(crate) const MIN_SEGMENT_BYTES: u64 = (HEADER_BYTES + SMALLEST_WRITE_BYTES) as u64;

const PUT: u8 = 1;
const DELETE: u8 = 0;

const SPARE: &str = "spare.wal";

/// One key-level write as the journal stores it: `None` deletes.
pub(crate) type Write = (Vec<u8>, Option<Vec<u8>>);

/// A segment the writer has moved past: once everything up to `last_seq` is
/// checkpointed, it can be recycled.
#[derive(Debug)]
pub(crate) struct Completed {
    pub(crate) path: PathBuf,
    pub(crate) last_seq: u64,
}

/// The appending end of the journal, owned by the committer thread.
pub(crate) struct Journal {
    dir: PathBuf,
    /// Nominal size of a segment.
    segment_bytes: u64,
    file: File,
    path: PathBuf,
    /// Where the next record goes in `file`.
    offset: u64,
    /// The seq the next record gets.
    next_seq: u64,
    /// Encoding buffer, reused across records.
    buf: Vec<u8>,
    /// The segment the last change of segment left behind.
    completed: Option<Completed>,
}

/// What [`replay`] found.
pub(crate) struct Replayed {
    /// The seq of the last record applied (or the checkpoint, if none).
    pub(crate) last_seq: u64,
    /// Records applied.
    pub(crate) records: u64,
    /// Every segment file found, for [`Journal::start`] to remove.
    segments: Vec<PathBuf>,
}

/// The journal directory of a store.
pub(crate) fn dir(store: &Path) -> PathBuf {
    store.join("journal")
}

fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.wal")
}

/// Reads the journal of `store` and calls `apply` with the writes of every
/// record after `checkpoint`, in order.
pub(crate) fn replay(
    store: &Path,
    checkpoint: u64,
    mut apply: impl FnMut(Vec<Write>) -> Result<(), StorageError>,
) -> Result<Replayed, StorageError> {
    let dir = dir(store);
    fs::create_dir_all(&dir).map_err(|e| StorageError::io("creating the journal directory", e))?;
    let mut segments = Vec::new();
    for entry in fs::read_dir(&dir).map_err(|e| StorageError::io("listing the journal", e))? {
        let entry = entry.map_err(|e| StorageError::io("listing the journal", e))?;
        let name = entry.file_name();
        let Some(first) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".wal"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        segments.push((first, entry.path()));
    }
    segments.sort();
    let mut replayed = Replayed {
        last_seq: checkpoint,
        records: 0,
        segments: segments.iter().map(|(_, p)| p.clone()).collect(),
    };
    // Segments whose successor starts at or before the first record needed are
    // wholly checkpointed.
    let start = segments
        .iter()
        .rposition(|(first, _)| *first <= checkpoint + 1)
        .unwrap_or(0);
    let mut expected: Option<u64> = None;
    for (first, path) in &segments[start..] {
        let corrupt = |offset: u64, reason: String| StorageError::CorruptJournal {
            file: path.display().to_string(),
            offset,
            reason,
        };
        match expected {
            None if *first > checkpoint + 1 => {
                return Err(corrupt(
                    0,
                    format!(
                        "starts at record {first}, but records from {} on are needed",
                        checkpoint + 1
                    ),
                ));
            }
            Some(next) if *first != next => {
                return Err(corrupt(
                    0,
                    format!(
                        "starts at record {first}, the journal before it ends at {}",
                        next - 1
                    ),
                ));
            }
            _ => {}
        }
        let data = fs::read(path).map_err(|e| StorageError::io("reading a journal segment", e))?;
        let mut reader = Reader {
            data: &data,
            offset: 0,
            next_seq: *first,
        };
        while let Some((seq, payload)) = reader.next() {
            if seq > checkpoint {
                apply(decode(payload).map_err(|reason| corrupt(reader.offset, reason))?)?;
                replayed.records += 1;
                replayed.last_seq = seq;
            }
        }
        replayed.last_seq = replayed.last_seq.max(reader.next_seq - 1);
        expected = Some(reader.next_seq);
    }
    Ok(replayed)
}

/// Refuses segments smaller than [`MIN_SEGMENT_BYTES`], before the store
/// touches its files.
pub(crate) fn check_segment_bytes(segment_bytes: u64) -> Result<(), StorageError> {
    if segment_bytes < MIN_SEGMENT_BYTES {
        return Err(StorageError::JournalSegmentTooSmall {
            size: segment_bytes,
            min: MIN_SEGMENT_BYTES,
        });
    }
    Ok(())
}

impl Journal {
    /// Starts a fresh journal after a replay (whose records must be
    /// checkpointed by now): removes the old segments and opens a new one,
    /// numbered after the last replayed record. `segment_bytes` has passed
    /// [`check_segment_bytes`].
    pub(crate) fn start(
        store: &Path,
        replayed: Replayed,
        segment_bytes: u64,
    ) -> Result<Journal, StorageError> {
        let dir = dir(store);
        for path in &replayed.segments {
            fs::remove_file(path).map_err(|e| StorageError::io("removing a replayed journal segment", e))?;
        }
        let next_seq = replayed.last_seq + 1;
        let (file, path) = open_segment(&dir, next_seq, true, segment_bytes)?;
        Ok(Journal {
            dir,
            segment_bytes,
            file,
            path,
            offset: 0,
            next_seq,
            buf: Vec::new(),
            completed: None,
        })
    }

    /// Nominal size of a segment.
    pub(crate) fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// The seq of the last record appended.
    pub(crate) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Appends one record with `writes` (not yet durable, but on its way to
    /// the disk: see [`start_writeback`]), moving to a new segment first if it
    /// does not fit ([`Journal::take_completed`] then has the old one). After
    /// a failed write the next record overwrites it.
    pub(crate) fn append<'a>(
        &mut self,
        writes: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<(), StorageError> {
        self.buf.clear();
        self.buf.resize(HEADER_BYTES, 0);
        for (key, value) in writes {
            self.buf.push(if value.is_some() { PUT } else { DELETE });
            put_bytes(&mut self.buf, key);
            if let Some(value) = value {
                put_bytes(&mut self.buf, value);
            }
        }
        let len = u32::try_from(self.buf.len() - HEADER_BYTES).map_err(|_| {
            StorageError::io("appending to the journal", io::Error::other("record over 4 GiB"))
        })?;
        let seq = self.next_seq;
        self.buf[8..16].copy_from_slice(&seq.to_le_bytes());
        let crc = crc32fast::hash(&self.buf[8..]);
        self.buf[0..4].copy_from_slice(&len.to_le_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());

        if self.offset > 0 && self.offset + self.buf.len() as u64 > self.segment_bytes {
            let (file, path) = open_segment(&self.dir, seq, false, self.segment_bytes)?;
            let old = std::mem::replace(&mut self.path, path);
            self.file = file;
            self.offset = 0;
            self.completed = Some(Completed {
                path: old,
                last_seq: seq - 1,
            });
        }
        self.file
            .write_all_at(&self.buf, self.offset)
            .map_err(|e| StorageError::io("writing to the journal", e))?;
        start_writeback(&self.file, self.offset, self.buf.len());
        self.offset += self.buf.len() as u64;
        self.next_seq += 1;
        Ok(())
    }

    /// The segment left by the last change of segment, once.
    pub(crate) fn take_completed(&mut self) -> Option<Completed> {
        self.completed.take()
    }

    /// Makes every record appended so far durable.
    pub(crate) fn sync(&self) -> Result<(), StorageError> {
        self.file
            .sync_data()
            .map_err(|e| StorageError::io("fdatasync of the journal", e))
    }

    /// Removes the current segment; for a clean close, once everything in it
    /// is checkpointed.
    pub(crate) fn remove(self) -> Result<(), StorageError> {
        drop(self.file);
        fs::remove_file(&self.path)
            .map_err(|e| StorageError::io("removing a checkpointed journal segment", e))
    }
}

fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    // Values are bounded far below 4 GiB (MAX_INLINE_RECORD_BYTES).
    buf.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    buf.extend_from_slice(bytes);
}

/// Opens the segment for records from `first_seq` on: the spare if there is
/// one, else a new file of `len` bytes (zero-filled when `zero_fill`, else
/// just sized, which is quicker to make but slower to sync into). The
/// directory entry is made durable before any record goes in.
fn open_segment(
    dir: &Path,
    first_seq: u64,
    zero_fill: bool,
    len: u64,
) -> Result<(File, PathBuf), StorageError> {
    let path = dir.join(segment_name(first_seq));
    let context = "creating a journal segment";
    match fs::rename(dir.join(SPARE), &path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let file = File::create(&path).map_err(|e| StorageError::io(context, e))?;
            if zero_fill {
                fill_zeros(&file, len).map_err(|e| StorageError::io(context, e))?;
            } else {
                file.set_len(len).map_err(|e| StorageError::io(context, e))?;
            }
        }
        Err(e) => return Err(StorageError::io(context, e)),
    }
    sync_dir(dir)?;
    let file = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| StorageError::io(context, e))?;
    Ok((file, path))
}

/// Asks the kernel to start writing a just-written range to the disk, without
/// waiting (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that the device works
/// while the committer makes the group readable; the `fdatasync` that follows
/// then waits for less. Only a head start: the `fdatasync` makes the record
/// durable whatever happens here, so a failure is ignored.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: usize) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: a plain syscall on a descriptor `file` keeps open; it reads no
    // memory of ours.
    unsafe { libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: usize) {}

fn fill_zeros(file: &File, len: u64) -> io::Result<()> {
    let zeros = vec![0u8; 1 << 20];
    let mut writer = io::BufWriter::new(file);
    let mut left = len;
    while left > 0 {
        let n = left.min(zeros.len() as u64);
        writer.write_all(&zeros[..n as usize])?;
        left -= n;
    }
    writer.flush()?;
    file.sync_data()
}

fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io("fsync of the journal directory", e))
}

/// Bytes the journal of `store` takes on disk, spare included.
pub(crate) fn disk_bytes(store: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir(store)) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Turns a checkpointed segment into the spare, or deletes it if there is a
/// spare already.
pub(crate) fn recycle(store: &Path, segment: &Path) -> Result<(), StorageError> {
    let spare = dir(store).join(SPARE);
    let result = if spare.exists() {
        fs::remove_file(segment)
    } else {
        fs::rename(segment, spare)
    };
    result.map_err(|e| StorageError::io("recycling a journal segment", e))
}

/// Makes a zero-filled spare segment of `len` bytes if there is none, so that
/// the next segment change does not write into a sparse file.
pub(crate) fn prepare_spare(store: &Path, len: u64) -> Result<(), StorageError> {
    let dir = dir(store);
    let spare = dir.join(SPARE);
    if spare.exists() {
        return Ok(());
    }
    let context = "preparing a spare journal segment";
    let partial = dir.join("spare.tmp");
    let file = File::create(&partial).map_err(|e| StorageError::io(context, e))?;
    fill_zeros(&file, len).map_err(|e| StorageError::io(context, e))?;
    fs::rename(&partial, &spare).map_err(|e| StorageError::io(context, e))
}

/// Reads whole records of one segment in order.
struct Reader<'a> {
    data: &'a [u8],
    offset: u64,
    next_seq: u64,
}

impl<'a> Reader<'a> {
    /// The next whole record with the expected seq, as (seq, payload).
    fn next(&mut self) -> Option<(u64, &'a [u8])> {
        let at = usize::try_from(self.offset).ok()?;
        let header = self.data.get(at..at + HEADER_BYTES)?;
        let len = u32::from_le_bytes(header[0..4].try_into().ok()?) as usize;
        let crc = u32::from_le_bytes(header[4..8].try_into().ok()?);
        let seq = u64::from_le_bytes(header[8..16].try_into().ok()?);
        if len == 0 || seq != self.next_seq {
            return None;
        }
        let payload = self.data.get(at + HEADER_BYTES..at + HEADER_BYTES + len)?;
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&header[8..16]);
        hasher.update(payload);
        if hasher.finalize() != crc {
            return None;
        }
        self.offset += (HEADER_BYTES + len) as u64;
        self.next_seq += 1;
        Some((seq, payload))
    }
}

/// Decodes a record's payload.
fn decode(mut payload: &[u8]) -> Result<Vec<Write>, String> {
    fn take<'a>(payload: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
        if payload.len() < n {
            return Err(format!(
                "record payload cut short ({} bytes left, {n} needed)",
                payload.len()
            ));
        }
        let (head, rest) = payload.split_at(n);
        *payload = rest;
        Ok(head)
    }
    fn bytes(payload: &mut &[u8]) -> Result<Vec<u8>, String> {
        let len = u32::from_le_bytes(take(payload, 4)?.try_into().expect("4 bytes")) as usize;
        Ok(take(payload, len)?.to_vec())
    }
    let mut writes = Vec::new();
    while !payload.is_empty() {
        let tag = take(&mut payload, 1)?[0];
        let key = bytes(&mut payload)?;
        let value = match tag {
            PUT => Some(bytes(&mut payload)?),
            DELETE => None,
            other => return Err(format!("unknown write tag {other}")),
        };
        writes.push((key, value));
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes(n: u8) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        vec![(vec![1, n], Some(vec![n; 100])), (vec![2, n], None)]
    }

    /// Segment size of the tests: small, so that rolling over is cheap.
    const SEGMENT_BYTES: u64 = 64 << 10;

    /// A journal started on an empty directory.
    fn fresh(dir: &Path) -> Journal {
        Journal::start(dir, replay(dir, 0, |_| Ok(())).unwrap(), SEGMENT_BYTES).unwrap()
    }

    /// Appends `n` records of a third of a segment each; returns the
    /// segments completed meanwhile.
    fn append_thirds(journal: &mut Journal, n: usize) -> Vec<Completed> {
        let third = vec![(vec![7], Some(vec![7u8; (SEGMENT_BYTES / 3) as usize]))];
        (0..n).filter_map(|_| append(journal, &third)).collect()
    }

    fn append(journal: &mut Journal, w: &[Write]) -> Option<Completed> {
        journal
            .append(w.iter().map(|(k, v)| (k.as_slice(), v.as_deref())))
            .unwrap();
        journal.take_completed()
    }

    fn replay_all(dir: &Path, checkpoint: u64) -> Result<(Replayed, Vec<Vec<Write>>), StorageError> {
        let mut seen = Vec::new();
        let replayed = replay(dir, checkpoint, |w| {
            seen.push(w);
            Ok(())
        })?;
        Ok((replayed, seen))
    }

    #[test]
    fn records_replay_in_order_after_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = fresh(dir.path());
        for n in 1..=5 {
            assert!(append(&mut journal, &writes(n)).is_none());
        }
        journal.sync().unwrap();
        assert_eq!(journal.last_seq(), 5);
        drop(journal);
        let (replayed, seen) = replay_all(dir.path(), 2).unwrap();
        assert_eq!(replayed.last_seq, 5);
        assert_eq!(seen, vec![writes(3), writes(4), writes(5)]);
    }

    #[test]
    fn a_torn_tail_ends_the_log_and_the_next_start_continues_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = fresh(dir.path());
        append(&mut journal, &writes(1));
        append(&mut journal, &writes(2));
        let path = journal.path.clone();
        drop(journal);
        // Damage the second record's payload.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        let first_len = HEADER_BYTES as u64 + 4 + 2 + 4 + 100 + 1 + 4 + 2 + HEADER_BYTES as u64;
        file.write_all_at(&[0xff], first_len + 3).unwrap();
        let (replayed, seen) = replay_all(dir.path(), 0).unwrap();
        assert_eq!(seen, vec![writes(1)]);
        assert_eq!(replayed.last_seq, 1);
        let mut journal = Journal::start(dir.path(), replayed, SEGMENT_BYTES).unwrap();
        append(&mut journal, &writes(9));
        drop(journal);
        let (_, seen) = replay_all(dir.path(), 1).unwrap();
        assert_eq!(seen, vec![writes(9)]);
    }

    #[test]
    fn records_roll_over_segments_and_recycled_segments_do_not_replay_old_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = fresh(dir.path());
        let mut completed = append_thirds(&mut journal, 7);
        assert_eq!(journal.last_seq(), 7);
        assert_eq!(completed.len(), 3, "{completed:?}");
        assert_eq!(completed[0].last_seq, 2);
        // The first segment is checkpointed and becomes the spare; the next
        // segment change reuses it, its old records must not come back.
        recycle(dir.path(), &completed[0].path).unwrap();
        completed.extend(append_thirds(&mut journal, 3));
        drop(journal);
        let (replayed, seen) = replay_all(dir.path(), 2).unwrap();
        assert_eq!(replayed.last_seq, 10);
        assert_eq!(seen.len(), 8);
    }

    #[test]
    fn a_record_larger_than_a_segment_gets_one_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = fresh(dir.path());
        let huge = vec![(vec![8], Some(vec![8u8; 2 * SEGMENT_BYTES as usize]))];
        assert!(append(&mut journal, &writes(1)).is_none());
        assert_eq!(append(&mut journal, &huge).map(|c| c.last_seq), Some(1));
        assert_eq!(append(&mut journal, &writes(3)).map(|c| c.last_seq), Some(2));
        drop(journal);
        let (replayed, seen) = replay_all(dir.path(), 0).unwrap();
        assert_eq!(replayed.last_seq, 3);
        assert_eq!(seen, vec![writes(1), huge, writes(3)]);
    }

    #[test]
    fn a_missing_segment_is_reported_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = fresh(dir.path());
        let completed = append_thirds(&mut journal, 7);
        drop(journal);
        fs::remove_file(&completed[1].path).unwrap();
        let err = replay_all(dir.path(), 0).err().expect("a gap");
        assert!(matches!(err, StorageError::CorruptJournal { .. }), "{err}");
        assert!(err.to_string().contains(".wal"), "{err}");
    }

    #[test]
    fn payloads_round_trip() {
        let w = vec![
            (vec![], None),
            (vec![1, 2, 3], Some(vec![])),
            (vec![9; 300], Some(vec![4; 70_000])),
        ];
        let mut buf = Vec::new();
        for (k, v) in &w {
            buf.push(if v.is_some() { PUT } else { DELETE });
            put_bytes(&mut buf, k);
            if let Some(v) = v {
                put_bytes(&mut buf, v);
            }
        }
        assert_eq!(decode(&buf).unwrap(), w);
        assert!(decode(&buf[..buf.len() - 1]).is_err());
    }
}
