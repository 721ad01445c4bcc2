//! Reads and recovery.
//!
//! Recovery reads in one `REPEATABLE READ` snapshot: addresses, queues, then
//! each queue's index as ranged pages ([`index_page`]: the messages of one
//! queue after an id, ascending, at most so many) that never load a body, and
//! the duplicate ids. The ranged read is also what reading a bounded head of
//! a queue (paging) or one queue taken over by another node needs.
//!
//! Scans and counts of a queue leave out the messages still in its inbox
//! (`inbox.rs`): the queue's owner takes those from there, and must not meet
//! them twice.

use deadpool_postgres::{GenericClient, Pool};
use tokio_postgres::IsolationLevel;

use super::pool::{db_error, pool_error};
use crate::error::StorageError;
use crate::records::{AddressRecord, DeliveryState, DueBatchRecord, MessageRecord, QueueRecord, decode};
use crate::{
    Due, DueBatch, IndexEntry, MessageId, QueueCount, QueueId, Recovered, RecoveredDuplicateId,
    RecoveredQueue, ScannedMessage, keys,
};

/// Index entries per round trip during recovery.
const INDEX_PAGE_ROWS: i64 = 10_000;

/// The message `id` of `queue`.
pub(super) async fn message(
    pool: &Pool,
    queue: QueueId,
    id: MessageId,
) -> Result<Option<MessageRecord>, StorageError> {
    let sql = "SELECT record FROM messages WHERE queue = $1 AND id = $2";
    record(pool, sql, queue, id, &keys::message(queue, id)).await
}

/// Which of messages `ids` of `queue` are stored, in the order given.
pub(super) async fn stored(
    pool: &Pool,
    queue: QueueId,
    ids: Vec<MessageId>,
) -> Result<Vec<bool>, StorageError> {
    let wanted: Vec<i64> = ids.iter().map(|&id| id as i64).collect();
    let client = pool.get().await.map_err(pool_error)?;
    let rows = client
        .query(
            "SELECT id FROM messages WHERE queue = $1 AND id = ANY($2)",
            &[&i64::from(queue), &wanted],
        )
        .await
        .map_err(db_error)?;
    let found: std::collections::HashSet<i64> = rows.iter().map(|row| row.get(0)).collect();
    Ok(wanted.iter().map(|id| found.contains(id)).collect())
}

/// The delivery state of message `id` of `queue`.
pub(super) async fn state(
    pool: &Pool,
    queue: QueueId,
    id: MessageId,
) -> Result<Option<DeliveryState>, StorageError> {
    let sql = "SELECT record FROM delivery_states WHERE queue = $1 AND id = $2";
    record(pool, sql, queue, id, &keys::state(queue, id)).await
}

/// The record `sql` selects for `(queue, id)`, decoded (`key` names it in errors).
async fn record<M: prost::Message + Default>(
    pool: &Pool,
    sql: &str,
    queue: QueueId,
    id: MessageId,
    key: &[u8],
) -> Result<Option<M>, StorageError> {
    let client = pool.get().await.map_err(pool_error)?;
    let statement = client.prepare_cached(sql).await.map_err(db_error)?;
    let row = client
        .query_opt(&statement, &[&i64::from(queue), &id_bound(id)])
        .await
        .map_err(db_error)?;
    row.map(|row| decode(key, row.get(0))).transpose()
}

/// Everything [`Store::recover_head`](crate::Store::recover_head) returns,
/// from one snapshot: each queue's first `head` index entries.
pub(super) async fn recover_head(pool: &Pool, head: usize) -> Result<Recovered, StorageError> {
    recover_in_pages(pool, head, INDEX_PAGE_ROWS).await
}

/// Every address record, by name as Rust orders strings: by bytes.
pub(super) async fn address_records(client: &impl GenericClient) -> Result<Vec<AddressRecord>, StorageError> {
    client
        .query(
            "SELECT name, record FROM addresses ORDER BY name COLLATE \"C\"",
            &[],
        )
        .await
        .map_err(db_error)?
        .iter()
        .map(|row| decode(&keys::address(row.get(0)), row.get(1)))
        .collect()
}

/// Every queue record, by id.
pub(super) async fn queue_records(client: &impl GenericClient) -> Result<Vec<QueueRecord>, StorageError> {
    client
        .query("SELECT id, record FROM queues ORDER BY id", &[])
        .await
        .map_err(db_error)?
        .iter()
        .map(|row| decode(&keys::queue(row.get::<_, i64>(0) as QueueId), row.get(1)))
        .collect()
}

/// [`recover_head`], reading each queue's index `page_rows` entries at a time.
async fn recover_in_pages(pool: &Pool, head: usize, page_rows: i64) -> Result<Recovered, StorageError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(db_error)?;
    let addresses = address_records(&tx).await?;
    let mut queues = Vec::new();
    for record in queue_records(&tx).await? {
        let id = record.id;
        let mut messages = Vec::new();
        // One entry past the head says whether the queue has more.
        let wanted = head.saturating_add(1);
        loop {
            let after = messages.last().map(|m: &IndexEntry| m.id);
            let limit = page_rows.min(rows(wanted - messages.len()));
            let page = index_page(&tx, id, after, limit).await?;
            let full = page.len() as i64 == limit;
            messages.extend(page);
            if !full || messages.len() == wanted {
                break;
            }
        }
        let more = messages.len() > head;
        messages.truncate(head);
        queues.push(RecoveredQueue {
            record,
            messages,
            more,
        });
    }
    let duplicate_ids = tx
        .query(
            "SELECT address, seq, id FROM duplicate_ids ORDER BY address, seq",
            &[],
        )
        .await
        .map_err(db_error)?
        .iter()
        .map(|row| RecoveredDuplicateId {
            address: row.get(0),
            seq: row.get::<_, i64>(1) as u64,
            id: bytes::Bytes::copy_from_slice(row.get(2)),
        })
        .collect();
    tx.commit().await.map_err(db_error)?;
    Ok(Recovered {
        addresses,
        queues,
        duplicate_ids,
    })
}

/// A count of rows as SQL takes it.
fn rows(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An id (or a time in ms) as the `bigint` column compares it (`u64::MAX`:
/// no bound).
pub(super) fn id_bound(id: MessageId) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

/// What [`Store::scan_queue`](crate::Store::scan_queue) returns: whole
/// messages with their states, at most `max_messages`, the last the one that
/// reaches `max_bytes`.
pub(super) async fn scan_queue(
    pool: &Pool,
    queue: QueueId,
    after: MessageId,
    max_messages: usize,
    max_bytes: u64,
) -> Result<Vec<ScannedMessage>, StorageError> {
    let client = pool.get().await.map_err(pool_error)?;
    let statement = client
        .prepare_cached(
            "SELECT m.id, m.size, m.record, s.record
             FROM messages m
             LEFT JOIN delivery_states s ON s.queue = m.queue AND s.id = m.id
             WHERE m.queue = $1 AND m.id > $2
               AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.queue = m.queue AND i.id = m.id)
             ORDER BY m.id
             LIMIT $3",
        )
        .await
        .map_err(db_error)?;
    let found = client
        .query(
            &statement,
            &[&i64::from(queue), &id_bound(after), &rows(max_messages)],
        )
        .await
        .map_err(db_error)?;
    let mut bytes = 0u64;
    let mut scanned = Vec::with_capacity(found.len());
    for row in found {
        let id = row.get::<_, i64>(0) as MessageId;
        // As the other stores: the message that reaches `max_bytes` is the last.
        if bytes >= max_bytes && !scanned.is_empty() {
            break;
        }
        bytes += row.get::<_, i32>(1) as u64;
        scanned.push(ScannedMessage {
            record: decode(&keys::message(queue, id), row.get(2))?,
            state: row
                .get::<_, Option<&[u8]>>(3)
                .map(|record| decode(&keys::state(queue, id), record))
                .transpose()?,
        });
    }
    Ok(scanned)
}

/// What [`Store::count_queue`](crate::Store::count_queue) returns, counted by
/// the database from the index columns (no record leaves it).
pub(super) async fn count_queue(
    pool: &Pool,
    queue: QueueId,
    after: MessageId,
    before: MessageId,
    max_messages: usize,
) -> Result<QueueCount, StorageError> {
    let client = pool.get().await.map_err(pool_error)?;
    let statement = client
        .prepare_cached(
            "SELECT count(*) FILTER (WHERE n <= $4::bigint),
                    coalesce(sum(size) FILTER (WHERE n <= $4::bigint), 0)::bigint,
                    max(id) FILTER (WHERE n <= $4::bigint),
                    count(*) > $4::bigint
             FROM (SELECT id, size, row_number() OVER (ORDER BY id) AS n
                   FROM (SELECT id, size FROM messages m
                         WHERE queue = $1 AND id > $2 AND id < $3
                           AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.queue = m.queue AND i.id = m.id)
                         ORDER BY id LIMIT $4::bigint + 1) r) numbered",
        )
        .await
        .map_err(db_error)?;
    let max = rows(max_messages).min(i64::MAX - 1);
    let row = client
        .query_one(
            &statement,
            &[&i64::from(queue), &id_bound(after), &id_bound(before), &max],
        )
        .await
        .map_err(db_error)?;
    Ok(QueueCount {
        messages: row.get::<_, i64>(0) as u64,
        bytes: row.get::<_, i64>(1) as u64,
        last: row.get::<_, Option<i64>>(2).map_or(after, |id| id as MessageId),
        more: row.get(3),
    })
}

/// What [`Store::scan_due`](crate::Store::scan_due) returns.
pub(super) async fn scan_due(
    pool: &Pool,
    queue: QueueId,
    after: Option<Due>,
    max: usize,
) -> Result<Vec<DueBatch>, StorageError> {
    let client = pool.get().await.map_err(pool_error)?;
    let statement = client
        .prepare_cached(
            "SELECT due_ms, id, record FROM dues WHERE queue = $1 AND (due_ms, id) > ($2, $3)
             ORDER BY due_ms, id LIMIT $4",
        )
        .await
        .map_err(db_error)?;
    let (at, id) = after.map_or((i64::MIN, i64::MIN), |d| (id_bound(d.at_ms), id_bound(d.id)));
    let rows = client
        .query(&statement, &[&i64::from(queue), &at, &id, &rows(max)])
        .await
        .map_err(db_error)?;
    rows.iter()
        .map(|row| {
            let first = Due {
                at_ms: row.get::<_, i64>(0) as u64,
                id: row.get::<_, i64>(1) as MessageId,
            };
            let key = keys::due(queue, first.at_ms, first.id);
            let entries = DueBatchRecord::decode_entries(&key, row.get(2))?;
            Ok(DueBatch { first, entries })
        })
        .collect()
}

/// The index entries of `queue`'s messages with ids above `after` (all if
/// `None`), ascending, at most `limit`.
pub(super) async fn index_page(
    client: &impl GenericClient,
    queue: QueueId,
    after: Option<MessageId>,
    limit: i64,
) -> Result<Vec<IndexEntry>, StorageError> {
    let statement = client
        .prepare_cached(
            "SELECT m.id, m.priority, m.expiration_ms, m.size, m.grp, s.record, m.scheduled_at_ms
             FROM messages m
             LEFT JOIN delivery_states s ON s.queue = m.queue AND s.id = m.id
             WHERE m.queue = $1 AND m.id > $2
             ORDER BY m.id
             LIMIT $3",
        )
        .await
        .map_err(db_error)?;
    let after = after.map_or(i64::MIN, |id| id as i64);
    let rows = client
        .query(&statement, &[&i64::from(queue), &after, &limit])
        .await
        .map_err(db_error)?;
    rows.iter()
        .map(|row| {
            let id = row.get::<_, i64>(0) as MessageId;
            let state = row
                .get::<_, Option<&[u8]>>(5)
                .map(|record| decode(&keys::state(queue, id), record))
                .transpose()?;
            Ok(IndexEntry {
                id,
                priority: row.get::<_, i32>(1) as u32,
                expiration_ms: row.get::<_, i64>(2) as u64,
                size: row.get::<_, i32>(3) as u32,
                state,
                scheduled_at_ms: row.get::<_, i64>(6) as u64,
                group: row.get(4),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::{PostgresOptions, PostgresStore, test_pg as pg};
    use crate::{Op, Store};

    fn put(queue: QueueId, id: MessageId) -> Op {
        Op::PutMessage {
            queue,
            message: MessageRecord {
                message_id: id,
                priority: (id % 10) as u32,
                ..Default::default()
            },
        }
    }

    #[tokio::test]
    async fn a_queue_index_reads_in_ranged_pages_and_recovery_pages_through_it() {
        let Some(schema) = pg::TestSchema::create("postgres ranged reads") else {
            return;
        };
        let store = PostgresStore::open(&PostgresOptions::new(schema.url())).unwrap();
        let mut ops = vec![
            Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            }),
            Op::PutQueue(QueueRecord {
                id: 2,
                ..Default::default()
            }),
        ];
        ops.extend((1..=25).map(|id| put(1, id * 2)));
        ops.extend((1..=3).map(|id| put(2, id)));
        ops.push(Op::PutState {
            queue: 1,
            id: 22,
            state: DeliveryState {
                delivery_count: 3,
                ..Default::default()
            },
        });
        store.commit(ops).await.unwrap();

        let pages = store
            .db
            .block(|pool| async move {
                let client = pool.get().await.map_err(pool_error)?;
                let mut pages = Vec::new();
                for after in [None, Some(20), Some(21), Some(48), Some(50)] {
                    pages.push(index_page(&client, 1, after, 10).await?);
                }
                Ok(pages)
            })
            .unwrap();
        let ids = |page: &Vec<IndexEntry>| page.iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids(&pages[0]), (1..=10).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(ids(&pages[1]), (11..=20).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(ids(&pages[1]), ids(&pages[2]), "after an id that is not there");
        assert_eq!(ids(&pages[3]), [50]);
        assert!(pages[4].is_empty());
        let entry = &pages[1][0];
        assert_eq!((entry.id, entry.priority), (22, 2));
        assert_eq!(entry.state.as_ref().map(|s| s.delivery_count), Some(3));

        let whole = store.recover().unwrap();
        let paged = store
            .db
            .block(|pool| async move { recover_in_pages(&pool, usize::MAX, 7).await })
            .unwrap();
        assert_eq!(paged, whole);
        assert_eq!(whole.queues[0].messages.len(), 25);
        assert_eq!(whole.queues[1].messages.len(), 3);
    }
}
