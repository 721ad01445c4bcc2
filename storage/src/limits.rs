//! The size limits of a commit, checked in one place for every store, so
//! that the broker sees the same [`StorageError::RecordTooLarge`] whatever
//! store is behind [`Store`](crate::Store).
//!
//! The limits come from the sled store ([`MAX_RECORD_BYTES`],
//! [`MAX_INLINE_RECORD_BYTES`], [`LARGE_BODY_THRESHOLD`] explain why), but
//! they are part of the contract: a store without sled's constraints (the
//! in-memory one) refuses the same commits, or a broker tested against it
//! would accept messages that production refuses.

use prost::Message;

use crate::error::StorageError;
use crate::large::MAX_MARKER_BYTES;
use crate::records::{DueBatchRecord, DuplicateIdRecord, MessageRecord};
use crate::{LARGE_BODY_THRESHOLD, MAX_INLINE_RECORD_BYTES, MAX_RECORD_BYTES, Op, keys};

/// Where a message that passed [`check_message`] keeps its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In the record.
    Inline,
    /// In a file of its own (see [`crate::large`]).
    File,
}

/// Checks every record `op` writes; a commit is refused whole if one op fails.
pub(crate) fn check_op(op: &Op) -> Result<(), StorageError> {
    match op {
        Op::PutAddress(record) => check_record(&keys::address(&record.name), record).map(drop),
        Op::PutQueue(record) => check_record(&keys::queue(record.id), record).map(drop),
        Op::PutMessage { queue, message } => {
            check_message(&keys::message(*queue, message.message_id), message).map(drop)
        }
        Op::PutState { queue, id, state } => check_record(&keys::state(*queue, *id), state).map(drop),
        Op::PutDues { queue, entries } => match entries.iter().min() {
            Some(first) => check_record(
                &keys::due(*queue, first.at_ms, first.id),
                &DueBatchRecord::of(entries),
            )
            .map(drop),
            None => Ok(()),
        },
        Op::PutDuplicateId { address, seq, id } => check_record(
            &keys::duplicate_id(address, *seq),
            &DuplicateIdRecord { id: id.clone() },
        )
        .map(drop),
        Op::DeleteAddress(_)
        | Op::DeleteQueue(_)
        | Op::RemoveMessage { .. }
        | Op::RemoveStatelessMessage { .. }
        | Op::RemoveDuplicateId { .. }
        | Op::RemoveDues { .. }
        | Op::Claim { .. } => Ok(()),
    }
}

/// Checks a record other than a message: key plus encoded value at most
/// [`MAX_INLINE_RECORD_BYTES`]. Returns that size.
pub(crate) fn check_record(key: &[u8], record: &impl Message) -> Result<usize, StorageError> {
    let size = key.len() + record.encoded_len();
    check(key, size, MAX_INLINE_RECORD_BYTES)?;
    Ok(size)
}

/// Checks a message: key plus full record at most [`MAX_RECORD_BYTES`]. It
/// stays inline if its body is at most [`LARGE_BODY_THRESHOLD`] and the whole
/// fits [`MAX_INLINE_RECORD_BYTES`]; otherwise its body goes to a file and
/// the rest, with the large-body marker, must fit [`MAX_INLINE_RECORD_BYTES`].
/// Returns the full size and the placement.
pub(crate) fn check_message(key: &[u8], message: &MessageRecord) -> Result<(usize, Placement), StorageError> {
    let size = key.len() + message.encoded_len();
    check(key, size, MAX_RECORD_BYTES)?;
    if message.body.len() <= LARGE_BODY_THRESHOLD && size <= MAX_INLINE_RECORD_BYTES {
        return Ok((size, Placement::Inline));
    }
    check(
        key,
        key.len() + message.encoded_len_without_body() + MAX_MARKER_BYTES,
        MAX_INLINE_RECORD_BYTES,
    )?;
    Ok((size, Placement::File))
}

fn check(key: &[u8], size: usize, max: usize) -> Result<(), StorageError> {
    if size > max {
        return Err(StorageError::RecordTooLarge {
            key: keys::hex(key),
            size,
            max,
        });
    }
    Ok(())
}
