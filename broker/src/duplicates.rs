//! Duplicate detection: each address remembers the last `id-cache-size` duplicate
//! ids (`_AMQ_DUPL_ID`) sent to it, oldest forgotten first, as Artemis's
//! per-address circular cache does; a send whose id is remembered is acknowledged
//! but not stored again, and inside a transaction fails the commit.
//!
//! Persistence: an id is stored (a `0x30` key of the store) in the same commit as
//! the message it came with, and the entries the FIFO drops are deleted in that
//! commit too, so the stored cache is the cache: a restart rebuilds it
//! ([`DuplicateIds::recover`]), also after a kill -9. An id is stored only with a
//! durable message; a non-durable one's id is remembered until the broker stops,
//! like the message itself.
//!
//! Commits in flight: an id enters the cache as *pending* when its commit is
//! submitted, and becomes remembered only once the commit is durable; a failed
//! commit forgets it ([`Reservation`]). A send carrying an id that is pending waits
//! for that commit's outcome ([`Claimed::Wait`]) rather than guess, so a producer's
//! retry racing its first attempt is stored exactly once, and a retry after a
//! failed commit is stored. A send whose future is dropped while its commit is in
//! flight (the client went away) forgets its ids: a retry may then store the
//! message twice, never lose it (on one node; in a cluster the database refuses
//! the retry's id once the first commit stored it, see below).
//!
//! Several nodes (PostgreSQL): each node has its cache, and the database has
//! one row per address and id whichever node stored it, so a commit storing an
//! id another node stored is refused ([`rebound_storage::StorageError::DuplicateIds`]);
//! the send learns those ids ([`DuplicateIds::learn`]) and is made again, its
//! messages with them now duplicates. Two nodes storing one id at once: the
//! database makes the second wait for the first's outcome. The cache stays the
//! fast path; each node evicts the rows it stored, so an address holds up to
//! `id-cache-size` rows per node. Non-durable messages' ids are not stored, so
//! they are checked by the node they reach only.
//!
//! Only producers' sends are checked: a message the broker moves (a dead letter, an
//! expired message, `queue move` and `queue retry`) keeps its `_AMQ_DUPL_ID` but is
//! not checked again, so sending a dead letter back is never taken for a duplicate.
//!
//! Cost: nothing for a message without an id; with one, a hash lookup under one
//! broker-wide lock, and about 60 bytes plus the id per remembered entry.
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use rebound_storage::{Op, RecoveredDuplicateId};
use tokio::sync::watch;

/// The duplicate-id caches of every address.
#[derive(Default)]
pub struct DuplicateIds {
    caches: Mutex<HashMap<String, Cache>>,
}

#[derive(Default)]
struct Cache {
    /// Oldest first: (seq, id, stored).
    fifo: VecDeque<(u64, Bytes, bool)>,
    ids: HashMap<Bytes, Seen>,
    next_seq: u64,
}

enum Seen {
    Remembered,
    /// In a commit not yet durable; the receiver ends when its outcome is known.
    Pending(u64, watch::Receiver<()>),
}

/// One id a send carries, in send order.
pub struct Claim<'a> {
    pub address: &'a str,
    pub id: &'a Bytes,
    /// Whether its message is durable (so is the id).
    pub durable: bool,
    /// The address's `id-cache-size` (> 0).
    pub cache_size: u32,
}

/// The answer to [`DuplicateIds::claim`].
pub enum Claimed<'a> {
    /// Whether each claim was a duplicate; the ops that store the new ids and drop
    /// what the FIFO evicts (to commit with the messages); and the reservation to
    /// settle with the commit's outcome.
    Done {
        duplicate: Vec<bool>,
        ops: Vec<Op>,
        reservation: Reservation<'a>,
    },
    /// An id is pending in another commit: wait for this, then claim again.
    Wait(watch::Receiver<()>),
}

impl DuplicateIds {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Cache>> {
        self.caches.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks a send's ids and reserves the new ones (a later repeat in the same
    /// send is a duplicate of the first).
    pub fn claim<'a>(&'a self, claims: &[Claim<'_>]) -> Claimed<'a> {
        let mut caches = self.lock();
        for claim in claims {
            if let Some(Seen::Pending(_, done)) = caches.get(claim.address).and_then(|c| c.ids.get(claim.id))
            {
                return Claimed::Wait(done.clone());
            }
        }
        let (tx, rx) = watch::channel(());
        let mut duplicate = Vec::with_capacity(claims.len());
        let mut ops = Vec::new();
        let mut pending = Vec::new();
        for claim in claims {
            if !caches.contains_key(claim.address) {
                caches.insert(claim.address.to_owned(), Cache::default());
            }
            let cache = caches.get_mut(claim.address).expect("inserted above");
            if cache.ids.contains_key(claim.id) {
                duplicate.push(true);
                continue;
            }
            duplicate.push(false);
            let seq = cache.next_seq;
            cache.next_seq += 1;
            cache.fifo.push_back((seq, claim.id.clone(), claim.durable));
            cache.ids.insert(claim.id.clone(), Seen::Pending(seq, rx.clone()));
            if claim.durable {
                ops.push(Op::PutDuplicateId {
                    address: claim.address.to_owned(),
                    seq,
                    id: claim.id.clone(),
                });
            }
            cache.evict(claim.address, claim.cache_size as usize, &mut ops);
            pending.push((claim.address.to_owned(), claim.id.clone(), seq));
        }
        Claimed::Done {
            duplicate,
            ops,
            reservation: Reservation {
                ids: self,
                pending,
                durable: false,
                _done: tx,
            },
        }
    }

    /// Rebuilds the caches from what the store recovered, keeping the newest
    /// `cache_size(address)` ids of each address; returns the ops that delete the
    /// rest (a cache made smaller, or switched off, while the broker was down).
    pub fn recover(&self, entries: Vec<RecoveredDuplicateId>, cache_size: impl Fn(&str) -> u32) -> Vec<Op> {
        let mut caches = self.lock();
        let mut ops = Vec::new();
        for entry in entries {
            let cache = caches.entry(entry.address.clone()).or_default();
            cache.next_seq = cache.next_seq.max(entry.seq + 1);
            cache.fifo.push_back((entry.seq, entry.id.clone(), true));
            cache.ids.insert(entry.id, Seen::Remembered);
        }
        for (address, cache) in caches.iter_mut() {
            cache.evict(address, cache_size(address) as usize, &mut ops);
        }
        caches.retain(|_, cache| !cache.fifo.is_empty());
        ops
    }

    /// Remembers ids another commit stored (another node's, in a cluster), as
    /// the store reported them; their rows are that commit's to delete.
    pub fn learn(&self, ids: &[(String, Bytes)]) {
        let mut caches = self.lock();
        for (address, id) in ids {
            let cache = caches.entry(address.clone()).or_default();
            if cache.ids.contains_key(id) {
                continue;
            }
            let seq = cache.next_seq;
            cache.next_seq += 1;
            cache.fifo.push_back((seq, id.clone(), false));
            cache.ids.insert(id.clone(), Seen::Remembered);
        }
    }

    /// How many ids `address` remembers (pending ones included).
    #[cfg(test)]
    fn len(&self, address: &str) -> usize {
        self.lock().get(address).map_or(0, |c| c.fifo.len())
    }

    /// Forgets the cache of a deleted address (the store deletes it with the
    /// address).
    pub fn forget_address(&self, address: &str) {
        self.lock().remove(address);
    }
}

impl Cache {
    /// Drops the oldest remembered ids beyond `size`. A pending one at the front
    /// stays until its commit is done (the cache is over its size meanwhile): its
    /// deletion must not reach the store before its insertion.
    fn evict(&mut self, address: &str, size: usize, ops: &mut Vec<Op>) {
        while self.fifo.len() > size {
            let Some((seq, id, stored)) = self.fifo.front() else {
                break;
            };
            if matches!(self.ids.get(id), Some(Seen::Pending(s, _)) if s == seq) {
                break;
            }
            if *stored {
                ops.push(Op::RemoveDuplicateId {
                    address: address.to_owned(),
                    seq: *seq,
                    id: id.clone(),
                });
            }
            self.ids.remove(id);
            self.fifo.pop_front();
        }
    }
}

/// The ids a send reserved: remembered once [`Reservation::durable`] says its
/// commit is, forgotten when dropped without (the commit failed or was never made).
/// Dropping it also wakes the sends waiting on these ids.
pub struct Reservation<'a> {
    ids: &'a DuplicateIds,
    pending: Vec<(String, Bytes, u64)>,
    durable: bool,
    _done: watch::Sender<()>,
}

impl Reservation<'_> {
    /// The commit is durable: the ids are remembered.
    pub fn durable(mut self) {
        self.durable = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut caches = self.ids.lock();
        for (address, id, seq) in self.pending.drain(..) {
            let Some(cache) = caches.get_mut(&address) else {
                continue;
            };
            if !matches!(cache.ids.get(&id), Some(Seen::Pending(s, _)) if *s == seq) {
                continue;
            }
            if self.durable {
                cache.ids.insert(id, Seen::Remembered);
            } else {
                cache.ids.remove(&id);
                cache.fifo.retain(|(s, _, _)| *s != seq);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    /// Claims `ids` on address `a` (durable, cache of `size`) and settles at once,
    /// the commit durable or failed.
    fn send(cache: &DuplicateIds, ids: &[&str], size: u32, committed: bool) -> (Vec<bool>, Vec<Op>) {
        let ids: Vec<Bytes> = ids.iter().map(|i| id(i)).collect();
        let claims: Vec<Claim> = ids
            .iter()
            .map(|id| Claim {
                address: "a",
                id,
                durable: true,
                cache_size: size,
            })
            .collect();
        match cache.claim(&claims) {
            Claimed::Done {
                duplicate,
                ops,
                reservation,
            } => {
                if committed {
                    reservation.durable();
                }
                (duplicate, ops)
            }
            Claimed::Wait(_) => panic!("nothing is pending"),
        }
    }

    fn removed(ops: &[Op]) -> Vec<u64> {
        ops.iter()
            .filter_map(|op| match op {
                Op::RemoveDuplicateId { seq, .. } => Some(*seq),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn repeats_are_duplicates_also_within_one_send() {
        let cache = DuplicateIds::default();
        let (dup, ops) = send(&cache, &["x", "y", "x"], 10, true);
        assert_eq!(dup, [false, false, true]);
        assert_eq!(ops.len(), 2);
        assert_eq!(send(&cache, &["y", "z"], 10, true).0, [true, false]);
    }

    #[test]
    fn the_oldest_ids_are_forgotten_first_and_deleted_from_the_store() {
        let cache = DuplicateIds::default();
        send(&cache, &["1", "2", "3"], 3, true);
        let (dup, ops) = send(&cache, &["4"], 3, true);
        assert_eq!(dup, [false]);
        assert_eq!(removed(&ops), [0]);
        assert_eq!(cache.len("a"), 3);
        // "1" was forgotten: it is new again, and evicts "2".
        let (dup, ops) = send(&cache, &["1", "3"], 3, true);
        assert_eq!(dup, [false, true]);
        assert_eq!(removed(&ops), [1]);
    }

    #[test]
    fn a_failed_commit_forgets_its_ids() {
        let cache = DuplicateIds::default();
        assert_eq!(send(&cache, &["x"], 10, false).0, [false]);
        assert_eq!(cache.len("a"), 0);
        assert_eq!(send(&cache, &["x"], 10, true).0, [false]);
    }

    #[tokio::test]
    async fn a_pending_id_makes_its_repeat_wait_for_the_outcome() {
        let cache = DuplicateIds::default();
        let x = id("x");
        let claim = [Claim {
            address: "a",
            id: &x,
            durable: true,
            cache_size: 10,
        }];
        let Claimed::Done { reservation, .. } = cache.claim(&claim) else {
            panic!("nothing pending")
        };
        let Claimed::Wait(mut done) = cache.claim(&claim) else {
            panic!("x is pending")
        };
        reservation.durable();
        assert!(done.changed().await.is_err(), "woken when the first is settled");
        assert_eq!(send(&cache, &["x"], 10, true).0, [true]);
    }

    #[test]
    fn learnt_ids_are_duplicates_and_their_rows_are_not_this_nodes_to_delete() {
        let cache = DuplicateIds::default();
        cache.learn(&[("a".into(), id("x"))]);
        assert_eq!(send(&cache, &["x", "y"], 10, true).0, [true, false]);
        // "x" is evicted first, without a delete: the node that stored it evicts it.
        let (_, ops) = send(&cache, &["z"], 2, true);
        assert!(removed(&ops).is_empty(), "{ops:?}");
        assert_eq!(send(&cache, &["x"], 10, true).0, [false]);
    }

    #[test]
    fn recovery_keeps_the_newest_and_deletes_the_rest() {
        let cache = DuplicateIds::default();
        let entries = (0..5)
            .map(|seq| RecoveredDuplicateId {
                address: "a".into(),
                seq,
                id: id(&seq.to_string()),
            })
            .collect();
        let ops = cache.recover(entries, |_| 2);
        assert_eq!(removed(&ops), [0, 1, 2]);
        assert_eq!(send(&cache, &["4", "3", "2"], 2, true).0, [true, true, false]);
        // New entries continue after the highest recovered seq.
        let (_, ops) = send(&cache, &["new"], 10, true);
        assert!(matches!(ops[..], [Op::PutDuplicateId { seq: 6, .. }]), "{ops:?}");
    }
}
