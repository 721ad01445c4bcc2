//! Management of queued messages: browse, count, purge, remove, move, and retry
//! (dead letters back to exactly the queue they failed on).
//!
//! Operations apply to messages that are not being delivered; each move is one
//! commit per message (`forward.rs`), so an interrupted operation leaves every
//! message in exactly one place.
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rebound_selector::Selector;
use rebound_storage::MessageRecord;
use tracing::info;

use super::Broker;
use super::addresses::Create;
use super::forward::Moved;
use crate::dead_letter::{self, Reason};
use crate::error::{BrokerError, Result};
use crate::message::{self, Selectable};
use crate::queue::{BrowseState, Entry, Queue};
use crate::time::now_ms;

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
}

/// What [`Broker::scan`] looks at.
struct Scan<'a> {
    filter: Option<&'a Selector>,
    /// Empty = any.
    message_ids: &'a BTreeSet<u64>,
    /// Management operations leave deliveries alone; browsing shows them.
    with_delivering: bool,
    limit: usize,
}

impl Broker {
    /// Up to `limit` messages in queue order (ready, delivering, scheduled) that
    /// `filter` matches (empty = all), without consuming them.
    pub fn browse(&self, name: &str, filter: &str, limit: usize) -> Result<Vec<Browsed>> {
        let queue = self.queue(name)?;
        let filter = self.client_filter(filter)?;
        self.scan(
            &queue,
            Scan {
                filter: filter.as_ref(),
                message_ids: &BTreeSet::new(),
                with_delivering: true,
                limit,
            },
        )
    }

    /// One message of a queue, whatever its state.
    pub fn message(&self, name: &str, id: u64) -> Result<Browsed> {
        let queue = self.queue(name)?;
        let scan = Scan {
            filter: None,
            message_ids: &BTreeSet::from([id]),
            with_delivering: true,
            limit: 1,
        };
        self.scan(&queue, scan)?
            .pop()
            .ok_or_else(|| BrokerError::MessageNotFound {
                queue: name.to_owned(),
                id,
            })
    }

    /// The one walk over a queue's messages that browsing and every management
    /// operation share.
    fn scan(&self, queue: &Queue, scan: Scan<'_>) -> Result<Vec<Browsed>> {
        let every = scan.filter.is_none() && scan.message_ids.is_empty() && scan.with_delivering;
        let mut out = Vec::new();
        // Without conditions the first `limit` entries are all it needs.
        for (entry, state) in queue.browse(if every { scan.limit } else { usize::MAX }) {
            if out.len() == scan.limit {
                break;
            }
            if (state == BrowseState::Delivering && !scan.with_delivering)
                || (!scan.message_ids.is_empty() && !scan.message_ids.contains(&entry.id))
            {
                continue;
            }
            let Some(record) = self.load(queue, &entry)? else {
                continue;
            };
            if scan.filter.is_none_or(|f| f.matches(&Selectable(&record))) {
                out.push(Browsed { entry, record, state });
            }
        }
        Ok(out)
    }

    /// The messages of a selection that are not being delivered.
    fn selected(&self, selection: &Selection) -> Result<(Arc<Queue>, Vec<Browsed>)> {
        let queue = self.queue(&selection.queue)?;
        let filter = self.client_filter(&selection.filter)?;
        let scan = Scan {
            filter: filter.as_ref(),
            message_ids: &selection.message_ids,
            with_delivering: false,
            limit: usize::MAX,
        };
        let selected = self.scan(&queue, scan)?;
        Ok((queue, selected))
    }

    pub fn count_messages(&self, selection: &Selection) -> Result<u64> {
        Ok(self.selected(selection)?.1.len() as u64)
    }

    /// Removes every message of a queue that is not being delivered.
    pub async fn purge(&self, name: &str) -> Result<u64> {
        let queue = self.queue(name)?;
        let entries = queue.purge();
        self.drop_entries(&queue, entries).await
    }

    /// Removes the selected messages; counted as dropped.
    pub async fn remove_messages(&self, selection: &Selection) -> Result<u64> {
        let (queue, selected) = self.selected(selection)?;
        let taken = selected
            .iter()
            .filter_map(|b| queue.take_idle(b.entry.id))
            .collect();
        self.drop_entries(&queue, taken).await
    }

    async fn drop_entries(&self, queue: &Queue, entries: Vec<Entry>) -> Result<u64> {
        let removed = entries.len() as u64;
        self.remove(queue, entries).await?;
        queue.count(|c| c.dropped += removed);
        Ok(removed)
    }

    /// Moves the selected messages to an address, one atomic move each. A message
    /// that no queue of the address takes stays where it is (and is not counted).
    pub async fn move_messages(self: &Arc<Self>, selection: &Selection, to_address: &str) -> Result<u64> {
        message::check_name("address", to_address)?;
        self.ensure_address(to_address, None, Create::OnSend).await?;
        let (queue, selected) = self.selected(selection)?;
        let now = now_ms();
        let mut moved = 0;
        for Browsed { entry, record, .. } in selected {
            let Some(taken) = queue.take_idle(entry.id) else {
                continue;
            };
            let copy = dead_letter::copy_for(
                &record,
                &taken,
                &queue.name,
                queue.routing_type,
                to_address,
                &Reason::Moved,
                now,
            );
            match self
                .move_entry(&queue, taken, copy, |reg, copy| reg.route(copy))
                .await?
            {
                Moved::Done => moved += 1,
                Moved::NoTarget(taken) => {
                    queue.requeue([(taken, 0)], now);
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
        self: &Arc<Self>,
        selection: &Selection,
        dry_run: bool,
        rate_per_second: u32,
        limit: Option<usize>,
        may_return_to: impl Fn(&str) -> std::result::Result<(), String>,
    ) -> Result<Vec<RetryOutcome>> {
        let (dlq, selected) = self.selected(selection)?;
        let pace = (rate_per_second > 0).then(|| Duration::from_secs(1) / rate_per_second);
        let mut outcomes = Vec::with_capacity(selected.len());
        let mut moving = 0;
        for Browsed { entry, record, .. } in selected {
            if limit.is_some_and(|limit| moving >= limit) {
                break;
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
            let Some(taken) = dlq.take_idle(entry.id) else {
                outcome.skipped = Some("it is being delivered or is gone".into());
                outcomes.push(outcome);
                continue;
            };
            let copy = dead_letter::retry_copy(&record, &outcome.to_address);
            let target = outcome.to_queue.clone();
            let to_target = |reg: &crate::postoffice::Registry, _: &MessageRecord| {
                reg.queues.get(&target).cloned().into_iter().collect()
            };
            match self.move_entry(&dlq, taken, copy, to_target).await? {
                Moved::Done => info!(from = %dlq.name, message = entry.id, to = %target, "retried message"),
                Moved::NoTarget(taken) => {
                    dlq.requeue([(taken, 0)], now_ms());
                    outcome.skipped = Some(format!("queue '{target}' no longer exists"));
                }
            }
            moving += usize::from(outcome.skipped.is_none());
            outcomes.push(outcome);
            if let Some(pace) = pace {
                tokio::time::sleep(pace).await;
            }
        }
        Ok(outcomes)
    }

    /// Where a dead letter would be retried to, or why it cannot be.
    fn retry_plan(&self, record: &MessageRecord) -> std::result::Result<(String, String), String> {
        let Some((address, queue)) = dead_letter::origin(record) else {
            return Err("not a dead letter: it has no _AMQ_ORIG_ADDRESS/_AMQ_ORIG_QUEUE".into());
        };
        let exists = self
            .read()
            .queues
            .get(queue)
            .is_some_and(|q| q.address == address);
        if !exists {
            return Err(format!("queue '{queue}' no longer exists on address '{address}'"));
        }
        let max = self.settings_for(address).max_redrive;
        let redrives = dead_letter::redrive_count(record);
        if redrives >= max {
            return Err(format!("already retried {redrives} times (max-redrive {max})"));
        }
        Ok((address.to_owned(), queue.to_owned()))
    }
}
