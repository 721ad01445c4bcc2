//! [`OrderedKv`], "the kv": what the write path (the committer in
//! `group_commit.rs` and the checkpointer in `checkpoint.rs`) needs from the
//! ordered key-value store behind the journal, where checkpointed writes go
//! (for [`SledStore`](crate::SledStore): the runs for message records, sled
//! for the rest).
//!
//! It has a file of its own so that imports go one way: both stages and the
//! implementation (`sled_store/kv.rs`) depend on this trait, and the
//! committer depends on the checkpointer, never the reverse.

use crate::error::StorageError;
use crate::large::LargeBody;
use crate::{MessageId, QueueId};

/// What the committer and the checkpointer need from the kv (each has a
/// clone).
pub(crate) trait OrderedKv: Clone + Send + 'static {
    /// The kv's value type, cheap to clone.
    type Value: Clone + AsRef<[u8]> + From<Vec<u8>> + Send + Sync + 'static;
    /// The keys under `prefix` in the kv.
    fn keys_with_prefix(&self, prefix: &[u8]) -> Result<Vec<Vec<u8>>, StorageError>;
    /// The large-body marker of the value under `key` in the kv, if any.
    fn marker(&self, key: &[u8]) -> Result<Option<LargeBody>, StorageError>;
    /// The highest message id among the message and state keys of `queue`
    /// in the kv, if it has any.
    fn highest_id(&self, queue: QueueId) -> Result<Option<MessageId>, StorageError>;
    /// Applies writes (visible at once, durable at the next checkpoint).
    fn apply(&self, writes: impl Iterator<Item = (Vec<u8>, Option<Self::Value>)>)
    -> Result<(), StorageError>;
    /// Records that every journal record up to `seq` is applied and makes
    /// everything applied so far durable.
    fn checkpoint(&self, seq: u64) -> Result<(), StorageError>;
}
