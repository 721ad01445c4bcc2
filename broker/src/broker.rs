//! The broker: addresses, queues and the life of a message from send to ack.
//!
//! [`Broker`] owns the post office (the registry of addresses and queues), the
//! address-settings, and the store. Every change that must survive a restart becomes
//! storage [`Op`]s committed through the store's group commit *before* the in-memory
//! state shows it (a send is acknowledged, a dead letter appears in its DLQ, only once
//! it is on disk); removals (acks) leave memory first and disk right after.
//!
//! Ordering across commits: every commit is handed to the store while the registry
//! lock is held (shared for messages, exclusive for creating and deleting queues), so
//! a message can never be written after the deletion of its queue.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use prost::Message as _;
use rebound_config::{
    Config, EffectiveSettings, MoveKind, ResolvedSettings, RoutingType, SettingsRepository,
};
use rebound_protocol::v1 as pb;
use rebound_selector::Selector;
use rebound_storage::{Commit, DeliveryState, MAX_RECORD_BYTES, MessageRecord, Op, QueueRecord, Store};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::dead_letter::{self, Reason};
use crate::error::{BrokerError, Result};
use crate::message::{self, Selectable};
use crate::postoffice::{Address, Registry};
use crate::queue::{BrowseState, ConsumerId, Entry, Queue};
use crate::redelivery::{self, Decision};
use crate::time::now_ms;
use crate::transaction::Transactions;

/// How a consumer settled its deliveries.
#[derive(Debug, Clone, PartialEq)]
pub enum Settlement {
    Ack,
    /// Failed: counts as an attempt; redelivered or dead-lettered per the settings.
    Nack {
        reason: String,
        retry_after_ms: Option<u64>,
    },
    /// Not processed: back at once, not counted.
    Release,
    /// Will never succeed: straight to the dead-letter address.
    DeadLetter {
        reason: String,
    },
}

/// Why an address is being created: that decides whether it may be, and whether an
/// anycast address gets a queue of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Create {
    /// Asked for by an operator or the config: exactly what was asked.
    Explicit,
    /// A send (or a dead letter routed like one): subject to auto-create-addresses and
    /// auto-create-queues.
    OnSend,
    /// A redelivery schedule's `move(queue:...)`: the target is created as named.
    ForMove,
}

/// Where a message that leaves its queue for another address goes.
#[derive(Debug)]
enum Forward {
    DeadLetter(Reason),
    Expire,
    Move(rebound_config::MoveTarget),
    Delete,
}

/// The engine. Cheap to share as `Arc<Broker>`.
pub struct Broker {
    store: Arc<dyn Store>,
    registry: RwLock<Registry>,
    settings: RwLock<Arc<SettingsRepository>>,
    /// Effective settings per address; cleared when the settings change.
    settings_cache: Mutex<HashMap<String, Arc<EffectiveSettings>>>,
    persist_count_before_delivery: AtomicBool,
    next_queue_id: AtomicU32,
    next_consumer_id: AtomicU64,
    /// Cancelled when the broker shuts down: consumer streams and dispatchers stop.
    pub shutdown: CancellationToken,
    /// The queues' dispatcher tasks, awaited on shutdown.
    tasks: TaskTracker,
    transactions: Transactions,
    started: Instant,
}

/// A message a management operation picked: its entry and its record.
type Selected = (Entry, Arc<MessageRecord>);

/// Which messages of a queue a management operation applies to.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub queue: String,
    /// A selector; empty = every message.
    pub filter: String,
    pub message_id: Option<u64>,
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

/// A browsed message.
pub struct Browsed {
    pub record: Arc<MessageRecord>,
    pub delivery_count: u32,
    pub state: BrowseState,
}

impl Broker {
    /// Rebuilds the broker from storage, then makes sure the addresses and queues of
    /// the config exist, and starts every queue's dispatcher.
    pub async fn open(
        config: &Config,
        store: Arc<dyn Store>,
        shutdown: CancellationToken,
    ) -> Result<Arc<Broker>> {
        let started = Instant::now();
        check_limits(&config.address_settings)?;
        let recovered = store.recover()?;
        let mut registry = Registry::default();
        for record in recovered.addresses {
            registry
                .addresses
                .insert(record.name.clone(), Address::from_record(record));
        }
        let now = now_ms();
        let mut max_queue_id = 0;
        let mut restored = 0usize;
        for rq in recovered.queues {
            let record = rq.record;
            max_queue_id = max_queue_id.max(record.id);
            let filter = parse_filter(&record.filter).unwrap_or_else(|err| {
                warn!(queue = %record.name, %err, "stored filter no longer parses; ignoring it");
                None
            });
            let routing = routing_from_store(record.routing_type);
            let queue = Arc::new(Queue::new(
                record.id,
                record.name,
                record.address,
                routing,
                true,
                record.auto_created,
                filter,
            ));
            restored += rq.messages.len();
            queue.requeue(
                rq.messages.into_iter().map(|m| {
                    let state = m.state.unwrap_or_default();
                    let entry = Entry {
                        id: m.id,
                        priority: m.priority.min(9) as u8,
                        expiration_ms: m.expiration_ms,
                        size: m.size as u64,
                        delivery_count: state.delivery_count,
                        failures: state.failures,
                        stored: true,
                        record: None,
                    };
                    (entry, state.scheduled_at_ms)
                }),
                now,
            );
            registry
                .addresses
                .entry(queue.address.clone())
                .or_insert_with(|| Address::new(queue.address.clone(), routing, true));
            registry.bind(queue);
        }
        let broker = Arc::new(Broker {
            store,
            registry: RwLock::new(registry),
            settings: RwLock::new(Arc::new(config.address_settings.clone())),
            settings_cache: Mutex::new(HashMap::new()),
            persist_count_before_delivery: AtomicBool::new(config.persist_delivery_count_before_delivery),
            next_queue_id: AtomicU32::new(max_queue_id + 1),
            next_consumer_id: AtomicU64::new(1),
            shutdown,
            tasks: TaskTracker::new(),
            transactions: Transactions::default(),
            started,
        });
        for queue in broker.read().queues.values() {
            broker.spawn_dispatcher(queue.clone());
        }
        broker.declare(config).await?;
        info!(
            queues = broker.read().queues.len(),
            messages = restored,
            ms = started.elapsed().as_millis() as u64,
            "recovered"
        );
        Ok(broker)
    }

    fn read(&self) -> RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|e| e.into_inner())
    }

    fn spawn_dispatcher(self: &Arc<Self>, queue: Arc<Queue>) {
        self.tasks.spawn(crate::dispatch::run(self.clone(), queue));
    }

    /// The effective address-settings of an address.
    pub fn settings_for(&self, address: &str) -> Arc<EffectiveSettings> {
        let mut cache = self.settings_cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = cache.get(address) {
            return s.clone();
        }
        let repo = self.settings.read().unwrap_or_else(|e| e.into_inner()).clone();
        let s = Arc::new(repo.effective(address));
        cache.insert(address.to_owned(), s.clone());
        s
    }

    /// The effective settings of an address with where each value came from.
    pub fn resolve_settings(&self, address: &str) -> ResolvedSettings {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .resolve(address)
    }

    pub fn persist_count_before_delivery(&self) -> bool {
        self.persist_count_before_delivery.load(Ordering::Relaxed)
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    pub fn transactions(&self) -> &Transactions {
        &self.transactions
    }

    pub fn next_consumer_id(&self) -> ConsumerId {
        self.next_consumer_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Commits ops (if any) and waits until they are durable.
    async fn commit(&self, commit: Option<Commit>) -> Result<()> {
        match commit {
            Some(c) => Ok(c.await?),
            None => Ok(()),
        }
    }

    fn submit(&self, ops: Vec<Op>) -> Option<Commit> {
        (!ops.is_empty()).then(|| self.store.commit(ops))
    }

    // ----- sending -----

    /// Accepts a batch of messages: validated, routed, written in one commit, and
    /// visible to consumers once durable. Returns the ids and how many found no queue.
    pub async fn send(self: &Arc<Self>, batch: Vec<pb::OutgoingMessage>) -> Result<(Vec<u64>, u32)> {
        let records = self.prepare(batch)?;
        let ids = records.iter().map(|r| r.message_id).collect();
        let unrouted = self.route_sends(records, Vec::new()).await?;
        Ok((ids, unrouted))
    }

    /// Validates messages a producer sent and gives them their ids, timestamps and
    /// expirations (`expiry-delay`).
    pub fn prepare(&self, batch: Vec<pb::OutgoingMessage>) -> Result<Vec<MessageRecord>> {
        if batch.is_empty() {
            return Err(BrokerError::InvalidArgument(
                "a send needs at least one message".into(),
            ));
        }
        if self.shutdown.is_cancelled() {
            return Err(BrokerError::ShuttingDown);
        }
        let now = now_ms();
        let mut records = Vec::with_capacity(batch.len());
        for outgoing in batch {
            let mut record = message::from_outgoing(outgoing)?;
            let settings = self.settings_for(&record.address);
            let size = record.encoded_len() as u64;
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
            record.timestamp_ms = now;
            record.message_id = self.store.generate_id()?;
            records.push(record);
        }
        Ok(records)
    }

    /// Routes prepared messages and commits them together with `ops` (a
    /// transaction's acks), then makes them visible. Returns how many found no queue.
    pub(crate) async fn route_sends(
        self: &Arc<Self>,
        records: Vec<MessageRecord>,
        mut ops: Vec<Op>,
    ) -> Result<u32> {
        let mut addresses: Vec<&str> = records.iter().map(|r| r.address.as_str()).collect();
        addresses.sort_unstable();
        addresses.dedup();
        for address in addresses {
            self.ensure_address(address, None, Create::OnSend).await?;
        }
        let mut unrouted = 0;
        let mut arrivals = Vec::new();
        let commit = {
            let reg = self.read();
            for record in records {
                let targets = reg.route(&record);
                if targets.is_empty() {
                    unrouted += 1;
                    continue;
                }
                if let Some(limit) = self.settings_for(&record.address).max_size_bytes {
                    let held: u64 = targets.iter().map(|q| q.bytes()).sum();
                    if held + record.encoded_len() as u64 > limit {
                        return Err(BrokerError::AddressFull {
                            address: record.address,
                            held,
                            limit,
                        });
                    }
                }
                place(record, targets, &mut ops, &mut arrivals);
            }
            self.submit(ops)
        };
        self.commit(commit).await?;
        deliver_arrivals(arrivals, now_ms());
        Ok(unrouted)
    }

    // ----- addresses and queues -----

    /// Makes sure an address exists, creating it if `how` allows.
    async fn ensure_address(
        self: &Arc<Self>,
        name: &str,
        routing: Option<RoutingType>,
        how: Create,
    ) -> Result<()> {
        if self.read().addresses.contains_key(name) {
            return Ok(());
        }
        message::check_name("address", name)?;
        let settings = self.settings_for(name);
        if how == Create::OnSend && !settings.auto_create_addresses {
            return Err(BrokerError::AddressNotFound(name.to_owned()));
        }
        let routing = routing.unwrap_or(settings.default_address_routing_type);
        let with_queue = routing == RoutingType::Anycast
            && match how {
                Create::Explicit => false,
                Create::OnSend => settings.auto_create_queues,
                Create::ForMove => true,
            };
        let (commit, queue) = {
            let mut reg = self.write();
            if reg.addresses.contains_key(name) {
                return Ok(());
            }
            let address = Address::new(name.to_owned(), routing, how != Create::Explicit);
            let mut ops = vec![Op::PutAddress(address.record())];
            reg.addresses.insert(name.to_owned(), address);
            let queue = (with_queue && !reg.queues.contains_key(name))
                .then(|| self.new_queue(&mut reg, &mut ops, name, name, routing, true, None, true));
            (self.submit(ops), queue)
        };
        self.commit(commit).await?;
        if let Some(queue) = queue {
            self.spawn_dispatcher(queue);
        }
        Ok(())
    }

    /// Creates the queue in the registry and adds its storage ops (under the write lock).
    #[allow(clippy::too_many_arguments)]
    fn new_queue(
        &self,
        reg: &mut Registry,
        ops: &mut Vec<Op>,
        address: &str,
        name: &str,
        routing: RoutingType,
        durable: bool,
        filter: Option<Selector>,
        auto_created: bool,
    ) -> Arc<Queue> {
        let id = self.next_queue_id.fetch_add(1, Ordering::Relaxed);
        let addr = reg
            .addresses
            .get_mut(address)
            .expect("address exists under the lock");
        if addr.allow(routing) {
            ops.push(Op::PutAddress(addr.record()));
        }
        let queue = Arc::new(Queue::new(
            id,
            name.to_owned(),
            address.to_owned(),
            routing,
            durable,
            auto_created,
            filter,
        ));
        if durable {
            ops.push(Op::PutQueue(QueueRecord {
                id,
                name: name.to_owned(),
                address: address.to_owned(),
                routing_type: routing_to_store(routing),
                filter: queue
                    .filter
                    .as_ref()
                    .map(|f| f.as_str().to_owned())
                    .unwrap_or_default(),
                auto_created,
            }));
        }
        reg.bind(queue.clone());
        queue
    }

    /// Creates an address explicitly.
    pub async fn create_address(self: &Arc<Self>, name: &str, routing: Option<RoutingType>) -> Result<()> {
        self.ensure_address(name, routing, Create::Explicit).await
    }

    /// Deletes an address; with `force` also its queues and their messages.
    pub async fn delete_address(&self, name: &str, force: bool) -> Result<()> {
        let (commit, closed) = {
            let mut reg = self.write();
            let Some(address) = reg.addresses.get(name) else {
                return Err(BrokerError::AddressNotFound(name.to_owned()));
            };
            if !address.queues.is_empty() && !force {
                return Err(BrokerError::FailedPrecondition(format!(
                    "address '{name}' still has {} queue(s); delete them first or use force",
                    address.queues.len()
                )));
            }
            let names: Vec<String> = address.queues.iter().map(|q| q.name.clone()).collect();
            let mut ops = Vec::new();
            let mut closed = Vec::new();
            for q in names.iter().filter_map(|n| reg.unbind(n)) {
                if q.durable {
                    ops.push(Op::DeleteQueue(q.id));
                }
                closed.push(q);
            }
            reg.addresses.remove(name);
            ops.push(Op::DeleteAddress(name.to_owned()));
            (self.submit(ops), closed)
        };
        closed.iter().for_each(|q| q.close());
        self.commit(commit).await
    }

    /// Creates a queue on an address (created if missing).
    pub async fn create_queue(
        self: &Arc<Self>,
        address: &str,
        name: &str,
        routing: Option<RoutingType>,
        durable: bool,
        filter: Option<&str>,
        auto_created: bool,
    ) -> Result<Arc<Queue>> {
        message::check_name("queue", name)?;
        let filter = parse_filter(filter.unwrap_or(""))?;
        self.ensure_address(address, routing, Create::Explicit).await?;
        let routing = routing.unwrap_or_else(|| self.settings_for(address).default_address_routing_type);
        let (commit, queue) = {
            let mut reg = self.write();
            if reg.queues.contains_key(name) {
                return Err(BrokerError::QueueExists(name.to_owned()));
            }
            if !reg.addresses.contains_key(address) {
                return Err(BrokerError::AddressNotFound(address.to_owned()));
            }
            let mut ops = Vec::new();
            let q = self.new_queue(
                &mut reg,
                &mut ops,
                address,
                name,
                routing,
                durable,
                filter,
                auto_created,
            );
            (self.submit(ops), q)
        };
        self.commit(commit).await?;
        self.spawn_dispatcher(queue.clone());
        Ok(queue)
    }

    /// Deletes a queue with its messages; its consumers' streams end.
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let (commit, queue) = {
            let mut reg = self.write();
            let queue = reg
                .unbind(name)
                .ok_or_else(|| BrokerError::QueueNotFound(name.to_owned()))?;
            let ops = if queue.durable {
                vec![Op::DeleteQueue(queue.id)]
            } else {
                Vec::new()
            };
            (self.submit(ops), queue)
        };
        queue.close();
        self.commit(commit).await
    }

    pub fn queue(&self, name: &str) -> Result<Arc<Queue>> {
        self.read()
            .queues
            .get(name)
            .cloned()
            .ok_or_else(|| BrokerError::QueueNotFound(name.to_owned()))
    }

    /// Every queue, by name.
    pub fn queues(&self) -> Vec<Arc<Queue>> {
        let mut queues: Vec<Arc<Queue>> = self.read().queues.values().cloned().collect();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        queues
    }

    /// The queue a consumer asked for; auto-created (anycast, on an address of the same
    /// name) when it does not exist and the settings allow it.
    pub async fn queue_for_consumer(self: &Arc<Self>, name: &str) -> Result<Arc<Queue>> {
        if let Ok(queue) = self.queue(name) {
            return Ok(queue);
        }
        message::check_name("queue", name)?;
        if !self.settings_for(name).auto_create_queues {
            return Err(BrokerError::QueueNotFound(name.to_owned()));
        }
        match self
            .create_queue(name, name, Some(RoutingType::Anycast), true, None, true)
            .await
        {
            Err(BrokerError::QueueExists(_)) => self.queue(name),
            other => other,
        }
    }

    /// Removes every message of a queue that is not being delivered.
    pub async fn purge(&self, name: &str) -> Result<u64> {
        let queue = self.queue(name)?;
        let entries = queue.purge();
        let removed = entries.len() as u64;
        let ops = removal_ops(&queue, &entries);
        queue.count(|c| c.dropped += removed);
        self.commit(self.submit(ops)).await?;
        Ok(removed)
    }

    /// Reads up to `limit` messages without consuming them.
    pub fn browse(&self, name: &str, limit: usize) -> Result<Vec<Browsed>> {
        let queue = self.queue(name)?;
        let mut out = Vec::new();
        for (entry, state) in queue.browse(limit) {
            if let Some(record) = self.load(&queue, &entry)? {
                out.push(Browsed {
                    record,
                    delivery_count: entry.delivery_count,
                    state,
                });
            }
        }
        Ok(out)
    }

    /// Whether a queued message passes a selector (for filtered consumers).
    pub fn matches(&self, queue: &Queue, entry: &Entry, selector: &Selector) -> bool {
        match self.load(queue, entry) {
            Ok(Some(record)) => selector.matches(&Selectable(&record)),
            _ => false,
        }
    }

    /// The message of an entry: in memory, or read from storage.
    pub fn load(&self, queue: &Queue, entry: &Entry) -> Result<Option<Arc<MessageRecord>>> {
        match &entry.record {
            Some(record) => Ok(Some(record.clone())),
            None => Ok(self.store.read_message(queue.id, entry.id)?.map(Arc::new)),
        }
    }

    // ----- settling -----

    /// Carries out a consumer's settlement of deliveries already taken from the queue.
    pub async fn settle(
        self: &Arc<Self>,
        queue: &Arc<Queue>,
        entries: Vec<Entry>,
        how: Settlement,
    ) -> Result<()> {
        match how {
            Settlement::Ack => {
                let n = entries.len() as u64;
                queue.count(|c| c.acked += n);
                let ops = removal_ops(queue, &entries);
                self.commit(self.submit(ops)).await
            }
            Settlement::Release => {
                let now = now_ms();
                let mut ops = Vec::new();
                let back: Vec<(Entry, u64)> = entries
                    .into_iter()
                    .map(|mut e| {
                        e.delivery_count = e.delivery_count.saturating_sub(1);
                        if e.stored && self.persist_count_before_delivery() {
                            ops.push(state_op(queue, &e, 0));
                        }
                        (e, 0)
                    })
                    .collect();
                let result = self.commit(self.submit(ops)).await;
                queue.requeue(back, now);
                result
            }
            Settlement::Nack {
                reason,
                retry_after_ms,
            } => self.fail(queue, entries, &reason, retry_after_ms).await,
            Settlement::DeadLetter { reason } => {
                let items = entries
                    .into_iter()
                    .map(|e| (e, Forward::DeadLetter(Reason::Rejected(reason.clone()))))
                    .collect();
                self.forward(queue, items).await
            }
        }
    }

    /// A consumer went away: what it held counts as failed deliveries, unless it had
    /// announced a graceful close (then it is released). When the broker itself is
    /// stopping they simply stay where storage has them.
    pub async fn consumer_gone(self: &Arc<Self>, queue: &Arc<Queue>, consumer: ConsumerId) {
        let (entries, closing) = queue.detach(consumer);
        if entries.is_empty() || self.shutdown.is_cancelled() {
            return;
        }
        let result = if closing {
            self.settle(queue, entries, Settlement::Release).await
        } else {
            self.fail(queue, entries, "consumer went away", None).await
        };
        if let Err(err) = result {
            warn!(queue = %queue.name, %err, "could not return the consumer's messages");
        }
    }

    /// Failed deliveries taken from `queue` (a rollback), through the redelivery policy.
    pub(crate) async fn fail_deliveries(
        self: &Arc<Self>,
        queue: &Arc<Queue>,
        entries: Vec<Entry>,
        reason: &str,
    ) -> Result<()> {
        self.fail(queue, entries, reason, None).await
    }

    /// Applies the redelivery policy to failed deliveries.
    async fn fail(
        self: &Arc<Self>,
        queue: &Arc<Queue>,
        entries: Vec<Entry>,
        reason: &str,
        retry_after_ms: Option<u64>,
    ) -> Result<()> {
        let settings = self.settings_for(&queue.address);
        let now = now_ms();
        let reason = if reason.is_empty() { "nack" } else { reason };
        let mut ops = Vec::new();
        let mut back = Vec::new();
        let mut forwards = Vec::new();
        {
            let mut rng = rand::rng();
            for mut entry in entries {
                entry.record_failure(now, reason.to_owned());
                match redelivery::decide(&settings, entry.delivery_count, retry_after_ms, &mut rng) {
                    Decision::Redeliver { delay_ms } => {
                        let due = if delay_ms > 0 {
                            now.saturating_add(delay_ms)
                        } else {
                            0
                        };
                        if entry.stored {
                            ops.push(state_op(queue, &entry, due));
                        }
                        back.push((entry, due));
                    }
                    Decision::DeadLetter => {
                        forwards.push((entry, Forward::DeadLetter(Reason::MaxDeliveryAttempts)))
                    }
                    Decision::Move(target) => forwards.push((entry, Forward::Move(target))),
                    Decision::Delete => forwards.push((entry, Forward::Delete)),
                }
            }
        }
        let result = self.commit(self.submit(ops)).await;
        queue.requeue(back, now);
        self.forward(queue, forwards).await?;
        result
    }

    /// Moves messages that leave their queue for another address (dead letters,
    /// expired messages, schedule moves) or drops them when there is nowhere to go.
    /// Each move is one commit: the removal and the routed copy together.
    async fn forward(self: &Arc<Self>, queue: &Arc<Queue>, items: Vec<(Entry, Forward)>) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let settings = self.settings_for(&queue.address);
        let now = now_ms();
        for (entry, how) in items {
            let target = match self.forward_target(queue, &settings, how).await {
                Ok(target) => target,
                Err(err) => {
                    warn!(queue = %queue.name, message = entry.id, %err, "cannot prepare the target address");
                    None
                }
            };
            let Some(record) = self.load(queue, &entry)? else {
                continue;
            };
            let ops = removal_ops(queue, std::slice::from_ref(&entry));
            let Some((address, reason)) = target else {
                self.drop_message(queue, &entry, ops, "no address to move it to")
                    .await?;
                continue;
            };
            let copy = dead_letter::copy_for(
                &record,
                &entry,
                &queue.name,
                queue.routing_type,
                &address,
                &reason,
                now,
            );
            if !self.relocate(copy, ops, |reg, copy| reg.route(copy)).await? {
                let ops = removal_ops(queue, std::slice::from_ref(&entry));
                let why = format!("address '{address}' has no queue for it");
                self.drop_message(queue, &entry, ops, &why).await?;
                continue;
            }
            queue.count(|c| match reason {
                Reason::Expired => c.expired += 1,
                Reason::Moved => {}
                _ => c.dead_lettered += 1,
            });
            info!(queue = %queue.name, message = entry.id, to = %address, %reason, "moved message");
        }
        Ok(())
    }

    /// Moves a message (already taken from its queue; `ops` remove it from storage) to
    /// the queues `targets` picks for its `copy`, which gets a new id: the removal and
    /// the copies are one commit. Returns false, changing nothing, if no queue takes it.
    async fn relocate(
        &self,
        mut copy: MessageRecord,
        mut ops: Vec<Op>,
        targets: impl FnOnce(&Registry, &MessageRecord) -> Vec<Arc<Queue>>,
    ) -> Result<bool> {
        let now = now_ms();
        copy.message_id = self.store.generate_id()?;
        copy.timestamp_ms = now;
        let mut arrivals = Vec::new();
        let commit = {
            let reg = self.read();
            let targets = targets(&reg, &copy);
            if targets.is_empty() {
                return Ok(false);
            }
            place(copy, targets, &mut ops, &mut arrivals);
            self.submit(ops)
        };
        self.commit(commit).await?;
        deliver_arrivals(arrivals, now);
        Ok(true)
    }

    /// Where a leaving message goes: the address and the reason it carries, creating
    /// the address (and the DLQ/expiry queue) when the settings say so; None = drop.
    async fn forward_target(
        self: &Arc<Self>,
        queue: &Queue,
        settings: &EffectiveSettings,
        how: Forward,
    ) -> Result<Option<(String, Reason)>> {
        let (address, reason, own_queue) = match how {
            Forward::Delete => return Ok(None),
            Forward::DeadLetter(reason) => {
                let Some(dla) = settings.dead_letter_address.clone() else {
                    return Ok(None);
                };
                let own = settings.auto_create_dead_letter_resources.then(|| {
                    format!(
                        "{}{}{}",
                        settings.dead_letter_queue_prefix, queue.address, settings.dead_letter_queue_suffix
                    )
                });
                (dla, reason, own)
            }
            Forward::Expire => {
                let Some(address) = settings.expiry_address.clone() else {
                    return Ok(None);
                };
                let own = settings.auto_create_expiry_resources.then(|| {
                    format!(
                        "{}{}{}",
                        settings.expiry_queue_prefix, queue.address, settings.expiry_queue_suffix
                    )
                });
                (address, Reason::Expired, own)
            }
            Forward::Move(target) => {
                let address = target.address_for(&queue.address);
                let routing = match target.kind {
                    MoveKind::Queue => RoutingType::Anycast,
                    MoveKind::Topic => RoutingType::Multicast,
                    MoveKind::Same => queue.routing_type,
                };
                self.ensure_address(&address, Some(routing), Create::ForMove)
                    .await?;
                return Ok(Some((address, Reason::Schedule)));
            }
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
            match self
                .create_queue(&address, &own_queue, None, true, Some(&filter), true)
                .await
            {
                Ok(_) | Err(BrokerError::QueueExists(_)) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(Some((address, reason)))
    }

    async fn drop_message(&self, queue: &Queue, entry: &Entry, ops: Vec<Op>, why: &str) -> Result<()> {
        warn!(
            message = entry.id,
            address = %queue.address,
            queue = %queue.name,
            delivery_count = entry.delivery_count,
            "dropping message: {why}"
        );
        queue.count(|c| c.dropped += 1);
        self.commit(self.submit(ops)).await
    }

    /// Handles messages the dispatcher found expired.
    pub async fn expire(self: &Arc<Self>, queue: &Arc<Queue>, entries: Vec<Entry>) -> Result<()> {
        let items = entries.into_iter().map(|e| (e, Forward::Expire)).collect();
        self.forward(queue, items).await
    }

    /// Stores the delivery counts of messages about to be delivered
    /// (`persist-delivery-count-before-delivery`).
    pub async fn persist_counts(&self, queue: &Queue, entries: impl Iterator<Item = &Entry>) -> Result<()> {
        let ops = entries
            .filter(|e| e.stored)
            .map(|e| state_op(queue, e, 0))
            .collect();
        self.commit(self.submit(ops)).await
    }

    // ----- management of queued messages -----

    /// The messages of a selection that are not being delivered, with their records.
    fn selected(&self, selection: &Selection) -> Result<(Arc<Queue>, Vec<Selected>)> {
        let queue = self.queue(&selection.queue)?;
        let filter = parse_filter(&selection.filter)?;
        let mut out = Vec::new();
        for (entry, state) in queue.browse(usize::MAX) {
            if state == BrowseState::Delivering || selection.message_id.is_some_and(|id| id != entry.id) {
                continue;
            }
            let Some(record) = self.load(&queue, &entry)? else {
                continue;
            };
            if filter.as_ref().is_none_or(|f| f.matches(&Selectable(&record))) {
                out.push((entry, record));
            }
        }
        Ok((queue, out))
    }

    /// Browses with an optional selector.
    pub fn browse_filtered(&self, name: &str, filter: &str, limit: usize) -> Result<Vec<Browsed>> {
        if filter.trim().is_empty() {
            return self.browse(name, limit);
        }
        let selector = parse_filter(filter)?.expect("non-empty filter");
        let queue = self.queue(name)?;
        let mut out = Vec::new();
        for (entry, state) in queue.browse(usize::MAX) {
            if out.len() == limit {
                break;
            }
            if let Some(record) = self.load(&queue, &entry)?
                && selector.matches(&Selectable(&record))
            {
                out.push(Browsed {
                    record,
                    delivery_count: entry.delivery_count,
                    state,
                });
            }
        }
        Ok(out)
    }

    pub fn count_messages(&self, selection: &Selection) -> Result<u64> {
        Ok(self.selected(selection)?.1.len() as u64)
    }

    /// Removes the selected messages; counted as dropped.
    pub async fn remove_messages(&self, selection: &Selection) -> Result<u64> {
        let (queue, selected) = self.selected(selection)?;
        let taken: Vec<Entry> = selected
            .iter()
            .filter_map(|(e, _)| queue.take_idle(e.id))
            .collect();
        let removed = taken.len() as u64;
        queue.count(|c| c.dropped += removed);
        self.commit(self.submit(removal_ops(&queue, &taken))).await?;
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
        for (entry, record) in selected {
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
            let ops = removal_ops(&queue, std::slice::from_ref(&taken));
            match self.relocate(copy, ops, |reg, copy| reg.route(copy)).await {
                Ok(true) => moved += 1,
                Ok(false) => {
                    queue.requeue([(taken, 0)], now);
                }
                Err(err) => {
                    queue.requeue([(taken, 0)], now);
                    return Err(err);
                }
            }
        }
        Ok(moved)
    }

    /// Sends dead letters back to exactly the queue they failed on.
    pub async fn retry_messages(
        self: &Arc<Self>,
        selection: &Selection,
        dry_run: bool,
        rate_per_second: u32,
    ) -> Result<Vec<RetryOutcome>> {
        let (dlq, selected) = self.selected(selection)?;
        let pace = (rate_per_second > 0).then(|| std::time::Duration::from_secs(1) / rate_per_second);
        let mut outcomes = Vec::with_capacity(selected.len());
        for (entry, record) in selected {
            let mut outcome = RetryOutcome {
                message_id: entry.id,
                to_address: String::new(),
                to_queue: String::new(),
                skipped: None,
            };
            let plan = self.retry_plan(&record);
            match plan {
                Ok((address, queue)) => {
                    outcome.to_address = address;
                    outcome.to_queue = queue;
                }
                Err(why) => outcome.skipped = Some(why),
            }
            if dry_run || outcome.skipped.is_some() {
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
            let ops = removal_ops(&dlq, std::slice::from_ref(&taken));
            let moved = self
                .relocate(copy, ops, |reg, _| {
                    reg.queues.get(&target).cloned().into_iter().collect()
                })
                .await;
            match moved {
                Ok(true) => info!(from = %dlq.name, message = entry.id, to = %target, "retried message"),
                Ok(false) => {
                    dlq.requeue([(taken, 0)], now_ms());
                    outcome.skipped = Some(format!("queue '{target}' no longer exists"));
                }
                Err(err) => {
                    dlq.requeue([(taken, 0)], now_ms());
                    return Err(err);
                }
            }
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

    /// Applies a new config: its address-settings take effect for every queue at
    /// once (consumers stay attached), and its addresses and queues are created if new.
    pub async fn reload(self: &Arc<Self>, config: &Config) -> Result<()> {
        check_limits(&config.address_settings)?;
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config.address_settings.clone());
        self.settings_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.persist_count_before_delivery
            .store(config.persist_delivery_count_before_delivery, Ordering::Relaxed);
        self.declare(config).await?;
        for queue in self.queues() {
            queue.wake.notify_one();
        }
        Ok(())
    }

    /// Makes sure the addresses and queues a config declares exist.
    async fn declare(self: &Arc<Self>, config: &Config) -> Result<()> {
        for address in &config.addresses {
            self.ensure_address(&address.name, Some(address.routing_type), Create::Explicit)
                .await?;
            for q in &address.queues {
                if !self.read().queues.contains_key(&q.name) {
                    self.create_queue(
                        &address.name,
                        &q.name,
                        Some(q.routing_type),
                        q.durable,
                        q.filter.as_deref(),
                        false,
                    )
                    .await?;
                }
            }
        }
        Ok(())
    }

    /// Stops the dispatchers and closes the store (flushed and fsynced).
    pub async fn close(&self) -> Result<()> {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        Ok(self.store.close()?)
    }
}

/// Room kept between `max-message-size` and the largest record the store takes, for
/// what the broker adds to a message (a dead letter's `_AMQ_ORIG_*` and failures).
const BROKER_PROPERTY_ROOM: u64 = 64 * 1024;

/// The largest `max-message-size` the store can honour.
pub const MAX_MESSAGE_SIZE_LIMIT: u64 = MAX_RECORD_BYTES as u64 - BROKER_PROPERTY_ROOM;

/// Refuses settings that promise more than the store can keep.
fn check_limits(settings: &SettingsRepository) -> Result<()> {
    for (pattern, entry) in settings.iter() {
        if let Some(size) = entry.max_message_size
            && size > MAX_MESSAGE_SIZE_LIMIT
        {
            return Err(BrokerError::InvalidArgument(format!(
                "address-settings match \"{pattern}\": max-message-size {size} is larger than the \
                 largest message the store keeps ({MAX_MESSAGE_SIZE_LIMIT} bytes)"
            )));
        }
    }
    Ok(())
}

/// Routes a record to `targets`: one stored record per durable queue (when the
/// message is durable), in-memory copies elsewhere.
fn place(
    record: MessageRecord,
    targets: Vec<Arc<Queue>>,
    ops: &mut Vec<Op>,
    arrivals: &mut Vec<(Arc<Queue>, Entry)>,
) {
    let size = record.encoded_len() as u64;
    for queue in targets {
        let mut record = record.clone();
        record.routing_type = routing_to_store(queue.routing_type);
        let stored = record.durable && queue.durable;
        let entry = Entry {
            id: record.message_id,
            priority: record.priority as u8,
            expiration_ms: record.expiration_ms,
            size,
            delivery_count: 0,
            failures: Vec::new(),
            stored,
            // Stored or not, the queue may keep it for a delivery without a read.
            record: Some(Arc::new(record.clone())),
        };
        if stored {
            ops.push(Op::PutMessage {
                queue: queue.id,
                message: record,
            });
        }
        arrivals.push((queue, entry));
    }
}

fn deliver_arrivals(arrivals: Vec<(Arc<Queue>, Entry)>, now: u64) {
    for (queue, entry) in arrivals {
        queue.enqueue([(entry, 0)], now);
    }
}

fn removal_ops(queue: &Queue, entries: &[Entry]) -> Vec<Op> {
    entries
        .iter()
        .filter(|e| e.stored)
        .map(|e| Op::RemoveMessage {
            queue: queue.id,
            id: e.id,
        })
        .collect()
}

fn state_op(queue: &Queue, entry: &Entry, scheduled_at_ms: u64) -> Op {
    Op::PutState {
        queue: queue.id,
        id: entry.id,
        state: DeliveryState {
            delivery_count: entry.delivery_count,
            scheduled_at_ms,
            failures: entry.failures.clone(),
        },
    }
}

pub fn parse_filter(text: &str) -> Result<Option<Selector>> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    Selector::parse(text)
        .map(Some)
        .map_err(|e| BrokerError::InvalidArgument(format!("filter {text:?}: {e}")))
}

pub fn routing_to_store(routing: RoutingType) -> i32 {
    match routing {
        RoutingType::Anycast => rebound_storage::RoutingType::Anycast as i32,
        RoutingType::Multicast => rebound_storage::RoutingType::Multicast as i32,
    }
}

pub fn routing_from_store(value: i32) -> RoutingType {
    if value == rebound_storage::RoutingType::Multicast as i32 {
        RoutingType::Multicast
    } else {
        RoutingType::Anycast
    }
}
