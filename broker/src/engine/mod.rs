//! The engine: addresses, queues and the life of a message from send to ack.
//!
//! [`Broker`] owns the post office (the registry of addresses and queues), the
//! address-settings and the store. It is one type, but each of its operations lives
//! in a file of its own, all of them `impl Broker` blocks over the state defined here:
//!
//! | file | what |
//! |---|---|
//! | `addresses.rs` | creating and deleting addresses and queues; declaring a config's; reload |
//! | `send.rs` | validating, routing and storing what producers send |
//! | `admit.rs` | `address-full-policy`: what a send to a full address does |
//! | `consume.rs` | subscribing consumers, their settles, and consumers that go away |
//! | `settle.rs` | acks, nacks, releases: the redelivery policy carried out |
//! | `moves.rs` | messages that leave their queue for another address (dead letters, expiry, schedule moves, management moves) |
//! | `manage.rs` | browsing, and the management operations on queued messages |
//! | `listing.rs` | read-only views: queues and addresses a page at a time |
//! | `transact.rs` | committing and rolling back local transactions |
//! | `dispatch.rs` | the per-queue task that hands messages to consumers |
//! | `depage.rs` | the per-queue task that reads paged messages back into memory |
//! | `recovery.rs` | rebuilding the registry from the store at start-up |
//! | `cluster/` | [`Cluster`]: one node of several: the queues it serves under leases, acks it holds for other nodes |
//! | `ops.rs` | the storage ops for queued messages: removal, delivery state |
//! | `wipe.rs` | emptying a deleted queue in bounded commits before it goes |
//!
//! These files call each other's methods; a few import a helper type or
//! function of another (`moves.rs` the placing of `send.rs`, `settle.rs`,
//! `manage.rs` and `transact.rs` the ops of `ops.rs` and `moves.rs`), never
//! in a circle.
//!
//! Durability: every change that must survive a restart becomes storage [`Op`]s
//! committed *before* the in-memory state shows it (a send is acknowledged, a dead
//! letter appears in its DLQ, only once it is on disk); removals (acks) leave memory
//! first and disk right after.
//!
//! Ordering across commits: commits that add messages, addresses or queues are
//! submitted while the registry lock is held (shared for messages, exclusive for
//! creating and deleting queues), so a message can never be written after the
//! deletion of its queue. Commits that only remove messages or rewrite the delivery
//! state of messages already queued (settles, purges, persisted counts) are not; a
//! queue's deletion removes its whole key range, and recovery lists only messages,
//! so such a commit landing after it leaves nothing a restart would bring back.
//!
//! Tasks: every task the engine starts (dispatchers, settles, the sessions and
//! watchers the daemon hands it) runs on [`Broker::spawn`], so that
//! [`Broker::close`] can wait for all of them before it closes the store.
mod addresses;
mod admit;
mod cluster;
mod consume;
mod depage;
mod dispatch;
mod listing;
mod manage;
mod moves;
mod ops;
mod recovery;
mod send;
mod settle;
mod transact;
mod wipe;

use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use rebound_config::{Config, EffectiveSettings, Limits, ResolvedSettings};
use rebound_selector::Selector;
use rebound_storage::{Commit, MAX_RECORD_BYTES, MessageId, MessageRecord, Op, QueueId, Store};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::info;

use crate::address_size::BrokerSize;
use crate::commit_health::CommitHealth;
use crate::duplicates::DuplicateIds;
use crate::error::{BrokerError, Result};
use crate::metrics::instruments::Metrics;
use crate::postoffice::Registry;
use crate::queue::{ConsumerId, Entry, Queue};
use crate::settings::Settings;
use crate::transactions::Transactions;

pub use addresses::Creation;
pub use cluster::{Cluster, HeldFor, Owner, QueueIds, Stored};
pub use consume::{Joins, Settled, Subscription, queue_gone};
pub use listing::{AddressView, Page};
pub use manage::{Browsed, Management, RetryOutcome, Selection};
pub use send::Sent;
pub use settle::Settlement;

/// The engine. Cheap to share as `Arc<Broker>`.
pub struct Broker {
    store: Arc<dyn Store>,
    registry: RwLock<Registry>,
    settings: Settings,
    next_queue_id: AtomicU32,
    next_consumer_id: AtomicU64,
    /// Cancelled when the broker shuts down: consumer streams and dispatchers stop.
    shutdown: CancellationToken,
    /// Every task the engine runs; [`Broker::close`] waits for them.
    tasks: TaskTracker,
    transactions: Transactions,
    /// Acks held for transactions of other nodes (`cluster/held.rs`).
    holds: cluster::Holds,
    /// The duplicate-id caches of the addresses.
    duplicates: DuplicateIds,
    started: Instant,
    /// Whether commits go through (readiness, liveness).
    commits: CommitHealth,
    metrics: Metrics,
    /// The bytes every address holds (the registry's running total).
    sizes: Arc<BrokerSize>,
    /// Set when this broker is one node of several (`cluster/serving.rs`).
    leased: std::sync::OnceLock<cluster::Leased>,
    /// Wakes whoever balances queues between nodes: a queue was created.
    queues_changed: tokio::sync::Notify,
    /// Queues whose inbox this node's sends joined (`cluster/serving.rs`).
    inbox_joined: cluster::InboxJoined,
}

impl Broker {
    /// Rebuilds the broker from storage, then makes sure the addresses and queues of
    /// the config exist, and starts every queue's dispatcher.
    pub async fn open(config: &Config, store: Arc<dyn Store>) -> Result<Arc<Broker>> {
        Broker::open_with(config, store, None).await
    }

    /// [`Broker::open`] for one node of several on one database: durable
    /// queues are served only once loaded, and queue ids, those of the
    /// config's queues included, come from `queue_ids` (`cluster/serving.rs`).
    pub async fn open_leased(
        config: &Config,
        store: Arc<dyn Store>,
        queue_ids: QueueIds,
    ) -> Result<Arc<Broker>> {
        Broker::open_with(config, store, Some(queue_ids)).await
    }

    async fn open_with(
        config: &Config,
        store: Arc<dyn Store>,
        queue_ids: Option<QueueIds>,
    ) -> Result<Arc<Broker>> {
        let started = Instant::now();
        let mut recovered = store.recover_head(recovery::head())?;
        // Every message stored so far has a lower id.
        let horizon = store.generate_id()?;
        let duplicate_ids = std::mem::take(&mut recovered.duplicate_ids);
        let recovered = recovery::rebuild(recovered, horizon);
        let sizes = recovered.registry.size.clone();
        let broker = Arc::new(Broker {
            store,
            registry: RwLock::new(recovered.registry),
            settings: Settings::new(config),
            next_queue_id: AtomicU32::new(recovered.max_queue_id + 1),
            next_consumer_id: AtomicU64::new(1),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            transactions: Transactions::default(),
            holds: Default::default(),
            duplicates: DuplicateIds::default(),
            started,
            commits: CommitHealth::default(),
            metrics: Metrics::default(),
            sizes,
            leased: std::sync::OnceLock::new(),
            queues_changed: tokio::sync::Notify::new(),
            inbox_joined: cluster::InboxJoined::default(),
        });
        if let Some(queue_ids) = queue_ids {
            broker.cluster().serve_leased_only(queue_ids);
        }
        let trimmed = broker.duplicates.recover(duplicate_ids, |address| {
            broker.settings_for(address).id_cache_size
        });
        broker.commit(broker.submit(trimmed)).await?;
        for queue in broker.read().queues.values() {
            broker.start_queue(queue.clone());
        }
        broker.apply(config).await?;
        info!(
            queues = broker.read().queues.len(),
            messages = recovered.messages,
            ms = started.elapsed().as_millis() as u64,
            global_max_size = broker.settings.global_max_size(),
            "recovered"
        );
        Ok(broker)
    }

    /// Starts a new or recovered queue's tasks, its head bounded by its settings.
    fn start_queue(self: &Arc<Self>, queue: Arc<Queue>) {
        self.apply_read_limit(&queue);
        self.spawn_depager(queue.clone());
        self.spawn_dispatcher(queue);
    }

    fn read(&self) -> RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `task` as one of the engine's own: [`close`](Self::close) waits for it.
    /// Tasks that serve a client should end when [`shutdown`](Self::shutdown) fires.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn(task);
    }

    /// The management operations: browsing, moving, retrying and removing
    /// queued messages, and the listings (`manage.rs`, `listing.rs`).
    pub fn management(self: &Arc<Self>) -> Management<'_> {
        Management::new(self)
    }

    /// Its side as one node of a cluster (`cluster/`).
    pub fn cluster(self: &Arc<Self>) -> Cluster<'_> {
        Cluster::new(self)
    }

    /// Fires when the broker begins to shut down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Whether the broker has begun to shut down.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// The effective address-settings of an address.
    pub fn settings_for(&self, address: &str) -> Arc<EffectiveSettings> {
        self.settings.for_address(address)
    }

    /// The addresses the address-settings dead-letter to: their queues hold dead letters.
    pub fn dead_letter_addresses(&self) -> std::collections::HashSet<String> {
        self.settings.dead_letter_addresses()
    }

    /// The `[limits]` in force (a reload may change them).
    pub fn limits(&self) -> Limits {
        self.settings.limits()
    }

    /// A filter a client sent (a consumer's selector, the filter of a browse or a
    /// management operation), bounded by `max-selector-length` before it is parsed.
    fn client_filter(&self, text: &str) -> Result<Option<Selector>> {
        let limit = self.limits().max_selector_length;
        if text.len() as u64 > limit {
            return Err(BrokerError::InvalidArgument(format!(
                "the filter is {} bytes long, more than max-selector-length {limit}",
                text.len()
            )));
        }
        parse_filter(text)
    }

    /// The effective settings of an address with where each value came from.
    pub fn resolve_settings(&self, address: &str) -> ResolvedSettings {
        self.settings.resolve(address)
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    pub fn next_consumer_id(&self) -> ConsumerId {
        self.next_consumer_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The broker-wide instruments (the per-queue counters are on each queue).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The open transactions, over every session.
    pub fn open_transactions(&self) -> usize {
        self.transactions.open()
    }

    /// Whether the last store commit failed, or the store's writes are being
    /// retried or have stopped: the broker is not ready for work.
    pub fn store_failing(&self) -> bool {
        self.commits.failing(&*self.store)
    }

    /// The error the store stopped on, if it did: the broker is not live.
    pub fn store_failed(&self) -> Option<rebound_storage::StorageError> {
        crate::commit_health::store_failed(&*self.store)
    }

    /// Resolves when a commit succeeds after failures (`commit_health.rs`).
    pub(super) fn commits_recovered(&self) -> tokio::sync::futures::Notified<'_> {
        self.commits.recovered()
    }

    /// Commits that failed since start.
    pub fn commit_failures(&self) -> &prometheus_client::metrics::counter::Counter {
        &self.commits.failures
    }

    /// Waits until a commit (if any) is durable.
    async fn commit(&self, commit: Option<Commit>) -> Result<()> {
        self.commit_inboxed(commit).await.map(drop)
    }

    /// Like [`commit`](Self::commit); returns the messages it stored with an
    /// inbox row ([`Commit::inboxed`]), sorted: none (and no allocation) on a
    /// single broker. The inbox task is told of their queues, and takes the
    /// inbox of those served here at once.
    async fn commit_inboxed(&self, commit: Option<Commit>) -> Result<Vec<(QueueId, MessageId)>> {
        let Some(mut commit) = commit else {
            return Ok(Vec::new());
        };
        let started = Instant::now();
        let result = (&mut commit).await;
        self.metrics
            .commit_latency
            .observe(started.elapsed().as_secs_f64());
        self.commits.record(&result);
        result?;
        let mut inboxed = commit.inboxed().to_vec();
        if !inboxed.is_empty() {
            inboxed.sort_unstable();
            self.inbox_joined.tell(inboxed.iter().map(|&(queue, _)| queue));
        }
        Ok(inboxed)
    }

    /// Hands ops (if any) to the store's group commit.
    fn submit(&self, ops: Vec<Op>) -> Option<Commit> {
        (!ops.is_empty()).then(|| self.store.commit(ops))
    }

    /// [`Broker::submit`] for a commit nothing waits on at once.
    fn submit_patient(&self, ops: Vec<Op>) -> Option<Commit> {
        (!ops.is_empty()).then(|| self.store.commit_patient(ops))
    }

    /// The message of an entry: in memory, or read from storage.
    pub fn load(&self, queue: &Queue, entry: &Entry) -> Result<Option<Arc<MessageRecord>>> {
        match &entry.record {
            Some(record) => Ok(Some(record.clone())),
            None => Ok(self.store.read_message(queue.id, entry.id)?.map(Arc::new)),
        }
    }

    /// Shuts down, in order: consumer streams, transacted sessions and dispatchers
    /// are told to stop; every task the engine runs is awaited, so settles and
    /// commits already under way finish; then the store is flushed, fsynced and
    /// closed.
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

// The config refuses a `max-message-size` above its limit at load (with file and
// line); the config cannot see the store, so the two limits are tied here.
const _: () = assert!(
    rebound_config::MAX_MESSAGE_SIZE_LIMIT == MAX_RECORD_BYTES as u64 - BROKER_PROPERTY_ROOM,
    "rebound_config::MAX_MESSAGE_SIZE_LIMIT must be the store's MAX_RECORD_BYTES less BROKER_PROPERTY_ROOM"
);

/// A queue or consumer filter; empty text means none.
pub fn parse_filter(text: &str) -> Result<Option<Selector>> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    Selector::parse(text)
        .map(Some)
        .map_err(|e| BrokerError::InvalidArgument(format!("filter {:?}: {e}", rebound_config::excerpt(text))))
}

/// Runs a store read on a blocking thread.
async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, rebound_storage::StorageError> + Send + 'static,
) -> Result<T> {
    match tokio::task::spawn_blocking(read).await {
        Ok(result) => Ok(result?),
        Err(join) => std::panic::resume_unwind(join.into_panic()),
    }
}

#[cfg(test)]
mod tests;
