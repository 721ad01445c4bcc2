//! Reads of a [`SledStore`]: the memtable's writes merged over the kv's, so
//! that a read sees every journaled commit, by key and by range.

use bytes::Bytes;

use super::SledStore;
use super::kv::kv_get;
use crate::error::StorageError;
use crate::keys::{self, Key};
use crate::large as large_dir;
use crate::records;
use crate::{MessageId, QueueId};

impl SledStore {
    /// The current value of `key`: the memtable's, else the kv's.
    pub(super) fn value(&self, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
        match self.memtable.get(key) {
            Some(value) => Ok(value),
            None => kv_get(&self.db, &self.runs, key),
        }
    }

    pub(super) fn get<M: prost::Message + Default>(&self, key: &[u8]) -> Result<Option<M>, StorageError> {
        self.value(key)?
            .map(|value| records::decode(key, &value))
            .transpose()
    }

    /// Decodes every record under `prefix`, in key order.
    pub(super) fn scan<M: prost::Message + Default>(&self, prefix: &[u8]) -> Result<Vec<M>, StorageError> {
        self.db
            .scan_prefix(prefix)
            .map(|entry| {
                let (key, value) = entry?;
                records::decode(&key, &value)
            })
            .collect()
    }

    /// Calls `visit` with the current value of every key in `from..=to`, in
    /// key order, the memtable's writes over sled's, until it returns false.
    pub(super) fn visit_range(
        &self,
        from: &[u8],
        to: &[u8],
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool, StorageError>,
    ) -> Result<(), StorageError> {
        /// Writes taken from each memtable table per round.
        const ROUND: usize = 4096;
        let mut from = from.to_vec();
        loop {
            // The memtable first, as in `keys_with_prefix`: what the
            // checkpointer moves to sled meanwhile is then read twice, and the
            // memtable's copy wins.
            let (writes, complete) = self.memtable.range(&from, to, ROUND);
            let bound = complete.clone().unwrap_or_else(|| to.to_vec());
            let mut kv = self.kv_range(&from, &bound)?.peekable();
            let mut writes = writes.into_iter().peekable();
            loop {
                let kv_key = match kv.peek() {
                    Some(Err(_)) => return Err(kv.next().expect("peeked").expect_err("peeked")),
                    Some(Ok((key, _))) => Some(key.clone()),
                    None => None,
                };
                let take_write = match (&kv_key, writes.peek()) {
                    (None, None) => break,
                    (None, Some(_)) => true,
                    (Some(_), None) => false,
                    (Some(e), Some((w, _))) => {
                        if e == w {
                            kv.next();
                        }
                        e >= w
                    }
                };
                let more = if take_write {
                    match writes.next().expect("peeked") {
                        (key, Some(value)) => visit(&key, &value)?,
                        (_, None) => true,
                    }
                } else {
                    let (key, value) = kv.next().expect("peeked")?;
                    visit(&key, &value)?
                };
                if !more {
                    return Ok(());
                }
            }
            match complete {
                Some(mut last) => {
                    last.push(0);
                    from = last;
                }
                None => return Ok(()),
            }
        }
    }

    /// The kv's records in `from..=to`, in key order: a range of one
    /// queue's messages from the runs, any other from sled.
    #[allow(clippy::type_complexity)]
    pub(super) fn kv_range(
        &self,
        from: &[u8],
        to: &[u8],
    ) -> Result<Box<dyn Iterator<Item = Result<(Vec<u8>, Bytes), StorageError>> + '_>, StorageError> {
        // `from` may be a key with a byte appended (where a round of
        // `visit_range` ends): the first id at or after it is the next one.
        let message_at = |bound: &[u8]| match bound.get(..13).map(Key::decode) {
            Some(Ok(Key::Message { queue, id })) => Some((queue, id, bound.len() > 13)),
            _ => None,
        };
        match (message_at(from), message_at(to)) {
            (Some((queue, first, after)), Some((q, last, _))) if q == queue => {
                let Some(first) = first.checked_add(u64::from(after)) else {
                    return Ok(Box::new(std::iter::empty()));
                };
                Ok(Box::new(self.runs.range(queue, first, last).map(move |entry| {
                    let (id, value) = entry?;
                    Ok((keys::message(queue, id).to_vec(), value))
                })))
            }
            _ if from.first() == Some(&keys::MESSAGE) || to.first() == Some(&keys::MESSAGE) => {
                Err(StorageError::refused(format!(
                    "a range of message keys must be within one queue: {}..={}",
                    keys::hex(from),
                    keys::hex(to)
                )))
            }
            _ => Ok(Box::new(self.db.range(from.to_vec()..=to.to_vec()).map(
                |entry| {
                    let (key, value) = entry?;
                    Ok((key.to_vec(), Bytes::from_owner(value)))
                },
            ))),
        }
    }

    /// The encoded size of a stored message with its body, as
    /// [`IndexEntry::size`] says, warning if its body file is missing.
    pub(super) fn stored_size(&self, queue: QueueId, id: MessageId, key: &[u8], value: &[u8]) -> u32 {
        let mut size = value.len() as i64;
        if let Some(body) = large_dir::stored_marker(key, value) {
            size += body.inline_size_delta();
            if !self.large.path(queue, id, body.generation).exists() {
                tracing::warn!(
                    key = %keys::hex(key),
                    "the body file of a large message is missing; reading it will fail"
                );
            }
        }
        // At most MAX_RECORD_BYTES for what this store writes.
        u32::try_from(size.max(0)).unwrap_or(u32::MAX)
    }
}
