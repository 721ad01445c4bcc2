//! Sending: a producer's batch validated, given ids, routed to its queues and
//! stored in one commit, then made visible to consumers.
//!
//! A message may ask to be delivered later (`crate::scheduled`): it is stored with a
//! delivery state saying when, in the same commit, and enters its queues' timelines.
//! A message may carry a duplicate id (`crate::duplicates`): its address's cache is
//! consulted and updated in the same commit. Messages that ask for neither pay for
//! neither.
use std::sync::Arc;

use prost::Message as _;
use rebound_config::EffectiveSettings;
use rebound_storage::{MessageId, MessageRecord, Op, QueueId, StorageError};

use super::Broker;
use super::addresses::Create;
use crate::duplicates::{Claim, Claimed, Reservation};
use crate::error::{BrokerError, Result};
use crate::message::{self, Prepared};
use crate::queue::{Entry, Queue};
use crate::routing;
use crate::scheduled;
use crate::time::now_ms;

/// What a send did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The ids given to the messages, in the order sent.
    pub ids: Vec<u64>,
    /// How many messages found no queue (dropped, as in Artemis).
    pub unrouted: u32,
    /// Per message, in the order sent, whether it was a duplicate (acknowledged,
    /// not stored); empty when none was.
    pub duplicates: Vec<bool>,
}

/// What a send does with a message whose duplicate id its address remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnDuplicate {
    /// Acknowledge it without storing it (a plain send).
    Skip,
    /// Refuse the whole commit (a transaction's).
    Refuse,
}

impl Broker {
    /// Accepts a batch of new messages: validated, routed, written in one commit, and
    /// visible to consumers once durable.
    pub async fn send(self: &Arc<Self>, batch: Vec<MessageRecord>) -> Result<Sent> {
        let prepared = self.prepare(batch)?;
        let ids = prepared.iter().map(|p| p.record.message_id).collect();
        let (unrouted, duplicates) = self.route_sends(prepared, Vec::new(), OnDuplicate::Skip).await?;
        Ok(Sent {
            ids,
            unrouted,
            duplicates,
        })
    }

    /// Validates messages a producer sent and gives them their ids, timestamps and
    /// expirations (`expiry-delay`), and the due times they ask for.
    pub fn prepare(&self, batch: Vec<MessageRecord>) -> Result<Vec<Prepared>> {
        if batch.is_empty() {
            return Err(BrokerError::InvalidArgument(
                "a send needs at least one message".into(),
            ));
        }
        if self.is_shutting_down() {
            return Err(BrokerError::ShuttingDown);
        }
        let now = now_ms();
        let limits = self.limits();
        let mut records = Vec::with_capacity(batch.len());
        let mut memo = SettingsMemo::default();
        for mut record in batch {
            let requests = message::check_new(&record, &limits)?;
            let settings = memo.get(self, &record.address);
            let size = message::counted_bytes(&record);
            let limit = settings.max_message_size;
            if size > limit {
                return Err(BrokerError::MessageTooLarge {
                    address: record.address,
                    size,
                    limit,
                });
            }
            if record.expiration_ms == 0
                && let Some(delay) = settings.expiry_delay_ms
            {
                record.expiration_ms = now.saturating_add(delay);
            }
            let due_ms = match requests.deliver_at_ms {
                Some(at) => scheduled::due_ms(at, now)?,
                None => 0,
            };
            let duplicate_id = requests.duplicate_id.filter(|_| settings.id_cache_size > 0);
            record.timestamp_ms = now;
            record.message_id = self.store.generate_id()?;
            records.push(Prepared {
                record,
                due_ms,
                duplicate_id,
                to_disk: false,
            });
        }
        Ok(records)
    }

    /// Routes prepared messages and commits them together with `ops` (a
    /// transaction's acks), then makes them visible. Returns how many found no queue
    /// and which were duplicates (see [`Sent::duplicates`]).
    ///
    /// A commit the store refuses for ids another commit stored (another node's,
    /// in a cluster: `crate::duplicates`) is made again with those ids remembered,
    /// so that their messages are now duplicates.
    pub(super) async fn route_sends(
        self: &Arc<Self>,
        mut prepared: Vec<Prepared>,
        mut ops: Vec<Op>,
        on_duplicate: OnDuplicate,
    ) -> Result<(u32, Vec<bool>)> {
        let mut addresses: Vec<&str> = prepared.iter().map(|p| p.record.address.as_str()).collect();
        addresses.sort_unstable();
        addresses.dedup();
        for address in addresses {
            self.ensure_address(address, None, Create::OnSend).await?;
        }
        let dropped = self.admit(&mut prepared).await?;
        // Each retry learns at least one id of the send's; a store that never
        // refuses one needs no copy of the send to make it again.
        let mut retries = match self.store.refuses_stored_duplicate_ids() {
            true => prepared.iter().filter(|p| p.duplicate_id.is_some()).count(),
            false => 0,
        };
        loop {
            let again = (retries > 0).then(|| (prepared.clone(), ops.clone()));
            match (
                self.store_sends(prepared, ops, &dropped, on_duplicate).await,
                again,
            ) {
                (Err(BrokerError::Storage(StorageError::DuplicateIds { ids })), Some(again)) => {
                    self.duplicates.learn(&ids);
                    (prepared, ops) = again;
                    retries -= 1;
                }
                (result, _) => return result,
            }
        }
    }

    /// [`Broker::route_sends`] once the messages are admitted (`dropped` says
    /// which were not).
    async fn store_sends(
        self: &Arc<Self>,
        mut prepared: Vec<Prepared>,
        mut ops: Vec<Op>,
        dropped: &[bool],
        on_duplicate: OnDuplicate,
    ) -> Result<(u32, Vec<bool>)> {
        let mut duplicates = Vec::new();
        let mut reservation = None;
        if prepared.iter().any(|p| p.duplicate_id.is_some()) {
            let (flags, claim_ops, claimed) = self.claim_duplicate_ids(&prepared, on_duplicate).await?;
            ops.extend(claim_ops);
            reservation = Some(claimed);
            let mut flag = flags.iter();
            prepared.retain(|_| !flag.next().copied().unwrap_or(false));
            // Flags in the order sent: a dropped message was no duplicate.
            let mut flag = flags.into_iter();
            duplicates = if dropped.is_empty() {
                flag.collect()
            } else {
                dropped
                    .iter()
                    .map(|&d| !d && flag.next().unwrap_or(false))
                    .collect()
            };
        }
        let mut unrouted = 0;
        let mut arrivals = Arrivals::default();
        let commit = {
            let reg = self.read();
            for Prepared {
                record,
                due_ms,
                to_disk,
                ..
            } in prepared
            {
                let targets = reg.route(&record);
                if targets.is_empty() {
                    unrouted += 1;
                    continue;
                }
                // A non-durable message lives in memory only, and a queue
                // another node serves keeps nothing in memory here: it would
                // be acknowledged and lost. The whole send is refused instead
                // (the gRPC edge forwards it to that node, `grpc/cluster/proxy.rs`).
                if !record.durable
                    && let Some(away) = targets.iter().find(|q| !q.is_served())
                {
                    let queue = away.name.clone();
                    drop(reg);
                    let owner = self.cluster().owner_of(&queue);
                    return Err(BrokerError::NotKeptHere { queue, owner });
                }
                place(record, due_ms, to_disk, targets, &mut ops, &mut arrivals);
            }
            self.submit(ops)
        };
        let inboxed = self.commit_inboxed(commit).await?;
        if let Some(reservation) = reservation {
            reservation.durable();
        }
        arrivals.deliver(now_ms(), &inboxed);
        Ok((unrouted, duplicates))
    }
}

impl Broker {
    /// Claims the duplicate ids of a send (`crate::duplicates`): per message whether
    /// it is a duplicate, the ops that store the new ids, and their reservation.
    /// Waits while one of the ids is in a commit still in flight. With
    /// [`OnDuplicate::Refuse`] a duplicate is an error.
    async fn claim_duplicate_ids(
        &self,
        prepared: &[Prepared],
        on_duplicate: OnDuplicate,
    ) -> Result<(Vec<bool>, Vec<Op>, Reservation<'_>)> {
        let claims: Vec<Claim> = prepared
            .iter()
            .filter_map(|p| {
                Some(Claim {
                    address: &p.record.address,
                    id: p.duplicate_id.as_ref()?,
                    durable: p.record.durable,
                    cache_size: self.settings_for(&p.record.address).id_cache_size,
                })
            })
            .collect();
        loop {
            let (duplicate, ops, reservation) = match self.duplicates.claim(&claims) {
                Claimed::Wait(mut done) => {
                    // Ends (as an error) once the commit holding the id is settled.
                    let _ = done.changed().await;
                    continue;
                }
                Claimed::Done {
                    duplicate,
                    ops,
                    reservation,
                } => (duplicate, ops, reservation),
            };
            if on_duplicate == OnDuplicate::Refuse
                && let Some(i) = duplicate.iter().position(|&d| d)
            {
                return Err(BrokerError::DuplicateId {
                    address: claims[i].address.to_owned(),
                    id: String::from_utf8_lossy(claims[i].id).into_owned(),
                });
            }
            let mut flag = duplicate.into_iter();
            let flags = prepared
                .iter()
                .map(|p| p.duplicate_id.is_some() && flag.next().unwrap_or(false))
                .collect();
            return Ok((flags, ops, reservation));
        }
    }
}

/// The effective settings of the address a batch's messages go to, looked up
/// once per run of messages to the same address rather than once per message.
#[derive(Default)]
struct SettingsMemo(Option<(String, Arc<EffectiveSettings>)>);

impl SettingsMemo {
    fn get(&mut self, broker: &Broker, address: &str) -> Arc<EffectiveSettings> {
        match &self.0 {
            Some((a, settings)) if a == address => settings.clone(),
            _ => {
                let settings = broker.settings_for(address);
                self.0 = Some((address.to_owned(), settings.clone()));
                settings
            }
        }
    }
}

/// Messages placed in a commit, to hand to their queues once it is durable.
/// Stored ones are announced to their queues when placed (the queue's depager
/// must not read them before they are enqueued, see `queue/tail.rs`); arrivals
/// dropped undelivered (the commit failed or was never made) are withdrawn.
#[derive(Default)]
pub(super) struct Arrivals(Vec<(Arc<Queue>, Entry, u64, bool)>);

impl Arrivals {
    /// Hands the messages to their queues: one lock and one wake-up of the
    /// queue's dispatcher per run of arrivals for the same queue, not one per
    /// message.
    /// `inboxed` is sorted.
    pub(super) fn deliver(mut self, now: u64, inboxed: &[(QueueId, MessageId)]) {
        // Stored with an inbox row: the queue's owner takes them from there,
        // also when that is this node by now; taken here too, one would be
        // in memory twice, and come again after its ack.
        if !inboxed.is_empty() {
            self.0.retain(|(queue, entry, _, _)| {
                let inboxed = inboxed.binary_search(&(queue.id, entry.id)).is_ok();
                !(inboxed && queue.leaves_to_inbox(entry.id))
            });
        }
        let mut arrivals = std::mem::take(&mut self.0).into_iter().peekable();
        while let Some((queue, entry, due_ms, to_disk)) = arrivals.next() {
            let mut entries = vec![(entry, due_ms)];
            while let Some((_, entry, due_ms, _)) =
                arrivals.next_if(|(next, _, _, disk)| Arc::ptr_eq(next, &queue) && *disk == to_disk)
            {
                entries.push((entry, due_ms));
            }
            if to_disk {
                queue.enqueue_to_disk(entries, now);
            } else {
                queue.enqueue(entries, now);
            }
        }
    }
}

impl Drop for Arrivals {
    fn drop(&mut self) {
        for (queue, entry, _, _) in self.0.iter().filter(|(_, entry, _, _)| entry.stored) {
            queue.abandon([entry.id]);
        }
    }
}

/// Routes a record to `targets`: one stored record per durable queue (when the
/// message is durable), in-memory copies elsewhere. A message due later (`due_ms`,
/// 0 = now) says when in its record (`scheduled_at_ms`: a copy moved here from
/// elsewhere is due at once, whatever its original said); one `to_disk` is paged
/// by its queues at once (PAGE past a size limit). The last target takes the
/// record itself, so a message to one queue is copied once (for the queue's
/// cache), not twice.
pub(super) fn place(
    mut record: MessageRecord,
    due_ms: u64,
    to_disk: bool,
    targets: Vec<Arc<Queue>>,
    ops: &mut Vec<Op>,
    arrivals: &mut Arrivals,
) {
    record.scheduled_at_ms = due_ms;
    let mut targets = targets.into_iter().peekable();
    while let Some(queue) = targets.next() {
        let mut record = match targets.peek() {
            Some(_) => record.clone(),
            None => std::mem::take(&mut record),
        };
        record.routing_type = routing::to_store(queue.routing_type);
        // As the store counts it (what the queue reads back when it depages).
        let size = record.encoded_len() as u64;
        let stored = record.durable && queue.durable;
        let entry = Entry {
            id: record.message_id,
            priority: record.priority as u8,
            expiration_ms: record.expiration_ms,
            size,
            delivery_count: 0,
            failures: Vec::new(),
            stored,
            state_stored: false,
            group: rebound_storage::records::group_of(&record.properties).map(Arc::from),
            // Stored or not, the queue may keep it for a delivery without a read.
            record: Some(Arc::new(record.clone())),
            serving: None,
        };
        if stored {
            let id = record.message_id;
            queue.arriving([id]);
            ops.push(Op::PutMessage {
                queue: queue.id,
                message: record,
            });
        }
        arrivals.0.push((queue, entry, due_ms, to_disk));
    }
}
