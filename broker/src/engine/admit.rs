//! Admission: every message a client sends (Send, Publish, a transaction's
//! commit) measured against its address's `max-size-bytes` and the broker's
//! `global-max-size` before it is routed, and the address's
//! `address-full-policy` carried out: `crate::address_full` decides, this waits
//! (BLOCK), refuses (FAIL), discards (DROP) or pages (PAGE).
//!
//! Messages the broker moves itself (`moves.rs`: dead letters, expired
//! messages, schedule moves, an operator's move or retry) never come here: a
//! full dead-letter address must not lose a dead letter, and the message
//! leaves another address of the same broker in the same commit.
//!
//! The limits are soft by what is in flight: a send reads the running totals
//! (`crate::address_size`) before its commit, and its messages count once they
//! are in their queues, so sends committing at the same time may together pass
//! a limit by what they carry. Within one batch the earlier messages count. A
//! message counts as many times as it will be stored in the address's queues
//! (filters aside), as the address's size does. In a cluster the totals
//! include what the other nodes' queues hold, as last published
//! (`crate::address_size`): a second or so late, so sends through several
//! nodes at once may pass a limit by what they carry in that time.
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message as _;
use rebound_config::EffectiveSettings;
use tracing::warn;

use super::Broker;
use crate::address_full::{Admit, Sizes, decide};
use crate::address_size::{AddressSize, Blocked};
use crate::error::{BrokerError, Result};
use crate::message::Prepared;
use crate::time::now_ms;

/// An address of the batch: its settings, its size, the copies a message
/// makes there, and what the batch's earlier messages add to it.
struct Target {
    address: String,
    settings: Arc<EffectiveSettings>,
    size: Arc<AddressSize>,
    copies: u64,
    pending: u64,
}

impl Broker {
    /// Applies the address-full policies to a batch: returns with the messages
    /// to store, after waiting for room under BLOCK, or fails under FAIL and when
    /// BLOCK waited `max-block-time`. Those DROP discarded are taken out; the
    /// answer says which they were, in the order sent (empty if none was).
    pub(super) async fn admit(&self, prepared: &mut Vec<Prepared>) -> Result<Vec<bool>> {
        let mut targets: Vec<Target> = Vec::new();
        let mut pending = 0;
        let mut dropped = Vec::new();
        for (i, message) in prepared.iter_mut().enumerate() {
            let t = match targets.iter().position(|t| t.address == message.record.address) {
                Some(t) => t,
                None => {
                    targets.push(self.target(&message.record.address));
                    targets.len() - 1
                }
            };
            let incoming = message.record.encoded_len() as u64 * targets[t].copies;
            let stored = match self.admit_one(&mut targets[t], pending, incoming).await? {
                Admit::Drop(_) => false,
                Admit::Page(_) => {
                    message.to_disk = true;
                    true
                }
                _ => true,
            };
            if stored {
                targets[t].pending += incoming;
                pending += incoming;
            }
            // Allocated at the first drop only.
            if !stored && dropped.is_empty() {
                dropped.resize(i, false);
            }
            if !stored || !dropped.is_empty() {
                dropped.push(!stored);
            }
        }
        if dropped.is_empty() {
            return Ok(dropped);
        }
        let mut drop = dropped.iter();
        prepared.retain(|_| !drop.next().copied().unwrap_or(false));
        Ok(dropped)
    }

    fn target(&self, address: &str) -> Target {
        let found = self
            .read()
            .addresses
            .get(address)
            .map(|a| (a.size.clone(), a.copies()));
        // An address deleted meanwhile: its messages will find no queue.
        let (size, copies) = found.unwrap_or_default();
        Target {
            address: address.to_owned(),
            settings: self.settings_for(address),
            size,
            copies,
            pending: 0,
        }
    }

    /// What becomes of a message of `incoming` bytes to `target`, the batch
    /// before it adding `pending` bytes to the broker: Accept, Page or Drop
    /// (Block is waited out, Fail is an error).
    async fn admit_one(&self, target: &mut Target, pending: u64, incoming: u64) -> Result<Admit> {
        let mut blocked: Option<(Blocked, Instant)> = None;
        loop {
            // Registered before the sizes are read, so that room made in between
            // is not missed.
            let mut room = pin!(self.sizes.room.notified());
            if blocked.is_some() {
                room.as_mut().enable();
            }
            let sizes = Sizes {
                address: target.size.bytes() + target.size.elsewhere() + target.pending,
                address_limit: target.settings.max_size_bytes,
                broker: self.sizes.bytes() + self.sizes.elsewhere() + pending,
                broker_limit: self.settings.global_max_size(),
            };
            let admit = decide(target.settings.address_full_policy, sizes, incoming);
            let full = match admit {
                Admit::Accept => {
                    target.size.accepted();
                    return Ok(admit);
                }
                Admit::Page(_) => return Ok(admit),
                Admit::Drop(full) => {
                    if target.size.drop_one() {
                        warn!(
                            address = %target.address,
                            "address is full ({full}): address-full-policy DROP discards what is sent to it"
                        );
                    }
                    return Ok(admit);
                }
                Admit::Fail(full) => full,
                Admit::Block(full) => {
                    let Some((_, since)) = &blocked else {
                        let (guard, first) = target.size.block(&self.sizes, now_ms());
                        if first {
                            warn!(
                                address = %target.address,
                                "address is full ({full}): sends block until consumers make room (address-full-policy BLOCK)"
                            );
                        }
                        blocked = Some((guard, Instant::now()));
                        continue;
                    };
                    let deadline = *since + Duration::from_millis(target.settings.max_block_time_ms);
                    if Instant::now() < deadline {
                        tokio::select! {
                            _ = room => {}
                            _ = tokio::time::sleep_until(deadline.into()) => {}
                            _ = self.shutdown.cancelled() => return Err(BrokerError::ShuttingDown),
                        }
                        // A reload may have changed the policy or the limit.
                        target.settings = self.settings_for(&target.address);
                        continue;
                    }
                    return Err(BrokerError::AddressFull {
                        address: target.address.clone(),
                        full,
                        waited_ms: Some(since.elapsed().as_millis() as u64),
                    });
                }
            };
            return Err(BrokerError::AddressFull {
                address: target.address.clone(),
                full,
                waited_ms: None,
            });
        }
    }
}
