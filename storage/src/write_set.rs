//! Turning [`Op`]s into key-level writes, and folding many commits into one
//! write set.
//!
//! [`stage`] runs on the caller's thread: it encodes every record and checks
//! the size limits ([`crate::limits`]), so a bad commit is refused before it
//! reaches the committer and can never poison a group. A message whose body
//! goes to a file (see [`crate::large`]) is staged as its encoded record
//! without the body plus the body itself; the committer writes the file and
//! appends the marker. [`WriteSet`] is what the committer builds from all
//! staged commits of a group: the final value (or deletion) of every touched
//! key, with later ops overriding earlier ones, exactly as if the commits had
//! been applied one after another. Nothing here knows the
//! kv; prefix deletes ask it for the existing keys through a closure.

use bytes::Bytes;
use prost::Message;

use crate::error::StorageError;
use crate::limits::{self, Placement};
use crate::records::{DueBatchRecord, DuplicateIdRecord, MessageRecord};
use crate::{Op, keys};

/// A value to store: the encoded record, and for a message whose body goes
/// to a file, that body (not part of `inline`).
pub(crate) struct Value {
    /// The encoded record as sled will store it (the committer appends the
    /// large-body marker).
    pub(crate) inline: Vec<u8>,
    /// The body to write to a file, if any.
    pub(crate) large: Option<Bytes>,
}

/// One key-level change.
enum Write {
    Put(Vec<u8>, Value),
    Delete(Vec<u8>),
    DeletePrefix(Vec<u8>),
}

/// One commit's ops, encoded and validated, in order.
pub(crate) struct Staged {
    writes: Vec<Write>,
    /// Number of [`Op`]s the commit carried.
    pub(crate) ops: usize,
    /// Encoded bytes of all keys and values, for bounding a group.
    pub(crate) bytes: usize,
}

/// Encodes `ops` into key-level writes, refusing the whole commit if one
/// message or one sled value is too large ([`crate::limits`]).
pub(crate) fn stage(ops: Vec<Op>) -> Result<Staged, StorageError> {
    let mut staged = Staged {
        writes: Vec::with_capacity(ops.len()),
        ops: ops.len(),
        bytes: 0,
    };
    for op in ops {
        match op {
            Op::PutAddress(record) => staged.put(keys::address(&record.name), &record)?,
            Op::DeleteAddress(name) => {
                staged
                    .writes
                    .push(Write::DeletePrefix(keys::address_duplicate_ids(&name)));
                staged.delete(keys::address(&name));
            }
            Op::PutQueue(record) => staged.put(keys::queue(record.id).to_vec(), &record)?,
            Op::DeleteQueue(queue) => {
                staged.delete(keys::queue(queue).to_vec());
                staged
                    .writes
                    .push(Write::DeletePrefix(keys::queue_messages(queue).to_vec()));
                staged
                    .writes
                    .push(Write::DeletePrefix(keys::queue_states(queue).to_vec()));
                staged
                    .writes
                    .push(Write::DeletePrefix(keys::queue_dues(queue).to_vec()));
            }
            Op::PutMessage { queue, message } => {
                staged.put_message(keys::message(queue, message.message_id).to_vec(), message)?
            }
            Op::PutState { queue, id, state } => staged.put(keys::state(queue, id).to_vec(), &state)?,
            Op::RemoveMessage { queue, id } => {
                staged.delete(keys::message(queue, id).to_vec());
                staged.delete(keys::state(queue, id).to_vec());
            }
            Op::RemoveStatelessMessage { queue, id } => staged.delete(keys::message(queue, id).to_vec()),
            Op::PutDues { queue, entries } => {
                if let Some(&first) = entries.iter().min() {
                    let key = keys::due(queue, first.at_ms, first.id).to_vec();
                    staged.put(key, &DueBatchRecord::of(&entries))?
                }
            }
            Op::RemoveDues { queue, first } => {
                staged.delete(keys::due(queue, first.at_ms, first.id).to_vec())
            }
            Op::PutDuplicateId { address, seq, id } => {
                staged.put(keys::duplicate_id(&address, seq), &DuplicateIdRecord { id })?
            }
            Op::RemoveDuplicateId { address, seq, .. } => staged.delete(keys::duplicate_id(&address, seq)),
            Op::Claim { .. } => {}
        }
    }
    Ok(staged)
}

impl Staged {
    fn put(&mut self, key: Vec<u8>, record: &impl Message) -> Result<(), StorageError> {
        let size = limits::check_record(&key, record)?;
        self.push_inline(key, size, record);
        Ok(())
    }

    /// A message, inline or with its body split off for a file, as
    /// [`limits::check_message`] decides.
    fn put_message(&mut self, key: Vec<u8>, mut message: MessageRecord) -> Result<(), StorageError> {
        let (size, placement) = limits::check_message(&key, &message)?;
        if placement == Placement::Inline {
            self.push_inline(key, size, &message);
            return Ok(());
        }
        let body = std::mem::take(&mut message.body);
        self.bytes += size;
        self.writes.push(Write::Put(
            key,
            Value {
                inline: message.encode_to_vec(),
                large: Some(body),
            },
        ));
        Ok(())
    }

    fn push_inline(&mut self, key: Vec<u8>, size: usize, record: &impl Message) {
        self.bytes += size;
        self.writes.push(Write::Put(
            key,
            Value {
                inline: record.encode_to_vec(),
                large: None,
            },
        ));
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.bytes += key.len();
        self.writes.push(Write::Delete(key));
    }
}

/// The net effect of a group of commits on the keyspace: `Some(value)` to
/// store, `None` to delete, one entry per key, in key order.
///
/// Built as a list and sorted once rather than as a map: a group's keys
/// arrive mostly in order (ids rise), so one stable sort costs less than a
/// tree insert per write, and a later write of a key replaces the earlier.
pub(crate) struct WriteSet(Vec<(Vec<u8>, Option<Value>)>);

impl WriteSet {
    /// Folds a group's commits, in order. `existing` lists the keys under a
    /// prefix that are already stored.
    pub(crate) fn fold(
        group: impl IntoIterator<Item = Staged>,
        existing: &mut impl FnMut(&[u8]) -> Result<Vec<Vec<u8>>, StorageError>,
    ) -> Result<WriteSet, StorageError> {
        let mut writes = Vec::new();
        for staged in group {
            for write in staged.writes {
                match write {
                    Write::Put(key, value) => writes.push((key, Some(value))),
                    Write::Delete(key) => writes.push((key, None)),
                    Write::DeletePrefix(prefix) => {
                        for (_, value) in writes.iter_mut().filter(|(k, _)| k.starts_with(&prefix)) {
                            *value = None;
                        }
                        writes.extend(existing(&prefix)?.into_iter().map(|key| (key, None)));
                    }
                }
            }
        }
        // Stable: of the writes of one key, the last ends up last.
        writes.sort_by(|a: &(Vec<u8>, _), b| a.0.cmp(&b.0));
        writes.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(&mut later.1, &mut earlier.1);
            }
            same
        });
        Ok(WriteSet(writes))
    }

    /// Every touched key with its final value, in key order, for the
    /// committer to place large bodies.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&Vec<u8>, &mut Option<Value>)> {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The writes, in key order, borrowed (for the journal).
    pub(crate) fn writes(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.0
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_ref().map(|v| v.inline.as_slice())))
    }

    /// The writes, in key order.
    pub(crate) fn into_writes(self) -> impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)> {
        self.0.into_iter().map(|(k, v)| (k, v.map(|v| v.inline)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::records::{MessageRecord, QueueRecord};
    use crate::{LARGE_BODY_THRESHOLD, MAX_RECORD_BYTES};

    fn put(queue: u32, id: u64) -> Op {
        Op::PutMessage {
            queue,
            message: MessageRecord {
                message_id: id,
                ..Default::default()
            },
        }
    }

    fn fold(commits: Vec<Vec<Op>>, stored: &[Vec<u8>]) -> Vec<(Vec<u8>, bool)> {
        let mut existing =
            |prefix: &[u8]| Ok(stored.iter().filter(|k| k.starts_with(prefix)).cloned().collect());
        let group = commits.into_iter().map(|ops| stage(ops).unwrap());
        let set = WriteSet::fold(group, &mut existing).unwrap();
        set.into_writes().map(|(k, v)| (k, v.is_some())).collect()
    }

    #[test]
    fn later_ops_win() {
        let writes = fold(
            vec![
                vec![put(1, 1)],
                vec![Op::RemoveMessage { queue: 1, id: 1 }, put(1, 2)],
            ],
            &[],
        );
        assert_eq!(
            writes,
            vec![
                (keys::message(1, 1).to_vec(), false),
                (keys::message(1, 2).to_vec(), true),
                (keys::state(1, 1).to_vec(), false),
            ]
        );
    }

    #[test]
    fn delete_queue_covers_stored_and_pending_keys_of_that_queue_only() {
        let stored = vec![
            keys::message(1, 1).to_vec(),
            keys::state(1, 1).to_vec(),
            keys::message(2, 1).to_vec(),
        ];
        let writes = fold(
            vec![
                vec![put(1, 2), put(2, 2)],
                vec![Op::DeleteQueue(1)],
                vec![put(1, 3)],
            ],
            &stored,
        );
        assert_eq!(
            writes,
            vec![
                (keys::message(1, 1).to_vec(), false),
                (keys::message(1, 2).to_vec(), false),
                (keys::message(1, 3).to_vec(), true),
                (keys::message(2, 2).to_vec(), true),
                (keys::state(1, 1).to_vec(), false),
                (keys::queue(1).to_vec(), false),
            ]
        );
    }

    #[derive(Debug, Clone)]
    enum W {
        Put(u8, u8),
        Delete(u8),
        DeletePrefix(u8),
    }

    /// Keys `[p, k]`: a prefix delete of `[p]` covers 4 of them.
    fn key(k: u8) -> Vec<u8> {
        vec![k / 4, k % 4]
    }

    proptest! {
        /// The folded set is what applying the commits one write at a time
        /// leaves behind.
        #[test]
        fn fold_is_applying_in_order(
            commits in proptest::collection::vec(
                proptest::collection::vec(
                    prop_oneof![
                        (0u8..16, any::<u8>()).prop_map(|(k, v)| W::Put(k, v)),
                        (0u8..16).prop_map(W::Delete),
                        (0u8..4).prop_map(W::DeletePrefix),
                    ],
                    0..8,
                ),
                0..8,
            ),
            stored in proptest::collection::btree_set(0u8..16, 0..8),
        ) {
            let stored: Vec<Vec<u8>> = stored.into_iter().map(key).collect();
            let mut model = BTreeMap::new();
            let mut group = Vec::new();
            for commit in &commits {
                let mut writes = Vec::new();
                for w in commit {
                    match *w {
                        W::Put(k, v) => {
                            model.insert(key(k), Some(v));
                            writes.push(Write::Put(key(k), Value { inline: vec![v], large: None }));
                        }
                        W::Delete(k) => {
                            model.insert(key(k), None);
                            writes.push(Write::Delete(key(k)));
                        }
                        W::DeletePrefix(p) => {
                            for k in stored.iter().chain(model.keys()).filter(|k| k[0] == p).cloned().collect::<Vec<_>>() {
                                model.insert(k, None);
                            }
                            writes.push(Write::DeletePrefix(vec![p]));
                        }
                    }
                }
                group.push(Staged { writes, ops: commit.len(), bytes: 0 });
            }
            let mut existing =
                |prefix: &[u8]| Ok(stored.iter().filter(|k| k.starts_with(prefix)).cloned().collect());
            let folded: Vec<_> = WriteSet::fold(group, &mut existing)
                .unwrap()
                .into_writes()
                .map(|(k, v)| (k, v.map(|v| v[0])))
                .collect();
            prop_assert_eq!(folded, model.into_iter().collect::<Vec<_>>());
        }
    }

    fn staged_value(body_len: usize) -> Value {
        let message = MessageRecord {
            message_id: 1,
            body: vec![3; body_len].into(),
            ..Default::default()
        };
        let mut staged = stage(vec![Op::PutMessage { queue: 1, message }]).unwrap();
        assert_eq!(
            staged.bytes,
            13 + 2 + 1 + prost::encoding::encoded_len_varint(body_len as u64) + body_len
        );
        match staged.writes.pop() {
            Some(Write::Put(_, value)) => value,
            _ => unreachable!(),
        }
    }

    #[test]
    fn bodies_above_the_threshold_are_split_off() {
        let inline = staged_value(LARGE_BODY_THRESHOLD);
        assert!(inline.large.is_none());
        assert!(inline.inline.len() > LARGE_BODY_THRESHOLD);
        let large = staged_value(LARGE_BODY_THRESHOLD + 1);
        assert_eq!(large.large.map(|b| b.len()), Some(LARGE_BODY_THRESHOLD + 1));
        // Only the id is left inline; the committer appends the marker.
        assert_eq!(large.inline, vec![0x08, 0x01]);
    }

    #[test]
    fn oversized_record_refuses_the_whole_commit() {
        let big = MessageRecord {
            message_id: 1,
            body: vec![0; MAX_RECORD_BYTES].into(),
            ..Default::default()
        };
        let ops = vec![
            Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            }),
            Op::PutMessage {
                queue: 1,
                message: big,
            },
        ];
        assert!(matches!(
            stage(ops),
            Err(StorageError::RecordTooLarge {
                max: MAX_RECORD_BYTES,
                ..
            })
        ));
    }
}
