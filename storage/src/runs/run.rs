//! One run: an immutable file of message records sorted by (queue, id), the
//! unit in which queued messages leave the memtable ([`super`] says why).
//!
//! # Format
//!
//! ```text
//! magic "RBRUN001"
//! block*         len u32 | crc32 u32 | entry*            (crc over the entries)
//! entry          queue u32 | id u64 | len u32 | value     (a MessageRecord)
//! index          (queue u32 | id u64 | offset u64 | len u32)*, one per block:
//!                its first key, and where the block starts and how long it is
//! footer         index offset u64 | index len u32 | index crc32 u32 | magic "RBRUNEND"
//! ```
//!
//! Integers are little-endian. A block is closed once it holds
//! [`BLOCK_BYTES`] (so a large record is a block of its own). The index is
//! read whole when the run is opened: one entry per block, some 40 bytes of
//! memory per 16 KiB of records, which is what keeps memory independent of
//! the number of messages. A run is written once, synced before a manifest
//! names it, then only read, and finally deleted; a damaged block or index is
//! [`StorageError::CorruptPage`] naming the file and offset, never a panic.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::{Buf, Bytes};

use crate::error::StorageError;
use crate::{MessageId, QueueId};

const MAGIC: &[u8; 8] = b"RBRUN001";
const FOOTER_MAGIC: &[u8; 8] = b"RBRUNEND";
const FOOTER_BYTES: usize = 8 + 4 + 4 + 8;
const BLOCK_HEADER: usize = 4 + 4;
const ENTRY_HEADER: usize = 4 + 8 + 4;
const INDEX_ENTRY: usize = 4 + 8 + 8 + 4;

/// The size at which a block is closed. Reading one message reads its block
/// and a scan reads blocks one after the other, so this trades the cost of
/// reading one message against the memory of the index.
pub(crate) const BLOCK_BYTES: usize = 16 << 10;

/// A (queue, id) pair, ordered as message keys are.
pub(crate) type RunKey = (QueueId, MessageId);

/// Where one block is.
#[derive(Debug, Clone, Copy)]
struct BlockRef {
    first: RunKey,
    offset: u64,
    len: u32,
}

/// A run: where its file is, and its block index.
///
/// The file is opened for each read rather than held open: a deep backlog is
/// a thousand runs or more, and one descriptor each would run into the usual
/// limit of 1,024 open files.
#[derive(Debug)]
pub(crate) struct Run {
    path: PathBuf,
    blocks: Vec<BlockRef>,
    /// The file's size.
    bytes: u64,
}

/// Builds a run file block by block.
struct Writer<'f> {
    out: BufWriter<&'f File>,
    offset: u64,
    blocks: Vec<BlockRef>,
    block: Vec<u8>,
    first: Option<RunKey>,
}

impl Writer<'_> {
    fn push(&mut self, key: RunKey, value: &[u8]) -> std::io::Result<()> {
        self.first.get_or_insert(key);
        self.block.extend_from_slice(&key.0.to_le_bytes());
        self.block.extend_from_slice(&key.1.to_le_bytes());
        self.block.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.block.extend_from_slice(value);
        if self.block.len() >= BLOCK_BYTES {
            self.close_block()?;
        }
        Ok(())
    }

    fn close_block(&mut self) -> std::io::Result<()> {
        let Some(first) = self.first.take() else {
            return Ok(());
        };
        let len = self.block.len() as u32;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&crc32fast::hash(&self.block).to_le_bytes())?;
        self.out.write_all(&self.block)?;
        self.blocks.push(BlockRef {
            first,
            offset: self.offset,
            len,
        });
        self.offset += (BLOCK_HEADER + self.block.len()) as u64;
        self.block.clear();
        Ok(())
    }

    /// Writes the index and the footer; returns the index and the file size.
    fn finish(mut self) -> std::io::Result<(Vec<BlockRef>, u64)> {
        self.close_block()?;
        let mut index = Vec::with_capacity(self.blocks.len() * INDEX_ENTRY);
        for block in &self.blocks {
            index.extend_from_slice(&block.first.0.to_le_bytes());
            index.extend_from_slice(&block.first.1.to_le_bytes());
            index.extend_from_slice(&block.offset.to_le_bytes());
            index.extend_from_slice(&block.len.to_le_bytes());
        }
        self.out.write_all(&index)?;
        self.out.write_all(&self.offset.to_le_bytes())?;
        self.out.write_all(&(index.len() as u32).to_le_bytes())?;
        self.out.write_all(&crc32fast::hash(&index).to_le_bytes())?;
        self.out.write_all(FOOTER_MAGIC)?;
        self.out.flush()?;
        let bytes = self.offset + index.len() as u64 + FOOTER_BYTES as u64;
        // Held for the run's life: no spare capacity.
        self.blocks.shrink_to_fit();
        Ok((self.blocks, bytes))
    }
}

impl Run {
    /// Writes `entries` (ascending by key, each key once) to a new file at
    /// `path` and returns it open; [`Run::sync`] makes it durable.
    pub(crate) fn write<'a>(
        path: &Path,
        entries: impl Iterator<Item = (RunKey, &'a [u8])>,
    ) -> Result<Run, StorageError> {
        let io = |e| StorageError::io("writing a run file", e);
        let file = File::create_new(path).map_err(io)?;
        // A run that cannot be written whole is no run: its file goes (a
        // full disk gets its space back), and the checkpoint writes another.
        Run::fill(path, &file, entries).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })
    }

    fn fill<'a>(
        path: &Path,
        file: &File,
        entries: impl Iterator<Item = (RunKey, &'a [u8])>,
    ) -> Result<Run, StorageError> {
        let io = |e| StorageError::io("writing a run file", e);
        let mut writer = Writer {
            out: BufWriter::with_capacity(256 << 10, file),
            offset: MAGIC.len() as u64,
            blocks: Vec::new(),
            block: Vec::with_capacity(2 * BLOCK_BYTES),
            first: None,
        };
        writer.out.write_all(MAGIC).map_err(io)?;
        for (key, value) in entries {
            writer.push(key, value).map_err(io)?;
        }
        let (blocks, bytes) = writer.finish().map_err(io)?;
        Ok(Run {
            path: path.to_path_buf(),
            blocks,
            bytes,
        })
    }

    /// Opens the run at `path`, reading its index.
    pub(crate) fn open(path: &Path) -> Result<Run, StorageError> {
        let io = |e| StorageError::io("opening a run file", e);
        let file = File::open(path).map_err(io)?;
        let bytes = file.metadata().map_err(io)?.len();
        let mut run = Run {
            path: path.to_path_buf(),
            blocks: Vec::new(),
            bytes,
        };
        let footer_at = bytes
            .checked_sub((MAGIC.len() + FOOTER_BYTES) as u64)
            .map(|at| at + MAGIC.len() as u64)
            .ok_or_else(|| run.corrupt(0, "shorter than a header and a footer"))?;
        let mut footer = Bytes::from(run.read_at(&file, footer_at, FOOTER_BYTES)?);
        let (index_at, index_len, index_crc) =
            (footer.get_u64_le(), footer.get_u32_le(), footer.get_u32_le());
        if &footer[..] != FOOTER_MAGIC || index_at.checked_add(u64::from(index_len)) != Some(footer_at) {
            return Err(run.corrupt(footer_at, "bad footer"));
        }
        if run.read_at(&file, 0, MAGIC.len())? != MAGIC {
            return Err(run.corrupt(0, "not a run file"));
        }
        let index = run.read_at(&file, index_at, index_len as usize)?;
        if crc32fast::hash(&index) != index_crc || index.len() % INDEX_ENTRY != 0 {
            return Err(run.corrupt(index_at, "damaged index"));
        }
        let mut index = &index[..];
        run.blocks.reserve_exact(index.len() / INDEX_ENTRY);
        while index.has_remaining() {
            run.blocks.push(BlockRef {
                first: (index.get_u32_le(), index.get_u64_le()),
                offset: index.get_u64_le(),
                len: index.get_u32_le(),
            });
        }
        Ok(run)
    }

    /// Makes the file durable (an fsync through any descriptor flushes the
    /// file's data).
    pub(crate) fn sync(&self) -> Result<(), StorageError> {
        File::open(&self.path)
            .map_err(|e| StorageError::io("opening a run file to make it durable", e))?
            .sync_data()
            .map_err(|e| StorageError::io("syncing a run file", e))
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size in bytes.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// How many blocks the run has.
    pub(crate) fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The index of the block that holds `key` if the run has it: the last
    /// one whose first key is not above it (0 if none is).
    pub(crate) fn block_of(&self, key: RunKey) -> usize {
        self.blocks.partition_point(|b| b.first <= key).saturating_sub(1)
    }

    /// Reads and checks block `i`; its entries, in key order. `None` if the
    /// file is gone: the run was deleted, once none of its entries was live.
    pub(crate) fn block(&self, i: usize) -> Result<Option<Vec<(RunKey, Bytes)>>, StorageError> {
        let block = self.blocks[i];
        let Some(file) = self.file()? else {
            return Ok(None);
        };
        let bytes = Bytes::from(self.read_at(&file, block.offset, BLOCK_HEADER + block.len as usize)?);
        let (mut header, body) = (bytes.slice(..BLOCK_HEADER), bytes.slice(BLOCK_HEADER..));
        if header.get_u32_le() != block.len || header.get_u32_le() != crc32fast::hash(&body) {
            return Err(self.corrupt(block.offset, "damaged block"));
        }
        let mut entries = Vec::with_capacity(body.len() / 128 + 1);
        let mut at = 0;
        while at < body.len() {
            let mut header = body
                .get(at..at + ENTRY_HEADER)
                .ok_or_else(|| self.corrupt(block.offset, "entry cut short"))?;
            let key = (header.get_u32_le(), header.get_u64_le());
            let len = header.get_u32_le() as usize;
            let start = at + ENTRY_HEADER;
            if body.len() - start < len {
                return Err(self.corrupt(block.offset, "entry cut short"));
            }
            entries.push((key, body.slice(start..start + len)));
            at = start + len;
        }
        Ok(Some(entries))
    }

    /// The value under `key` among a block's `entries` (in key order).
    pub(crate) fn find(entries: &[(RunKey, Bytes)], key: RunKey) -> Option<Bytes> {
        entries
            .binary_search_by_key(&key, |(k, _)| *k)
            .ok()
            .map(|i| entries[i].1.clone())
    }

    /// The file, opened to read; `None` if it is gone.
    fn file(&self) -> Result<Option<File>, StorageError> {
        match File::open(&self.path) {
            Ok(file) => Ok(Some(file)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StorageError::io("opening a run file", e)),
        }
    }

    fn read_at(&self, file: &File, offset: u64, len: usize) -> Result<Vec<u8>, StorageError> {
        let mut buf = vec![0; len];
        match file.read_exact_at(&mut buf, offset) {
            Ok(()) => Ok(buf),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(self.corrupt(offset, "the file ends early"))
            }
            Err(e) => Err(StorageError::io("reading a run file", e)),
        }
    }

    fn corrupt(&self, offset: u64, reason: &str) -> StorageError {
        StorageError::CorruptPage {
            file: self.path.display().to_string(),
            offset,
            reason: reason.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The value under `key`, as `Runs::get` finds it.
    fn get(run: &Run, key: RunKey) -> Result<Option<Bytes>, StorageError> {
        if run.block_count() == 0 {
            return Ok(None);
        }
        let entries = run.block(run.block_of(key))?.expect("the file is there");
        Ok(Run::find(&entries, key))
    }

    fn write(dir: &Path, entries: &[(RunKey, Vec<u8>)]) -> Run {
        Run::write(&dir.join("1.run"), entries.iter().map(|(k, v)| (*k, &v[..]))).unwrap()
    }

    fn entries() -> impl Strategy<Value = Vec<(RunKey, Vec<u8>)>> {
        prop::collection::btree_map(
            (0..4u32, 0..5_000u64),
            prop::collection::vec(any::<u8>(), 0..3_000),
            0..200,
        )
        .prop_map(|map| map.into_iter().collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever was written reads back, by key and block by block, from
        /// the run as written and as opened again.
        #[test]
        fn what_is_written_reads_back(entries in entries(), probe in (0..4u32, 0..5_000u64)) {
            let dir = tempfile::tempdir().unwrap();
            let written = write(dir.path(), &entries);
            let opened = Run::open(&dir.path().join("1.run")).unwrap();
            prop_assert_eq!(opened.bytes(), std::fs::metadata(dir.path().join("1.run")).unwrap().len());
            for run in [&written, &opened] {
                let mut all = Vec::new();
                for i in 0..run.block_count() {
                    all.extend(run.block(i).unwrap().unwrap().into_iter().map(|(k, v)| (k, v.to_vec())));
                }
                prop_assert_eq!(&all, &entries);
                for (key, value) in &entries {
                    prop_assert_eq!(get(run, *key).unwrap().map(|v| v.to_vec()), Some(value.clone()));
                }
                let expected = entries.iter().find(|(k, _)| *k == probe).map(|(_, v)| v.clone());
                prop_assert_eq!(get(run, probe).unwrap().map(|v| v.to_vec()), expected);
            }
        }
    }

    #[test]
    fn a_damaged_block_or_index_is_corrupt_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let entries: Vec<_> = (0..2_000u64).map(|id| ((1, id), vec![7u8; 100])).collect();
        let run = write(dir.path(), &entries);
        assert!(run.block_count() > 2);
        let path = dir.path().join("1.run");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[100] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let run = Run::open(&path).unwrap();
        let error = get(&run, (1, 0)).unwrap_err();
        assert!(
            matches!(&error, StorageError::CorruptPage { file, offset: 8, .. } if file.ends_with("1.run")),
            "{error:?}"
        );
        let len = bytes.len();
        bytes[len - 30] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(Run::open(&path), Err(StorageError::CorruptPage { .. })));
        std::fs::write(&path, &bytes[..len - 1]).unwrap();
        assert!(matches!(Run::open(&path), Err(StorageError::CorruptPage { .. })));
    }
}
