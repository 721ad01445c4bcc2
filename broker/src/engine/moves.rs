//! Messages that leave their queue for another address: dead letters, expired
//! messages, a redelivery schedule's `move(...)`, and the management operations
//! that move messages (`move`, `retry`).
//!
//! A move is not a send: the target's `address-full-policy` does not apply
//! (`admit.rs`), so a full dead-letter or expiry address still takes what the
//! broker moves there, and an operator's retry is never refused or dropped.
//!
//! Every move is one commit: the removal from the queue and the new message(s) on
//! the target together, so after any crash the message is in exactly one of them.
//! If the commit fails, the message is back in its queue as it was.
//!
//! A queue on its own dead-letter address (a DLQ under a `#` setting) keeps its
//! dead letters, as Artemis does: dead-lettered into itself, a message would only
//! start its attempts over as a copy that no longer says where it failed.
use std::sync::Arc;

use rebound_config::{EffectiveSettings, MoveTarget};
use rebound_storage::{MessageRecord, Op};
use tracing::{info, warn};

use super::Broker;
use super::addresses::Create;
use super::ops::{removal_ops, state_op};
use super::send::{Arrivals, place};
use crate::dead_letter::{self, Destination, Reason};
use crate::error::{BrokerError, Result};
use crate::postoffice::Registry;
use crate::queue::{Entry, Queue};
use crate::redelivery;
use crate::time::now_ms;

/// Where a message that leaves its queue for another address goes.
#[derive(Debug)]
pub(super) enum Exit {
    DeadLetter(Reason),
    Expire,
    Move(MoveTarget),
    Delete,
}

/// What [`Broker::move_entry`] did.
pub(super) enum Moved {
    Done,
    /// No queue of the target took the message; it changed nothing.
    NoTarget(Entry),
}

impl Broker {
    /// Moves messages taken from `queue` on to where `Exit` says, or drops them
    /// when there is nowhere to go. On an error, the message that failed and those
    /// not yet moved are back in `queue`.
    pub(super) async fn leave(self: &Arc<Self>, queue: &Arc<Queue>, items: Vec<(Entry, Exit)>) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let settings = self.settings_for(&queue.address);
        let mut items = items.into_iter();
        while let Some((entry, how)) = items.next() {
            if let Err(err) = self.leave_one(queue, &settings, entry, how).await {
                queue.requeue(items.map(|(e, _)| (e, 0)), now_ms());
                return Err(err);
            }
        }
        Ok(())
    }

    async fn leave_one(
        self: &Arc<Self>,
        queue: &Arc<Queue>,
        settings: &EffectiveSettings,
        entry: Entry,
        how: Exit,
    ) -> Result<()> {
        if let Exit::DeadLetter(reason) = &how
            && settings.dead_letter_address.as_ref() == Some(&queue.address)
        {
            return self.keep_dead_letter(queue, settings, entry, reason).await;
        }
        let target = match self.exit_target(queue, settings, how).await {
            Ok(target) => target,
            // Storage refused to create the target: the message stays, as for a
            // failed move.
            Err(err @ BrokerError::Storage(_)) => {
                queue.requeue([(entry, 0)], now_ms());
                return Err(err);
            }
            Err(err) => {
                warn!(queue = %queue.name, message_id = entry.id, %err, "cannot prepare the target address");
                None
            }
        };
        let record = match self.load(queue, &entry) {
            Ok(Some(record)) => record,
            Ok(None) => {
                queue.finish(std::slice::from_ref(&entry));
                return Ok(());
            }
            Err(err) => {
                queue.requeue([(entry, 0)], now_ms());
                return Err(err);
            }
        };
        let Some((address, reason)) = target else {
            return self.drop_message(queue, entry, "no address to move it to").await;
        };
        let (id, delivery_count) = (entry.id, entry.delivery_count);
        let mut copy = dead_letter::copy_for(
            &record,
            &entry,
            &queue.name,
            queue.routing_type,
            &address,
            &reason,
            now_ms(),
        );
        if let Some(waiting) = queue.held_behind(&entry) {
            dead_letter::mark_group_held(&mut copy, waiting);
        }
        if let Moved::NoTarget(entry) = self
            .move_entry(queue, entry, 0, copy, |reg, copy| reg.route(copy))
            .await?
        {
            let why = format!("address '{address}' has no queue for it");
            return self.drop_message(queue, entry, &why).await;
        }
        queue.count(|c| match reason {
            Reason::Expired => c.expired += 1,
            Reason::Moved => c.moved_out += 1,
            _ => c.dead_lettered += 1,
        });
        info!(
            queue = %queue.name,
            address = %queue.address,
            message_id = id,
            delivery_count,
            to = %address,
            %reason,
            "moved message"
        );
        Ok(())
    }

    /// Moves `entry`, already taken from `queue`, as `copy` to the queues `targets`
    /// picks: its removal and the new message are one commit. When no queue takes it
    /// nothing changes and the entry is handed back; on an error it is back in
    /// `queue`, due at `due_ms` (when it was due before it was taken; 0 = now).
    pub(super) async fn move_entry(
        &self,
        queue: &Queue,
        entry: Entry,
        due_ms: u64,
        copy: MessageRecord,
        targets: impl FnOnce(&Registry, &MessageRecord) -> Vec<Arc<Queue>>,
    ) -> Result<Moved> {
        let ops = removal_ops(queue, [&entry]);
        match self.relocate(copy, ops, targets).await {
            Ok(true) => {
                queue.finish(std::slice::from_ref(&entry));
                Ok(Moved::Done)
            }
            Ok(false) => Ok(Moved::NoTarget(entry)),
            Err(err) => {
                queue.requeue([(entry, due_ms)], now_ms());
                Err(err)
            }
        }
    }

    /// Stores `record` as a new message in the queues `targets` picks for it, in one
    /// commit with `ops`. Returns false, changing nothing, if no queue takes it.
    async fn relocate(
        &self,
        mut record: MessageRecord,
        mut ops: Vec<Op>,
        targets: impl FnOnce(&Registry, &MessageRecord) -> Vec<Arc<Queue>>,
    ) -> Result<bool> {
        let now = now_ms();
        record.message_id = self.store.generate_id()?;
        record.timestamp_ms = now;
        let mut arrivals = Arrivals::default();
        let commit = {
            let reg = self.read();
            let targets = targets(&reg, &record);
            if targets.is_empty() {
                return Ok(false);
            }
            place(record, 0, false, targets, &mut ops, &mut arrivals);
            self.submit(ops)
        };
        let inboxed = self.commit_inboxed(commit).await?;
        arrivals.deliver(now, &inboxed);
        Ok(true)
    }

    /// Where a leaving message goes: the address and the reason it carries, creating
    /// the address (and the DLQ/expiry queue) when the settings say so; None = drop.
    async fn exit_target(
        self: &Arc<Self>,
        queue: &Queue,
        settings: &EffectiveSettings,
        how: Exit,
    ) -> Result<Option<(String, Reason)>> {
        let (destination, reason) = match how {
            Exit::Delete => return Ok(None),
            Exit::DeadLetter(reason) => (Destination::dead_letters(settings, &queue.address), reason),
            Exit::Expire => (Destination::expired(settings, &queue.address), Reason::Expired),
            Exit::Move(target) => {
                let address = target.address_for(&queue.address);
                let routing = target.kind.routing_type(queue.routing_type);
                self.ensure_address(&address, Some(routing), Create::ForMove)
                    .await?;
                return Ok(Some((address, Reason::Schedule)));
            }
        };
        let Some(Destination { address, own_queue }) = destination else {
            return Ok(None);
        };
        let Some(own_queue) = own_queue else {
            // Routed like a send to that address.
            self.ensure_address(&address, None, Create::OnSend).await?;
            return Ok(Some((address, reason)));
        };
        if !self.read().queues.contains_key(&own_queue) {
            // As in Artemis, the auto-created queue filters on the original address, so
            // it holds only that address's messages.
            let filter = format!(
                "{} = '{}'",
                dead_letter::ORIG_ADDRESS,
                queue.address.replace('\'', "''")
            );
            self.queue_or_create(&address, &own_queue, None, Some(&filter))
                .await?;
        }
        Ok(Some((address, reason)))
    }

    /// Puts a dead letter of a queue on its own dead-letter address back, with a WARN
    /// line that names it. It waits its redelivery delay like any failed message,
    /// so a consumer that keeps failing it does not make it spin.
    async fn keep_dead_letter(
        &self,
        queue: &Queue,
        settings: &EffectiveSettings,
        mut entry: Entry,
        reason: &Reason,
    ) -> Result<()> {
        let now = now_ms();
        // A nack's failure is recorded already; a `dead-letter` nack's is not.
        if let Reason::Rejected(_) = reason {
            entry.record_failure(now, &reason.to_string());
        }
        warn!(
            message = entry.id,
            address = %queue.address,
            queue = %queue.name,
            delivery_count = entry.delivery_count,
            %reason,
            "not dead-lettering the message: its dead-letter address is its own; it stays in the queue"
        );
        let delay_ms = redelivery::delay_after_failure(settings, entry.delivery_count, &mut rand::rng());
        let due = if delay_ms > 0 {
            now.saturating_add(delay_ms)
        } else {
            0
        };
        let ops = match entry.stored {
            true => vec![state_op(queue, &mut entry, due)],
            false => Vec::new(),
        };
        let result = self.commit(self.submit(ops)).await;
        queue.requeue([(entry, due)], now);
        result
    }

    /// Drops a message taken from `queue` for good, with a WARN line that names it.
    async fn drop_message(&self, queue: &Queue, entry: Entry, why: &str) -> Result<()> {
        warn!(
            message = entry.id,
            address = %queue.address,
            queue = %queue.name,
            delivery_count = entry.delivery_count,
            "dropping message: {why}"
        );
        self.remove(queue, vec![entry]).await?;
        queue.count(|c| c.dropped += 1);
        Ok(())
    }

    /// Handles messages the dispatcher found expired.
    pub(super) async fn expire(self: &Arc<Self>, queue: &Arc<Queue>, entries: Vec<Entry>) -> Result<()> {
        let items = entries.into_iter().map(|e| (e, Exit::Expire)).collect();
        self.leave(queue, items).await
    }
}
