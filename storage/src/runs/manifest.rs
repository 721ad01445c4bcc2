//! The manifest: which runs exist and which of their messages are still
//! live, as of the last checkpoint.
//!
//! # Format
//!
//! `pages/MANIFEST` is the magic `RBPAGES1`, the crc32 of the rest, then one
//! protobuf message ([`Manifest`]; the same compatibility rule as
//! [`crate::records`]). Each run lists, per queue, the ids it holds that are
//! live ([`super::live`]): a span of ids as its two ends, any other set as a
//! roaring bitmap in `RoaringTreemap`'s portable format.
//! It is written to `MANIFEST.tmp`, synced and renamed over the old one, so
//! a crash leaves one whole manifest or the other.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::QueueId;
use crate::error::StorageError;

/// "PAGES" from the runs' first name, kept so that stored manifests stay readable.
const MAGIC: &[u8; 8] = b"RBPAGES1";
/// The manifest's file name in the runs' directory.
pub(crate) const FILE: &str = "MANIFEST";
const TMP: &str = "MANIFEST.tmp";

/// Every run, with its live ids.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Manifest {
    #[prost(message, repeated, tag = "1")]
    pub(crate) runs: Vec<RunLive>,
}

/// One run's live ids, per queue.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RunLive {
    /// The run's number: its file is `<number>.run`.
    #[prost(uint64, tag = "1")]
    pub(crate) number: u64,
    #[prost(message, repeated, tag = "2")]
    pub(crate) queues: Vec<QueueLive>,
    /// How many entries the run has, live or not.
    #[prost(uint64, tag = "3")]
    pub(crate) entries: u64,
}

/// The live ids of one queue in one run.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct QueueLive {
    #[prost(uint32, tag = "1")]
    pub(crate) queue: QueueId,
    /// A serialized `RoaringTreemap`; empty when the ids are the span
    /// `first..=last`.
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) live: Vec<u8>,
    #[prost(uint64, tag = "3")]
    pub(crate) first: u64,
    #[prost(uint64, tag = "4")]
    pub(crate) last: u64,
}

/// Reads the manifest in `dir`; an empty one if there is none yet.
pub(crate) fn read(dir: &Path) -> Result<Manifest, StorageError> {
    let path = dir.join(FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Manifest::default()),
        Err(e) => return Err(StorageError::io("reading the runs' manifest", e)),
    };
    let corrupt = |reason: &str| StorageError::CorruptPage {
        file: path.display().to_string(),
        offset: 0,
        reason: reason.to_owned(),
    };
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| corrupt("not a runs manifest"))?;
    let (crc, body) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| corrupt("cut short"))?;
    if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
        return Err(corrupt("checksum mismatch"));
    }
    prost::Message::decode(body).map_err(|e| corrupt(&e.to_string()))
}

/// Replaces the manifest in `dir` with `manifest`, durably: the directory is
/// synced first (so the runs it names are durable), then the new file, then
/// the directory again.
pub(crate) fn write(dir: &Path, manifest: &Manifest) -> Result<(), StorageError> {
    let io = |e| StorageError::io("writing the runs' manifest", e);
    sync_dir(dir)?;
    let body = prost::Message::encode_to_vec(manifest);
    let tmp = dir.join(TMP);
    let mut file = File::create(&tmp).map_err(io)?;
    file.write_all(MAGIC).map_err(io)?;
    file.write_all(&crc32fast::hash(&body).to_le_bytes())
        .map_err(io)?;
    file.write_all(&body).map_err(io)?;
    file.sync_data().map_err(io)?;
    fs::rename(&tmp, dir.join(FILE)).map_err(io)?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io("syncing the runs' directory", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_and_damage_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), Manifest::default());
        let manifest = Manifest {
            runs: vec![RunLive {
                number: 7,
                queues: vec![QueueLive {
                    queue: 3,
                    live: vec![1, 2, 3],
                    first: 0,
                    last: 0,
                }],
                entries: 9,
            }],
        };
        write(dir.path(), &manifest).unwrap();
        assert_eq!(read(dir.path()).unwrap(), manifest);
        let path = dir.path().join(FILE);
        let mut bytes = fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(matches!(read(dir.path()), Err(StorageError::CorruptPage { .. })));
    }
}
