//! The post office: which addresses and queues exist, and where a message goes.
//!
//! Routing follows Artemis for a send that names no routing type: every multicast
//! queue of the address gets its own copy, and one of its anycast queues (taken in
//! turn) gets one more. A queue with a filter only takes messages its selector
//! matches. An address with no (matching) queue drops the message; the send reports it
//! as unrouted.
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rebound_config::RoutingType;
use rebound_storage::{AddressRecord, MessageRecord};

use crate::address_size::{AddressSize, BrokerSize, Meter};
use crate::message::Selectable;
use crate::queue::Queue;

/// An address and the queues bound to it.
#[derive(Debug)]
pub struct Address {
    pub name: String,
    pub anycast: bool,
    pub multicast: bool,
    pub auto_created: bool,
    pub queues: Vec<Arc<Queue>>,
    /// The bytes its queues hold, and what its `address-full-policy` did.
    pub size: Arc<AddressSize>,
    next_anycast: AtomicUsize,
}

impl Address {
    pub fn new(name: String, routing: RoutingType, auto_created: bool) -> Address {
        Address {
            name,
            anycast: routing == RoutingType::Anycast,
            multicast: routing == RoutingType::Multicast,
            auto_created,
            queues: Vec::new(),
            size: Arc::default(),
            next_anycast: AtomicUsize::new(0),
        }
    }

    pub fn from_record(record: AddressRecord) -> Address {
        Address {
            name: record.name,
            anycast: record.anycast,
            multicast: record.multicast,
            auto_created: record.auto_created,
            queues: Vec::new(),
            size: Arc::default(),
            next_anycast: AtomicUsize::new(0),
        }
    }

    pub fn record(&self) -> AddressRecord {
        AddressRecord {
            name: self.name.clone(),
            anycast: self.anycast,
            multicast: self.multicast,
            auto_created: self.auto_created,
        }
    }

    /// Whether the address carries queues of `routing`.
    pub fn allows(&self, routing: RoutingType) -> bool {
        match routing {
            RoutingType::Anycast => self.anycast,
            RoutingType::Multicast => self.multicast,
        }
    }

    /// The routing types it carries, for messages.
    pub fn routing_types(&self) -> &'static str {
        match (self.anycast, self.multicast) {
            (true, true) => "anycast and multicast",
            (true, false) => "anycast",
            (false, true) => "multicast",
            (false, false) => "no routing type",
        }
    }

    /// Lets the address carry queues of `routing` too. Returns true if that is new.
    pub fn allow(&mut self, routing: RoutingType) -> bool {
        let flag = match routing {
            RoutingType::Anycast => &mut self.anycast,
            RoutingType::Multicast => &mut self.multicast,
        };
        !std::mem::replace(flag, true)
    }

    /// How many copies a message sent here makes, filters aside: one per
    /// multicast queue and one for the anycast queues. At least 1.
    pub fn copies(&self) -> u64 {
        let multicast = self
            .queues
            .iter()
            .filter(|q| q.routing_type == RoutingType::Multicast)
            .count();
        let anycast = self.queues.iter().any(|q| q.routing_type == RoutingType::Anycast);
        (multicast as u64 + u64::from(anycast)).max(1)
    }

    /// The queues a message sent to this address goes to.
    pub fn route(&self, record: &MessageRecord) -> Vec<Arc<Queue>> {
        let accepts = |q: &&Arc<Queue>| q.filter.as_ref().is_none_or(|f| f.matches(&Selectable(record)));
        let mut targets: Vec<Arc<Queue>> = self
            .queues
            .iter()
            .filter(|q| q.routing_type == RoutingType::Multicast)
            .filter(accepts)
            .cloned()
            .collect();
        let anycast: Vec<&Arc<Queue>> = self
            .queues
            .iter()
            .filter(|q| q.routing_type == RoutingType::Anycast)
            .filter(accepts)
            .collect();
        if !anycast.is_empty() {
            let turn = self.next_anycast.fetch_add(1, Ordering::Relaxed);
            targets.push(anycast[turn % anycast.len()].clone());
        }
        targets
    }
}

/// Every address and queue, by name. Queue names are unique across addresses.
#[derive(Debug, Default)]
pub struct Registry {
    pub addresses: HashMap<String, Address>,
    pub queues: HashMap<String, Arc<Queue>>,
    /// The bytes all bound queues hold.
    pub size: Arc<BrokerSize>,
}

impl Registry {
    /// Binds a queue to its (existing) address; what it holds counts towards the
    /// address's size and the broker's.
    pub fn bind(&mut self, queue: Arc<Queue>) {
        if let Some(address) = self.addresses.get_mut(&queue.address) {
            queue.measure(Some(Meter {
                address: address.size.clone(),
                broker: self.size.clone(),
            }));
            address.queues.push(queue.clone());
        }
        self.queues.insert(queue.name.clone(), queue);
    }

    /// Removes a queue from the registry and from its address, and what it holds
    /// from their sizes.
    pub fn unbind(&mut self, name: &str) -> Option<Arc<Queue>> {
        let queue = self.queues.remove(name)?;
        if let Some(address) = self.addresses.get_mut(&queue.address) {
            address.queues.retain(|q| q.name != name);
        }
        queue.measure(None);
        Some(queue)
    }

    /// Removes address `name` with its queues, unbound; they are returned.
    pub fn remove_address(&mut self, name: &str) -> Vec<Arc<Queue>> {
        let names: Vec<String> = self
            .addresses
            .get(name)
            .map(|a| a.queues.iter().map(|q| q.name.clone()).collect())
            .unwrap_or_default();
        let queues = names.iter().filter_map(|q| self.unbind(q)).collect();
        self.addresses.remove(name);
        queues
    }

    /// Where a message goes; empty if its address does not exist or has no queue for it.
    pub fn route(&self, record: &MessageRecord) -> Vec<Arc<Queue>> {
        self.addresses
            .get(&record.address)
            .map(|a| a.route(record))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, routing: RoutingType, filter: Option<&str>) -> Arc<Queue> {
        Arc::new(Queue::new(
            1,
            name.into(),
            "a".into(),
            routing,
            true,
            false,
            filter.map(|f| rebound_selector::Selector::parse(f).unwrap()),
        ))
    }

    fn names(queues: &[Arc<Queue>]) -> Vec<&str> {
        let mut v: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
        v.sort();
        v
    }

    fn record() -> MessageRecord {
        MessageRecord {
            address: "a".into(),
            ..Default::default()
        }
    }

    #[test]
    fn multicast_copies_to_all_anycast_to_one_in_turn() {
        let mut reg = Registry::default();
        let mut address = Address::new("a".into(), RoutingType::Multicast, false);
        address.allow(RoutingType::Anycast);
        reg.addresses.insert("a".into(), address);
        for (name, routing) in [
            ("s1", RoutingType::Multicast),
            ("s2", RoutingType::Multicast),
            ("w1", RoutingType::Anycast),
            ("w2", RoutingType::Anycast),
        ] {
            reg.bind(queue(name, routing, None));
        }
        assert_eq!(reg.addresses["a"].copies(), 3);
        assert_eq!(names(&reg.route(&record())), vec!["s1", "s2", "w1"]);
        assert_eq!(names(&reg.route(&record())), vec!["s1", "s2", "w2"]);
        reg.unbind("s1");
        assert_eq!(names(&reg.route(&record())), vec!["s2", "w1"]);
        let mut elsewhere = record();
        elsewhere.address = "b".into();
        assert!(reg.route(&elsewhere).is_empty());
    }

    #[test]
    fn filters_select_what_a_queue_takes() {
        let mut reg = Registry::default();
        reg.addresses.insert(
            "a".into(),
            Address::new("a".into(), RoutingType::Multicast, false),
        );
        reg.bind(queue("red", RoutingType::Multicast, Some("color = 'red'")));
        reg.bind(queue("all", RoutingType::Multicast, None));
        let mut m = record();
        assert_eq!(names(&reg.route(&m)), vec!["all"]);
        m.properties.insert(
            "color".into(),
            rebound_storage::PropertyValue {
                value: Some(rebound_storage::records::property_value::Value::String(
                    "red".into(),
                )),
            },
        );
        assert_eq!(names(&reg.route(&m)), vec!["all", "red"]);
    }
}
