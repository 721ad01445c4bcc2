//! Running totals of the bytes held per address and over the whole broker, for
//! `max-size-bytes` and `global-max-size` (`address_full.rs`), so that a send
//! reads two atomics instead of summing queues.
//!
//! A queue bound to an address holds a [`Meter`] and moves it exactly where its
//! own byte count changes, under its own lock (`queue/state.rs`): a message
//! added, a message gone (acked, expired, dead-lettered, moved, purged). Binding
//! a queue adds what it holds, unbinding it (deleting it) takes that away, so
//! the totals are always the sum of the bound queues' [`Queue::bytes`].
//!
//! Several nodes on one database: the totals are the node's, of the queues it
//! serves (another node's queue holds nothing here); what the other nodes'
//! queues hold, as they publish it about every second, is kept beside them
//! ([`set_elsewhere`]) and counted by admission (`engine/admit.rs`).
//!
//! Sends that wait for room (BLOCK) wait on [`BrokerSize::room`]; whatever makes
//! room wakes them, but only while some are waiting, so the common path pays
//! one relaxed load.
//!
//! [`Queue::bytes`]: crate::queue::Queue::bytes
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

/// The bytes every address holds together, and the sends waiting for room.
#[derive(Debug, Default)]
pub struct BrokerSize {
    bytes: AtomicU64,
    /// What other nodes' queues hold, as last published (`crate::cluster`).
    elsewhere: AtomicU64,
    blocked: AtomicU64,
    /// Notified (all waiters) when bytes leave an address while sends are
    /// blocked, and when the settings change.
    pub room: Notify,
}

impl BrokerSize {
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// What other nodes' queues hold, as last published (0 on a single broker).
    pub fn elsewhere(&self) -> u64 {
        self.elsewhere.load(Ordering::Relaxed)
    }

    /// Sends waiting for room, over every address.
    pub fn blocked(&self) -> u64 {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Wakes the blocked sends to look again (a reload may have raised a limit).
    pub fn recheck(&self) {
        self.room.notify_waiters();
    }
}

/// What one address holds, and what its policy did.
#[derive(Debug, Default)]
pub struct AddressSize {
    bytes: AtomicU64,
    /// What other nodes' queues of the address hold, as last published.
    elsewhere: AtomicU64,
    blocked: AtomicU64,
    dropped: AtomicU64,
    /// Dropping since the last accepted send (one WARN per episode).
    dropping: AtomicBool,
    /// When the last "blocked" WARN was logged (ms since the epoch).
    warned_ms: AtomicU64,
}

/// How often, at most, an address logs that its sends block (Artemis: 10 s).
pub const BLOCK_WARNING_EVERY_MS: u64 = 10_000;

impl AddressSize {
    /// Bytes its queues hold.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// What other nodes' queues of the address hold, as last published (0 on
    /// a single broker).
    pub fn elsewhere(&self) -> u64 {
        self.elsewhere.load(Ordering::Relaxed)
    }

    /// Sends waiting for room now.
    pub fn blocked(&self) -> u64 {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Messages DROP discarded since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Counts a dropped message; true for the first of an episode.
    pub fn drop_one(&self) -> bool {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        !self.dropping.swap(true, Ordering::Relaxed)
    }

    /// A send was accepted: a later drop starts a new episode.
    pub fn accepted(&self) {
        if self.dropping.load(Ordering::Relaxed) {
            self.dropping.store(false, Ordering::Relaxed);
        }
    }

    /// Counts a send as blocked (here and broker-wide) while the guard lives.
    /// The flag says whether to log it: the first blocked send since
    /// [`BLOCK_WARNING_EVERY_MS`].
    pub fn block(self: &Arc<Self>, broker: &Arc<BrokerSize>, now_ms: u64) -> (Blocked, bool) {
        self.blocked.fetch_add(1, Ordering::Relaxed);
        broker.blocked.fetch_add(1, Ordering::Relaxed);
        let last = self.warned_ms.load(Ordering::Relaxed);
        let warn = now_ms.saturating_sub(last) >= BLOCK_WARNING_EVERY_MS
            && self
                .warned_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        let guard = Blocked {
            address: self.clone(),
            broker: broker.clone(),
        };
        (guard, warn)
    }
}

/// A send counted as blocked; uncounted when dropped.
pub struct Blocked {
    address: Arc<AddressSize>,
    broker: Arc<BrokerSize>,
}

impl Drop for Blocked {
    fn drop(&mut self) {
        self.address.blocked.fetch_sub(1, Ordering::Relaxed);
        self.broker.blocked.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Records what other nodes' queues hold, per address (`addresses`) and in
/// all (`total`); wakes blocked sends when that went down.
pub fn set_elsewhere<'a>(
    broker: &BrokerSize,
    addresses: impl IntoIterator<Item = (&'a AddressSize, u64)>,
    total: u64,
) {
    let mut less = broker.elsewhere.swap(total, Ordering::Relaxed) > total;
    for (address, bytes) in addresses {
        less |= address.elsewhere.swap(bytes, Ordering::Relaxed) > bytes;
    }
    if less && broker.blocked() > 0 {
        broker.room.notify_waiters();
    }
}

/// What a bound queue moves as its bytes change: its address's total and the
/// broker's.
#[derive(Debug, Clone)]
pub struct Meter {
    pub address: Arc<AddressSize>,
    pub broker: Arc<BrokerSize>,
}

impl Meter {
    pub fn add(&self, bytes: u64) {
        self.address.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.broker.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Takes bytes away and wakes blocked sends, if any.
    pub fn sub(&self, bytes: u64) {
        self.address.bytes.fetch_sub(bytes, Ordering::Relaxed);
        self.broker.bytes.fetch_sub(bytes, Ordering::Relaxed);
        if self.broker.blocked() > 0 {
            self.broker.room.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_follow_adds_and_removals_and_blocked_sends_are_counted() {
        let broker = Arc::new(BrokerSize::default());
        let (a, b) = (Arc::new(AddressSize::default()), Arc::new(AddressSize::default()));
        let meter = |address: &Arc<AddressSize>| Meter {
            address: address.clone(),
            broker: broker.clone(),
        };
        meter(&a).add(10);
        meter(&b).add(5);
        meter(&a).sub(4);
        assert_eq!((a.bytes(), b.bytes(), broker.bytes()), (6, 5, 11));
        let (first, warn) = a.block(&broker, 100_000);
        let (second, again) = a.block(&broker, 100_001);
        assert!(warn && !again, "one WARN per {BLOCK_WARNING_EVERY_MS} ms");
        assert_eq!((a.blocked(), broker.blocked()), (2, 2));
        drop((first, second));
        assert_eq!((a.blocked(), broker.blocked()), (0, 0));
        assert!(a.block(&broker, 100_000 + BLOCK_WARNING_EVERY_MS).1);
    }

    #[tokio::test]
    async fn what_other_nodes_hold_is_kept_apart_and_less_of_it_wakes_blocked_sends() {
        let broker = Arc::new(BrokerSize::default());
        let a = Arc::new(AddressSize::default());
        set_elsewhere(&broker, [(&*a, 700)], 900);
        assert_eq!((a.bytes(), a.elsewhere(), broker.elsewhere()), (0, 700, 900));
        let (_blocked, _) = a.block(&broker, 0);
        let room = broker.room.notified();
        tokio::pin!(room);
        room.as_mut().enable();
        set_elsewhere(&broker, [(&*a, 100)], 100);
        assert!(
            futures::poll!(room).is_ready(),
            "room made elsewhere wakes the blocked"
        );
    }

    #[test]
    fn a_drop_episode_warns_once() {
        let a = AddressSize::default();
        assert!(a.drop_one());
        assert!(!a.drop_one());
        a.accepted();
        assert!(a.drop_one());
        assert_eq!(a.dropped(), 3);
    }
}
