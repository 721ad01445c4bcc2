//! Message ids from blocks reserved in the database, so that
//! [`Store::generate_id`](crate::Store::generate_id) costs a round trip only
//! once every [`BLOCK`] ids.
//!
//! A block is reserved by one committed `UPDATE` of `id_allocator` before its
//! first id is handed out, so no id is handed out twice, across restarts and
//! between stores sharing the database; a restart skips what was left of its
//! block.

use deadpool_postgres::Pool;

use super::pool::{db_error, pool_error};
use crate::MessageId;
use crate::error::StorageError;

/// Ids per reservation.
pub(super) const BLOCK: u64 = 1 << 16;

/// The ids left of the block reserved last: `next..end`.
#[derive(Debug, Default)]
pub(super) struct IdBlock {
    next: MessageId,
    end: MessageId,
}

impl IdBlock {
    /// The next id, reserving a new block with `reserve` (which returns its
    /// first id) when this one is used up.
    pub(super) fn next(
        &mut self,
        reserve: impl FnOnce() -> Result<MessageId, StorageError>,
    ) -> Result<MessageId, StorageError> {
        if self.next == self.end {
            let start = reserve()?;
            (self.next, self.end) = (start, start + BLOCK);
        }
        self.next += 1;
        Ok(self.next - 1)
    }
}

/// Reserves the next [`BLOCK`] ids and returns the first.
pub(super) async fn reserve(pool: &Pool) -> Result<MessageId, StorageError> {
    let client = pool.get().await.map_err(pool_error)?;
    let row = client
        .query_one(
            "UPDATE id_allocator SET next_id = next_id + $1 RETURNING next_id - $1",
            &[&(BLOCK as i64)],
        )
        .await
        .map_err(db_error)?;
    Ok(row.get::<_, i64>(0) as MessageId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_reserved_once_per_block_of_ids() {
        let mut block = IdBlock::default();
        let mut reservations = 0;
        let mut starts = [1, 1 + BLOCK, 5 * BLOCK].into_iter();
        let mut last = 0;
        let mut ids = Vec::new();
        for _ in 0..2 * BLOCK + 1 {
            let id = block
                .next(|| {
                    reservations += 1;
                    Ok(starts.next().unwrap())
                })
                .unwrap();
            assert!(id > last);
            last = id;
            ids.push(id);
        }
        assert_eq!(reservations, 3);
        assert_eq!((ids[0], ids[BLOCK as usize]), (1, 1 + BLOCK));
        assert_eq!(ids.last(), Some(&(5 * BLOCK)));
    }

    #[test]
    fn a_failed_reservation_hands_out_nothing_and_is_retried() {
        let mut block = IdBlock::default();
        assert!(block.next(|| Err(StorageError::Closed)).is_err());
        assert_eq!(block.next(|| Ok(7)).unwrap(), 7);
        assert_eq!(block.next(|| unreachable!()).unwrap(), 8);
    }
}
