//! Which queues this node serves, when several brokers share one database
//! (`crate::cluster` decides; this carries it out). A durable queue another
//! node serves stays in the registry, so that sends route to it and listings
//! show it, but is away (`queue/away.rs`): its messages are only stored here.
//! Loading a queue reads it back from the store as a restart would, through
//! its depager, with the delivery counts and scheduled redeliveries stored.
//! Non-durable queues live in one node's memory and are never moved.
//!
//! On a broker opened with [`Broker::open_leased`], durable queues, those
//! recovered and those created later, are served only once loaded, and new
//! queues get their ids from the cluster's allocator, so that two nodes
//! never give one id to two queues. That allocator is called under the
//! registry's write lock: queues are created rarely, and an id must be known
//! before the queue is.
use std::collections::{BTreeSet, HashMap};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_storage::{QueueId, ScannedMessage, StorageError};
use tracing::info;

use super::Cluster;
use crate::error::Result;
use crate::queue::{Entry, Queue};
use crate::time::now_ms;

/// The queues this node's sends stored inbox rows for (`Commit::inboxed`):
/// the inbox task takes those it serves at once rather than at its next
/// look, since there its own sends joined the inbox behind other nodes'
/// messages whose notification was lost or is late.
#[derive(Debug, Default)]
pub(in crate::engine) struct InboxJoined {
    queues: Mutex<BTreeSet<QueueId>>,
    told: tokio::sync::Notify,
}

impl InboxJoined {
    pub(in crate::engine) fn tell(&self, queues: impl Iterator<Item = QueueId>) {
        let mut joined = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let before = joined.len();
        joined.extend(queues);
        if joined.len() > before {
            self.told.notify_one();
        }
    }
}

/// Hands out the id of a queue by its name, unique among the nodes (and the
/// same for one name while the queue exists).
pub type QueueIds = Box<dyn Fn(&str) -> std::result::Result<QueueId, StorageError> + Send + Sync>;

/// A node serving queues, as the cluster's leases name it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    /// Its `node-id`.
    pub node: String,
    /// Where it is reached (`host:port`).
    pub advertise: String,
    /// Where its HTTP endpoint is reached, if it has one.
    pub http: Option<String>,
}

/// Who serves what, as last seen.
#[derive(Default)]
struct Owners {
    /// This node (an empty id until its cluster task has seen the leases).
    me: Owner,
    /// This node's incarnation (`rebound_storage::postgres`'s membership).
    incarnation: u64,
    /// The queues other nodes serve.
    others: HashMap<QueueId, Owner>,
}

/// What [`Cluster::serve_leased_only`] set.
pub(in crate::engine) struct Leased {
    queue_ids: QueueIds,
    owners: std::sync::RwLock<Owners>,
    /// Fires when `owners` is seen again, and when this node loads or unloads
    /// a queue.
    owners_seen: tokio::sync::Notify,
    /// The epoch of the lease each served queue was loaded under.
    epochs: std::sync::Mutex<HashMap<QueueId, u64>>,
    /// Until when this node's leases hold by its own monotonic clock, as its
    /// cluster task last renewed them (`cluster/deadline.rs`).
    leases_until: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long a call for a queue whose node is not known yet (created a moment
/// ago, or its node just went) waits for one before it is answered
/// UNAVAILABLE: a few rounds of a node that looks again at once.
const OWNER_WAIT: Duration = Duration::from_secs(5);

/// How long a subscription sent here as the queue's node waits for this
/// node to serve the queue ([`Cluster::served_here_soon`]): it takes its
/// inbox after its lease, and other nodes may see the lease first.
const TAKING_WAIT: Duration = Duration::from_secs(2);

/// How long a node about to serve a queue waits for its sends to it under
/// way ([`Cluster::arrivals_committed`]): a commit slower than that is left to
/// the inbox, which delivers its messages all the same, maybe late.
const ARRIVALS_WAIT: Duration = Duration::from_millis(500);

impl<'a> Cluster<'a> {
    /// From now on, serves a durable queue only once [`Cluster::load_queue`]
    /// says so (every one is unloaded now), and takes new queue ids from
    /// `queue_ids` ([`Broker::open_leased`], before the config's queues).
    pub(in crate::engine) fn serve_leased_only(&self, queue_ids: QueueIds) {
        let leased = Leased {
            queue_ids,
            owners: Default::default(),
            owners_seen: Default::default(),
            epochs: Default::default(),
            leases_until: Default::default(),
        };
        if self.broker.leased.set(leased).is_err() {
            return;
        }
        for queue in self.broker.read().queues.values().filter(|q| q.durable) {
            queue.unload();
        }
    }

    /// Records who this node is (`me`) and its incarnation, and which nodes
    /// serve the queues it does not (`others`), for forwarding and listings.
    pub fn set_owners(&self, me: Owner, incarnation: u64, others: HashMap<QueueId, Owner>) {
        if let Some(leased) = self.broker.leased.get() {
            *leased.owners.write().unwrap_or_else(|e| e.into_inner()) = Owners {
                me,
                incarnation,
                others,
            };
        }
        self.owners_changed();
    }

    /// Until when this node's leases hold, by its monotonic clock (`None`:
    /// they do not).
    pub fn leases_hold_until(&self, until: Option<std::time::Instant>) {
        if let Some(leased) = self.broker.leased.get() {
            *leased.leases_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
        }
    }

    /// Whether this node's leases ran out by its own clock, its cluster task
    /// not having stopped its queues yet: a node resumed after a stall past
    /// its leases. Deliveries it made before the stall and had not sent yet
    /// are not sent (the queue's next owner delivers those messages again);
    /// false on a single broker.
    pub fn leases_ran_out(&self) -> bool {
        let Some(leased) = self.broker.leased.get() else {
            return false;
        };
        let until = *leased.leases_until.lock().unwrap_or_else(|e| e.into_inner());
        until.is_some_and(|until| std::time::Instant::now() >= until)
    }

    /// Whether this broker is a node of a cluster (its durable queues are
    /// served under leases, and may move).
    pub fn is_node(&self) -> bool {
        self.broker.leased.get().is_some()
    }

    /// This node's id and incarnation, once its cluster task has seen the
    /// leases; `None` before, and on a single broker.
    pub fn node(&self) -> Option<(String, u64)> {
        let owners = self
            .broker
            .leased
            .get()?
            .owners
            .read()
            .unwrap_or_else(|e| e.into_inner());
        (!owners.me.node.is_empty()).then(|| (owners.me.node.clone(), owners.incarnation))
    }

    /// The epoch of the lease this node serves queue `id` under, if it
    /// serves it.
    pub(crate) fn lease_epoch(&self, id: QueueId) -> Option<u64> {
        let epochs = self
            .broker
            .leased
            .get()?
            .epochs
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        epochs.get(&id).copied()
    }

    /// The id of the node serving `queue`, as last seen: this node's for one
    /// it serves, empty when no node is known to (and on a single broker).
    pub fn served_by(&self, queue: &Queue) -> String {
        let Some(leased) = self.broker.leased.get() else {
            return String::new();
        };
        let owners = leased.owners.read().unwrap_or_else(|e| e.into_inner());
        match queue.is_served() {
            true => owners.me.node.clone(),
            false => owners
                .others
                .get(&queue.id)
                .map(|o| o.node.clone())
                .unwrap_or_default(),
        }
    }

    /// Like [`Cluster::owner_of`], but when no node is known to serve a queue
    /// that is away from this one (created a moment ago, or its node just
    /// went), asks this node's cluster task to look at the leases again
    /// ([`Cluster::queues_changed`]) and waits up to [`OWNER_WAIT`] for one,
    /// so that a consumer subscribing right after creating its queue is
    /// forwarded rather than refused.
    pub async fn owner_of_soon(&self, name: &str) -> Option<String> {
        self.until_owners_say(OWNER_WAIT, None, || {
            if let Some(owner) = self.owner_of(name) {
                return ControlFlow::Break(Some(owner));
            }
            let away = self
                .broker
                .read()
                .queues
                .get(name)
                .is_some_and(|q| q.durable && !q.is_served() && !q.is_closed());
            if !away {
                return ControlFlow::Break(None);
            }
            self.broker.queues_changed.notify_one();
            ControlFlow::Continue(())
        })
        .await
    }

    /// Whether this node serves queue `name`, waiting up to [`TAKING_WAIT`]
    /// for it to (it may have taken the queue's lease a moment ago); false at
    /// once for a queue that is not durable or is gone.
    pub async fn served_here_soon(&self, name: &str) -> bool {
        self.until_owners_say(TAKING_WAIT, false, || match self.broker.read().queues.get(name) {
            Some(q) if q.is_served() => ControlFlow::Break(true),
            Some(q) if q.durable && !q.is_closed() => ControlFlow::Continue(()),
            _ => ControlFlow::Break(false),
        })
        .await
    }

    /// What `look` says, looking again each time where queues are served
    /// changes, for at most `wait`; `timed_out` if it has not said by then,
    /// and at once on a single broker (nothing moves there).
    async fn until_owners_say<T>(
        &self,
        wait: Duration,
        timed_out: T,
        mut look: impl FnMut() -> ControlFlow<T>,
    ) -> T {
        let Some(leased) = self.broker.leased.get() else {
            return timed_out;
        };
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Listening before looking, so that no change after the look goes unseen.
            let seen = leased.owners_seen.notified();
            tokio::pin!(seen);
            seen.as_mut().enable();
            if let ControlFlow::Break(said) = look() {
                return said;
            }
            if tokio::time::timeout_at(deadline, seen).await.is_err() {
                return timed_out;
            }
        }
    }

    /// Where the node serving queue `name` is reached, this one included
    /// (its own advertised address), waiting for one as
    /// [`Cluster::owner_of_soon`] does; `None` when no node serves it by then,
    /// or there is no such queue.
    pub async fn served_at_soon(&self, name: &str) -> Option<String> {
        let here = || {
            let served = self
                .broker
                .read()
                .queues
                .get(name)
                .is_some_and(|q| q.durable && q.is_served());
            let leased = self.broker.leased.get()?;
            let owners = leased.owners.read().unwrap_or_else(|e| e.into_inner());
            served.then(|| owners.me.advertise.clone())
        };
        match here() {
            Some(me) => Some(me),
            // Served here by the time the wait ended, or gone.
            None => self.owner_of_soon(name).await.or_else(here),
        }
    }

    /// Where the node serving queue `name` is reached, if another node
    /// serves it (as last seen).
    pub fn owner_of(&self, name: &str) -> Option<String> {
        self.serving_node(name).map(|o| o.advertise)
    }

    /// The node serving queue `name`, if another node serves it (as last
    /// seen).
    pub fn serving_node(&self, name: &str) -> Option<Owner> {
        let leased = self.broker.leased.get()?;
        let queue = self.broker.read().queues.get(name).cloned()?;
        if queue.is_served() {
            return None;
        }
        let owners = leased.owners.read().unwrap_or_else(|e| e.into_inner());
        owners.others.get(&queue.id).cloned()
    }

    /// Whether a delivery's count is stored before the message goes out:
    /// `persist-delivery-count-before-delivery`, and always on a node of a
    /// cluster, where a node that dies leaves no other record of the
    /// deliveries it had out, and the node taking its queues must count them
    /// as failed attempts (the cost: one state write per delivery, in the
    /// group commit).
    pub(in crate::engine) fn persists_counts_before_delivery(&self) -> bool {
        self.is_node() || self.broker.settings.persist_count_before_delivery()
    }

    /// Fires when a queue was created (a node may want to serve it).
    pub fn queues_changed(&self) -> &'a tokio::sync::Notify {
        &self.broker.queues_changed
    }

    /// The queues whose inbox this node's sends stored messages in since the
    /// last call, once there are any: those served here are to be taken now.
    pub async fn inbox_joined(&self) -> BTreeSet<QueueId> {
        let joined = &self.broker.inbox_joined;
        loop {
            let told = joined.told.notified();
            let queues = std::mem::take(&mut *joined.queues.lock().unwrap_or_else(|e| e.into_inner()));
            if !queues.is_empty() {
                return queues;
            }
            told.await;
        }
    }

    /// The ids of the durable queues: those nodes take leases on.
    pub fn durable_queue_ids(&self) -> Vec<QueueId> {
        let mut ids: Vec<QueueId> = self
            .broker
            .read()
            .queues
            .values()
            .filter(|q| q.durable)
            .map(|q| q.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Stops serving queue `id` here (its consumers are told it moved).
    /// Returns whether there is such a durable queue.
    pub fn unload_queue(&self, id: QueueId) -> bool {
        if let Some(leased) = self.broker.leased.get() {
            leased
                .epochs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        }
        let Some(queue) = self.durable_queue(id) else {
            return false;
        };
        if queue.is_served() {
            queue.unload();
            info!(queue = %queue.name, "no longer served by this node");
        }
        self.owners_changed();
        true
    }

    /// Serves queue `id` here from what the store holds, under the lease
    /// this node acquired with `epoch`. Returns whether there is such a
    /// durable queue.
    pub fn load_queue(&self, id: QueueId, epoch: u64) -> bool {
        let Some(queue) = self.durable_queue(id) else {
            return false;
        };
        if let Some(leased) = self.broker.leased.get() {
            leased
                .epochs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, epoch);
        }
        if !queue.is_served() {
            queue.load();
            info!(queue = %queue.name, "served by this node");
        }
        self.owners_changed();
        true
    }

    /// Wakes the calls waiting to learn where a queue is served.
    fn owners_changed(&self) {
        if let Some(leased) = self.broker.leased.get() {
            leased.owners_seen.notify_waiters();
        }
    }

    /// Waits, for at most [`ARRIVALS_WAIT`], until the sends to queue `id`
    /// under way now are committed (or failed). A node that has just taken
    /// the queue's lease waits for its own sends to it before it empties the
    /// queue's inbox: those begun before it held the lease store an inbox row
    /// (`cluster/node.rs`).
    pub async fn arrivals_committed(&self, id: QueueId) {
        let Some(queue) = self.durable_queue(id) else {
            return;
        };
        let under_way = queue.arriving_now();
        let deadline = tokio::time::Instant::now() + ARRIVALS_WAIT;
        while under_way.iter().any(|&id| queue.is_arriving(id)) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A node taking queue `id` over deleted the inbox rows of `emptied`
    /// ([`Queue::emptied_from_inbox`]).
    pub fn inbox_emptied(&self, id: QueueId, emptied: Vec<rebound_storage::MessageId>) {
        if let Some(queue) = self.durable_queue(id) {
            queue.emptied_from_inbox(emptied);
        }
    }

    /// The ids of the durable queues this node serves.
    pub fn served_queue_ids(&self) -> Vec<QueueId> {
        let mut ids: Vec<QueueId> = self
            .broker
            .read()
            .queues
            .values()
            .filter(|q| q.durable && q.is_served())
            .map(|q| q.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Adds to queue `id` the messages `take` takes from its inbox (messages
    /// other nodes stored for it), as new arrivals. Holds the queue's tail
    /// lock meanwhile, so that its depager never reads a message twice (see
    /// `rebound_storage::postgres`'s inbox). Returns how many it added.
    pub async fn take_inbox<F>(&self, id: QueueId, take: impl FnOnce() -> F) -> Result<usize>
    where
        F: Future<Output = std::result::Result<Vec<ScannedMessage>, StorageError>>,
    {
        let Some(queue) = self.durable_queue(id) else {
            return Ok(0);
        };
        let _tail = queue.tail.lock().await;
        // What a take answered late, after the queue was unloaded and loaded
        // again, is that serving's: the next one reads those messages itself.
        let serving = Some(queue.serving());
        // This node's sends committed from now on may come after what the take
        // brings: they wait for it.
        let taking = queue.taking_inbox();
        // Started only now (a store call runs as soon as it is made): a
        // message taken from the inbox while a depager read was in flight
        // would be loaded by the read uncounted, and enqueued again here.
        let mut messages = take().await?;
        // A send of this node that stored one while the queue was away, and
        // enqueued it after the queue was loaded, got there first.
        messages.retain(|m| !queue.holds(m.record.message_id));
        let count = messages.len();
        taking.took(
            messages.into_iter().map(|m| {
                let (entry, due_ms) = Entry::read_back(m.record, m.state);
                (Entry { serving, ..entry }, due_ms)
            }),
            now_ms(),
        );
        Ok(count)
    }

    pub(in crate::engine) fn durable_queue(&self, id: QueueId) -> Option<Arc<Queue>> {
        self.broker
            .read()
            .queues
            .values()
            .find(|q| q.id == id && q.durable)
            .cloned()
    }

    /// The id of queue `name`, about to be created.
    pub(in crate::engine) fn queue_id(&self, name: &str) -> Result<QueueId> {
        match self.broker.leased.get() {
            Some(leased) => Ok((leased.queue_ids)(name)?),
            None => Ok(self
                .broker
                .next_queue_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        }
    }

    /// A queue was just created (not yet bound): once queues are leased, a
    /// durable one waits for its lease.
    pub(in crate::engine) fn created(&self, queue: &Queue) {
        if self.is_node() {
            if queue.durable {
                queue.unload();
            }
            self.broker.queues_changed.notify_one();
        }
    }
}
