//! Duplicate ids shared by the nodes: the database decides whether an id is
//! new, so that a producer's retry reaching another node (or racing its first
//! attempt there) is stored once.
//!
//! `duplicate_ids` has one row per address and id (migration 3), and a group
//! inserts its ids without `ON CONFLICT` (`writes.rs`): an id stored already,
//! by any node, fails the transaction, and an id another transaction is
//! inserting makes this one wait for that one's outcome. The committer then
//! asks which of the group's ids are stored ([`stored`]), fails the commits
//! that carried them with [`StorageError::DuplicateIds`] (nothing of them is
//! written: the message is the id's) and writes the others again. The broker
//! remembers those ids and sends again, as a duplicate now.
//!
//! An id the group itself deletes (its cache evicted it) is no conflict:
//! the delete runs before the insert.
//!
//! Nor could two commits of one group storing the same id conflict: the
//! group writes the id once, and both messages. So a commit storing an id
//! that a commit already in the group stores starts the next group instead,
//! which waits for this one (their footprints share the address) and is
//! refused if the id was written. Such a pair is a producer's retry queued
//! behind its first attempt, which the broker gave up on while the database
//! was away, forgetting its id (the broker's `duplicates.rs`).

use std::collections::BTreeSet;

use bytes::Bytes;
use deadpool_postgres::Client;

use super::pool::db_error;
use crate::Op;
use crate::error::StorageError;

/// The ids a commit stores and the ids it deletes, with their address.
#[derive(Debug, Default)]
pub(super) struct Ids {
    pub(super) stored: Vec<(String, Bytes)>,
    pub(super) deleted: Vec<(String, Bytes)>,
}

impl Ids {
    pub(super) fn of(ops: &[Op]) -> Ids {
        let mut ids = Ids::default();
        for op in ops {
            match op {
                Op::PutDuplicateId { address, id, .. } => ids.stored.push((address.clone(), id.clone())),
                Op::RemoveDuplicateId { address, id, .. } => ids.deleted.push((address.clone(), id.clone())),
                _ => {}
            }
        }
        ids
    }
}

const STORED: &str = "SELECT t.address, t.id FROM duplicate_ids t
     JOIN unnest($1::text[], $2::bytea[]) AS d(address, id)
     ON t.address = d.address AND t.id = d.id";

/// Which of `ids` the database holds.
pub(super) async fn stored(
    client: &Client,
    ids: &BTreeSet<(String, Bytes)>,
) -> Result<BTreeSet<(String, Bytes)>, StorageError> {
    let addresses: Vec<&str> = ids.iter().map(|(a, _)| a.as_str()).collect();
    let entries: Vec<&[u8]> = ids.iter().map(|(_, id)| &id[..]).collect();
    let rows = client
        .query(STORED, &[&addresses, &entries])
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|row| {
            let address: String = row.get(0);
            let id: Vec<u8> = row.get(1);
            (address, Bytes::from(id))
        })
        .collect())
}
