//! A message with a large body, shared by the contract suite and the sled
//! store's own large-message tests.
use bytes::Bytes;
use rebound_storage::MessageRecord;

/// A message with a body of `body_len` bytes that differ from message to
/// message.
pub fn large(id: u64, body_len: usize) -> MessageRecord {
    MessageRecord {
        message_id: id,
        address: "big".into(),
        body: Bytes::from(
            (0..body_len)
                .map(|i| (i as u64 * 31 + id) as u8)
                .collect::<Vec<u8>>(),
        ),
        durable: true,
        priority: 6,
        expiration_ms: 77,
        ..Default::default()
    }
}
