//! The key codec: how every stored record is addressed.
//!
//! All records live in one ordered keyspace. A key starts with a one-byte
//! *kind* prefix, followed by the record's identity. Integers are written
//! big-endian, so the kv's lexicographic byte order is the numeric order:
//! the messages of one queue are contiguous and ascend by [`MessageId`], and
//! "everything of queue `q`" is a prefix scan.
//!
//! | kind   | rest of the key                 | value                          |
//! |--------|---------------------------------|--------------------------------|
//! | `0x01` | queue `u32` ‖ message `u64`     | [`MessageRecord`]              |
//! | `0x02` | queue `u32` ‖ message `u64`     | [`DeliveryState`]              |
//! | `0x03` | queue `u32` ‖ due `u64` ‖ message `u64` | [`DueBatchRecord`] |
//! | `0x10` | address name, UTF-8             | [`AddressRecord`]              |
//! | `0x11` | queue `u32`                     | [`QueueRecord`]                |
//! | `0x20` | (nothing)                       | journal checkpoint, `u64` BE   |
//! | `0x30` | address length `u32` ‖ address, UTF-8 ‖ seq `u64` | [`DuplicateIdRecord`] |
//!
//! A `0x03` key holds a batch of the scheduled messages the broker keeps out
//! of memory, keyed by the batch's earliest entry (when it is due, ms since
//! the epoch, then its id), so that the queue's next due ones are one ordered
//! scan ([`Op::PutDues`](crate::Op::PutDues)).
//!
//! A `0x30` key is one entry of an address's duplicate-id cache; `seq` orders
//! the entries of one address oldest first, so the cache's FIFO is a prefix
//! scan. The length prefix makes "every entry of address `a`" an exact prefix
//! whatever bytes names contain (so byte order sorts these keys by address
//! length first: only the order within one address means anything).
//!
//! This module is pure: no store, no I/O, so it is unit- and property-tested
//! on its own.
//!
//! [`MessageRecord`]: crate::records::MessageRecord
//! [`DeliveryState`]: crate::records::DeliveryState
//! [`AddressRecord`]: crate::records::AddressRecord
//! [`QueueRecord`]: crate::records::QueueRecord
//! [`DuplicateIdRecord`]: crate::records::DuplicateIdRecord
//! [`DueBatchRecord`]: crate::records::DueBatchRecord

use crate::{MessageId, QueueId};

/// Kind prefix of a [`MessageRecord`](crate::records::MessageRecord) key.
pub const MESSAGE: u8 = 0x01;
/// Kind prefix of a [`DeliveryState`](crate::records::DeliveryState) key.
pub const STATE: u8 = 0x02;
/// Kind prefix of a due-time index batch key ([`DueBatchRecord`](crate::records::DueBatchRecord)).
pub const DUE: u8 = 0x03;
/// Kind prefix of an [`AddressRecord`](crate::records::AddressRecord) key.
pub const ADDRESS: u8 = 0x10;
/// Kind prefix of a [`QueueRecord`](crate::records::QueueRecord) key.
pub const QUEUE: u8 = 0x11;
/// The one key of the journal checkpoint: the seq of the last journal record
/// known to be durable in the kv (see `journal.rs`).
pub const JOURNAL_CHECKPOINT: u8 = 0x20;
/// Kind prefix of a [`DuplicateIdRecord`](crate::records::DuplicateIdRecord) key.
pub const DUPLICATE_ID: u8 = 0x30;

/// A decoded key: which record a stored key names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// A message reference held by a queue.
    Message {
        /// The queue holding the reference.
        queue: QueueId,
        /// The message.
        id: MessageId,
    },
    /// The delivery state of a message reference.
    State {
        /// The queue holding the reference.
        queue: QueueId,
        /// The message.
        id: MessageId,
    },
    /// A batch of the due-time index, by its earliest entry.
    Due {
        /// The queue whose index it is.
        queue: QueueId,
        /// When its earliest message is due, ms since the epoch.
        due_ms: u64,
        /// That message.
        id: MessageId,
    },
    /// An address definition.
    Address(String),
    /// A queue definition.
    Queue(QueueId),
    /// The journal checkpoint.
    JournalCheckpoint,
    /// One entry of an address's duplicate-id cache.
    DuplicateId {
        /// The address whose cache it is.
        address: String,
        /// Its place in that cache, oldest first.
        seq: u64,
    },
}

/// Why a byte string is not a valid key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key is empty or starts with an unknown kind byte.
    #[error("unknown key kind {0:?}")]
    UnknownKind(Option<u8>),
    /// The key has the wrong length for its kind.
    #[error("key of kind {kind:#04x} has {len} bytes")]
    BadLength {
        /// The kind byte.
        kind: u8,
        /// The key's full length.
        len: usize,
    },
    /// An address key whose name is not UTF-8.
    #[error("address name is not UTF-8")]
    NotUtf8,
}

impl Key {
    /// Encodes this key to the bytes stored in the kv.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Key::Message { queue, id } => message(*queue, *id).to_vec(),
            Key::State { queue, id } => state(*queue, *id).to_vec(),
            Key::Due { queue, due_ms, id } => due(*queue, *due_ms, *id).to_vec(),
            Key::Address(name) => address(name),
            Key::Queue(queue) => self::queue(*queue).to_vec(),
            Key::JournalCheckpoint => vec![JOURNAL_CHECKPOINT],
            Key::DuplicateId { address, seq } => duplicate_id(address, *seq),
        }
    }

    /// Decodes stored key bytes.
    pub fn decode(bytes: &[u8]) -> Result<Key, KeyError> {
        let (&kind, rest) = bytes.split_first().ok_or(KeyError::UnknownKind(None))?;
        let bad_length = || KeyError::BadLength {
            kind,
            len: bytes.len(),
        };
        match kind {
            MESSAGE | STATE => {
                let rest: &[u8; 12] = rest.try_into().map_err(|_| bad_length())?;
                let (q, m) = rest.split_at(4);
                let queue = u32::from_be_bytes(q.try_into().expect("4 bytes"));
                let id = u64::from_be_bytes(m.try_into().expect("8 bytes"));
                Ok(if kind == MESSAGE {
                    Key::Message { queue, id }
                } else {
                    Key::State { queue, id }
                })
            }
            DUE => {
                let rest: &[u8; 20] = rest.try_into().map_err(|_| bad_length())?;
                let (q, rest) = rest.split_at(4);
                let (due_ms, id) = rest.split_at(8);
                Ok(Key::Due {
                    queue: u32::from_be_bytes(q.try_into().expect("4 bytes")),
                    due_ms: u64::from_be_bytes(due_ms.try_into().expect("8 bytes")),
                    id: u64::from_be_bytes(id.try_into().expect("8 bytes")),
                })
            }
            ADDRESS => std::str::from_utf8(rest)
                .map(|name| Key::Address(name.to_owned()))
                .map_err(|_| KeyError::NotUtf8),
            QUEUE => {
                let rest: [u8; 4] = rest.try_into().map_err(|_| bad_length())?;
                Ok(Key::Queue(u32::from_be_bytes(rest)))
            }
            JOURNAL_CHECKPOINT if rest.is_empty() => Ok(Key::JournalCheckpoint),
            JOURNAL_CHECKPOINT => Err(bad_length()),
            DUPLICATE_ID => {
                let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(bad_length)?;
                let len = u32::from_be_bytes(*len) as usize;
                if rest.len() != len.saturating_add(8) {
                    return Err(bad_length());
                }
                let (name, seq) = rest.split_at(len);
                let address = std::str::from_utf8(name).map_err(|_| KeyError::NotUtf8)?;
                Ok(Key::DuplicateId {
                    address: address.to_owned(),
                    seq: u64::from_be_bytes(seq.try_into().expect("8 bytes")),
                })
            }
            other => Err(KeyError::UnknownKind(Some(other))),
        }
    }
}

/// The key of a queue's reference to a message: `0x01 | queue | id`.
pub fn message(queue: QueueId, id: MessageId) -> [u8; 13] {
    per_message(MESSAGE, queue, id)
}

/// The key of a message reference's delivery state: `0x02 | queue | id`.
pub fn state(queue: QueueId, id: MessageId) -> [u8; 13] {
    per_message(STATE, queue, id)
}

/// The key of `queue`'s due-time batch whose earliest entry is message `id`
/// due at `due_ms`: `0x03 | queue | due_ms | id` (a [`Due`](crate::Due)'s order
/// is the bytes').
pub fn due(queue: QueueId, due_ms: u64, id: MessageId) -> [u8; 21] {
    let mut key = [0; 21];
    key[..5].copy_from_slice(&queue_prefix(DUE, queue));
    key[5..13].copy_from_slice(&due_ms.to_be_bytes());
    key[13..].copy_from_slice(&id.to_be_bytes());
    key
}

/// The prefix shared by the due-time index keys of `queue`.
pub fn queue_dues(queue: QueueId) -> [u8; 5] {
    queue_prefix(DUE, queue)
}

/// The key of an address definition: `0x10 | name`.
pub fn address(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + name.len());
    key.push(ADDRESS);
    key.extend_from_slice(name.as_bytes());
    key
}

/// The key of a queue definition: `0x11 | queue`.
pub fn queue(queue: QueueId) -> [u8; 5] {
    queue_prefix(QUEUE, queue)
}

/// The prefix shared by all message keys of `queue`.
pub fn queue_messages(queue: QueueId) -> [u8; 5] {
    queue_prefix(MESSAGE, queue)
}

/// The prefix shared by all delivery-state keys of `queue`.
pub fn queue_states(queue: QueueId) -> [u8; 5] {
    queue_prefix(STATE, queue)
}

/// The key of an entry of an address's duplicate-id cache:
/// `0x30 | len u32 | address | seq`.
pub fn duplicate_id(address: &str, seq: u64) -> Vec<u8> {
    let mut key = address_duplicate_ids(address);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The prefix shared by the duplicate-id cache entries of `address`.
pub fn address_duplicate_ids(address: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + 4 + address.len() + 8);
    key.push(DUPLICATE_ID);
    // Names are far below 4 GiB (the store bounds every key by its record limit).
    key.extend_from_slice(&(address.len() as u32).to_be_bytes());
    key.extend_from_slice(address.as_bytes());
    key
}

/// Lower-case hex of a key, for error messages and logs.
pub fn hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

fn per_message(kind: u8, queue: QueueId, id: MessageId) -> [u8; 13] {
    let mut key = [0; 13];
    key[0] = kind;
    key[1..5].copy_from_slice(&queue.to_be_bytes());
    key[5..].copy_from_slice(&id.to_be_bytes());
    key
}

fn queue_prefix(kind: u8, queue: QueueId) -> [u8; 5] {
    let mut key = [0; 5];
    key[0] = kind;
    key[1..].copy_from_slice(&queue.to_be_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_key() -> impl Strategy<Value = Key> {
        prop_oneof![
            (any::<u32>(), any::<u64>()).prop_map(|(queue, id)| Key::Message { queue, id }),
            (any::<u32>(), any::<u64>()).prop_map(|(queue, id)| Key::State { queue, id }),
            (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(queue, due_ms, id)| Key::Due {
                queue,
                due_ms,
                id
            }),
            ".*".prop_map(Key::Address),
            any::<u32>().prop_map(Key::Queue),
            Just(Key::JournalCheckpoint),
        ]
    }

    fn any_duplicate_id() -> impl Strategy<Value = Key> {
        (".*", any::<u64>()).prop_map(|(address, seq)| Key::DuplicateId { address, seq })
    }

    proptest! {
        #[test]
        fn round_trips(key in any_key()) {
            prop_assert_eq!(Key::decode(&key.encode()), Ok(key));
        }

        /// Byte order of encoded keys is the order of `Key` (kind, then
        /// numeric queue, then numeric id, then name bytes): what makes
        /// prefix scans return messages ascending by id.
        #[test]
        fn order_is_preserved(a in any_key(), b in any_key()) {
            prop_assert_eq!(a.encode().cmp(&b.encode()), a.cmp(&b));
        }

        #[test]
        fn queue_prefixes_cover_exactly_their_queue(q in any::<u32>(), other in any::<u32>(), id in any::<u64>()) {
            prop_assert!(message(q, id).starts_with(&queue_messages(q)));
            prop_assert!(state(q, id).starts_with(&queue_states(q)));
            prop_assert!(due(q, id, id).starts_with(&queue_dues(q)));
            prop_assert_eq!(due(other, id, id).starts_with(&queue_dues(q)), other == q);
            prop_assert_eq!(message(other, id).starts_with(&queue_messages(q)), other == q);
        }

        #[test]
        fn duplicate_id_keys_round_trip(key in any_duplicate_id()) {
            prop_assert_eq!(Key::decode(&key.encode()), Ok(key));
        }

        /// The entries of one address are exactly those under its prefix, and
        /// they scan oldest first.
        #[test]
        fn duplicate_ids_of_an_address_are_its_prefix_in_seq_order(
            a in ".*", b in ".*", s in any::<u64>(), t in any::<u64>()
        ) {
            prop_assert_eq!(duplicate_id(&b, s).starts_with(&address_duplicate_ids(&a)), a == b);
            prop_assert_eq!(duplicate_id(&a, s).cmp(&duplicate_id(&a, t)), s.cmp(&t));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..20)) {
            let _ = Key::decode(&bytes);
        }
    }

    #[test]
    fn layout_is_big_endian() {
        assert_eq!(hex(&message(1, 2)), "01000000010000000000000002");
        assert_eq!(hex(&state(0x0102_0304, 5)), "02010203040000000000000005");
        assert_eq!(hex(&queue(7)), "1100000007");
        assert_eq!(hex(&due(1, 2, 3)), "030000000100000000000000020000000000000003");
        assert_eq!(address("a.b"), b"\x10a.b");
        assert_eq!(Key::JournalCheckpoint.encode(), [0x20]);
        assert_eq!(hex(&duplicate_id("ab", 3)), "300000000261620000000000000003");
    }

    #[test]
    fn rejects_malformed_keys() {
        assert_eq!(Key::decode(&[]), Err(KeyError::UnknownKind(None)));
        assert_eq!(Key::decode(&[0x7f]), Err(KeyError::UnknownKind(Some(0x7f))));
        assert_eq!(
            Key::decode(&[MESSAGE, 0, 0]),
            Err(KeyError::BadLength {
                kind: MESSAGE,
                len: 3
            })
        );
        assert_eq!(Key::decode(&[ADDRESS, 0xff]), Err(KeyError::NotUtf8));
        let mut long = duplicate_id("ab", 3);
        long.push(0);
        assert_eq!(
            Key::decode(&long),
            Err(KeyError::BadLength {
                kind: DUPLICATE_ID,
                len: 16
            })
        );
        assert!(Key::decode(&[DUPLICATE_ID, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
