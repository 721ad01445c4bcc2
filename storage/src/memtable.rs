//! Writes that are durable in the journal but not yet applied to the kv.
//!
//! Why: in a queue that keeps up, a message is stored, delivered from memory
//! and acknowledged within milliseconds. Applying its put and then its delete
//! to sled costs two copy-on-write leaf updates for nothing, and that was the
//! committer's main cost once the journal took over durability. So a group's
//! writes go into the *active* table here once journaled; a put followed by a
//! delete of the same key leaves only the delete behind. When the journal
//! moves to a new segment, or the active table's estimated size reaches its
//! bound ([`TABLE_BYTES`] by default), the active table is frozen and handed
//! to the checkpointer, which applies what is left to the kv, one table later
//! and without the deletes the kv does not need ([`crate::checkpoint`]).
//!
//! Why a size bound and not only the segment: a journal record of a delete is
//! some 20 bytes, its entry here ten times that (a key allocation and a share
//! of a B-tree node). Draining a deep backlog fills a segment with some
//! 400,000 deletes, ~60 MB per table and several tables at once while the
//! checkpointer is behind; with the bound a table stays a few MiB however
//! small the records of its segment are.
//!
//! Why a smaller bound on message puts ([`PUT_SHARE`]): the message puts
//! still in a table are messages nobody has acked yet. In a queue that keeps up they are few,
//! replaced by their deletes within milliseconds; in a backlog being filled
//! they are the whole table, and they wait in memory for nothing, three
//! tables of them at a time (the active one, the one held back and the one
//! being applied). Freezing once they make a quarter of the bound keeps a
//! fill's memory small without applying more of a busy queue's puts and
//! deletes to the kv (BENCHMARKS.md, "Deep backlogs in page files").
//!
//! Reads look here first, newest table first, then in the kv: the
//! committer (large-body markers, prefix deletes) and the store's readers see
//! every journaled write at once. A frozen table leaves the read path only
//! after the kv holds its writes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, PoisonError, RwLock};

use crate::keys;

/// Key-level writes, `None` deleting.
pub(crate) type Table<V> = BTreeMap<Vec<u8>, Option<V>>;

/// The estimated memory of the active table at which the committer freezes
/// it, by default. The checkpointer holds at most a few tables more than it
/// has queued ([`crate::checkpoint`]), so this bounds the memtable to tens of
/// MiB.
pub(crate) const TABLE_BYTES: usize = 4 << 20;

/// The share of the bound at which the puts of a table freeze it: 1 in 4.
const PUT_SHARE: usize = 4;

/// What an entry costs beyond its key and value bytes: the key's `Vec` and
/// its allocation's header and rounding, the value's handle, and a share of
/// a B-tree node (11 slots, about two thirds full).
const ENTRY_OVERHEAD: usize = 96;

/// The estimated memory of one entry of a table.
fn entry_bytes<V: AsRef<[u8]>>(key_len: usize, value: &Option<V>) -> usize {
    ENTRY_OVERHEAD + key_len + value.as_ref().map_or(0, |v| v.as_ref().len())
}

/// The tables not yet in the kv, newest last.
pub(crate) struct Memtable<V> {
    tables: RwLock<Tables<V>>,
    /// The estimated size at which the active table asks to be frozen.
    table_bytes: usize,
}

struct Tables<V> {
    active: Table<V>,
    /// The estimated memory of `active`.
    active_bytes: usize,
    /// The estimated memory of the message puts in `active`.
    active_put_bytes: usize,
    frozen: VecDeque<Arc<Table<V>>>,
}

impl<V: Clone + AsRef<[u8]>> Memtable<V> {
    /// An empty memtable whose active table asks to be frozen at an
    /// estimated `table_bytes`.
    pub(crate) fn new(table_bytes: usize) -> Self {
        Memtable {
            tables: RwLock::new(Tables {
                active: Table::new(),
                active_bytes: 0,
                active_put_bytes: 0,
                frozen: VecDeque::new(),
            }),
            table_bytes,
        }
    }

    /// Adds journaled writes to the active table; returns whether it has
    /// reached its bound (or its message puts theirs) and should be frozen.
    /// (Delivery states, say, stay out of the puts' count: they are
    /// written while a message is redelivered and deleted with it, and
    /// freezing on them would only hand their churn to the kv.)
    pub(crate) fn merge(&self, writes: impl Iterator<Item = (Vec<u8>, Option<V>)>) -> bool {
        let mut tables = self.tables.write().unwrap_or_else(PoisonError::into_inner);
        let Tables {
            active,
            active_bytes,
            active_put_bytes,
            ..
        } = &mut *tables;
        for (key, value) in writes {
            let key_len = key.len();
            let message = key.first() == Some(&keys::MESSAGE);
            let bytes = entry_bytes(key_len, &value);
            *active_bytes += bytes;
            if message && value.is_some() {
                *active_put_bytes += bytes;
            }
            if let Some(old) = active.insert(key, value) {
                // A put acked within the table leaves only its delete behind.
                let bytes = entry_bytes(key_len, &old);
                *active_bytes -= bytes;
                if message && old.is_some() {
                    *active_put_bytes -= bytes;
                }
            }
        }
        *active_bytes >= self.table_bytes || *active_put_bytes >= self.table_bytes / PUT_SHARE
    }

    /// The latest journaled write of `key`, if any table has one: `Some(None)`
    /// means deleted.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<V>> {
        let tables = self.tables.read().unwrap_or_else(PoisonError::into_inner);
        std::iter::once(&tables.active)
            .chain(tables.frozen.iter().rev().map(|t| &**t))
            .find_map(|table| table.get(key).cloned())
    }

    /// Whether no write waits for the kv.
    pub(crate) fn is_empty(&self) -> bool {
        let tables = self.tables.read().unwrap_or_else(PoisonError::into_inner);
        tables.active.is_empty() && tables.frozen.is_empty()
    }

    /// The keys under `prefix`, given a function listing those in the kv.
    pub(crate) fn keys_with_prefix<E>(
        &self,
        prefix: &[u8],
        kv: impl FnOnce() -> Result<Vec<Vec<u8>>, E>,
    ) -> Result<Vec<Vec<u8>>, E> {
        // Tables first: one the checkpointer applies meanwhile is then applied
        // again below, which changes nothing; listing the kv first could miss
        // its writes once it has left the read path.
        let (frozen, active): (Vec<_>, Vec<_>) = {
            let tables = self.tables.read().unwrap_or_else(PoisonError::into_inner);
            let under = |table: &Table<V>| -> Vec<(Vec<u8>, bool)> {
                table
                    .range(prefix.to_vec()..)
                    .take_while(|(k, _)| k.starts_with(prefix))
                    .map(|(k, v)| (k.clone(), v.is_some()))
                    .collect()
            };
            (
                tables.frozen.iter().flat_map(|t| under(t)).collect(),
                under(&tables.active),
            )
        };
        let mut keys: BTreeSet<Vec<u8>> = kv()?.into_iter().collect();
        for (key, present) in frozen.into_iter().chain(active) {
            if present {
                keys.insert(key);
            } else {
                keys.remove(&key);
            }
        }
        Ok(keys.into_iter().collect())
    }

    /// The latest journaled writes of the keys in `from..=to`, at most `max`
    /// keys from each table, and the key up to which that is every write
    /// (`None`: all of `from..=to`). An ordered read merges them over the
    /// kv's range up to that key, then goes on after it.
    #[allow(clippy::type_complexity)]
    pub(crate) fn range(
        &self,
        from: &[u8],
        to: &[u8],
        max: usize,
    ) -> (BTreeMap<Vec<u8>, Option<V>>, Option<Vec<u8>>) {
        let tables = self.tables.read().unwrap_or_else(PoisonError::into_inner);
        let mut complete: Option<Vec<u8>> = None;
        let mut writes = BTreeMap::new();
        // Oldest first, so that a newer write replaces an older one.
        for table in tables
            .frozen
            .iter()
            .map(|t| &**t)
            .chain(std::iter::once(&tables.active))
        {
            for (taken, (key, value)) in table.range(from.to_vec()..=to.to_vec()).enumerate() {
                if taken == max {
                    // This table has more after the previous key.
                    if complete.as_ref().is_none_or(|c| *c > *key) {
                        complete = Some(writes_last_before(table, key));
                    }
                    break;
                }
                writes.insert(key.clone(), value.clone());
            }
        }
        if let Some(bound) = &complete {
            writes.retain(|key, _| key <= bound);
        }
        (writes, complete)
    }

    /// Freezes the active table and returns it for the kv.
    pub(crate) fn freeze(&self) -> Arc<Table<V>> {
        let mut tables = self.tables.write().unwrap_or_else(PoisonError::into_inner);
        let table = Arc::new(std::mem::take(&mut tables.active));
        tables.active_bytes = 0;
        tables.active_put_bytes = 0;
        tables.frozen.push_back(Arc::clone(&table));
        table
    }

    /// Drops the oldest frozen table, whose writes the kv now holds.
    pub(crate) fn release(&self) {
        let mut tables = self.tables.write().unwrap_or_else(PoisonError::into_inner);
        tables.frozen.pop_front();
    }
}

/// The key of `table` just before `key` (which is not its first).
fn writes_last_before<V>(table: &Table<V>, key: &[u8]) -> Vec<u8> {
    table
        .range(..key.to_vec())
        .next_back()
        .map(|(k, _)| k.clone())
        .expect("a table taken from has a key before the one it stopped at")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(k: u8, v: Option<u8>) -> (Vec<u8>, Option<Vec<u8>>) {
        (vec![1, k], v.map(|v| vec![v]))
    }

    #[test]
    fn the_newest_write_wins_across_tables() {
        let m = Memtable::new(TABLE_BYTES);
        m.merge([w(1, Some(1)), w(2, Some(2))].into_iter());
        m.freeze();
        m.merge([w(1, None)].into_iter());
        assert_eq!(m.get(&[1, 1]), Some(None));
        assert_eq!(m.get(&[1, 2]), Some(Some(vec![2])));
        assert_eq!(m.get(&[1, 3]), None);
        m.release();
        assert_eq!(m.get(&[1, 2]), None);
        assert_eq!(m.get(&[1, 1]), Some(None));
    }

    #[test]
    fn ranges_are_complete_up_to_the_bound_they_return() {
        let m = Memtable::new(TABLE_BYTES);
        m.merge([w(1, Some(1)), w(2, Some(2)), w(5, Some(5))].into_iter());
        m.freeze();
        m.merge([w(2, None), w(3, Some(3)), w(4, Some(4)), w(6, Some(6))].into_iter());
        let (all, complete) = m.range(&[1, 0], &[1, 9], 10);
        assert_eq!(complete, None);
        assert_eq!(
            all.into_iter().collect::<Vec<_>>(),
            vec![
                w(1, Some(1)),
                w(2, None),
                w(3, Some(3)),
                w(4, Some(4)),
                w(5, Some(5)),
                w(6, Some(6))
            ]
        );
        // Two keys per table: the frozen one stops after 2, the active after 3.
        let (some, complete) = m.range(&[1, 0], &[1, 9], 2);
        assert_eq!(complete, Some(vec![1, 2]));
        assert_eq!(
            some.into_iter().collect::<Vec<_>>(),
            vec![w(1, Some(1)), w(2, None)]
        );
        let (rest, _) = m.range(&[1, 3], &[1, 4], 2);
        assert_eq!(rest.len(), 2);
    }

    #[test]
    fn prefix_listing_merges_kv_and_tables() {
        let m = Memtable::new(TABLE_BYTES);
        m.merge([w(1, None), w(3, Some(3))].into_iter());
        m.freeze();
        m.merge([w(3, None), w(4, Some(4)), (vec![2, 9], Some(vec![9]))].into_iter());
        let keys = m
            .keys_with_prefix(&[1], || Ok::<_, ()>(vec![vec![1, 1], vec![1, 2]]))
            .unwrap();
        assert_eq!(keys, vec![vec![1, 2], vec![1, 4]]);
    }

    #[test]
    fn merge_asks_for_a_freeze_once_the_active_table_reaches_its_bound() {
        let m = Memtable::new(TABLE_BYTES);
        let delete = |id: u32| (id.to_be_bytes().to_vec(), None::<Vec<u8>>);
        let per_entry = entry_bytes(delete(0).0.len(), &delete(0).1);
        let entries = TABLE_BYTES.div_ceil(per_entry) as u32;
        assert!(!m.merge((0..entries - 1).map(delete)));
        assert!(m.merge([delete(entries - 1)].into_iter()));
        let frozen = m.freeze();
        assert_eq!(frozen.len(), entries as usize);
        // A fresh table starts from nothing, and every write stays readable.
        assert!(!m.merge([delete(entries)].into_iter()));
        assert_eq!(m.get(&0u32.to_be_bytes()), Some(None));
        assert_eq!(m.get(&entries.to_be_bytes()), Some(None));
    }

    #[test]
    fn values_count_towards_the_bound() {
        let m = Memtable::new(TABLE_BYTES);
        assert!(m.merge([(vec![1], Some(vec![0u8; TABLE_BYTES]))].into_iter()));
    }

    /// Puts nobody deletes (a backlog being filled) freeze a table at a
    /// quarter of the bound; puts deleted in the same table (a queue that
    /// keeps up) only count towards the whole bound.
    #[test]
    fn puts_left_in_a_table_freeze_it_at_a_quarter_of_the_bound() {
        let key = |id: u32| keys::message(1, u64::from(id)).to_vec();
        let put = |id: u32| (key(id), Some(vec![0u8; 200]));
        let per_put = entry_bytes(13, &put(0).1);
        let quarter = (TABLE_BYTES / PUT_SHARE).div_ceil(per_put) as u32;
        let m = Memtable::new(TABLE_BYTES);
        assert!(!m.merge((0..quarter - 1).map(put)));
        assert!(m.merge([put(quarter - 1)].into_iter()));

        let m = Memtable::new(TABLE_BYTES);
        let acked = |id: u32| [put(id), (key(id), None)];
        assert!(!m.merge((0..2 * quarter).flat_map(acked)), "deletes are small");

        let m = Memtable::new(TABLE_BYTES);
        let state = |id: u32| (keys::state(1, u64::from(id)).to_vec(), Some(vec![0u8; 200]));
        assert!(!m.merge((0..2 * quarter).map(state)), "only message puts count");
    }

    #[test]
    fn a_key_written_again_counts_once() {
        let m = Memtable::new(TABLE_BYTES);
        let put = (vec![1u8; 13], Some(vec![0u8; TABLE_BYTES / 2]));
        let delete = (vec![1u8; 13], None);
        assert!(!m.merge([put.clone(), delete.clone()].into_iter()));
        assert!(!m.merge([put, delete].into_iter()), "the delete replaced the put");
    }
}
