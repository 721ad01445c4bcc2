//! Per-address metrics, read at scrape time from each address's running totals
//! (`crate::address_size`): the bytes it holds (what `max-size-bytes` is measured
//! against), the sends its BLOCK policy holds back, and the messages its DROP
//! policy discarded; and which addresses take dead letters (some address's
//! `dead-letter-address` names them), so that a dashboard or an alert finds
//! the dead-letter queues by that relation rather than by their names. Like
//! the queues', only the addresses the caller may browse.
use std::collections::HashSet;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::Shown;
use crate::address_size::AddressSize;
use crate::engine::Broker;

/// The collector of the metrics of every shown address.
pub(super) struct Addresses(pub(super) Arc<Broker>, pub(super) Shown);

impl std::fmt::Debug for Addresses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Addresses")
    }
}

/// A per-address metric: its name, its help, and its value.
type Figure = (&'static str, &'static str, fn(&AddressSize) -> u64);

const GAUGES: [Figure; 2] = [
    (
        "address_bytes",
        "Bytes of the messages the address's queues hold (what max-size-bytes is measured against).",
        AddressSize::bytes,
    ),
    (
        "address_blocked_sends",
        "Sends waiting for room in the address (address-full-policy BLOCK).",
        AddressSize::blocked,
    ),
];

/// Named without `_total`, which the encoding adds.
const COUNTERS: [Figure; 1] = [(
    "address_dropped_messages",
    "Messages discarded because the address was full (address-full-policy DROP).",
    AddressSize::dropped,
)];

impl Collector for Addresses {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut sizes = self.0.management().address_sizes();
        sizes.retain(|(name, _)| (self.1)(name));
        for (name, help, value) in GAUGES {
            let metric_type = ConstGauge::new(0u64).metric_type();
            let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
            for (address, size) in &sizes {
                ConstGauge::new(value(size))
                    .encode(family.encode_family(&[("address", address.as_str())])?)?;
            }
        }
        for (name, help, value) in COUNTERS {
            let metric_type = ConstCounter::new(0u64).metric_type();
            let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
            for (address, size) in &sizes {
                ConstCounter::new(value(size))
                    .encode(family.encode_family(&[("address", address.as_str())])?)?;
            }
        }
        let dead_letters: HashSet<String> = sizes
            .iter()
            .filter_map(|(address, _)| self.0.settings_for(address).dead_letter_address.clone())
            .collect();
        let gauge = ConstGauge::new(1u64);
        let mut family = encoder.encode_descriptor(
            "dead_letter_address",
            "1 for an address that takes dead letters (another address's, or its own, dead-letter-address).",
            None,
            gauge.metric_type(),
        )?;
        for (address, _) in sizes.iter().filter(|(address, _)| dead_letters.contains(address)) {
            gauge.encode(family.encode_family(&[("address", address.as_str())])?)?;
        }
        Ok(())
    }
}
