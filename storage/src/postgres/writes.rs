//! [`Writes`]: the ops of a group of commits folded into the net final value
//! of every row they touch, and the few multi-row statements that write it in one transaction.
//!
//! Folding is what the sled store's write set does for keys
//! (`src/write_set.rs`), with the two prefix deletes kept as such: deleting
//! a queue (or an address) wipes its rows in the database with one statement
//! and forgets what the group had put for it before; what the group puts for
//! it afterwards is written after the wipe. So the statements run in a fixed
//! order, wipes, then deletes, then upserts, and the result is the same as
//! applying every op one after the other. The maps are sorted, so rows are
//! written (and locked) in key order.
//!
//! Messages stored for queues other nodes hold also get an `inbox` row, and
//! the group then sends one `NOTIFY` naming those queues (`inbox.rs`); those
//! stored for queues this node holds get one if the queue's inbox holds rows
//! (the statement returns which did); a
//! group that writes addresses or queues sends one on the metadata channel
//! (`cluster.rs`), so that other nodes update their registries.
//!
//! Each table gets at most one `DELETE … USING unnest(…)` and one
//! `INSERT … SELECT * FROM unnest(…) ON CONFLICT … DO UPDATE` (duplicate ids:
//! a plain `INSERT`, which fails on an id stored already), whatever the
//! number of rows; statements with no rows are not sent.

use std::collections::{BTreeMap, BTreeSet};

use deadpool_postgres::Client;
use futures::TryFutureExt;
use futures::future::BoxFuture;
use prost::Message;
use tokio_postgres::types::ToSql;

use super::fence::{self, Claims};
use super::pool::db_error;
use crate::error::StorageError;
use crate::records::{self, MessageRecord};
use crate::{Due, MessageId, Op, QueueId};

/// What a message row holds besides its key.
struct MessageRow {
    priority: i32,
    expiration_ms: i64,
    size: i32,
    group: Option<String>,
    scheduled_at_ms: i64,
    record: Vec<u8>,
}

impl MessageRow {
    fn new(message: &MessageRecord) -> MessageRow {
        let record = message.encode_to_vec();
        MessageRow {
            // Bit patterns: the broker's values fit (priority 0..=9,
            // times in ms, sizes below MAX_RECORD_BYTES).
            priority: message.priority as i32,
            expiration_ms: message.expiration_ms as i64,
            size: record.len() as i32,
            group: records::group_of(&message.properties).map(str::to_owned),
            scheduled_at_ms: message.scheduled_at_ms as i64,
            record,
        }
    }
}

/// The net effect of a group of commits on the tables: `Some` to upsert,
/// `None` to delete.
#[derive(Default)]
pub(super) struct Writes {
    wiped_queues: BTreeSet<QueueId>,
    wiped_addresses: BTreeSet<String>,
    addresses: BTreeMap<String, Option<Vec<u8>>>,
    queues: BTreeMap<QueueId, Option<Vec<u8>>>,
    messages: BTreeMap<(QueueId, MessageId), Option<MessageRow>>,
    states: BTreeMap<(QueueId, MessageId), Option<Vec<u8>>>,
    /// Due-time index batches by their earliest entry: the encoded record
    /// to upsert, or `None` to delete.
    dues: BTreeMap<(QueueId, Due), Option<Vec<u8>>>,
    /// Duplicate ids removed, then those inserted (with their seq): an id
    /// the group removes and stores again is deleted before it is inserted.
    duplicate_ids_gone: BTreeSet<(String, Vec<u8>)>,
    duplicate_ids: BTreeMap<(String, Vec<u8>), u64>,
    /// Messages stored for queues other nodes hold (`fence.rs`).
    inbox: BTreeSet<(QueueId, MessageId)>,
    /// Messages stored for queues this node holds (`fence.rs`).
    owned: BTreeSet<(QueueId, MessageId)>,
}

impl Writes {
    /// Adds one op after everything added so far. Its limits were checked
    /// when it was committed.
    pub(super) fn add(&mut self, op: Op) {
        match op {
            Op::PutAddress(record) => {
                self.addresses
                    .insert(record.name.clone(), Some(record.encode_to_vec()));
            }
            Op::DeleteAddress(name) => {
                self.duplicate_ids.retain(|(address, _), _| *address != name);
                self.duplicate_ids_gone.retain(|(address, _)| *address != name);
                self.addresses.insert(name.clone(), None);
                self.wiped_addresses.insert(name);
            }
            Op::PutQueue(record) => {
                self.queues.insert(record.id, Some(record.encode_to_vec()));
            }
            Op::DeleteQueue(queue) => {
                self.messages.retain(|(q, _), _| *q != queue);
                self.states.retain(|(q, _), _| *q != queue);
                self.dues.retain(|(q, _), _| *q != queue);
                self.inbox.retain(|(q, _)| *q != queue);
                self.owned.retain(|(q, _)| *q != queue);
                self.queues.insert(queue, None);
                self.wiped_queues.insert(queue);
            }
            Op::PutMessage { queue, message } => {
                let row = MessageRow::new(&message);
                self.messages.insert((queue, message.message_id), Some(row));
            }
            Op::PutState { queue, id, state } => {
                self.states.insert((queue, id), Some(state.encode_to_vec()));
            }
            Op::RemoveMessage { queue, id } => {
                self.messages.insert((queue, id), None);
                self.states.insert((queue, id), None);
            }
            Op::RemoveStatelessMessage { queue, id } => {
                self.messages.insert((queue, id), None);
                // A state this very group wrote goes too; none in the table is deleted.
                if let Some(state) = self.states.get_mut(&(queue, id)) {
                    *state = None;
                }
            }
            Op::PutDues { queue, entries } => {
                if let Some(&first) = entries.iter().min() {
                    let record = records::DueBatchRecord::of(&entries).encode_to_vec();
                    self.dues.insert((queue, first), Some(record));
                }
            }
            Op::RemoveDues { queue, first } => {
                self.dues.insert((queue, first), None);
            }
            Op::PutDuplicateId { address, seq, id } => {
                self.duplicate_ids.insert((address, id.to_vec()), seq);
            }
            Op::RemoveDuplicateId { address, id, .. } => {
                let key = (address, id.to_vec());
                self.duplicate_ids.remove(&key);
                self.duplicate_ids_gone.insert(key);
            }
            // Checked by the fence (`fence.rs`) before anything is written.
            Op::Claim { .. } => {}
        }
    }

    /// Adds inbox rows for messages added so far (that are still stored).
    pub(super) fn add_inbox(&mut self, keys: &[(QueueId, MessageId)]) {
        let keys = self.still_stored(keys);
        self.inbox.extend(keys);
    }

    /// Adds messages added so far (that are still stored) for queues this
    /// node holds: each joins its queue's inbox if that holds rows.
    pub(super) fn add_owned(&mut self, keys: &[(QueueId, MessageId)]) {
        let keys = self.still_stored(keys);
        self.owned.extend(keys);
    }

    fn still_stored(&self, keys: &[(QueueId, MessageId)]) -> Vec<(QueueId, MessageId)> {
        let stored = |key: &&(QueueId, MessageId)| matches!(self.messages.get(key), Some(Some(_)));
        keys.iter().filter(stored).copied().collect()
    }

    /// The rows the set touches, coarsely, to order it against other sets.
    pub(super) fn footprint(&self) -> Footprint {
        Footprint {
            queues: self
                .wiped_queues
                .iter()
                .chain(self.queues.keys())
                .copied()
                .collect(),
            messages: self
                .messages
                .keys()
                .chain(self.states.keys())
                .copied()
                .chain(self.dues.keys().map(|&(q, due)| (q, due.id)))
                .collect(),
            addresses: self
                .wiped_addresses
                .iter()
                .chain(self.addresses.keys())
                .chain(self.duplicate_ids.keys().map(|(address, _)| address))
                .chain(self.duplicate_ids_gone.iter().map(|(address, _)| address))
                .cloned()
                .collect(),
        }
    }

    /// The statements that write the set, in the order they must run.
    fn statements(self) -> Vec<Statement> {
        let mut out = Vec::new();
        let metadata = !self.addresses.is_empty() || !self.queues.is_empty();
        if !self.wiped_queues.is_empty() {
            let queues: Vec<i64> = self.wiped_queues.iter().map(|&q| i64::from(q)).collect();
            out.push(Statement::new(WIPE_MESSAGES, vec![Box::new(queues.clone())]));
            out.push(Statement::new(WIPE_INBOX, vec![Box::new(queues.clone())]));
            out.push(Statement::new(WIPE_STATES, vec![Box::new(queues.clone())]));
            out.push(Statement::new(WIPE_DUES, vec![Box::new(queues)]));
        }
        if !self.wiped_addresses.is_empty() {
            let addresses: Vec<String> = self.wiped_addresses.into_iter().collect();
            out.push(Statement::new(WIPE_DUPLICATE_IDS, vec![Box::new(addresses)]));
        }

        let (put, gone) = split(self.addresses);
        out.push(Statement::new(DELETE_ADDRESSES, vec![Box::new(gone)]));
        let (names, records): (Vec<String>, Vec<Vec<u8>>) = put.into_iter().unzip();
        out.push(Statement::new(
            UPSERT_ADDRESSES,
            vec![Box::new(names), Box::new(records)],
        ));

        let (put, gone) = split(self.queues);
        let gone: Vec<i64> = gone.into_iter().map(i64::from).collect();
        out.push(Statement::new(DELETE_QUEUE_NAMES, vec![Box::new(gone.clone())]));
        out.push(Statement::new(DELETE_QUEUE_SIZES, vec![Box::new(gone.clone())]));
        out.push(Statement::new(DELETE_QUEUES, vec![Box::new(gone)]));
        let (ids, records): (Vec<i64>, Vec<Vec<u8>>) =
            put.into_iter().map(|(q, r)| (i64::from(q), r)).unzip();
        out.push(Statement::new(
            UPSERT_QUEUES,
            vec![Box::new(ids), Box::new(records)],
        ));

        let (put, gone) = split(self.messages);
        out.push(delete_by_message_key(DELETE_MESSAGES, gone));
        let mut columns = MessageColumns::default();
        put.into_iter().for_each(|(key, row)| columns.push(key, row));
        out.push(columns.upsert());

        let (queues, ids) = message_key_columns(self.inbox.iter().copied().collect());
        out.push(Statement::new(
            INSERT_INBOX,
            vec![Box::new(queues), Box::new(ids)],
        ));
        let mut notified: Vec<i64> = self.inbox.iter().map(|&(q, _)| i64::from(q)).collect();
        notified.dedup();
        out.push(Statement::new(NOTIFY_INBOX, vec![Box::new(notified)]));

        let (put, gone) = split(self.states);
        out.push(delete_by_message_key(DELETE_STATES, gone));
        let (keys, records): (Vec<_>, Vec<Vec<u8>>) = put.into_iter().unzip();
        let (queues, ids) = message_key_columns(keys);
        out.push(Statement::new(
            UPSERT_STATES,
            vec![Box::new(queues), Box::new(ids), Box::new(records)],
        ));

        let (put, gone) = split(self.dues);
        out.push(dues_statement(DELETE_DUES, gone, None));
        let (keys, records) = put.into_iter().unzip();
        out.push(dues_statement(UPSERT_DUES, keys, Some(records)));

        let (addresses, entries): (Vec<String>, Vec<Vec<u8>>) = self.duplicate_ids_gone.into_iter().unzip();
        out.push(Statement::new(
            DELETE_DUPLICATE_IDS,
            vec![Box::new(addresses), Box::new(entries)],
        ));
        let mut addresses = Vec::with_capacity(self.duplicate_ids.len());
        let mut seqs = Vec::with_capacity(self.duplicate_ids.len());
        let mut entries = Vec::with_capacity(self.duplicate_ids.len());
        for ((address, id), seq) in self.duplicate_ids {
            addresses.push(address);
            seqs.push(seq as i64);
            entries.push(id);
        }
        out.push(Statement::new(
            INSERT_DUPLICATE_IDS,
            vec![Box::new(addresses), Box::new(seqs), Box::new(entries)],
        ));
        if metadata {
            out.push(Statement::new(NOTIFY_METADATA, vec![Box::new(vec![1_i32])]));
        }
        out.retain(|s| !s.is_empty());
        out
    }

    /// Writes the set in one transaction on `client`: every statement is
    /// prepared (once per connection), then `BEGIN`, the statements and
    /// `COMMIT` are sent at once and their results awaited together
    /// (pipelined: one round trip, plus the WAL flush of the COMMIT).
    ///
    /// Pipelining a COMMIT is safe: if a statement fails, the transaction is
    /// aborted, the server turns the COMMIT into a rollback, and the
    /// statement's error is what this returns. Each request goes out when its
    /// future is first polled, and `try_join_all` polls them in order (fewer
    /// than its 30-future threshold), so they reach the server in order.
    /// With `claims`, the fence check (`fence.rs`) runs first in the
    /// transaction, and a lease lost aborts it whole.
    /// Writes the set in one transaction; returns the messages of queues
    /// this node holds that joined their queue's inbox.
    pub(super) async fn write(
        mut self,
        client: &Client,
        claims: Option<&Claims>,
    ) -> Result<BTreeSet<(QueueId, MessageId)>, StorageError> {
        let (owned_queues, owned_ids) =
            message_key_columns(std::mem::take(&mut self.owned).into_iter().collect());
        let join = match owned_ids.is_empty() {
            true => None,
            false => Some(client.prepare_cached(JOIN_INBOX).await.map_err(db_error)?),
        };
        let statements = self.statements();
        // Prepared before anything is sent, as the others: the check must
        // reach the server after BEGIN and before the writes.
        let fence = match claims {
            Some(claims) => Some((
                client.prepare_cached(fence::FENCE).await.map_err(db_error)?,
                claims.columns(),
            )),
            None => None,
        };
        let mut prepared = Vec::with_capacity(statements.len());
        for statement in &statements {
            prepared.push(client.prepare_cached(statement.sql).await.map_err(db_error)?);
        }
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = statements
            .iter()
            .map(|s| s.params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect())
            .collect();
        // Each yields the rows the join returned, if it is the join.
        type Step<'a> = BoxFuture<'a, Result<Option<Vec<tokio_postgres::Row>>, tokio_postgres::Error>>;
        let mut pipeline: Vec<Step<'_>> = Vec::new();
        pipeline.push(Box::pin(client.batch_execute("BEGIN").map_ok(|_| None)));
        if let Some((statement, (nodes, queues, epochs, count))) = &fence {
            pipeline.push(Box::pin(async move {
                client
                    .query_one(statement, &[nodes, queues, epochs, count])
                    .await
                    .map(|_| None)
            }));
        }
        for (statement, params) in prepared.iter().zip(&params) {
            pipeline.push(Box::pin(client.execute(statement, params).map_ok(|_| None)));
        }
        if let Some(join) = &join {
            let (queues, ids) = (&owned_queues, &owned_ids);
            pipeline.push(Box::pin(async move {
                client.query(join, &[queues, ids]).await.map(Some)
            }));
        }
        pipeline.push(Box::pin(client.batch_execute("COMMIT").map_ok(|_| None)));
        let done = futures::future::try_join_all(pipeline).await.map_err(db_error)?;
        let joined = done.into_iter().flatten().flatten();
        Ok(joined
            .map(|row| (row.get::<_, i64>(0) as QueueId, row.get::<_, i64>(1) as MessageId))
            .collect())
    }
}

/// What a set of writes touches: whole queues (their record written or
/// their rows wiped), single messages (their row or their state), and
/// addresses (their record or duplicate ids).
#[derive(Debug)]
pub(super) struct Footprint {
    queues: BTreeSet<QueueId>,
    messages: BTreeSet<(QueueId, MessageId)>,
    addresses: BTreeSet<String>,
}

impl Footprint {
    /// Whether the two may touch the same row, so that their order matters.
    pub(super) fn overlaps(&self, other: &Footprint) -> bool {
        let whole_queue = |a: &Footprint, b: &Footprint| b.messages.iter().any(|(q, _)| a.queues.contains(q));
        !self.queues.is_disjoint(&other.queues)
            || !self.messages.is_disjoint(&other.messages)
            || !self.addresses.is_disjoint(&other.addresses)
            || whole_queue(self, other)
            || whole_queue(other, self)
    }
}

/// One statement with its array parameters.
struct Statement {
    sql: &'static str,
    params: Vec<Box<dyn Column>>,
}

impl Statement {
    fn new(sql: &'static str, params: Vec<Box<dyn Column>>) -> Statement {
        Statement { sql, params }
    }

    /// Whether it has no rows to write (its first array is empty).
    fn is_empty(&self) -> bool {
        self.params.first().is_none_or(|p| p.rows() == 0)
    }
}

/// An array parameter: one column of the rows a statement writes.
trait Column: ToSql + Sync + Send {
    fn rows(&self) -> usize;
}

impl<T> Column for Vec<T>
where
    Vec<T>: ToSql + Sync + Send,
{
    fn rows(&self) -> usize {
        self.len()
    }
}

/// Splits a net map into what to upsert and what to delete.
fn split<K, V>(map: BTreeMap<K, Option<V>>) -> (Vec<(K, V)>, Vec<K>) {
    let mut put = Vec::new();
    let mut gone = Vec::new();
    for (key, value) in map {
        match value {
            Some(value) => put.push((key, value)),
            None => gone.push(key),
        }
    }
    (put, gone)
}

fn message_key_columns(keys: Vec<(QueueId, MessageId)>) -> (Vec<i64>, Vec<i64>) {
    keys.into_iter().map(|(q, id)| (i64::from(q), id as i64)).unzip()
}

fn delete_by_message_key(sql: &'static str, keys: Vec<(QueueId, MessageId)>) -> Statement {
    let (queues, ids) = message_key_columns(keys);
    Statement::new(sql, vec![Box::new(queues), Box::new(ids)])
}

/// A statement on due-time batches: their keys, and their records if it writes them.
fn dues_statement(sql: &'static str, keys: Vec<(QueueId, Due)>, records: Option<Vec<Vec<u8>>>) -> Statement {
    let mut queues = Vec::with_capacity(keys.len());
    let mut at = Vec::with_capacity(keys.len());
    let mut ids = Vec::with_capacity(keys.len());
    for (queue, due) in keys {
        queues.push(i64::from(queue));
        at.push(super::reads::id_bound(due.at_ms));
        ids.push(super::reads::id_bound(due.id));
    }
    let mut params: Vec<Box<dyn Column>> = vec![Box::new(queues), Box::new(at), Box::new(ids)];
    params.extend(records.map(|r| Box::new(r) as Box<dyn Column>));
    Statement::new(sql, params)
}

/// The message rows to upsert, one array per column.
#[derive(Default)]
struct MessageColumns {
    queues: Vec<i64>,
    ids: Vec<i64>,
    priorities: Vec<i32>,
    expirations: Vec<i64>,
    sizes: Vec<i32>,
    groups: Vec<Option<String>>,
    records: Vec<Vec<u8>>,
    scheduled: Vec<i64>,
}

impl MessageColumns {
    fn push(&mut self, (queue, id): (QueueId, MessageId), row: MessageRow) {
        self.queues.push(i64::from(queue));
        self.ids.push(id as i64);
        self.priorities.push(row.priority);
        self.expirations.push(row.expiration_ms);
        self.sizes.push(row.size);
        self.groups.push(row.group);
        self.records.push(row.record);
        self.scheduled.push(row.scheduled_at_ms);
    }

    fn upsert(self) -> Statement {
        Statement::new(
            UPSERT_MESSAGES,
            vec![
                Box::new(self.queues),
                Box::new(self.ids),
                Box::new(self.priorities),
                Box::new(self.expirations),
                Box::new(self.sizes),
                Box::new(self.groups),
                Box::new(self.records),
                Box::new(self.scheduled),
            ],
        )
    }
}

const WIPE_MESSAGES: &str = "DELETE FROM messages WHERE queue = ANY($1::bigint[])";
const WIPE_STATES: &str = "DELETE FROM delivery_states WHERE queue = ANY($1::bigint[])";
const WIPE_DUPLICATE_IDS: &str = "DELETE FROM duplicate_ids WHERE address = ANY($1::text[])";
const DELETE_ADDRESSES: &str = "DELETE FROM addresses WHERE name = ANY($1::text[])";
const UPSERT_ADDRESSES: &str = "INSERT INTO addresses (name, record)
     SELECT * FROM unnest($1::text[], $2::bytea[])
     ON CONFLICT (name) DO UPDATE SET record = EXCLUDED.record";
/// A deleted queue's name may be given to a new queue (`cluster.rs`).
const DELETE_QUEUE_NAMES: &str = "DELETE FROM queue_names WHERE id = ANY($1::bigint[])";
/// What a deleted queue held no longer counts for its address (`sizes.rs`).
const DELETE_QUEUE_SIZES: &str = "DELETE FROM queue_sizes WHERE queue = ANY($1::bigint[])";
/// Other nodes re-read the addresses and queues (`cluster.rs`); the array
/// only makes the statement one with rows.
const NOTIFY_METADATA: &str = "SELECT pg_notify('rebound_metadata', '') FROM unnest($1::integer[])";
const DELETE_QUEUES: &str = "DELETE FROM queues WHERE id = ANY($1::bigint[])";
const UPSERT_QUEUES: &str = "INSERT INTO queues (id, record)
     SELECT * FROM unnest($1::bigint[], $2::bytea[])
     ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record";
const DELETE_MESSAGES: &str = "DELETE FROM messages t
     USING unnest($1::bigint[], $2::bigint[]) AS d(queue, id)
     WHERE t.queue = d.queue AND t.id = d.id";
const UPSERT_MESSAGES: &str = "INSERT INTO messages (queue, id, priority, expiration_ms, size, grp, record,
                          scheduled_at_ms)
     SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::bigint[], $5::integer[],
                          $6::text[], $7::bytea[], $8::bigint[])
     ON CONFLICT (queue, id) DO UPDATE SET priority = EXCLUDED.priority,
         expiration_ms = EXCLUDED.expiration_ms, size = EXCLUDED.size, grp = EXCLUDED.grp,
         record = EXCLUDED.record, scheduled_at_ms = EXCLUDED.scheduled_at_ms";
const WIPE_INBOX: &str = "DELETE FROM inbox WHERE queue = ANY($1::bigint[])";
const INSERT_INBOX: &str = "INSERT INTO inbox (queue, id)
     SELECT * FROM unnest($1::bigint[], $2::bigint[]) ON CONFLICT DO NOTHING";
/// Messages of queues this node holds join the queue's inbox if other
/// nodes' messages wait there: the owner takes them after those, in id
/// order, rather than take its own first (`inbox.rs`).
const JOIN_INBOX: &str = "INSERT INTO inbox (queue, id)
     SELECT n.queue, n.id FROM unnest($1::bigint[], $2::bigint[]) AS n(queue, id)
     WHERE EXISTS (SELECT 1 FROM inbox i WHERE i.queue = n.queue)
     ON CONFLICT DO NOTHING RETURNING queue, id";
/// One notification per group, naming the queues whose inbox it added to
/// (none: too many to name, look at every queue).
const NOTIFY_INBOX: &str = "SELECT pg_notify('rebound_inbox',
     CASE WHEN cardinality($1::bigint[]) > 500 THEN '' ELSE array_to_string($1::bigint[], ',') END)";
const DELETE_STATES: &str = "DELETE FROM delivery_states t
     USING unnest($1::bigint[], $2::bigint[]) AS d(queue, id)
     WHERE t.queue = d.queue AND t.id = d.id";
const UPSERT_STATES: &str = "INSERT INTO delivery_states (queue, id, record)
     SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bytea[])
     ON CONFLICT (queue, id) DO UPDATE SET record = EXCLUDED.record";
const WIPE_DUES: &str = "DELETE FROM dues WHERE queue = ANY($1::bigint[])";
const DELETE_DUES: &str = "DELETE FROM dues t
     USING unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS d(queue, due_ms, id)
     WHERE t.queue = d.queue AND t.due_ms = d.due_ms AND t.id = d.id";
const UPSERT_DUES: &str = "INSERT INTO dues (queue, due_ms, id, record)
     SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bytea[])
     ON CONFLICT (queue, due_ms, id) DO UPDATE SET record = EXCLUDED.record";
const DELETE_DUPLICATE_IDS: &str = "DELETE FROM duplicate_ids t
     USING unnest($1::text[], $2::bytea[]) AS d(address, id)
     WHERE t.address = d.address AND t.id = d.id";
/// No `ON CONFLICT`: an id stored already, by this node or another, fails
/// the transaction, and the committer finds which (`duplicate_ids.rs`).
/// The insert of an id another transaction is storing waits for its outcome.
const INSERT_DUPLICATE_IDS: &str = "INSERT INTO duplicate_ids (address, seq, id)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{DeliveryState, QueueRecord};

    fn put(queue: u32, id: u64) -> Op {
        Op::PutMessage {
            queue,
            message: MessageRecord {
                message_id: id,
                ..Default::default()
            },
        }
    }

    /// (sql, rows) of every statement the ops fold into.
    fn fold(ops: Vec<Op>) -> Vec<(&'static str, usize)> {
        let mut writes = Writes::default();
        ops.into_iter().for_each(|op| writes.add(op));
        writes
            .statements()
            .into_iter()
            .map(|s| (s.sql, s.params.len()))
            .collect()
    }

    #[test]
    fn put_then_remove_is_one_delete_and_later_ops_win() {
        let mut writes = Writes::default();
        for op in [
            put(1, 1),
            Op::PutState {
                queue: 1,
                id: 1,
                state: DeliveryState::default(),
            },
            Op::RemoveMessage { queue: 1, id: 1 },
            put(1, 2),
        ] {
            writes.add(op);
        }
        assert!(writes.messages[&(1, 1)].is_none());
        assert!(writes.states[&(1, 1)].is_none());
        assert!(writes.messages[&(1, 2)].is_some());
        assert_eq!(
            fold(vec![put(1, 1), Op::RemoveMessage { queue: 1, id: 1 }])
                .into_iter()
                .map(|(sql, _)| sql)
                .collect::<Vec<_>>(),
            [DELETE_MESSAGES, DELETE_STATES]
        );
    }

    #[test]
    fn a_wipe_forgets_earlier_rows_of_its_queue_and_runs_before_later_ones() {
        let mut writes = Writes::default();
        for op in [
            put(1, 1),
            put(2, 1),
            Op::DeleteQueue(1),
            Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            }),
            put(1, 3),
        ] {
            writes.add(op);
        }
        let keys: Vec<_> = writes.messages.keys().copied().collect();
        assert_eq!(keys, [(1, 3), (2, 1)]);
        let sql: Vec<_> = writes.statements().into_iter().map(|s| s.sql).collect();
        assert_eq!(
            sql,
            [
                WIPE_MESSAGES,
                WIPE_INBOX,
                WIPE_STATES,
                WIPE_DUES,
                UPSERT_QUEUES,
                UPSERT_MESSAGES,
                NOTIFY_METADATA
            ]
        );
    }

    fn footprint(ops: Vec<Op>) -> Footprint {
        let mut writes = Writes::default();
        ops.into_iter().for_each(|op| writes.add(op));
        writes.footprint()
    }

    #[test]
    fn footprints_overlap_on_a_shared_message_queue_or_address_only() {
        let send = footprint(vec![put(1, 1), put(1, 2)]);
        let ack = footprint(vec![Op::RemoveMessage { queue: 1, id: 3 }]);
        assert!(!send.overlaps(&ack));
        let state = footprint(vec![Op::PutState {
            queue: 1,
            id: 2,
            state: DeliveryState::default(),
        }]);
        assert!(send.overlaps(&state) && state.overlaps(&send));
        let wipe = footprint(vec![Op::DeleteQueue(1)]);
        assert!(send.overlaps(&wipe) && wipe.overlaps(&send));
        assert!(!footprint(vec![put(2, 1)]).overlaps(&wipe));
        let dup = |address: &str| {
            footprint(vec![Op::PutDuplicateId {
                address: address.into(),
                seq: 1,
                id: bytes::Bytes::from_static(b"x"),
            }])
        };
        assert!(dup("a").overlaps(&footprint(vec![Op::DeleteAddress("a".into())])));
        assert!(!dup("a").overlaps(&dup("b")));
    }

    #[test]
    fn deleting_an_address_drops_its_pending_duplicate_ids_only() {
        let dup = |address: &str, seq| Op::PutDuplicateId {
            address: address.into(),
            seq,
            id: bytes::Bytes::from_static(b"x"),
        };
        let mut writes = Writes::default();
        for op in [
            dup("a", 1),
            dup("b", 1),
            Op::DeleteAddress("a".into()),
            dup("a", 2),
        ] {
            writes.add(op);
        }
        let keys: Vec<_> = writes
            .duplicate_ids
            .iter()
            .map(|((a, _), seq)| (a.clone(), *seq))
            .collect();
        assert_eq!(keys, [("a".to_owned(), 2), ("b".to_owned(), 1)]);
        assert_eq!(
            fold(vec![Op::DeleteAddress("a".into())]),
            [
                (WIPE_DUPLICATE_IDS, 1),
                (DELETE_ADDRESSES, 1),
                (NOTIFY_METADATA, 1)
            ]
        );
    }

    #[test]
    fn an_id_removed_and_stored_again_is_deleted_before_it_is_inserted() {
        let id = bytes::Bytes::from_static(b"x");
        let ops = vec![
            Op::RemoveDuplicateId {
                address: "a".into(),
                seq: 1,
                id: id.clone(),
            },
            Op::PutDuplicateId {
                address: "a".into(),
                seq: 2,
                id: id.clone(),
            },
        ];
        assert_eq!(fold(ops), [(DELETE_DUPLICATE_IDS, 2), (INSERT_DUPLICATE_IDS, 3)]);
        let stored_then_removed = vec![
            Op::PutDuplicateId {
                address: "a".into(),
                seq: 2,
                id: id.clone(),
            },
            Op::RemoveDuplicateId {
                address: "a".into(),
                seq: 2,
                id,
            },
        ];
        assert_eq!(fold(stored_then_removed), [(DELETE_DUPLICATE_IDS, 2)]);
    }
}
