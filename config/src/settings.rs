//! Address-settings: partial entries, merging, and where each value came from.
//!
//! As in Artemis, an `[[address-settings]]` entry sets only some keys. For an
//! address, every matching entry is taken from most to least specific (see
//! [`Pattern`](crate::Pattern)'s ordering) and each key gets its value from the first entry
//! that sets it; keys nobody sets take their default. Defaults are applied
//! only after merging, so "not set" and "set to the default" differ, and a
//! derived default (`max-redelivery-delay` = 10 × `redelivery-delay`) uses
//! the merged `redelivery-delay`.
//!
//! Every key is declared once, in the `for_each_setting!` table. It generates
//! the partial [`AddressSettings`], the [`EffectiveSettings`], the merge, the
//! provenance report and (in `model.rs`) the TOML schema and validation, so
//! adding a setting is a single edit.

use std::fmt;

use crate::address_full::AddressFullPolicy;
use crate::pattern_map::PatternMap;
use crate::routing_type::RoutingType;
use crate::schedule::RedeliverySchedule;

/// The table of address-settings keys; expands `$callback!` with it.
///
/// Each row reads: doc comment, field and effective type, TOML key, raw TOML
/// type and the validator turning it into the effective type (a function in
/// `check.rs`, resolved where the callback expands), then the fallback:
/// `default = expr` or `derived("why") = expr`. A derived expression may use
/// fields of earlier rows by name. `none = "..."` is how `None` is shown.
macro_rules! for_each_setting {
    ($callback:ident) => {
        $callback! {
            /// Delay before redelivering a message whose delivery failed, in
            /// ms; `0` (the default) redelivers immediately.
            redelivery_delay_ms: u64 = "redelivery-delay",
                i64 => check::non_negative, default = 0;
            /// Factor applied to the delay for every further failure (>= 1.0).
            /// Default 1.0.
            redelivery_delay_multiplier: f64 = "redelivery-delay-multiplier",
                f64 => check::multiplier, default = 1.0;
            /// Upper bound of the redelivery delay, in ms. Default: 10 ×
            /// the merged `redelivery_delay_ms`.
            max_redelivery_delay_ms: u64 = "max-redelivery-delay",
                i64 => check::non_negative,
                derived("10 × redelivery-delay") = redelivery_delay_ms.saturating_mul(10);
            /// Random jitter of the delay, as a fraction in `0.0..=1.0`.
            /// Default 0.0.
            redelivery_collision_avoidance_factor: f64 = "redelivery-collision-avoidance-factor",
                f64 => check::fraction, default = 0.0;
            /// Deliveries (including the first) before a message is
            /// dead-lettered; `None` = unlimited. Default 10.
            max_delivery_attempts: Option<u32> = "max-delivery-attempts",
                i64 => check::delivery_attempts, default = Some(10), none = "unlimited";
            /// Where messages go after `max_delivery_attempts`; `None` (the
            /// default) drops them.
            dead_letter_address: Option<String> = "dead-letter-address",
                String => check::address_or_empty, default = None;
            /// Whether to create the dead-letter address and queue on demand.
            /// Default false.
            auto_create_dead_letter_resources: bool = "auto-create-dead-letter-resources",
                bool => check::any, default = false;
            /// Prefix of an auto-created dead-letter queue's name. Default `DLQ.`.
            dead_letter_queue_prefix: String = "dead-letter-queue-prefix",
                String => check::queue_prefix, default = "DLQ.".to_owned();
            /// Suffix of an auto-created dead-letter queue's name. Default empty.
            dead_letter_queue_suffix: String = "dead-letter-queue-suffix",
                String => check::queue_suffix, default = String::new();
            /// Where expired messages go; `None` (the default) drops them.
            expiry_address: Option<String> = "expiry-address",
                String => check::address_or_empty, default = None;
            /// Whether to create the expiry address and queue on demand.
            /// Default false.
            auto_create_expiry_resources: bool = "auto-create-expiry-resources",
                bool => check::any, default = false;
            /// Prefix of an auto-created expiry queue's name. Default `EXP.`.
            expiry_queue_prefix: String = "expiry-queue-prefix",
                String => check::queue_prefix, default = "EXP.".to_owned();
            /// Suffix of an auto-created expiry queue's name. Default empty.
            expiry_queue_suffix: String = "expiry-queue-suffix",
                String => check::queue_suffix, default = String::new();
            /// Expiration given to messages sent without one, in ms; `None`
            /// (the default) = off.
            expiry_delay_ms: Option<u64> = "expiry-delay",
                i64 => check::minus_one_or_non_negative, default = None, none = "off";
            /// Bytes an address may hold (its queues' messages, summed);
            /// `None` (the default) = unlimited.
            max_size_bytes: Option<u64> = "max-size-bytes",
                i64 => check::minus_one_or_positive, default = None, none = "unlimited";
            /// What a send does when the address holds `max-size-bytes`, or
            /// the broker `global-max-size`. Default PAGE.
            address_full_policy: AddressFullPolicy = "address-full-policy",
                String => check::address_full_policy, default = AddressFullPolicy::Page;
            /// Under BLOCK, how long a send waits for room before it fails, in
            /// ms. Default 30,000.
            max_block_time_ms: u64 = "max-block-time",
                i64 => check::positive, default = 30_000;
            /// Routing type of auto-created addresses. Artemis defaults to
            /// multicast; our default is anycast because our gRPC sends carry
            /// no routing type and a point-to-point queue is what they expect.
            default_address_routing_type: RoutingType = "default-address-routing-type",
                String => check::routing_type, default = RoutingType::Anycast;
            /// Whether sending to an unknown address creates it. Default true.
            auto_create_addresses: bool = "auto-create-addresses",
                bool => check::any, default = true;
            /// Whether consuming from an unknown queue creates it. Default true.
            auto_create_queues: bool = "auto-create-queues",
                bool => check::any, default = true;
            /// Largest accepted message, in bytes, at most
            /// [`MAX_MESSAGE_SIZE_LIMIT`](crate::MAX_MESSAGE_SIZE_LIMIT). Default 1 MiB.
            max_message_size: u64 = "max-message-size",
                i64 => check::message_size, default = 1024 * 1024;
            /// Step schedule overriding the geometric redelivery delay; an
            /// empty string unsets an inherited one. Default none.
            redelivery_schedule: Option<RedeliverySchedule> = "redelivery-schedule",
                String => check::schedule, default = None;
            /// How often a message may be moved back from a dead-letter queue.
            /// Default 3.
            max_redrive: u32 = "max-redrive",
                i64 => check::count, default = 3;
            /// Upper bound of the delay a consumer asks for itself (a nack's
            /// `retry-after`), in ms. Default 3,600,000 (1 h); independent of
            /// the broker-side delays, so that a consumer's "retry in 30 s" is
            /// kept on a broker that configures none.
            max_retry_after_ms: u64 = "max-retry-after",
                i64 => check::non_negative, default = 3_600_000;
            /// Outage mode: distinct messages failing in a row, with no
            /// success between, that make the queue pause; `None` (the
            /// default) = off.
            outage_threshold: Option<u32> = "outage-threshold",
                i64 => check::count_or_off, default = None, none = "off";
            /// Outage mode: share of failures among the last `outage-window`
            /// outcomes (`0.0..=1.0`) that makes the queue pause; `None` (the
            /// default) = off.
            outage_failure_ratio: Option<f64> = "outage-failure-ratio",
                f64 => check::ratio_or_off, default = None, none = "off";
            /// Outcomes (acks and failures) `outage-failure-ratio` looks at.
            /// Default 20.
            outage_window: u32 = "outage-window",
                i64 => check::window, default = 20;
            /// First pause of a queue in outage mode, in ms. Default 1000.
            outage_pause_ms: u64 = "outage-pause",
                i64 => check::positive, default = 1000;
            /// Factor applied to the pause after every failed probe (>= 1.0).
            /// Default 2.0.
            outage_pause_multiplier: f64 = "outage-pause-multiplier",
                f64 => check::multiplier, default = 2.0;
            /// Upper bound of an outage pause, a consumer's `pause-queue`
            /// included, in ms. Default 60,000.
            max_outage_pause_ms: u64 = "max-outage-pause",
                i64 => check::positive, default = 60_000;
            /// Whether failures during an outage count towards
            /// `max-delivery-attempts`. Default false: an outage does not
            /// dead-letter good messages.
            outage_counts_attempts: bool = "outage-counts-attempts",
                bool => check::any, default = false;
            /// How many duplicate ids (`_AMQ_DUPL_ID`) the address remembers,
            /// oldest forgotten first; `0` turns duplicate detection off.
            /// Default 20,000, as in Artemis.
            id_cache_size: u32 = "id-cache-size",
                i64 => check::count, default = 20_000;
            /// Paging: messages a queue keeps in memory (ready and being
            /// delivered; not those waiting for a later delivery); the rest of
            /// its stored backlog stays on disk and is read back as the head
            /// drains. Default 2,000: enough for consumers to take from
            /// while the next 1,000 are read back, and ~1 MB of memory.
            max_read_page_messages: u64 = "max-read-page-messages",
                i64 => check::positive, default = 2_000;
            /// Paging: bytes of messages a queue keeps in memory, counted as
            /// `max-read-page-messages` is. Default 4 MiB.
            max_read_page_bytes: u64 = "max-read-page-bytes",
                i64 => check::positive, default = 4 << 20;
        }
    };
}
pub(crate) use for_each_setting;

/// The [`Source`] of a key no entry sets.
macro_rules! fallback_origin {
    (default) => {
        Origin::Default
    };
    (derived $why:literal) => {
        Origin::Derived($why)
    };
}

/// How a key shows `None`: its `none = "..."` or else `"none"`.
macro_rules! none_text {
    () => {
        "none"
    };
    ($text:literal) => {
        $text
    };
}

macro_rules! define_settings {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident : $ty:ty = $key:literal,
            $raw:ty => $check:path,
            $fallback:ident $(($why:literal))? = $default:expr $(, none = $none:literal)?;
    )*) => {
        /// One entry's settings: `None` means "not set here, ask a less
        /// specific entry". An explicitly empty `dead-letter-address` or
        /// `expiry-address` is `Some(None)`: it overrides an inherited value.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct AddressSettings {
            $( $(#[doc = $doc])* pub $field: Option<$ty>, )*
        }

        /// The merged settings of one address, defaults applied.
        #[derive(Clone, Debug, PartialEq)]
        pub struct EffectiveSettings {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        /// Every address-settings key as written in TOML, in table order.
        pub const SETTING_KEYS: &[&str] = &[$($key),*];

        const KEY_COUNT: usize = SETTING_KEYS.len();

        /// Per key, the first value found while walking the matching entries
        /// from most to least specific, with the pattern it came from.
        #[derive(Default)]
        struct Merged<'a> {
            $( $field: Option<(&'a $ty, &'a str)>, )*
        }

        impl<'a> Merged<'a> {
            fn absorb(&mut self, pattern: &'a str, settings: &'a AddressSettings) {
                $(
                    if self.$field.is_none() {
                        self.$field = settings.$field.as_ref().map(|value| (value, pattern));
                    }
                )*
            }

            fn finish(&self) -> (EffectiveSettings, [Origin<'a>; KEY_COUNT]) {
                // In table order, so derived defaults can use earlier fields.
                $(
                    let $field: $ty = match self.$field {
                        Some((value, _)) => value.clone(),
                        None => $default,
                    };
                )*
                let origins = [$(
                    match self.$field {
                        Some((_, pattern)) => Origin::Match(pattern),
                        None => fallback_origin!($fallback $($why)?),
                    }
                ),*];
                (EffectiveSettings { $($field),* }, origins)
            }
        }

        impl EffectiveSettings {
            /// Display form of every value, in [`SETTING_KEYS`] order.
            fn rendered(&self) -> [String; KEY_COUNT] {
                [$( self.$field.render(none_text!($($none)?)) ),*]
            }
        }
    };
}

for_each_setting!(define_settings);

/// [`Source`] without allocation, for the hot path.
#[derive(Clone, Copy)]
enum Origin<'a> {
    Match(&'a str),
    Default,
    Derived(&'static str),
}

impl Default for EffectiveSettings {
    /// Every key at its default, as for an address no entry matches.
    fn default() -> Self {
        Merged::default().finish().0
    }
}

/// Where an effective value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Set by the entry with this `match`.
    Match(String),
    /// Nobody set it; the built-in default applies.
    Default,
    /// Nobody set it; computed from other keys as described.
    Derived(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Match(pattern) => write!(f, "match {pattern:?}"),
            Source::Default => f.write_str("default"),
            Source::Derived(why) => write!(f, "derived: {why}"),
        }
    }
}

/// One row of a [`ResolvedSettings`] report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingEntry {
    /// The TOML key, e.g. `redelivery-delay`.
    pub key: &'static str,
    /// The effective value for display: strings quoted, `none`, `off` or
    /// `unlimited` where a value is absent.
    pub value: String,
    /// Where the value came from.
    pub source: Source,
}

/// The effective settings of an address plus the provenance of every key;
/// `Display` prints the table shown by `rebound config resolve`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedSettings {
    /// The address that was looked up.
    pub address: String,
    /// The merged values.
    pub settings: EffectiveSettings,
    /// One row per key, in [`SETTING_KEYS`] order.
    pub entries: Vec<SettingEntry>,
}

impl fmt::Display for ResolvedSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sources: Vec<String> = self.entries.iter().map(|e| e.source.to_string()).collect();
        let key_width = self
            .entries
            .iter()
            .map(|e| e.key.len())
            .chain([3])
            .max()
            .unwrap_or(0);
        let value_width = self
            .entries
            .iter()
            .map(|e| e.value.chars().count())
            .chain([5])
            .max()
            .unwrap_or(0);
        writeln!(f, "address-settings for {:?}", self.address)?;
        writeln!(f, "{:key_width$}  {:value_width$}  SOURCE", "KEY", "VALUE")?;
        for (entry, source) in self.entries.iter().zip(&sources) {
            writeln!(
                f,
                "{:key_width$}  {:value_width$}  {source}",
                entry.key, entry.value
            )?;
        }
        Ok(())
    }
}

/// All `[[address-settings]]` entries, kept in precedence order.
///
/// The default (empty) repository gives every address the default settings.
pub type SettingsRepository = PatternMap<AddressSettings>;

impl PatternMap<AddressSettings> {
    /// The merged settings for `address`.
    pub fn effective(&self, address: &str) -> EffectiveSettings {
        self.merge(address).finish().0
    }

    /// The merged settings for `address` with the provenance of every key.
    pub fn resolve(&self, address: &str) -> ResolvedSettings {
        let (settings, origins) = self.merge(address).finish();
        let entries = SETTING_KEYS
            .iter()
            .copied()
            .zip(settings.rendered())
            .zip(origins)
            .map(|((key, value), origin)| SettingEntry {
                key,
                value,
                source: match origin {
                    Origin::Match(pattern) => Source::Match(pattern.to_owned()),
                    Origin::Default => Source::Default,
                    Origin::Derived(why) => Source::Derived(why),
                },
            })
            .collect();
        ResolvedSettings {
            address: address.to_owned(),
            settings,
            entries,
        }
    }

    fn merge<'a>(&'a self, address: &'a str) -> Merged<'a> {
        let mut merged = Merged::default();
        for (pattern, settings) in self.matching(address) {
            merged.absorb(pattern.as_str(), settings);
        }
        merged
    }
}

/// Display form of a setting's value.
trait Render {
    fn render(&self, none: &str) -> String;
}

macro_rules! render_with_display {
    ($($ty:ty),*) => {$(
        impl Render for $ty {
            fn render(&self, _none: &str) -> String {
                self.to_string()
            }
        }
    )*};
}
render_with_display!(u32, u64, bool);

impl Render for f64 {
    fn render(&self, _none: &str) -> String {
        // Debug keeps the `.0` that tells a factor from a count.
        format!("{self:?}")
    }
}

impl Render for String {
    fn render(&self, _none: &str) -> String {
        format!("{self:?}")
    }
}

impl Render for AddressFullPolicy {
    fn render(&self, _none: &str) -> String {
        self.as_str().to_owned()
    }
}

impl Render for RoutingType {
    fn render(&self, _none: &str) -> String {
        self.as_str().to_owned()
    }
}

impl Render for RedeliverySchedule {
    fn render(&self, _none: &str) -> String {
        format!("{:?}", self.to_string())
    }
}

impl<T: Render> Render for Option<T> {
    fn render(&self, none: &str) -> String {
        self.as_ref()
            .map_or_else(|| none.to_owned(), |value| value.render(none))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::Pattern;
    use crate::matcher::tests::{address, artemis_compare, pattern};
    use proptest::prelude::*;

    fn repo(entries: Vec<(&str, AddressSettings)>) -> SettingsRepository {
        let mut repo = SettingsRepository::new();
        for (pattern, settings) in entries {
            repo.insert(Pattern::parse(pattern).unwrap(), settings).unwrap();
        }
        repo
    }

    fn source_of(resolved: &ResolvedSettings, key: &str) -> Source {
        resolved
            .entries
            .iter()
            .find(|e| e.key == key)
            .unwrap()
            .source
            .clone()
    }

    fn matched(pattern: &str) -> Source {
        Source::Match(pattern.into())
    }

    #[test]
    fn empty_repository_gives_defaults() {
        let s = SettingsRepository::default().effective("anything");
        assert_eq!(s, EffectiveSettings::default());
        assert_eq!(s.redelivery_delay_ms, 0);
        assert_eq!(s.redelivery_delay_multiplier, 1.0);
        assert_eq!(s.max_redelivery_delay_ms, 0);
        assert_eq!(s.redelivery_collision_avoidance_factor, 0.0);
        assert_eq!(s.max_delivery_attempts, Some(10));
        assert_eq!(s.dead_letter_address, None);
        assert!(!s.auto_create_dead_letter_resources);
        assert_eq!(s.dead_letter_queue_prefix, "DLQ.");
        assert_eq!(s.dead_letter_queue_suffix, "");
        assert_eq!(s.expiry_address, None);
        assert!(!s.auto_create_expiry_resources);
        assert_eq!(s.expiry_queue_prefix, "EXP.");
        assert_eq!(s.expiry_queue_suffix, "");
        assert_eq!(s.expiry_delay_ms, None);
        assert_eq!(s.max_size_bytes, None);
        assert_eq!(s.default_address_routing_type, RoutingType::Anycast);
        assert!(s.auto_create_addresses);
        assert!(s.auto_create_queues);
        assert_eq!(s.max_message_size, 1_048_576);
        assert_eq!(s.redelivery_schedule, None);
        assert_eq!(s.max_redrive, 3);
        assert_eq!(s.max_retry_after_ms, 3_600_000);
        assert_eq!(s.address_full_policy, AddressFullPolicy::Page);
        assert_eq!(s.max_block_time_ms, 30_000);
    }

    #[test]
    fn every_key_is_reported_once() {
        let resolved = SettingsRepository::default().resolve("x");
        let keys: Vec<_> = resolved.entries.iter().map(|e| e.key).collect();
        assert_eq!(keys, SETTING_KEYS);
        assert_eq!(keys.len(), 34);
        assert_eq!(source_of(&resolved, "redelivery-delay"), Source::Default);
        assert_eq!(
            source_of(&resolved, "max-redelivery-delay"),
            Source::Derived("10 × redelivery-delay")
        );
    }

    #[test]
    fn per_field_merge_from_repository_test() {
        // RepositoryTest#testAddressSettingsMergeIdempotence, with
        // expiry-delay standing in for max-expiry-delay.
        let r = repo(vec![
            (
                "foo.*",
                AddressSettings {
                    max_redelivery_delay_ms: Some(10_000),
                    ..Default::default()
                },
            ),
            (
                "foo.0.#",
                AddressSettings {
                    max_redelivery_delay_ms: Some(20_000),
                    expiry_delay_ms: Some(Some(20_000)),
                    ..Default::default()
                },
            ),
        ]);
        let foo0 = r.resolve("foo.0");
        assert_eq!(foo0.settings.max_redelivery_delay_ms, 10_000);
        assert_eq!(foo0.settings.expiry_delay_ms, Some(20_000));
        assert_eq!(source_of(&foo0, "max-redelivery-delay"), matched("foo.*"));
        assert_eq!(source_of(&foo0, "expiry-delay"), matched("foo.0.#"));
        let foox = r.effective("foo.x");
        assert_eq!(foox.max_redelivery_delay_ms, 10_000);
        assert_eq!(foox.expiry_delay_ms, None);
    }

    #[test]
    fn orders_illustration() {
        let r = repo(vec![
            (
                "#",
                AddressSettings {
                    dead_letter_address: Some(Some("DLQ".into())),
                    max_delivery_attempts: Some(Some(10)),
                    redelivery_delay_ms: Some(1000),
                    ..Default::default()
                },
            ),
            (
                "orders.#",
                AddressSettings {
                    redelivery_delay_ms: Some(5000),
                    redelivery_delay_multiplier: Some(2.0),
                    ..Default::default()
                },
            ),
            (
                "orders.eu",
                AddressSettings {
                    max_delivery_attempts: Some(Some(3)),
                    ..Default::default()
                },
            ),
        ]);
        let eu = r.resolve("orders.eu");
        assert_eq!(eu.settings.dead_letter_address.as_deref(), Some("DLQ"));
        assert_eq!(eu.settings.max_delivery_attempts, Some(3));
        assert_eq!(eu.settings.redelivery_delay_ms, 5000);
        assert_eq!(eu.settings.redelivery_delay_multiplier, 2.0);
        assert_eq!(eu.settings.max_redelivery_delay_ms, 50_000);
        assert_eq!(source_of(&eu, "dead-letter-address"), matched("#"));
        assert_eq!(source_of(&eu, "max-delivery-attempts"), matched("orders.eu"));
        assert_eq!(source_of(&eu, "redelivery-delay"), matched("orders.#"));
        assert_eq!(
            source_of(&eu, "max-redelivery-delay"),
            Source::Derived("10 × redelivery-delay")
        );
        assert_eq!(source_of(&eu, "max-redrive"), Source::Default);

        let vip = r.effective("orders.eu.vip");
        assert_eq!(vip.max_delivery_attempts, Some(10));
        assert_eq!(
            (vip.redelivery_delay_ms, vip.redelivery_delay_multiplier),
            (5000, 2.0)
        );

        let billing = r.effective("billing");
        assert_eq!(billing.redelivery_delay_ms, 1000);
        assert_eq!(billing.redelivery_delay_multiplier, 1.0);
        assert_eq!(billing.max_redelivery_delay_ms, 10_000);
    }

    #[test]
    fn inherited_cap_beats_base_delay() {
        let r = repo(vec![
            (
                "#",
                AddressSettings {
                    max_redelivery_delay_ms: Some(10_000),
                    ..Default::default()
                },
            ),
            (
                "slow",
                AddressSettings {
                    redelivery_delay_ms: Some(60_000),
                    ..Default::default()
                },
            ),
        ]);
        let slow = r.effective("slow");
        assert_eq!(
            (slow.redelivery_delay_ms, slow.max_redelivery_delay_ms),
            (60_000, 10_000)
        );
    }

    #[test]
    fn empty_address_unsets_an_inherited_one() {
        let r = repo(vec![
            (
                "#",
                AddressSettings {
                    dead_letter_address: Some(Some("DLQ".into())),
                    expiry_address: Some(Some("ExpiryQueue".into())),
                    ..Default::default()
                },
            ),
            (
                "DLQ",
                AddressSettings {
                    dead_letter_address: Some(None),
                    ..Default::default()
                },
            ),
        ]);
        let dlq = r.resolve("DLQ");
        assert_eq!(dlq.settings.dead_letter_address, None);
        assert_eq!(dlq.settings.expiry_address.as_deref(), Some("ExpiryQueue"));
        assert_eq!(source_of(&dlq, "dead-letter-address"), matched("DLQ"));
        let row = dlq
            .entries
            .iter()
            .find(|e| e.key == "dead-letter-address")
            .unwrap();
        assert_eq!(row.value, "none");
    }

    #[test]
    fn resolved_table_is_aligned() {
        let r = repo(vec![(
            "orders.#",
            AddressSettings {
                redelivery_delay_ms: Some(5000),
                max_delivery_attempts: Some(None),
                redelivery_schedule: Some("5:1000; 9:delete".parse().ok()),
                ..Default::default()
            },
        )]);
        let text = r.resolve("orders.eu").to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "address-settings for \"orders.eu\"");
        assert!(lines[1].starts_with("KEY "), "{text}");
        assert_eq!(lines.len(), 2 + SETTING_KEYS.len());
        let column = lines[1].find("VALUE").unwrap();
        let source_column = lines[1].find("SOURCE").unwrap();
        for line in &lines[1..] {
            assert_eq!(line.chars().nth(column - 1), Some(' '), "{line}");
            assert_eq!(line.chars().nth(source_column - 1), Some(' '), "{line}");
        }
        let row = |key: &str| *lines.iter().find(|l| l.starts_with(&format!("{key} "))).unwrap();
        assert!(row("redelivery-delay").ends_with("match \"orders.#\""));
        assert!(row("max-redelivery-delay").contains(" 50000 "));
        assert!(row("max-redelivery-delay").ends_with("derived: 10 × redelivery-delay"));
        assert!(row("max-delivery-attempts").contains(" unlimited "));
        assert!(row("redelivery-schedule").contains("\"5:1000; 9:delete\""));
        assert!(row("expiry-delay").contains(" off "));
        assert!(row("max-size-bytes").contains(" unlimited "));
        assert!(row("dead-letter-queue-prefix").contains(" \"DLQ.\" "));
        assert!(row("redelivery-delay-multiplier").contains(" 1.0 "));
        assert!(row("default-address-routing-type").contains(" anycast "));
        assert!(row("max-redrive").ends_with(" default"));
    }

    /// Random entries setting (or not) two keys of different kinds.
    fn entries() -> impl Strategy<Value = Vec<(Pattern, Option<u64>, Option<Option<String>>)>> {
        let dla = prop::option::of(prop::option::of("[A-Z]{1,3}"));
        prop::collection::vec((pattern(), prop::option::of(0u64..100), dla), 0..12)
    }

    proptest! {
        #[test]
        fn merge_takes_each_key_from_the_most_specific_setter(entries in entries(), address in address()) {
            let mut r = SettingsRepository::new();
            let mut kept = Vec::new();
            for (pattern, delay, dla) in entries {
                let settings = AddressSettings {
                    redelivery_delay_ms: delay,
                    dead_letter_address: dla.clone(),
                    ..Default::default()
                };
                if r.insert(pattern.clone(), settings).is_ok() {
                    kept.push((pattern, delay, dla));
                }
            }
            // Brute force: among matching entries setting the key, those no
            // other such entry outranks (exact first, then Artemis's
            // comparator); the merged value must be one of theirs.
            fn best<T: Clone + PartialEq + std::fmt::Debug>(
                candidates: Vec<(&Pattern, T)>,
            ) -> Option<Vec<T>> {
                let outranks = |a: &Pattern, b: &Pattern| match (a.is_wildcard(), b.is_wildcard()) {
                    (false, true) => true,
                    (true, true) => artemis_compare(a.as_str(), b.as_str()) < 0,
                    _ => false,
                };
                let winners: Vec<T> = candidates
                    .iter()
                    .filter(|(p, _)| !candidates.iter().any(|(q, _)| outranks(q, p)))
                    .map(|(_, v)| v.clone())
                    .collect();
                (!candidates.is_empty()).then_some(winners)
            }
            let hits: Vec<_> = kept.iter().filter(|(p, _, _)| p.matches(&address)).collect();
            let effective = r.effective(&address);

            let delays = best(hits.iter().filter_map(|(p, d, _)| d.map(|d| (p, d))).collect());
            match delays {
                Some(winners) => prop_assert!(winners.contains(&effective.redelivery_delay_ms)),
                None => prop_assert_eq!(effective.redelivery_delay_ms, 0),
            }
            prop_assert_eq!(effective.max_redelivery_delay_ms, effective.redelivery_delay_ms * 10);

            let dlas = best(hits.iter().filter_map(|(p, _, a)| a.clone().map(|a| (p, a))).collect());
            match dlas {
                Some(winners) => prop_assert!(winners.contains(&effective.dead_letter_address)),
                None => prop_assert_eq!(&effective.dead_letter_address, &None),
            }
        }
    }
}
