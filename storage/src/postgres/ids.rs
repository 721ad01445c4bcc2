//! Message ids ordered by the database's clock across the stores that share
//! the database, so that a queue, which delivers in id order, delivers one
//! producer's sends in the order it made them, whichever node stored each
//! (two sends further apart than the nodes' clocks are, a round trip).
//!
//! An id is `ms << 21 | counter << 12 | slot`:
//!
//! - `ms`: the database's time (`clock.rs`), 42 bits: until the year 2109;
//! - `counter`: ids of this store within that millisecond, 9 bits; a store
//!   handing out more borrows the next millisecond;
//! - `slot`: this store's, reserved when it opens (one committed `UPDATE` of
//!   `id_allocator`), 12 bits: two stores share one only when 4,096 others
//!   opened in between.
//!
//! A store's ids only grow: each is the larger of the one before plus one
//! counter step and its time now, so a reading of the clock that goes back
//! never makes an id smaller. Ids of stores older than this format (one
//! counter reserved in blocks) are all smaller than these.

use std::sync::atomic::{AtomicU64, Ordering};

use deadpool_postgres::Pool;

use super::clock::{DATABASE_MS, DatabaseClock};
use super::pool::{db_error, pool_error};
use crate::MessageId;
use crate::error::StorageError;

/// Bits of the slot, the lowest of an id.
const SLOT_BITS: u32 = 12;
/// Bits of the counter within a millisecond, above the slot.
const COUNTER_BITS: u32 = 9;
/// The step from one id of a store to its next: the counter's lowest bit.
const STEP: u64 = 1 << SLOT_BITS;

/// The ids of one store.
#[derive(Debug)]
pub(super) struct TimeIds {
    /// The last id handed out (its slot bits are the slot).
    last: AtomicU64,
}

impl TimeIds {
    pub(super) fn new(slot: u64) -> TimeIds {
        TimeIds {
            last: AtomicU64::new(slot % STEP),
        }
    }

    /// The next id at `now_ms`.
    pub(super) fn next(&self, now_ms: u64) -> MessageId {
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let slot = last % STEP;
            let next = (last + STEP).max(now_ms << (COUNTER_BITS + SLOT_BITS) | slot);
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }
}

/// Reserves a slot and reads the database's clock, in one round trip.
pub(super) async fn open(pool: &Pool) -> Result<(TimeIds, DatabaseClock), StorageError> {
    let client = pool.get().await.map_err(pool_error)?;
    let row = client
        .query_one(
            &format!("UPDATE id_allocator SET next_id = next_id + 1 RETURNING next_id, {DATABASE_MS}"),
            &[],
        )
        .await
        .map_err(db_error)?;
    let slot = row.get::<_, i64>(0) as u64;
    Ok((TimeIds::new(slot), DatabaseClock::read(row.get(1))))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const MS: u32 = COUNTER_BITS + SLOT_BITS;

    #[test]
    fn an_id_is_the_time_then_a_counter_then_the_slot() {
        let ids = TimeIds::new(4_096 + 7);
        let now = 1_797_000_000_000;
        assert_eq!(ids.next(now), now << MS | 7);
        assert_eq!(ids.next(now), now << MS | 1 << SLOT_BITS | 7);
        assert_eq!(ids.next(now + 1), (now + 1) << MS | 7);
    }

    #[test]
    fn a_full_millisecond_borrows_the_next() {
        let ids = TimeIds::new(3);
        let now = 1_000;
        for _ in 0..1 << COUNTER_BITS {
            ids.next(now);
        }
        assert_eq!(ids.next(now), (now + 1) << MS | 3);
    }

    #[test]
    fn ids_are_above_those_of_the_block_format() {
        assert!(TimeIds::new(0).next(1_797_000_000_000) > i64::MAX as u64 / 4);
        assert!(1_797_000_000_000u64 << MS < i64::MAX as u64);
    }

    proptest! {
        /// Whatever the clock does, a store's ids grow and keep its slot, and
        /// an id is never below its time.
        #[test]
        fn ids_grow_keep_the_slot_and_follow_the_clock(
            slot in 0u64..1 << 20,
            times in prop::collection::vec(1_000_000u64..1_000_100, 1..300),
        ) {
            let ids = TimeIds::new(slot);
            let mut last = 0;
            for now in times {
                let id = ids.next(now);
                prop_assert!(id > last);
                prop_assert_eq!(id % STEP, slot % STEP);
                prop_assert!(id >> MS >= now);
                last = id;
            }
        }

        /// Two stores with different slots never hand out the same id.
        #[test]
        fn different_slots_never_meet(
            times in prop::collection::vec((0u8..2, 5_000u64..5_004), 1..2_000),
        ) {
            let stores = [TimeIds::new(1), TimeIds::new(2)];
            let mut seen = std::collections::HashSet::new();
            for (store, now) in times {
                prop_assert!(seen.insert(stores[store as usize].next(now)));
            }
        }
    }
}
