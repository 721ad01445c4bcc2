//! The registry kept in step with what other nodes create and delete, when
//! several brokers share one database (`crate::cluster` reads the store and
//! calls this). Routing stays local: every node keeps every address and
//! queue, so that a send through any node reaches every queue it should.
//!
//! What the store has and the registry lacks is added (a queue as away,
//! `serving.rs`: its lease decides who serves it). A queue the registry has
//! and the store lost is removed, but only if the previous read had it: a
//! queue this node just created may not be committed when the store is read,
//! and must not be taken for one deleted elsewhere. An address goes the same
//! way, with its node-local (non-durable) queues, unless a durable queue of
//! it is still there (one this node just created on it).
use std::collections::BTreeSet;

use rebound_storage::{AddressRecord, QueueId, QueueRecord};
use tracing::info;

use super::Cluster;
use crate::engine::recovery::queue_from_record;
use crate::postoffice::Address;

/// What one read of the store had: the ids of its queues and the names of
/// its addresses.
#[derive(Debug, Default)]
pub struct Stored {
    /// The ids of the durable queues stored.
    pub queues: BTreeSet<QueueId>,
    /// The names of the addresses stored.
    pub addresses: BTreeSet<String>,
}

impl Cluster<'_> {
    /// Brings the registry in step with the store's `addresses` and `queues`;
    /// `previous` is what the previous call had (nothing the first time).
    /// Returns what this one had.
    pub fn merge_stored(
        &self,
        addresses: Vec<AddressRecord>,
        queues: Vec<QueueRecord>,
        previous: &Stored,
    ) -> Stored {
        let stored = Stored {
            queues: queues.iter().map(|q| q.id).collect(),
            addresses: addresses.iter().map(|a| a.name.clone()).collect(),
        };
        let mut added = Vec::new();
        let mut removed = Vec::new();
        let mut gone_addresses = Vec::new();
        {
            let mut reg = self.broker.write();
            let gone: Vec<String> = reg
                .queues
                .values()
                .filter(|q| q.durable && !stored.queues.contains(&q.id) && previous.queues.contains(&q.id))
                .map(|q| q.name.clone())
                .collect();
            removed.extend(gone.iter().filter_map(|name| reg.unbind(name)));
            let gone: Vec<String> = reg
                .addresses
                .values()
                .filter(|a| !stored.addresses.contains(&a.name) && previous.addresses.contains(&a.name))
                .filter(|a| !a.queues.iter().any(|q| q.durable))
                .map(|a| a.name.clone())
                .collect();
            for name in gone {
                removed.extend(reg.remove_address(&name));
                gone_addresses.push(name);
            }
            for record in addresses {
                if !reg.addresses.contains_key(&record.name) {
                    reg.addresses
                        .insert(record.name.clone(), Address::from_record(record));
                }
            }
            for record in queues {
                if reg.queues.contains_key(&record.name) || !reg.addresses.contains_key(&record.address) {
                    continue;
                }
                let queue = queue_from_record(record);
                self.created(&queue);
                reg.bind(queue.clone());
                added.push(queue);
            }
        }
        for queue in removed {
            info!(queue = %queue.name, "deleted by another node");
            queue.close();
        }
        for address in gone_addresses {
            info!(%address, "address deleted by another node");
            self.broker.duplicates.forget_address(&address);
        }
        for queue in added {
            info!(queue = %queue.name, "created by another node");
            self.broker.start_queue(queue);
        }
        stored
    }
}
