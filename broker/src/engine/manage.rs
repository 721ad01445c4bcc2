//! [`Management`], the engine as an operator works it: browse, count, purge,
//! remove, move, and retry (dead letters back to exactly the queue they failed
//! on) here; the listings of addresses and queues in `listing.rs`.
//!
//! It is a type of its own, borrowed from the engine by the admin API, the
//! console, metrics and the access checks, so that the operations of sessions
//! (`Broker`) and those of management are not one list of methods.
//!
//! Operations apply to messages that are not being delivered; each move is one
//! commit per message (`moves.rs`), so an interrupted operation leaves every
//! message in exactly one place.
//!
//! They cover paged messages too (`queue/tail.rs`): a walk goes over the messages
//! in memory, then over the paged ones in id order, then over the scheduled ones
//! waiting on disk (`queue/far.rs`) in due order, read from storage a chunk at
//! a time. Operations that take messages hold the queue's tail lock for a chunk,
//! its commits included, so the depager cannot load a message being removed.
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rebound_selector::Selector;
use rebound_storage::{Due, MessageId, MessageRecord};
use tracing::info;

use super::Broker;
use super::addresses::Create;
use super::moves::Moved;
use super::settle::log_outage;
use crate::dead_letter::{self, Reason};
use crate::error::{BrokerError, Result};
use crate::message::{self, Selectable};
use crate::outage::Outage;
use crate::queue::{BrowseState, Entry, Queue};
use crate::time::now_ms;

/// The engine's management operations ([`Broker::management`]).
#[derive(Clone, Copy)]
pub struct Management<'a> {
    pub(super) broker: &'a Arc<Broker>,
}

impl<'a> Management<'a> {
    pub(super) fn new(broker: &'a Arc<Broker>) -> Self {
        Management { broker }
    }
}

/// Which messages of a queue a management operation applies to.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub queue: String,
    /// A selector; empty = every message.
    pub filter: String,
    /// Only the messages with these ids; empty = any.
    pub message_ids: BTreeSet<u64>,
}

/// What a retry did (or would do) with one message.
#[derive(Debug, Clone)]
pub struct RetryOutcome {
    pub message_id: u64,
    pub to_address: String,
    pub to_queue: String,
    /// Why it stays where it is; None when it moved (or would move).
    pub skipped: Option<String>,
}

impl RetryOutcome {
    /// How many of `outcomes` moved (or would move).
    pub fn moved(outcomes: &[RetryOutcome]) -> usize {
        outcomes.iter().filter(|o| o.skipped.is_none()).count()
    }
}

/// A browsed message.
pub struct Browsed {
    pub entry: Entry,
    pub record: Arc<MessageRecord>,
    pub state: BrowseState,
    /// Read from storage: the queue holds it on disk (paged or due far
    /// ahead), not in memory.
    pub paged: bool,
}

/// Paged messages read per step of a walk.
const PAGED_CHUNK: usize = 1000;

/// Where a walk over a queue's messages is.
#[derive(Debug, Clone, Copy)]
enum Walk {
    Memory,
    /// The stored messages above this id.
    Paged(MessageId),
    /// The far ones, in the batches of the due-time index after this one.
    Far(Option<Due>),
    Done,
}

/// What a walk looks at.
struct Scan<'a> {
    filter: Option<&'a Selector>,
    /// Empty = any.
    message_ids: &'a BTreeSet<u64>,
    /// Management operations leave deliveries alone; browsing shows them.
    with_delivering: bool,
    limit: usize,
}

/// A paged message read from storage, as a walk shows it.
fn paged(record: MessageRecord, state: Option<rebound_storage::DeliveryState>) -> Option<Browsed> {
    let (entry, due_ms) = Entry::read_back(record, state);
    let record = entry.record.clone()?;
    let state = if due_ms > now_ms() {
        BrowseState::Scheduled(due_ms)
    } else {
        BrowseState::Ready
    };
    Some(Browsed {
        entry,
        record,
        state,
        paged: true,
    })
}

impl<'a> Scan<'a> {
    /// The messages of a selection that are not being delivered.
    fn selection(filter: Option<&'a Selector>, selection: &'a Selection) -> Scan<'a> {
        Scan {
            filter,
            message_ids: &selection.message_ids,
            with_delivering: false,
            limit: usize::MAX,
        }
    }
}

impl Walk {
    fn done(self) -> bool {
        matches!(self, Walk::Done)
    }
}

impl Management<'_> {
    /// The queue a management operation works on: one this node serves
    /// (another node's is reached through it, `grpc/cluster/proxy.rs`; here it holds
    /// nothing, and its stored messages are that node's to change).
    fn managed_queue(self, name: &str) -> Result<Arc<Queue>> {
        let queue = self.broker.queue(name)?;
        match queue.is_served() {
            true => Ok(queue),
            false => Err(BrokerError::QueueMoved(queue.name.clone())),
        }
    }

    /// Up to `limit` messages in queue order (ready, delivering, scheduled; then
    /// the paged ones) that `filter` matches (empty = all), without consuming them.
    pub fn browse(self, name: &str, filter: &str, limit: usize) -> Result<Vec<Browsed>> {
        let queue = self.managed_queue(name)?;
        let filter = self.broker.client_filter(filter)?;
        let scan = Scan {
            filter: filter.as_ref(),
            message_ids: &BTreeSet::new(),
            with_delivering: true,
            limit,
        };
        self.collect(&queue, &scan)
    }

    /// One message of a queue, whatever its state.
    pub fn message(self, name: &str, id: u64) -> Result<Browsed> {
        let queue = self.managed_queue(name)?;
        let scan = Scan {
            filter: None,
            message_ids: &BTreeSet::from([id]),
            with_delivering: true,
            limit: 1,
        };
        self.collect(&queue, &scan)?
            .pop()
            .ok_or_else(|| BrokerError::MessageNotFound {
                queue: name.to_owned(),
                id,
            })
    }

    /// Up to `scan.limit` messages of a walk.
    fn collect(self, queue: &Queue, scan: &Scan<'_>) -> Result<Vec<Browsed>> {
        let mut out = Vec::new();
        let mut at = Walk::Memory;
        while out.len() < scan.limit && !matches!(at, Walk::Done) {
            let (chunk, next) = self.walk(queue, scan, at)?;
            out.extend(chunk.into_iter().take(scan.limit - out.len()));
            at = next;
        }
        Ok(out)
    }

    /// One step of the walk over a queue's messages that browsing and every
    /// management operation share: the messages in memory, then a chunk of the
    /// paged ones at a time. Returns what matches and where to go on.
    fn walk(self, queue: &Queue, scan: &Scan<'_>, at: Walk) -> Result<(Vec<Browsed>, Walk)> {
        let mut out = Vec::new();
        let keep = |entry: &Entry, record: &MessageRecord| {
            (scan.message_ids.is_empty() || scan.message_ids.contains(&entry.id))
                && scan.filter.is_none_or(|f| f.matches(&Selectable(record)))
        };
        match at {
            Walk::Done => Ok((out, Walk::Done)),
            Walk::Memory => {
                let every = scan.filter.is_none() && scan.message_ids.is_empty() && scan.with_delivering;
                // Without conditions the first `limit` entries are all it needs.
                let (entries, cursor) = queue.browse(if every { scan.limit } else { usize::MAX });
                for (entry, state) in entries {
                    if out.len() == scan.limit {
                        break;
                    }
                    if (state == BrowseState::Delivering && !scan.with_delivering)
                        || (!scan.message_ids.is_empty() && !scan.message_ids.contains(&entry.id))
                    {
                        continue;
                    }
                    let Some(record) = self.broker.load(queue, &entry)? else {
                        continue;
                    };
                    if keep(&entry, &record) {
                        out.push(Browsed {
                            entry,
                            record,
                            state,
                            paged: false,
                        });
                    }
                }
                let next = if queue.durable {
                    Walk::Paged(cursor)
                } else {
                    Walk::Done
                };
                Ok((out, next))
            }
            Walk::Paged(after) if !scan.message_ids.is_empty() => {
                // Named messages are read one by one rather than walked to.
                let on_disk = scan
                    .message_ids
                    .iter()
                    .filter(|&&id| id > after || queue.is_far(id));
                for &id in on_disk {
                    out.extend(self.read_stored(queue, id)?.filter(|b| keep(&b.entry, &b.record)));
                }
                Ok((out, Walk::Done))
            }
            Walk::Paged(after) => {
                let read = self
                    .broker
                    .store
                    .scan_queue(queue.id, after, PAGED_CHUNK, u64::MAX)?;
                let next = match read.last() {
                    Some(last) if read.len() == PAGED_CHUNK => Walk::Paged(last.record.message_id),
                    _ => Walk::Far(None),
                };
                for message in read {
                    out.extend(paged(message.record, message.state).filter(|b| keep(&b.entry, &b.record)));
                }
                Ok((out, next))
            }
            Walk::Far(after) => {
                let read = self.broker.store.scan_due(queue.id, after, 1)?;
                let next = match read.first() {
                    Some(batch) => Walk::Far(Some(batch.first)),
                    None => Walk::Done,
                };
                let entries = read.into_iter().flat_map(|batch| batch.entries);
                for due in entries.filter(|due| queue.is_far(due.id)) {
                    out.extend(
                        self.read_stored(queue, due.id)?
                            .filter(|b| keep(&b.entry, &b.record)),
                    );
                }
                Ok((out, next))
            }
        }
    }

    /// Message `id` of `queue` read from storage with its state, as a walk
    /// shows it; None if it is not stored (any more).
    fn read_stored(self, queue: &Queue, id: MessageId) -> Result<Option<Browsed>> {
        let Some(record) = self.broker.store.read_message(queue.id, id)? else {
            return Ok(None);
        };
        let state = self.broker.store.read_state(queue.id, id)?;
        Ok(paged(record, state))
    }

    /// How many messages of a selection are not being delivered.
    pub fn count_messages(self, selection: &Selection) -> Result<u64> {
        let queue = self.managed_queue(&selection.queue)?;
        let filter = self.broker.client_filter(&selection.filter)?;
        let scan = Scan::selection(filter.as_ref(), selection);
        let mut count = 0;
        let mut at = Walk::Memory;
        while !at.done() {
            let chunk;
            (chunk, at) = self.walk(&queue, &scan, at)?;
            count += chunk.len() as u64;
        }
        Ok(count)
    }

    /// Removes every message of a queue that is not being delivered.
    pub async fn purge(self, name: &str) -> Result<u64> {
        let selection = Selection {
            queue: name.to_owned(),
            ..Selection::default()
        };
        self.remove_messages(&selection).await
    }

    /// Removes the selected messages; counted as removed.
    pub async fn remove_messages(self, selection: &Selection) -> Result<u64> {
        let queue = self.managed_queue(&selection.queue)?;
        let filter = self.broker.client_filter(&selection.filter)?;
        let scan = Scan::selection(filter.as_ref(), selection);
        let mut removed = 0;
        let mut at = Walk::Memory;
        while !at.done() {
            let _tail = queue.tail.lock().await;
            let chunk;
            (chunk, at) = self.walk(&queue, &scan, at)?;
            let entries = chunk.iter().filter_map(|b| Self::take(&queue, b)).collect();
            removed += self.remove_entries(&queue, entries).await?;
        }
        Ok(removed)
    }

    /// Takes a walked message out of its queue, if it is still there and idle. One
    /// on disk may have been read into memory since the walk read it (the
    /// depager runs between chunks).
    fn take(queue: &Queue, browsed: &Browsed) -> Option<Entry> {
        if browsed.paged
            && let Some(entry) = queue
                .take_paged(browsed.entry.clone())
                .or_else(|| queue.take_far(browsed.entry.clone()))
        {
            return Some(entry);
        }
        queue.take_idle(browsed.entry.id)
    }

    async fn remove_entries(self, queue: &Queue, entries: Vec<Entry>) -> Result<u64> {
        let removed = entries.len() as u64;
        self.broker.remove(queue, entries).await?;
        queue.count(|c| c.removed += removed);
        Ok(removed)
    }

    /// Moves the selected messages to an address, one atomic move each. A message
    /// that no queue of the address takes stays where it is (and is not counted).
    pub async fn move_messages(self, selection: &Selection, to_address: &str) -> Result<u64> {
        message::check_name("address", to_address)?;
        self.broker
            .ensure_address(to_address, None, Create::OnSend)
            .await?;
        let queue = self.managed_queue(&selection.queue)?;
        let filter = self.broker.client_filter(&selection.filter)?;
        let scan = Scan::selection(filter.as_ref(), selection);
        let now = now_ms();
        let mut moved = 0;
        let mut at = Walk::Memory;
        while !at.done() {
            let _tail = queue.tail.lock().await;
            let chunk;
            (chunk, at) = self.walk(&queue, &scan, at)?;
            let mut taken = chunk
                .into_iter()
                .filter_map(|b| Some((Self::take(&queue, &b)?, b)))
                .collect::<Vec<_>>()
                .into_iter();
            while let Some((entry, Browsed { record, state, .. })) = taken.next() {
                let copy = dead_letter::copy_for(
                    &record,
                    &entry,
                    &queue.name,
                    queue.routing_type,
                    to_address,
                    &Reason::Moved,
                    now,
                );
                match self
                    .broker
                    .move_entry(&queue, entry, state.due_ms(), copy, |reg, copy| reg.route(copy))
                    .await
                {
                    Ok(Moved::Done) => {
                        moved += 1;
                        queue.count(|c| c.moved_out += 1);
                    }
                    // A scheduled message put back keeps its time.
                    Ok(Moved::NoTarget(entry)) => {
                        queue.requeue([(entry, state.due_ms())], now);
                    }
                    Err(err) => {
                        // Those taken and not tried yet stay in the queue.
                        queue.requeue(taken.map(|(e, b)| (e, b.state.due_ms())), now);
                        return Err(err);
                    }
                }
            }
        }
        Ok(moved)
    }

    /// Sends dead letters back to exactly the queue they failed on.
    ///
    /// With a `limit`, it stops once that many messages moved (or, in a dry run,
    /// would move); skipped messages do not count, so a client retrying a large
    /// queue in chunks shows progress between them. A message whose way back
    /// `may_return_to` refuses (its original address; the caller's permissions)
    /// is skipped with the reason it gives.
    pub async fn retry_messages(
        self,
        selection: &Selection,
        dry_run: bool,
        rate_per_second: u32,
        limit: Option<usize>,
        may_return_to: impl Fn(&str) -> std::result::Result<(), String>,
    ) -> Result<Vec<RetryOutcome>> {
        let pace = (rate_per_second > 0).then(|| Duration::from_secs(1) / rate_per_second);
        let dlq = self.managed_queue(&selection.queue)?;
        let filter = self.broker.client_filter(&selection.filter)?;
        let scan = Scan::selection(filter.as_ref(), selection);
        let mut outcomes = Vec::new();
        let mut moving = 0;
        let mut at = Walk::Memory;
        'walk: while !at.done() {
            let _tail = dlq.tail.lock().await;
            let chunk;
            (chunk, at) = self.walk(&dlq, &scan, at)?;
            for Browsed {
                entry,
                record,
                paged,
                state,
            } in chunk
            {
                if limit.is_some_and(|limit| moving >= limit) {
                    break 'walk;
                }
                let mut outcome = RetryOutcome {
                    message_id: entry.id,
                    to_address: String::new(),
                    to_queue: String::new(),
                    skipped: None,
                };
                match self
                    .retry_plan(&record)
                    .and_then(|(address, queue)| may_return_to(&address).map(|()| (address, queue)))
                {
                    Ok((address, queue)) => {
                        outcome.to_address = address;
                        outcome.to_queue = queue;
                    }
                    Err(why) => outcome.skipped = Some(why),
                }
                if dry_run || outcome.skipped.is_some() {
                    moving += usize::from(outcome.skipped.is_none());
                    outcomes.push(outcome);
                    continue;
                }
                let browsed = Browsed {
                    entry,
                    record,
                    paged,
                    state,
                };
                let Some(taken) = Self::take(&dlq, &browsed) else {
                    outcome.skipped = Some("it is being delivered or is gone".into());
                    outcomes.push(outcome);
                    continue;
                };
                let copy = dead_letter::retry_copy(&browsed.record, &outcome.to_address);
                let target = outcome.to_queue.clone();
                let to_target = |reg: &crate::postoffice::Registry, _: &MessageRecord| {
                    reg.queues.get(&target).cloned().into_iter().collect()
                };
                let due_ms = browsed.state.due_ms();
                match self
                    .broker
                    .move_entry(&dlq, taken, due_ms, copy, to_target)
                    .await?
                {
                    Moved::Done => dlq.count(|c| c.moved_out += 1),
                    Moved::NoTarget(taken) => {
                        dlq.requeue([(taken, due_ms)], now_ms());
                        outcome.skipped = Some(format!("queue '{target}' no longer exists"));
                    }
                }
                moving += usize::from(outcome.skipped.is_none());
                outcomes.push(outcome);
                if let Some(pace) = pace {
                    tokio::time::sleep(pace).await;
                }
            }
        }
        if !dry_run {
            // One line for the whole retry, however many messages it moved.
            let skipped = outcomes.iter().filter(|o| o.skipped.is_some()).count();
            info!(from = %dlq.name, retried = moving, skipped, "retried dead letters");
        }
        Ok(outcomes)
    }

    /// Ends the outage of `queue` (an operator's call): whether it was in one.
    pub fn resume_queue(self, queue: &Queue) -> bool {
        let change = queue.outage(|o| o.resume(now_ms()));
        change.map(|change| log_outage(queue, change)).is_some()
    }

    /// Sends the next probe of `queue`'s outage now (an operator's call):
    /// whether one was waiting for its pause to end.
    pub fn probe_queue_now(self, queue: &Queue) -> bool {
        let probing = queue.outage(Outage::probe_now);
        if probing {
            info!(queue = %queue.name, "queue in outage mode: probe sent now, as asked");
        }
        probing
    }

    /// Where a dead letter would be retried to, or why it cannot be.
    fn retry_plan(self, record: &MessageRecord) -> std::result::Result<(String, String), String> {
        let Some((address, queue)) = dead_letter::origin(record) else {
            return Err("not a dead letter: it has no _AMQ_ORIG_ADDRESS/_AMQ_ORIG_QUEUE".into());
        };
        let exists = self
            .broker
            .read()
            .queues
            .get(queue)
            .is_some_and(|q| q.address == address);
        if !exists {
            return Err(format!("queue '{queue}' no longer exists on address '{address}'"));
        }
        let max = self.broker.settings_for(address).max_redrive;
        let redrives = dead_letter::redrive_count(record);
        if redrives >= max {
            return Err(format!("already retried {redrives} times (max-redrive {max})"));
        }
        Ok((address.to_owned(), queue.to_owned()))
    }
}
