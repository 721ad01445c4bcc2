//! Read-only views for management: queues and addresses a page at a time, and one
//! address with its queues.
//!
//! Pages are sorted by name and start after a name (the last one of the previous
//! page), so a listing needs no state on the broker and a reply stays small however
//! many queues there are. Each page is taken under the registry's read lock in
//! O(n): the names after the cursor are filtered, the smallest `limit` of them
//! selected, and only those sorted.
use std::sync::Arc;

use rebound_config::{AddressFullPolicy, EffectiveSettings};

use super::Management;
use crate::address_size::AddressSize;
use crate::error::{BrokerError, Result};
use crate::postoffice::Address;
use crate::queue::Queue;

/// An address as management shows it: its routing types and its queues, by name.
#[derive(Debug, Clone)]
pub struct AddressView {
    pub name: String,
    pub anycast: bool,
    pub multicast: bool,
    pub auto_created: bool,
    /// Sorted by name.
    pub queues: Vec<Arc<Queue>>,
    /// What it holds, and what its policy did.
    pub size: Arc<AddressSize>,
    /// Its `max-size-bytes` (`None` = unlimited) and `address-full-policy`.
    pub max_size_bytes: Option<u64>,
    pub policy: AddressFullPolicy,
}

impl AddressView {
    fn of(address: &Address, settings: &EffectiveSettings) -> AddressView {
        let mut queues = address.queues.clone();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        AddressView {
            name: address.name.clone(),
            anycast: address.anycast,
            multicast: address.multicast,
            auto_created: address.auto_created,
            queues,
            size: address.size.clone(),
            max_size_bytes: settings.max_size_bytes,
            policy: settings.address_full_policy,
        }
    }
}

/// One page of a listing and whether another follows.
#[derive(Debug)]
pub struct Page<T> {
    /// Sorted by name.
    pub items: Vec<T>,
    /// More items follow the last one of this page.
    pub more: bool,
}

/// The first `limit` of `items` (by `name`) whose name sorts after `after` (all of
/// them for an empty `after`), sorted.
fn page<T>(items: impl Iterator<Item = T>, name: impl Fn(&T) -> &str, after: &str, limit: usize) -> Page<T> {
    let mut items: Vec<T> = items
        .filter(|item| after.is_empty() || name(item) > after)
        .collect();
    let more = items.len() > limit;
    if more {
        if limit > 0 {
            items.select_nth_unstable_by(limit - 1, |a, b| name(a).cmp(name(b)));
        }
        items.truncate(limit);
    }
    items.sort_by(|a, b| name(a).cmp(name(b)));
    Page { items, more }
}

impl Management<'_> {
    /// The queues `shown` keeps, in no particular order (for a caller that sorts
    /// them its own way).
    pub fn queues_where(self, shown: impl Fn(&Queue) -> bool) -> Vec<Arc<Queue>> {
        self.broker
            .read()
            .queues
            .values()
            .filter(|q| shown(q))
            .cloned()
            .collect()
    }

    /// Up to `limit` of the queues `shown` keeps whose names sort after `after`
    /// (empty: from the first), by name. A caller lists only what it may see.
    pub fn queues_page(self, after: &str, limit: usize, shown: impl Fn(&Queue) -> bool) -> Page<Arc<Queue>> {
        let reg = self.broker.read();
        let queues = reg.queues.values().filter(|q| shown(q)).cloned();
        page(queues, |q| &q.name, after, limit)
    }

    /// Up to `limit` of the addresses whose names `shown` keeps and sort after
    /// `after` (empty: from the first), by name.
    pub fn addresses_page(
        self,
        after: &str,
        limit: usize,
        shown: impl Fn(&str) -> bool,
    ) -> Page<AddressView> {
        let reg = self.broker.read();
        let addresses = page(
            reg.addresses.values().filter(|a| shown(&a.name)),
            |a| &a.name,
            after,
            limit,
        );
        Page {
            items: addresses
                .items
                .into_iter()
                .map(|a| self.address_view(a))
                .collect(),
            more: addresses.more,
        }
    }

    fn address_view(self, address: &Address) -> AddressView {
        AddressView::of(address, &self.broker.settings_for(&address.name))
    }

    /// Every address's name and size, for the metrics.
    pub fn address_sizes(self) -> Vec<(String, Arc<AddressSize>)> {
        let reg = self.broker.read();
        reg.addresses
            .values()
            .map(|a| (a.name.clone(), a.size.clone()))
            .collect()
    }

    /// The bytes all addresses hold, sends blocked over all of them, and the
    /// `global-max-size` in force (`None` = unlimited).
    pub fn broker_size(self) -> (u64, u64, Option<u64>) {
        (
            self.broker.sizes.bytes(),
            self.broker.sizes.blocked(),
            self.broker.settings.global_max_size(),
        )
    }

    /// How many addresses there are.
    pub fn address_count(self) -> usize {
        self.broker.read().addresses.len()
    }

    /// How many queues there are.
    pub fn queue_count(self) -> usize {
        self.broker.read().queues.len()
    }

    /// One address with its queues.
    pub fn address(self, name: &str) -> Result<AddressView> {
        self.broker
            .read()
            .addresses
            .get(name)
            .map(|a| self.address_view(a))
            .ok_or_else(|| BrokerError::AddressNotFound(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::page;

    fn names(after: &str, limit: usize) -> (Vec<&'static str>, bool) {
        let all = ["d", "a", "e", "c", "b"];
        let p = page(all.into_iter(), |s| *s, after, limit);
        (p.items, p.more)
    }

    #[test]
    fn pages_are_sorted_bounded_and_start_after_the_cursor() {
        assert_eq!(names("", 2), (vec!["a", "b"], true));
        assert_eq!(names("b", 2), (vec!["c", "d"], true));
        assert_eq!(names("d", 2), (vec!["e"], false));
        assert_eq!(names("e", 2), (vec![], false));
        assert_eq!(names("", 5), (vec!["a", "b", "c", "d", "e"], false));
        assert_eq!(names("bb", 10), (vec!["c", "d", "e"], false));
        assert_eq!(names("", 0), (vec![], true));
    }
}
