//! What [`Store::recover_head`](crate::Store::recover_head) returns for a
//! [`SledStore`]: the broker's indexes, read from the kv alone once it holds
//! every commit.

use super::SledStore;
use super::kv::per_message;
use crate::error::StorageError;
use crate::keys::{self, Key};
use crate::records::{self, DuplicateIdRecord, MessageIndex, QueueRecord};
use crate::{IndexEntry, MessageId, RecoveredDuplicateId, RecoveredQueue};

impl SledStore {
    pub(super) fn recover_queue(
        &self,
        record: QueueRecord,
        head: usize,
    ) -> Result<RecoveredQueue, StorageError> {
        // Both scans ascend by id: a merge join pairs each message with its
        // state, if any, and skips states without a message.
        let mut states = per_message(&self.db, &keys::queue_states(record.id));
        let mut next_state = states.next().transpose()?;
        let mut messages = Vec::new();
        let mut more = false;
        for entry in self.runs.range(record.id, 0, MessageId::MAX) {
            if messages.len() == head {
                more = true;
                break;
            }
            let (id, value) = entry?;
            let key = keys::message(record.id, id);
            let index: MessageIndex = records::decode(&key, &value)?;
            let mut state = None;
            while let Some((state_id, state_key, state_value)) = &next_state {
                if *state_id > id {
                    break;
                }
                if *state_id == id {
                    state = Some(records::decode(state_key, state_value)?);
                }
                next_state = states.next().transpose()?;
            }
            messages.push(IndexEntry {
                id,
                priority: index.priority,
                expiration_ms: index.expiration_ms,
                size: self.stored_size(record.id, id, &key, &value),
                state,
                scheduled_at_ms: index.scheduled_at_ms,
                group: records::group_of(&index.properties).map(str::to_owned),
            });
        }
        Ok(RecoveredQueue {
            record,
            messages,
            more,
        })
    }

    /// Every duplicate-id cache entry: key order is one address after the
    /// other, each ascending by seq.
    pub(super) fn recover_duplicate_ids(&self) -> Result<Vec<RecoveredDuplicateId>, StorageError> {
        self.db
            .scan_prefix([keys::DUPLICATE_ID])
            .map(|entry| {
                let (key, value) = entry?;
                let Ok(Key::DuplicateId { address, seq }) = Key::decode(&key) else {
                    return Err(StorageError::Corrupt {
                        key: keys::hex(&key),
                        reason: "not a duplicate-id key".into(),
                    });
                };
                let record: DuplicateIdRecord = records::decode(&key, &value)?;
                Ok(RecoveredDuplicateId {
                    address,
                    seq,
                    id: record.id,
                })
            })
            .collect()
    }
}
