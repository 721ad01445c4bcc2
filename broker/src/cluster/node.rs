//! [`Node`]: this broker's membership of the cluster, as one engine task.
//!
//! Every third of the lease it heartbeats (which renews every lease it holds,
//! in one statement, and says which it still holds), then balances
//! (`balance.rs`): acquires free queues and loads them, or unloads one and
//! gives it back; and it tells the engine where the other nodes' queues are
//! served, for forwarding. A queue created here wakes it at once, so that its creator
//! usually serves it. Each tick also resolves the acks held for transactions
//! of nodes that died or started again since (`engine/cluster/held.rs`).
//!
//! Losing a lease: a queue the heartbeat no longer lists (another node took
//! it) is unloaded at once. When heartbeats fail (the database is away), the
//! node serves its queues only until its local deadline (`deadline.rs`), a
//! margin before the leases can run out in the database: then it unloads
//! every queue, so that no message is delivered by two nodes while a lease is
//! valid. Every database call of a tick races that deadline. Once the
//! database answers again, the node registers again if it must and acquires
//! queues as any node would, without a restart.
//!
//! At shutdown it gives every lease back, so that the other nodes take the
//! queues at their next tick rather than when the leases run out.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use rebound_storage::{LiveNode, PostgresStore, QueueId, StorageError};
use tokio::time::Instant;
use tracing::{error, info, warn};

use super::balance;
use super::deadline::Deadline;
use crate::engine::{Broker, Owner, QueueIds};

/// What a broker that is a node of the cluster takes its queue ids from
/// ([`Broker::open_leased`]): the database, one id per queue name.
pub fn queue_ids(store: &Arc<PostgresStore>) -> QueueIds {
    let store = Arc::clone(store);
    Box::new(move |name| store.allocate_queue_id(name))
}

/// Who this node is.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Its `node-id`.
    pub id: String,
    /// Where other nodes reach its gRPC.
    pub advertise: String,
    /// Where other nodes reach its HTTP endpoint (their consoles forward
    /// to it), if it has one.
    pub http_advertise: Option<String>,
    /// How long a lease lasts.
    pub lease: Duration,
}

/// This node's view of its membership and leases.
pub struct Node {
    store: Arc<PostgresStore>,
    broker: Arc<Broker>,
    me: Identity,
    /// Set once registered; `None` again when it must register anew.
    incarnation: Option<u64>,
    deadline: Deadline,
    serving: BTreeSet<QueueId>,
}

impl Node {
    /// Joins the cluster with a broker opened with [`queue_ids`] (whose
    /// durable queues wait for their leases): the node registers. Fails if
    /// the database does not answer (start-up just opened the store there).
    pub async fn join(
        store: Arc<PostgresStore>,
        broker: Arc<Broker>,
        me: Identity,
    ) -> Result<Node, StorageError> {
        let incarnation = store
            .register_node(&me.id, &me.advertise, me.http_advertise.as_deref())
            .await?;
        info!(node = %me.id, advertise = %me.advertise, incarnation, lease_ms = me.lease.as_millis() as u64, "joined the cluster");
        Ok(Node {
            store,
            broker,
            deadline: Deadline::new(me.lease),
            me,
            incarnation: Some(incarnation),
            serving: BTreeSet::new(),
        })
    }

    /// Runs until the broker shuts down, then gives its leases back.
    pub async fn run(mut self) {
        let period = self.me.lease / 3;
        let broker = Arc::clone(&self.broker);
        loop {
            let until = self.deadline_or(Instant::now() + period);
            tokio::select! {
                _ = self.tick() => {}
                _ = tokio::time::sleep_until(until) => {}
                _ = broker.shutdown().cancelled() => break,
            }
            if !self.serving.is_empty() && !self.deadline.holds(Instant::now().into_std()) {
                warn!(
                    queues = self.serving.len(),
                    "no lease renewal in time: this node stops serving its queues"
                );
                self.stop_all();
            }
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = broker.cluster().queues_changed().notified() => {}
                _ = broker.shutdown().cancelled() => break,
            }
        }
        self.leave().await;
    }

    /// When the leases stop holding, or `otherwise` if that is sooner (or
    /// none holds).
    fn deadline_or(&self, otherwise: Instant) -> Instant {
        match self.serving.is_empty() {
            true => otherwise,
            false => self
                .deadline
                .until()
                .map_or(otherwise, |d| Instant::from_std(d).min(otherwise)),
        }
    }

    async fn tick(&mut self) {
        if let Err(err) = self.renew().await {
            match err {
                StorageError::NodeReplaced { .. } => {
                    error!(%err, "this node stops serving and registers again");
                    self.stop_all();
                    self.incarnation = None;
                }
                err => warn!(%err, "lease renewal failed"),
            }
            return;
        }
        if let Err(err) = self.balance().await {
            warn!(%err, "balancing queues between nodes failed");
        }
    }

    /// Registers if needed, heartbeats, and drops what it no longer holds.
    async fn renew(&mut self) -> Result<(), StorageError> {
        let incarnation = match self.incarnation {
            Some(incarnation) => incarnation,
            None => {
                let me = &self.me;
                let incarnation = self
                    .store
                    .register_node(&me.id, &me.advertise, me.http_advertise.as_deref())
                    .await?;
                info!(incarnation, "registered again");
                *self.incarnation.insert(incarnation)
            }
        };
        let sent = std::time::Instant::now();
        let heartbeat = self
            .store
            .heartbeat(&self.me.id, incarnation, self.me.lease)
            .await?;
        self.deadline.renewed(sent);
        let held: BTreeMap<QueueId, u64> = heartbeat.leases.into_iter().collect();
        for queue in self.serving.clone() {
            if !held.contains_key(&queue) {
                info!(queue, "another node took this queue over");
                self.stop(queue);
            }
        }
        // Only now: the queues taken over are no longer served here.
        self.broker.cluster().leases_hold_until(self.deadline.until());
        // Held but not served: an acquisition or a release cut short. Given
        // back, since the epoch this node would write under may be forgotten.
        for &queue in held.keys().filter(|q| !self.serving.contains(q)) {
            self.store.release(&self.me.id, queue).await?;
        }
        Ok(())
    }

    async fn balance(&mut self) -> Result<(), StorageError> {
        let live = self.store.live_nodes(self.me.lease).await?;
        let incarnations: HashMap<String, u64> = live.iter().map(|n| (n.id.clone(), n.incarnation)).collect();
        let broker = Arc::clone(&self.broker);
        self.broker
            .spawn(async move { broker.cluster().resolve_held_of_gone(&incarnations).await });
        let nodes: HashMap<String, LiveNode> = live.into_iter().map(|n| (n.id.clone(), n)).collect();
        let live: Vec<String> = nodes.keys().cloned().collect();
        let holders: BTreeMap<QueueId, String> = self
            .store
            .leases()
            .await?
            .into_iter()
            .filter(|l| l.live)
            .filter_map(|l| Some((l.queue, l.node?)))
            .collect();
        let owners = holders
            .iter()
            .filter(|(_, node)| **node != self.me.id)
            .filter_map(|(&queue, node)| {
                let live = nodes.get(node)?;
                Some((
                    queue,
                    Owner {
                        node: node.clone(),
                        advertise: live.advertise.clone(),
                        http: live.http_advertise.clone(),
                    },
                ))
            })
            .collect();
        let me = Owner {
            node: self.me.id.clone(),
            advertise: self.me.advertise.clone(),
            http: self.me.http_advertise.clone(),
        };
        self.broker
            .cluster()
            .set_owners(me, self.incarnation.unwrap_or_default(), owners);
        let queues = self.broker.cluster().durable_queue_ids();
        let plan = balance::plan(&self.me.id, &live, &queues, &holders);
        for queue in plan.take {
            if let Some(epoch) = self.store.acquire(&self.me.id, queue, self.me.lease).await? {
                // What was sent for the queue before this node held its lease
                // stored an inbox row, maybe after the lease was taken: such
                // sends of this node are let finish, and the inbox emptied,
                // so that the queue's first read finds those messages in id
                // order with the rest, as they were sent.
                self.broker.cluster().arrivals_committed(queue).await;
                match self.store.empty_inbox(queue).await {
                    // This node's sends still under way among them are
                    // enqueued by their senders, as no drain brings them.
                    Ok(emptied) => self.broker.cluster().inbox_emptied(queue, emptied),
                    Err(err) => {
                        warn!(queue, %err, "cannot empty the inbox of a queue just taken; it is drained instead")
                    }
                }
                self.serving.insert(queue);
                self.broker.cluster().load_queue(queue, epoch);
                // Sends of nodes that did not know yet stored inbox rows
                // since it was emptied, and their notifications found the
                // queue not served: taken now, before the next look.
                super::inbox::take(&self.store, &self.broker, queue).await;
            }
        }
        if let Some(queue) = plan.give {
            self.stop(queue);
            self.store.release(&self.me.id, queue).await?;
        }
        Ok(())
    }

    /// Stops serving `queue`: no owner write to it is accepted any more.
    fn stop(&mut self, queue: QueueId) {
        self.serving.remove(&queue);
        self.store.forget_lease(queue);
        self.broker.cluster().unload_queue(queue);
    }

    fn stop_all(&mut self) {
        for queue in std::mem::take(&mut self.serving) {
            self.store.forget_lease(queue);
            self.broker.cluster().unload_queue(queue);
        }
        self.deadline.lapse();
        self.broker.cluster().leases_hold_until(None);
    }

    /// Gives every lease back (at shutdown), within a lease at most.
    async fn leave(mut self) {
        let serving = std::mem::take(&mut self.serving);
        let release = async {
            for queue in serving {
                self.store.forget_lease(queue);
                if let Err(err) = self.store.release(&self.me.id, queue).await {
                    warn!(%err, "could not give the leases back; they run out by themselves");
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(self.me.lease, release).await;
        info!("left the cluster");
    }
}
