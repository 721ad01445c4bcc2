//! The in-memory store with its commits (and close) handed to a hook: how the
//! engine copes with a store that is slow or refuses, without a disk.
use std::sync::Arc;

use rebound_storage::{
    Commit, DeliveryState, Due, DueBatch, MemoryStore, MessageId, MessageRecord, Op, QueueCount, QueueId,
    Recovered, ScannedMessage, StorageError, Store, StoreStats,
};

/// What a test does to the store's commits.
pub(super) trait Hook: Send + Sync + 'static {
    fn commit(&self, inner: &Arc<MemoryStore>, ops: Vec<Op>) -> Commit;

    fn close(&self, inner: &MemoryStore) -> Result<(), StorageError> {
        inner.close()
    }
}

/// A [`MemoryStore`] whose commits go through `hook`; reads go straight to it.
pub(super) struct Intercepted<H> {
    pub inner: Arc<MemoryStore>,
    pub hook: H,
}

impl<H: Hook> Store for Intercepted<H> {
    fn commit(&self, ops: Vec<Op>) -> Commit {
        self.hook.commit(&self.inner, ops)
    }

    fn generate_id(&self) -> Result<MessageId, StorageError> {
        self.inner.generate_id()
    }

    fn read_message(&self, queue: QueueId, id: MessageId) -> Result<Option<MessageRecord>, StorageError> {
        self.inner.read_message(queue, id)
    }

    fn read_state(&self, queue: QueueId, id: MessageId) -> Result<Option<DeliveryState>, StorageError> {
        self.inner.read_state(queue, id)
    }

    fn recover_head(&self, head: usize) -> Result<Recovered, StorageError> {
        self.inner.recover_head(head)
    }

    fn scan_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        max_messages: usize,
        max_bytes: u64,
    ) -> Result<Vec<ScannedMessage>, StorageError> {
        self.inner.scan_queue(queue, after, max_messages, max_bytes)
    }

    fn count_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        before: MessageId,
        max_messages: usize,
    ) -> Result<QueueCount, StorageError> {
        self.inner.count_queue(queue, after, before, max_messages)
    }

    fn scan_due(
        &self,
        queue: QueueId,
        after: Option<Due>,
        max: usize,
    ) -> Result<Vec<DueBatch>, StorageError> {
        self.inner.scan_due(queue, after, max)
    }

    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }

    fn close(&self) -> Result<(), StorageError> {
        self.hook.close(&self.inner)
    }
}
