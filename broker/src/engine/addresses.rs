//! Addresses and queues: creating them (explicitly, on first send or consume, for a
//! schedule's move), deleting them, looking them up, and the ones a config declares.
//!
//! Creating what exists is idempotent only when it is what was asked for: an address
//! with the routing type asked is a no-op, anything else is ALREADY_EXISTS naming what
//! differs (a queue always is, as before, so a client knows whether it made it).
//!
//! A config is applied whole or not at all (start-up and reload alike): everything it
//! declares is checked against what exists, under the registry's write lock, before
//! its settings are put in force and what is new is created, in one commit. The file
//! itself was fully validated when it loaded.
use std::sync::Arc;

use rebound_config::{Config, RoutingType};
use rebound_selector::Selector;
use rebound_storage::{Commit, Op, QueueId, QueueRecord};

use super::{Broker, parse_filter};
use crate::error::{BrokerError, Differences, Result};
use crate::message;
use crate::postoffice::{Address, Registry};
use crate::queue::Queue;
use crate::routing;

/// Why an address is being created: that decides whether it may be, and whether an
/// anycast address gets a queue of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Create {
    /// Asked for by an operator or the config: exactly what was asked.
    Explicit,
    /// A send (or a dead letter routed like one, or a consumer of a new name): subject
    /// to auto-create-addresses and auto-create-queues.
    OnSend,
    /// A redelivery schedule's `move(queue:...)`: the target is created as named.
    ForMove,
}

/// What a new queue is.
struct NewQueue<'a> {
    address: &'a str,
    name: &'a str,
    routing: RoutingType,
    durable: bool,
    filter: Option<Selector>,
    auto_created: bool,
}

/// What an operation would create: the facts the permission checks at the edge
/// need (auto-creating needs the create permissions), asked before acting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Creation {
    pub address: bool,
    pub queue: bool,
}

/// What [`Broker::ensure_address`] creates for an address that does not exist.
struct AddressPlan {
    routing: RoutingType,
    /// An anycast address made on demand gets a queue of its name.
    with_queue: bool,
}

impl Broker {
    /// Makes sure an address exists, creating it if `how` allows.
    pub(super) async fn ensure_address(
        self: &Arc<Self>,
        name: &str,
        routing: Option<RoutingType>,
        how: Create,
    ) -> Result<()> {
        if self.address_plan(&self.read(), name, routing, how)?.is_none() {
            return Ok(());
        }
        let (commit, queue) = {
            let mut reg = self.write();
            let Some(plan) = self.address_plan(&reg, name, routing, how)? else {
                return Ok(());
            };
            let queue_too = plan.with_queue && !reg.queues.contains_key(name);
            if how != Create::Explicit {
                self.auto_create_room(&reg, 1 + u64::from(queue_too))?;
            }
            let id = queue_too.then(|| self.cluster().queue_id(name)).transpose()?;
            let address = Address::new(name.to_owned(), plan.routing, how != Create::Explicit);
            let mut ops = vec![Op::PutAddress(address.record())];
            reg.addresses.insert(name.to_owned(), address);
            let queue = id.map(|id| {
                let new = NewQueue {
                    address: name,
                    name,
                    routing: plan.routing,
                    durable: true,
                    filter: None,
                    auto_created: true,
                };
                self.new_queue(&mut reg, &mut ops, id, new)
            });
            (self.submit(ops), queue)
        };
        self.commit(commit).await?;
        if let Some(queue) = queue {
            self.start_queue(queue);
        }
        Ok(())
    }

    /// What making sure of `name` would create given `reg`: nothing if it exists;
    /// an error if it may not be created.
    fn address_plan(
        &self,
        reg: &Registry,
        name: &str,
        routing: Option<RoutingType>,
        how: Create,
    ) -> Result<Option<AddressPlan>> {
        if reg.addresses.contains_key(name) {
            return Ok(None);
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
        Ok(Some(AddressPlan { routing, with_queue }))
    }

    /// What a send to `address` (or a management move there) would create now;
    /// nothing when the address exists or may not be auto-created (the send then
    /// fails by itself).
    pub fn creation_on_send(&self, address: &str) -> Creation {
        let reg = self.read();
        match self.address_plan(&reg, address, None, Create::OnSend) {
            Ok(Some(plan)) => Creation {
                address: true,
                queue: plan.with_queue && !reg.queues.contains_key(address),
            },
            _ => Creation::default(),
        }
    }

    /// The address a consumer of `queue` would attach to (the queue's; for a queue
    /// that does not exist, the one of its name that auto-creating it uses) and what
    /// subscribing would create now ([`Broker::queue_for_consumer`]).
    pub fn consumer_plan(&self, queue: &str) -> (String, Creation) {
        let reg = self.read();
        if let Some(existing) = reg.queues.get(queue) {
            return (existing.address.clone(), Creation::default());
        }
        let creation = match self.address_plan(&reg, queue, Some(RoutingType::Anycast), Create::OnSend) {
            Ok(plan) if self.settings_for(queue).auto_create_queues => Creation {
                address: plan.is_some(),
                queue: true,
            },
            _ => Creation::default(),
        };
        (queue.to_owned(), creation)
    }

    /// Refuses to auto-create `more` addresses and queues beyond `max-auto-created`.
    /// Counted when asked (a scan, on the rare path that creates), so nothing can
    /// drift from what the registry holds.
    fn auto_create_room(&self, reg: &Registry, more: u64) -> Result<()> {
        let limit = self.limits().max_auto_created;
        let held = reg.addresses.values().filter(|a| a.auto_created).count()
            + reg.queues.values().filter(|q| q.auto_created).count();
        let total = held as u64 + more;
        if total > limit {
            return Err(BrokerError::LimitReached {
                what: format!("auto-creating would make {total} auto-created addresses and queues"),
                limit: "max-auto-created",
                value: limit,
            });
        }
        Ok(())
    }

    /// Creates queue `id` ([`Cluster::queue_id`]) in the registry and adds its
    /// storage ops (under the write lock).
    fn new_queue(
        self: &Arc<Self>,
        reg: &mut Registry,
        ops: &mut Vec<Op>,
        id: QueueId,
        new: NewQueue<'_>,
    ) -> Arc<Queue> {
        let addr = reg
            .addresses
            .get_mut(new.address)
            .expect("address exists under the lock");
        if addr.allow(new.routing) {
            ops.push(Op::PutAddress(addr.record()));
        }
        let queue = Arc::new(Queue::new(
            id,
            new.name.to_owned(),
            new.address.to_owned(),
            new.routing,
            new.durable,
            new.auto_created,
            new.filter,
        ));
        if new.durable {
            ops.push(Op::PutQueue(QueueRecord {
                id,
                name: new.name.to_owned(),
                address: new.address.to_owned(),
                routing_type: routing::to_store(new.routing),
                filter: queue
                    .filter
                    .as_ref()
                    .map(|f| f.as_str().to_owned())
                    .unwrap_or_default(),
                auto_created: new.auto_created,
            }));
        }
        self.cluster().created(&queue);
        reg.bind(queue.clone());
        queue
    }

    /// Creates an address explicitly; false if it existed already. One that exists is
    /// fine if it carries `routing` (or none was asked for); otherwise ALREADY_EXISTS
    /// says what it carries.
    pub async fn create_address(self: &Arc<Self>, name: &str, routing: Option<RoutingType>) -> Result<bool> {
        let existed = self.read().addresses.contains_key(name);
        self.ensure_address(name, routing, Create::Explicit).await?;
        // Checked after: whether it was there before or made just now, it must be as asked.
        if let (Some(address), Some(routing)) = (self.read().addresses.get(name), routing) {
            address_as_asked(address, routing)?;
        }
        Ok(!existed)
    }

    /// Deletes an address; with `force` also its queues and their messages
    /// (on a store that deletes key by key, its durable queues first, each a
    /// chunk at a time).
    pub async fn delete_address(&self, name: &str, force: bool) -> Result<()> {
        if force && self.store.queue_delete_chunk().is_some() {
            self.delete_durable_queues_of(name).await?;
        }
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
            let closed = reg.remove_address(name);
            let mut ops: Vec<Op> = closed
                .iter()
                .filter(|q| q.durable)
                .map(|q| Op::DeleteQueue(q.id))
                .collect();
            ops.push(Op::DeleteAddress(name.to_owned()));
            (self.submit(ops), closed)
        };
        closed.iter().for_each(|q| q.close());
        // The store deletes the address's duplicate ids with it.
        self.duplicates.forget_address(name);
        self.commit(commit).await
    }

    /// Deletes the durable queues of address `name` one by one, each a chunk
    /// at a time (`wipe.rs`), before the address goes with what is left.
    async fn delete_durable_queues_of(&self, name: &str) -> Result<()> {
        let durable: Vec<String> = self.read().addresses.get(name).map_or_else(Vec::new, |a| {
            a.queues
                .iter()
                .filter(|q| q.durable)
                .map(|q| q.name.clone())
                .collect()
        });
        for queue in durable {
            match self.delete_queue(&queue).await {
                // Deleted meanwhile by someone else: as good.
                Ok(()) | Err(BrokerError::QueueNotFound(_)) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
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
        let routing = routing.unwrap_or_else(|| self.settings_for(address).default_address_routing_type);
        let exists = |existing: &Queue| BrokerError::QueueExists {
            name: name.to_owned(),
            differs: queue_differences(existing, address, routing, durable, filter.as_ref()),
        };
        // Before the address is made: a refused queue must not leave an address behind.
        if let Some(existing) = self.read().queues.get(name) {
            return Err(exists(existing));
        }
        if auto_created {
            self.auto_create_room(&self.read(), 1)?;
        }
        self.ensure_address(address, Some(routing), Create::Explicit)
            .await?;
        let (commit, queue) = {
            let mut reg = self.write();
            if let Some(existing) = reg.queues.get(name) {
                return Err(exists(existing));
            }
            if !reg.addresses.contains_key(address) {
                return Err(BrokerError::AddressNotFound(address.to_owned()));
            }
            if auto_created {
                self.auto_create_room(&reg, 1)?;
            }
            let mut ops = Vec::new();
            let new = NewQueue {
                address,
                name,
                routing,
                durable,
                filter,
                auto_created,
            };
            let id = self.cluster().queue_id(name)?;
            let q = self.new_queue(&mut reg, &mut ops, id, new);
            (self.submit(ops), q)
        };
        self.commit(commit).await?;
        self.start_queue(queue.clone());
        Ok(queue)
    }

    /// Deletes a queue with its messages; its consumers' streams end. On a
    /// store that deletes key by key, a large queue is emptied first in
    /// bounded commits (`wipe.rs`).
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let chunk = self.store.queue_delete_chunk();
        let (commit, queue) = {
            let mut reg = self.write();
            let queue = reg
                .unbind(name)
                .ok_or_else(|| BrokerError::QueueNotFound(name.to_owned()))?;
            // A store that deletes a queue whole gets the deletion at once, in
            // the registry's order.
            let ops = if queue.durable && chunk.is_none() {
                vec![Op::DeleteQueue(queue.id)]
            } else {
                Vec::new()
            };
            (self.submit(ops), queue)
        };
        queue.close();
        self.commit(commit).await?;
        if let (true, Some(chunk)) = (queue.durable, chunk) {
            self.empty_stored(&queue, chunk).await?;
            self.commit(self.submit(vec![Op::DeleteQueue(queue.id)])).await?;
        }
        Ok(())
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
        // A missing address is made as a send to it makes it, with its queue: the
        // same settings, flag and `max-auto-created`.
        self.ensure_address(name, Some(RoutingType::Anycast), Create::OnSend)
            .await?;
        // On an address that existed, the queue alone.
        self.queue_or_create(name, name, Some(RoutingType::Anycast), None)
            .await
    }

    /// The named queue, created (durable, auto-created) if it does not exist yet; a
    /// concurrent creation of the same queue is not an error.
    pub(super) async fn queue_or_create(
        self: &Arc<Self>,
        address: &str,
        name: &str,
        routing: Option<RoutingType>,
        filter: Option<&str>,
    ) -> Result<Arc<Queue>> {
        match self
            .create_queue(address, name, routing, true, filter, true)
            .await
        {
            Err(BrokerError::QueueExists { .. }) => self.queue(name),
            other => other,
        }
    }

    /// Applies a new config: its address-settings take effect for every queue at
    /// once (consumers stay attached), and its addresses and queues are created if new.
    /// Nothing changes unless all of it can be applied: any error but
    /// [`BrokerError::Storage`] is a refusal that left everything as it was.
    pub async fn reload(self: &Arc<Self>, config: &Config) -> Result<()> {
        self.apply(config).await?;
        for queue in self.queues() {
            queue.wake.notify_one();
        }
        Ok(())
    }

    /// Puts a config in force: checks what it declares against what exists, then (under
    /// the same lock) replaces the settings and creates what is new, in one commit.
    pub(super) async fn apply(self: &Arc<Self>, config: &Config) -> Result<()> {
        let (commit, created) = {
            let mut reg = self.write();
            let plan = plan_declared(&reg, config)?;
            let ids = plan
                .queues
                .iter()
                .map(|new| self.cluster().queue_id(new.name))
                .collect::<Result<Vec<_>>>()?;
            self.settings.replace(config);
            for queue in reg.queues.values() {
                self.apply_read_limit(queue);
            }
            self.create_declared(&mut reg, plan, ids)
        };
        // Blocked sends look again: a limit may have been raised.
        self.sizes.recheck();
        self.commit(commit).await?;
        for queue in created {
            self.start_queue(queue);
        }
        Ok(())
    }

    /// Creates what [`plan_declared`] found missing, under the write lock, its
    /// queues with `ids` (one each).
    fn create_declared(
        self: &Arc<Self>,
        reg: &mut Registry,
        plan: Declared<'_>,
        ids: Vec<QueueId>,
    ) -> (Option<Commit>, Vec<Arc<Queue>>) {
        let mut ops = Vec::new();
        for (name, routing) in plan.addresses {
            let address = Address::new(name.to_owned(), routing, false);
            ops.push(Op::PutAddress(address.record()));
            reg.addresses.insert(name.to_owned(), address);
        }
        let queues = plan
            .queues
            .into_iter()
            .zip(ids)
            .map(|(new, id)| self.new_queue(reg, &mut ops, id, new))
            .collect();
        (self.submit(ops), queues)
    }
}

/// What a config declares that does not exist yet.
struct Declared<'c> {
    addresses: Vec<(&'c str, RoutingType)>,
    queues: Vec<NewQueue<'c>>,
}

/// Checks what `config` declares against the registry without changing anything: a
/// declared address that exists must carry its routing type, a declared queue that
/// exists must be exactly as declared. Returns what is missing.
fn plan_declared<'c>(reg: &Registry, config: &'c Config) -> Result<Declared<'c>> {
    let mut plan = Declared {
        addresses: Vec::new(),
        queues: Vec::new(),
    };
    for address in &config.addresses {
        match reg.addresses.get(&address.name) {
            Some(existing) => address_as_asked(existing, address.routing_type)?,
            None => plan.addresses.push((&address.name, address.routing_type)),
        }
        for q in &address.queues {
            let filter = parse_filter(q.filter.as_deref().unwrap_or(""))?;
            match reg.queues.get(&q.name) {
                Some(existing) => {
                    let differs = queue_differences(
                        existing,
                        &address.name,
                        q.routing_type,
                        q.durable,
                        filter.as_ref(),
                    );
                    if !differs.is_empty() {
                        return Err(BrokerError::QueueExists {
                            name: q.name.clone(),
                            differs,
                        });
                    }
                }
                None => plan.queues.push(NewQueue {
                    address: &address.name,
                    name: &q.name,
                    routing: q.routing_type,
                    durable: q.durable,
                    filter,
                    auto_created: false,
                }),
            }
        }
    }
    Ok(plan)
}

/// An existing address is what was asked for if it carries `routing`.
fn address_as_asked(existing: &Address, routing: RoutingType) -> Result<()> {
    if existing.allows(routing) {
        return Ok(());
    }
    Err(BrokerError::AddressExists {
        name: existing.name.clone(),
        differs: Differences::default().compare("routing type", existing.routing_types(), routing.as_str()),
    })
}

/// How an existing queue differs from the one asked for.
fn queue_differences(
    existing: &Queue,
    address: &str,
    routing: RoutingType,
    durable: bool,
    filter: Option<&Selector>,
) -> Differences {
    let shown = |filter: Option<&Selector>| filter.map_or("none".to_owned(), |f| format!("{:?}", f.as_str()));
    Differences::default()
        .compare(
            "address",
            format!("'{}'", existing.address),
            format!("'{address}'"),
        )
        .compare("routing type", existing.routing_type, routing)
        .compare("filter", shown(existing.filter.as_ref()), shown(filter))
        .compare("durable", existing.durable, durable)
}
