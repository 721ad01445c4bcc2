//! The one place that decides what a send to a full address does.
//!
//! An address is full when what it holds plus what a send adds would exceed its
//! `max-size-bytes`, or when what every address holds plus the send would exceed
//! `global-max-size`; then its `address-full-policy` (PAGE, BLOCK, FAIL, DROP, as
//! in Artemis) says what happens. [`decide`] is pure: the send path
//! (`engine/admit.rs`) gives it the sizes it keeps as running totals
//! (`address_size.rs`) and carries out the answer. Under any policy but PAGE a
//! message is never accepted past a limit, so a message larger than
//! `max-size-bytes` cannot be sent to a BLOCK or FAIL address at all.
use std::fmt;

use rebound_config::AddressFullPolicy;

/// Which limit a send met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The address's `max-size-bytes`.
    Address,
    /// The broker's `global-max-size`.
    Broker,
}

/// A limit a send met: what was held (before the send) and the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    pub scope: Scope,
    pub held: u64,
    pub limit: u64,
}

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scope {
            Scope::Address => write!(
                f,
                "it holds {} bytes and max-size-bytes is {}",
                self.held, self.limit
            ),
            Scope::Broker => write!(
                f,
                "the broker's addresses hold {} bytes and global-max-size is {}",
                self.held, self.limit
            ),
        }
    }
}

/// What to do with a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Room enough: store it.
    Accept,
    /// Full, PAGE: store it, on disk rather than in memory.
    Page(Full),
    /// Full, BLOCK: wait for room.
    Block(Full),
    /// Full, FAIL: refuse it.
    Fail(Full),
    /// Full, DROP: acknowledge it and discard it.
    Drop(Full),
}

/// The limits in force for an address and what is held against them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Bytes the address holds, and its `max-size-bytes`.
    pub address: u64,
    pub address_limit: Option<u64>,
    /// Bytes every address holds, and `global-max-size`.
    pub broker: u64,
    pub broker_limit: Option<u64>,
}

/// What a send of `incoming` bytes to an address does under `policy`.
pub fn decide(policy: AddressFullPolicy, sizes: Sizes, incoming: u64) -> Admit {
    let over =
        |held: u64, limit: Option<u64>| limit.is_some_and(|limit| held.saturating_add(incoming) > limit);
    let full = if over(sizes.address, sizes.address_limit) {
        Full {
            scope: Scope::Address,
            held: sizes.address,
            limit: sizes.address_limit.unwrap_or_default(),
        }
    } else if over(sizes.broker, sizes.broker_limit) {
        Full {
            scope: Scope::Broker,
            held: sizes.broker,
            limit: sizes.broker_limit.unwrap_or_default(),
        }
    } else {
        return Admit::Accept;
    };
    match policy {
        AddressFullPolicy::Page => Admit::Page(full),
        AddressFullPolicy::Block => Admit::Block(full),
        AddressFullPolicy::Fail => Admit::Fail(full),
        AddressFullPolicy::Drop => Admit::Drop(full),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressFullPolicy::*;
    use proptest::prelude::*;

    fn sizes(address: u64, address_limit: Option<u64>, broker: u64, broker_limit: Option<u64>) -> Sizes {
        Sizes {
            address,
            address_limit,
            broker,
            broker_limit,
        }
    }

    #[test]
    fn the_address_limit_is_named_before_the_broker_limit() {
        let s = sizes(90, Some(100), 990, Some(1000));
        assert_eq!(decide(Fail, s, 10), Admit::Accept);
        let full = Full {
            scope: Scope::Address,
            held: 90,
            limit: 100,
        };
        assert_eq!(decide(Fail, s, 11), Admit::Fail(full));
        assert_eq!(decide(Block, s, 11), Admit::Block(full));
        assert_eq!(decide(Drop, s, 11), Admit::Drop(full));
        assert_eq!(decide(Page, s, 11), Admit::Page(full));
        let s = sizes(0, None, 990, Some(1000));
        let Admit::Fail(full) = decide(Fail, s, 11) else {
            panic!("not full")
        };
        assert_eq!(
            full.to_string(),
            "the broker's addresses hold 990 bytes and global-max-size is 1000"
        );
        assert_eq!(
            decide(Block, sizes(u64::MAX, None, u64::MAX, None), u64::MAX),
            Admit::Accept
        );
    }

    fn policy() -> impl Strategy<Value = AddressFullPolicy> {
        prop_oneof![Just(Page), Just(Block), Just(Fail), Just(Drop)]
    }

    proptest! {
        /// Accepted exactly when both limits have room; otherwise the policy
        /// decides, and only PAGE ever stores past a limit.
        #[test]
        fn never_accepts_past_a_limit(
            policy in policy(),
            address in 0u64..1000,
            address_limit in proptest::option::of(1u64..1000),
            broker in 0u64..3000,
            broker_limit in proptest::option::of(1u64..3000),
            incoming in 0u64..500,
        ) {
            let s = sizes(address, address_limit, broker.max(address), broker_limit);
            let room = |held: u64, limit: Option<u64>| limit.is_none_or(|l| held + incoming <= l);
            let fits = room(s.address, address_limit) && room(s.broker, broker_limit);
            let admit = decide(policy, s, incoming);
            prop_assert_eq!(admit == Admit::Accept, fits);
            let stored = matches!(admit, Admit::Accept | Admit::Page(_));
            prop_assert!(fits || !stored || policy == Page);
            if let Admit::Page(full) | Admit::Block(full) | Admit::Fail(full) | Admit::Drop(full) = admit {
                prop_assert!(full.held + incoming > full.limit);
            }
        }
    }
}
