//! The workloads of `rebound perf`, defined once: [`WORKLOADS`] is the table
//! BENCHMARKS.md describes, and the command line may only override its numbers.

use anyhow::bail;
use rebound_client::{Client, SettingValue};

/// The config file the `poison` and `outage` workloads need, relative to the repository root.
pub const PERF_CONFIG: &str = "bench/perf.toml";

/// One named load: what is sent, by how many, and how it is consumed.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The `--workload` name, also the middle word of its queue name.
    pub name: &'static str,
    /// Messages sent in total.
    pub messages: u64,
    /// Body size in bytes (at least [`super::load::HEADER`]).
    pub size: usize,
    /// Producer tasks, each on its own connection, sharing the messages.
    pub producers: u32,
    /// Consumer tasks, each on its own connection.
    pub consumers: u32,
    /// Messages each producer may have sent and not yet acknowledged (a
    /// publisher-confirms window).
    pub in_flight: usize,
    /// Messages per `Send` call, so a window is `in_flight / batch` concurrent calls.
    pub batch: usize,
    /// Each consumer's credit window.
    pub credit: u32,
    /// Every n-th message is nacked on every delivery until it is dead-lettered.
    pub poison_every: Option<u64>,
    /// Send everything first and only then consume (no consumer while filling).
    pub backlog: bool,
    /// Message groups (`_AMQ_GROUP_ID`) the messages are spread over, round-robin:
    /// each group is delivered one message at a time, in order.
    pub groups: Option<u64>,
    /// Consumers nack every delivery for this long from the start (a dependency
    /// down), then ack.
    pub outage_ms: Option<u64>,
}

/// `durable`, the row the others are told apart from.
const DURABLE: Workload = Workload {
    name: "durable",
    messages: 50_000,
    size: 1024,
    producers: 1,
    consumers: 1,
    in_flight: 64,
    batch: 16,
    credit: 1000,
    poison_every: None,
    backlog: false,
    groups: None,
    outage_ms: None,
};

/// `outage`; `outage-off` is the same load against a broker with outage mode off
/// (their settings differ: [`Workload::required_settings`]).
const OUTAGE: Workload = Workload {
    name: "outage",
    messages: 20_000,
    consumers: 2,
    credit: 100,
    outage_ms: Some(3000),
    ..DURABLE
};

/// Every workload. Keep BENCHMARKS.md's table in step with this one.
pub const WORKLOADS: &[Workload] = &[
    DURABLE,
    Workload {
        name: "fan",
        producers: 4,
        consumers: 4,
        ..DURABLE
    },
    Workload {
        name: "poison",
        messages: 10_000,
        poison_every: Some(10),
        ..DURABLE
    },
    Workload {
        name: "backlog",
        messages: 500_000,
        size: 100,
        in_flight: 2000,
        batch: 500,
        backlog: true,
        ..DURABLE
    },
    Workload {
        name: "groups",
        consumers: 2,
        groups: Some(100),
        ..DURABLE
    },
    OUTAGE,
    Workload {
        name: "outage-off",
        ..OUTAGE
    },
];

/// The workload called `name`.
pub fn named(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// An address-setting a workload needs, as `GetSettings` renders its value;
/// `None` = any value but "none".
type Required = (&'static str, Option<&'static str>);

/// What every checked workload needs: `perf.#`'s 5 deliveries.
const DELIVERIES: Required = ("max-delivery-attempts", Some("5"));

/// What `poison` needs from the address-settings of its address.
const POISON_SETTINGS: &[Required] = &[
    DELIVERIES,
    ("redelivery-delay", Some("10")),
    ("redelivery-delay-multiplier", Some("2.0")),
    ("dead-letter-address", None),
    ("auto-create-dead-letter-resources", Some("true")),
];

/// What `outage` needs (outage mode on).
const OUTAGE_SETTINGS: &[Required] = &[
    DELIVERIES,
    ("outage-threshold", Some("10")),
    ("outage-pause", Some("100")),
    ("outage-pause-multiplier", Some("2.0")),
    ("max-outage-pause", Some("1000")),
];

/// What `outage-off` needs (outage mode off).
const OUTAGE_OFF_SETTINGS: &[Required] = &[
    DELIVERIES,
    ("outage-threshold", Some("off")),
    ("outage-failure-ratio", Some("off")),
];

impl Workload {
    /// The address-settings the workload's figures depend on.
    fn required_settings(&self) -> &'static [Required] {
        match (self.poison_every, self.name) {
            (Some(_), _) => POISON_SETTINGS,
            (None, "outage") => OUTAGE_SETTINGS,
            (None, "outage-off") => OUTAGE_OFF_SETTINGS,
            _ => &[],
        }
    }

    /// How many of the messages are poison.
    pub fn poison_count(&self) -> u64 {
        self.poison_every.map_or(0, |every| self.messages / every)
    }

    /// The group of message number `seq` (0-based), if the workload has groups.
    pub fn group(&self, seq: u64) -> Option<String> {
        self.groups.map(|groups| format!("g{}", seq % groups))
    }

    /// Whether message number `seq` (0-based) is poison: the 10th, 20th, ...
    pub fn is_poison(&self, seq: u64) -> bool {
        self.poison_every.is_some_and(|every| seq % every == every - 1)
    }

    /// Refuses to run against a broker whose settings for `address` differ
    /// from what the workload is defined with. Settings come from the
    /// broker's config, so the tool can only check them, not set them.
    pub async fn check_settings(&self, client: &Client, address: &str) -> anyhow::Result<()> {
        let required = self.required_settings();
        if required.is_empty() {
            return Ok(());
        }
        let settings = client.settings(address).await?;
        let problems = mismatches(required, &settings);
        if problems.is_empty() {
            return Ok(());
        }
        bail!(
            "workload {} needs the broker's address-settings for {address} to be: {}; but {}.\n\
             Start the broker with the config shipped for it: rebound serve --config {PERF_CONFIG}",
            self.name,
            required
                .iter()
                .map(|(key, want)| format!("{key} = {}", want.unwrap_or("<set>")))
                .collect::<Vec<_>>()
                .join(", "),
            problems.join(", ")
        )
    }
}

/// The required settings `settings` does not have, described.
fn mismatches(required: &[Required], settings: &[SettingValue]) -> Vec<String> {
    required
        .iter()
        .filter_map(|&(key, want)| {
            let Some(have) = settings.iter().find(|s| s.key == key) else {
                return Some(format!("the broker does not report {key}"));
            };
            let ok = match want {
                Some(want) => have.value == want,
                None => have.value != "none",
            };
            (!ok).then(|| format!("{key} is {} ({})", have.value, have.source))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(key: &str, value: &str) -> SettingValue {
        SettingValue {
            key: key.into(),
            value: value.into(),
            source: "default".into(),
        }
    }

    #[test]
    fn names_are_unique_and_poison_is_every_tenth() {
        for (i, w) in WORKLOADS.iter().enumerate() {
            assert_eq!(named(w.name), Some(w), "{} defined twice", w.name);
            assert!(w.batch <= w.in_flight, "{}", w.name);
            assert!(WORKLOADS[..i].iter().all(|o| o.name != w.name));
        }
        let poison = named("poison").unwrap();
        assert_eq!(poison.poison_count(), 1000);
        assert_eq!((0..100).filter(|&s| poison.is_poison(s)).count(), 10);
        assert!(!named("durable").unwrap().is_poison(9));
        let groups = named("groups").unwrap();
        assert_eq!(
            (groups.group(0), groups.group(101)),
            (Some("g0".into()), Some("g1".into()))
        );
        assert_eq!(named("durable").unwrap().group(0), None);
    }

    #[test]
    fn poison_settings_are_checked_key_by_key() {
        let mut settings = vec![
            setting("max-delivery-attempts", "5"),
            setting("redelivery-delay", "10"),
            setting("redelivery-delay-multiplier", "2.0"),
            setting("dead-letter-address", "\"DLA\""),
            setting("auto-create-dead-letter-resources", "true"),
        ];
        assert!(mismatches(POISON_SETTINGS, &settings).is_empty());
        settings[0] = setting("max-delivery-attempts", "10");
        settings[3] = setting("dead-letter-address", "none");
        assert_eq!(
            mismatches(POISON_SETTINGS, &settings),
            [
                "max-delivery-attempts is 10 (default)",
                "dead-letter-address is none (default)"
            ]
        );
    }
}
