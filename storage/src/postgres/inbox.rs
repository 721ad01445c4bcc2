//! The inbox: how the node that serves a queue learns of the messages other
//! nodes stored for it.
//!
//! A send is one commit wherever its queues are served: the messages are
//! stored by the node the producer talks to, and for each queue that node
//! does not hold, an `inbox (queue, id)` row joins the same transaction
//! (`fence.rs` sorts them, `writes.rs` writes them), which then sends one
//! `NOTIFY rebound_inbox` naming those queues, never one per message. The
//! [`Commit`](crate::Commit) names those messages ([`Commit::inboxed`](crate::Commit::inboxed)), so that
//! the sending node never takes one into its own memory, also when it has
//! become the queue's owner meanwhile: a message with an inbox row reaches
//! memory through the inbox only, once.
//!
//! The owner's own messages join the inbox too while other nodes' messages
//! wait there (its listening connection was down, say): the commit's
//! statement adds their rows only if the queue's inbox holds rows, and the
//! commit names them once it resolved. Taken first, the owner's message
//! would be delivered before an earlier send of the same producer made
//! through another node; behind them, it is taken with them, in id order.
//!
//! The owner listens on a connection of its own ([`PostgresStore::inbox_notices`])
//! and also looks every second or so ([`PostgresStore::inbox_queues`]), since
//! a notification sent while its listening connection was down is lost. It
//! then takes a queue's rows ([`PostgresStore::drain_inbox`]): one
//! transaction, fenced like every owner write, deletes them and returns
//! their messages with their states. Until then the queue's scans and counts
//! leave those messages out (`reads.rs`), so that a message reaches its
//! owner's memory exactly once, through the inbox or through a scan. A node
//! that takes a queue over empties its inbox before it first reads the queue
//! ([`PostgresStore::empty_inbox`], once its own sends to the queue that were
//! under way as it took the lease have committed): those reads then find
//! the messages in id order with the rest (the order one producer sent them
//! in), rather than after messages sent later. It drains it from then on
//! like any owner; one that fails after draining leaves the messages in the
//! queue, where its successor's scan of the queue finds them.

use tokio::sync::mpsc;

use super::PostgresStore;
use super::fence::Claims;
use super::pool::{db_error, pool_error};
use crate::error::StorageError;
use crate::records::decode;
use crate::{MessageId, QueueId, ScannedMessage, keys};

/// The channel of the inbox notifications.
const CHANNEL: &str = "rebound_inbox";

/// What one notification said: the queues it names, or every queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxNotice {
    /// Messages were stored for these queues.
    Queues(Vec<QueueId>),
    /// For too many queues to name: look at all.
    Any,
}

impl InboxNotice {
    fn parse(payload: &str) -> InboxNotice {
        let queues: Option<Vec<QueueId>> = payload.split(',').map(|q| q.parse().ok()).collect();
        match queues {
            Some(queues) if !payload.is_empty() => InboxNotice::Queues(queues),
            _ => InboxNotice::Any,
        }
    }
}

impl PostgresStore {
    /// Every inbox notification from now on, on a connection of its own;
    /// stops when the receiver is dropped.
    pub fn inbox_notices(&self) -> mpsc::UnboundedReceiver<InboxNotice> {
        let mut payloads = self.db.listen(CHANNEL);
        let (tx, rx) = mpsc::unbounded_channel();
        self.db.spawn(async move {
            while let Some(payload) = payloads.recv().await {
                if tx.send(InboxNotice::parse(&payload)).is_err() {
                    return;
                }
            }
        });
        rx
    }

    /// Which of `queues` have messages in their inbox.
    pub fn inbox_queues(
        &self,
        queues: Vec<QueueId>,
    ) -> impl Future<Output = Result<Vec<QueueId>, StorageError>> + Send + 'static {
        self.db.run(move |pool| async move {
            let client = pool.get().await.map_err(pool_error)?;
            let queues: Vec<i64> = queues.into_iter().map(i64::from).collect();
            let rows = client
                .query(
                    "SELECT DISTINCT queue FROM inbox WHERE queue = ANY($1::bigint[]) ORDER BY queue",
                    &[&queues],
                )
                .await
                .map_err(db_error)?;
            Ok(rows.iter().map(|row| row.get::<_, i64>(0) as QueueId).collect())
        })
    }

    /// Takes the messages in `queue`'s inbox (with their states), ascending
    /// by id. Only under the lease this node holds on the queue: otherwise
    /// [`StorageError::Fenced`], and nothing is taken.
    pub fn drain_inbox(
        &self,
        queue: QueueId,
    ) -> impl Future<Output = Result<Vec<ScannedMessage>, StorageError>> + Send + 'static {
        let claims = self.fence.claim(queue);
        self.db.run(move |pool| async move {
            let claims = claims?;
            let mut client = pool.get().await.map_err(pool_error)?;
            let tx = client.transaction().await.map_err(db_error)?;
            held(&tx, &claims, queue).await?;
            let rows = tx
                .query(
                    "WITH drained AS (DELETE FROM inbox WHERE queue = $1 RETURNING queue, id)
                     SELECT m.id, m.record, s.record FROM drained d
                     JOIN messages m ON m.queue = d.queue AND m.id = d.id
                     LEFT JOIN delivery_states s ON s.queue = d.queue AND s.id = d.id
                     ORDER BY m.id",
                    &[&i64::from(queue)],
                )
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            rows.iter()
                .map(|row| {
                    let id = row.get::<_, i64>(0) as u64;
                    Ok(ScannedMessage {
                        record: decode(&keys::message(queue, id), row.get(1))?,
                        state: row
                            .get::<_, Option<&[u8]>>(2)
                            .map(|record| decode(&keys::state(queue, id), record))
                            .transpose()?,
                    })
                })
                .collect()
        })
    }

    /// Empties `queue`'s inbox without taking its messages: they stay in the
    /// queue, where this node's first reads of it find them (a node that has
    /// just taken the queue, before it reads it); returns their ids. Only
    /// under the lease this node holds on the queue: otherwise
    /// [`StorageError::Fenced`].
    pub fn empty_inbox(
        &self,
        queue: QueueId,
    ) -> impl Future<Output = Result<Vec<MessageId>, StorageError>> + Send + 'static {
        let claims = self.fence.claim(queue);
        self.db.run(move |pool| async move {
            let claims = claims?;
            let mut client = pool.get().await.map_err(pool_error)?;
            let tx = client.transaction().await.map_err(db_error)?;
            held(&tx, &claims, queue).await?;
            let rows = tx
                .query(
                    "DELETE FROM inbox WHERE queue = $1 RETURNING id",
                    &[&i64::from(queue)],
                )
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            Ok(rows.iter().map(|row| row.get::<_, i64>(0) as MessageId).collect())
        })
    }
}

/// Checks in `tx` that this node still holds `queue` under `claims` (the
/// queue's row stays locked until `tx` ends): [`StorageError::Fenced`] if not.
async fn held(
    tx: &tokio_postgres::Transaction<'_>,
    claims: &Claims,
    queue: QueueId,
) -> Result<(), StorageError> {
    let (nodes, queues, epochs, count) = claims.columns();
    tx.query_one(super::fence::FENCE, &[&nodes, &queues, &epochs, &count])
        .await
        .map_err(|err| match err.code().map(|c| c.code()) {
            Some(super::fence::LOST) => StorageError::Fenced { queue },
            _ => db_error(err),
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_name_their_queues_or_all() {
        assert_eq!(InboxNotice::parse("3,17"), InboxNotice::Queues(vec![3, 17]));
        assert_eq!(InboxNotice::parse(""), InboxNotice::Any);
        assert_eq!(InboxNotice::parse("x"), InboxNotice::Any);
    }
}
