//! Writes that are durable in the journal but not yet applied to the engine.
//!
//! Why: in a queue that keeps up, a message is stored, delivered from memory
//! and acknowledged within milliseconds. Applying its put and then its delete
//! to sled costs two copy-on-write leaf updates for nothing, and that was the
//! committer's main cost once the journal took over durability. So a group's
//! writes go into the *active* table here once journaled; a put followed by a
//! delete of the same key leaves only the delete behind. When the journal
//! moves to a new segment the active table is frozen and handed to the
//! checkpointer, which applies what is left to the engine, one segment later
//! and without the deletes the engine does not need ([`crate::checkpoint`]).
//!
//! Reads look here first, newest table first, then in the engine: the
//! committer (large-body markers, prefix deletes) and the store's readers see
//! every journaled write at once. A frozen table leaves the read path only
//! after the engine holds its writes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, PoisonError, RwLock};

/// Key-level writes, `None` deleting.
pub(crate) type Table<V> = BTreeMap<Vec<u8>, Option<V>>;

/// The tables not yet in the engine, newest last.
pub(crate) struct Memtable<V> {
    tables: RwLock<Tables<V>>,
}

struct Tables<V> {
    active: Table<V>,
    frozen: VecDeque<Arc<Table<V>>>,
}

impl<V: Clone> Default for Memtable<V> {
    fn default() -> Self {
        Memtable {
            tables: RwLock::new(Tables {
                active: Table::new(),
                frozen: VecDeque::new(),
            }),
        }
    }
}

impl<V: Clone> Memtable<V> {
    /// Adds journaled writes to the active table.
    pub(crate) fn merge(&self, writes: impl Iterator<Item = (Vec<u8>, Option<V>)>) {
        let mut tables = self.tables.write().unwrap_or_else(PoisonError::into_inner);
        tables.active.extend(writes);
    }

    /// The latest journaled write of `key`, if any table has one: `Some(None)`
    /// means deleted.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<V>> {
        let tables = self.tables.read().unwrap_or_else(PoisonError::into_inner);
        std::iter::once(&tables.active)
            .chain(tables.frozen.iter().rev().map(|t| &**t))
            .find_map(|table| table.get(key).cloned())
    }

    /// Whether no write waits for the engine.
    pub(crate) fn is_empty(&self) -> bool {
        let tables = self.tables.read().unwrap_or_else(PoisonError::into_inner);
        tables.active.is_empty() && tables.frozen.is_empty()
    }

    /// The keys under `prefix`, given a function listing those in the engine.
    pub(crate) fn keys_with_prefix<E>(
        &self,
        prefix: &[u8],
        engine: impl FnOnce() -> Result<Vec<Vec<u8>>, E>,
    ) -> Result<Vec<Vec<u8>>, E> {
        // Tables first: one the checkpointer applies meanwhile is then applied
        // again below, which changes nothing; listing the engine first could miss
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
        let mut keys: BTreeSet<Vec<u8>> = engine()?.into_iter().collect();
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
    /// engine's range up to that key, then goes on after it.
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

    /// Freezes the active table and returns it for the engine.
    pub(crate) fn freeze(&self) -> Arc<Table<V>> {
        let mut tables = self.tables.write().unwrap_or_else(PoisonError::into_inner);
        let table = Arc::new(std::mem::take(&mut tables.active));
        tables.frozen.push_back(Arc::clone(&table));
        table
    }

    /// Drops the oldest frozen table, whose writes the engine now holds.
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

    fn w(k: u8, v: Option<u8>) -> (Vec<u8>, Option<u8>) {
        (vec![1, k], v)
    }

    #[test]
    fn the_newest_write_wins_across_tables() {
        let m = Memtable::default();
        m.merge([w(1, Some(1)), w(2, Some(2))].into_iter());
        m.freeze();
        m.merge([w(1, None)].into_iter());
        assert_eq!(m.get(&[1, 1]), Some(None));
        assert_eq!(m.get(&[1, 2]), Some(Some(2)));
        assert_eq!(m.get(&[1, 3]), None);
        m.release();
        assert_eq!(m.get(&[1, 2]), None);
        assert_eq!(m.get(&[1, 1]), Some(None));
    }

    #[test]
    fn ranges_are_complete_up_to_the_bound_they_return() {
        let m = Memtable::default();
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
    fn prefix_listing_merges_engine_and_tables() {
        let m = Memtable::default();
        m.merge([w(1, None), w(3, Some(3))].into_iter());
        m.freeze();
        m.merge([w(3, None), w(4, Some(4)), (vec![2, 9], Some(9))].into_iter());
        let keys = m
            .keys_with_prefix(&[1], || Ok::<_, ()>(vec![vec![1, 1], vec![1, 2]]))
            .unwrap();
        assert_eq!(keys, vec![vec![1, 2], vec![1, 4]]);
    }
}
