//! The whole configuration, [`Config`], and its loading from TOML: the
//! broker-wide keys and the `[[address-settings]]` entries here, the
//! `[[addresses]]` in `address.rs`.
//!
//! Loading happens in two steps. serde reads the text into crate-private
//! `Raw*` structs that mirror the file (kebab-case keys, unknown keys refused,
//! byte spans kept); then conversion validates every value and builds the
//! public types. Validation is ours rather than serde's so that messages can
//! say what the value means ("use -1 for unlimited") and point at the value.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::address::{AddressConfig, RawAddress, addresses};
use crate::address_full::GlobalMaxSize;
use crate::check::{self, checked};
use crate::cluster::{ClusterConfig, RawCluster};
use crate::error::{ConfigError, Document};
use crate::limits::{Limits, RawLimits};
use crate::pattern_map::{RawEntry, by_pattern};
use crate::security::{RawSecurityEntry, SecuritySettings};
use crate::settings::{AddressSettings, SettingsRepository, for_each_setting};
use crate::storage::{self, PostgresClientCert, StorageEngine};
use crate::tls::{self, RawTls, TlsConfig};
use crate::users::{RawUser, UserConfig, users};

/// Journal segment sizes `journal-file-size` accepts: 4 KiB to 1 GiB. A
/// segment's writes are held in memory until it is checkpointed, so the top
/// bounds that memory.
pub const JOURNAL_FILE_SIZE_RANGE: std::ops::RangeInclusive<u64> = (4 << 10)..=(1 << 30);

/// The whole broker configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `host:port` the broker listens on; `None` leaves it to the broker.
    pub listen: Option<String>,
    /// `host:port` of the HTTP endpoint (health, metrics); `Some("")` turns it
    /// off; `None` leaves it to the broker.
    pub http_listen: Option<String>,
    /// Host names and addresses the HTTP endpoint answers to besides its own
    /// (`http-allowed-hosts`; see `rebound_broker::http::host`), lowercase. Read at start-up.
    pub http_allowed_hosts: Vec<String>,
    /// Directory of the message store; `None` leaves it to the broker.
    pub data_dir: Option<PathBuf>,
    /// Persist the delivery count before each delivery, so that a crash
    /// cannot make a delivered message look undelivered (costs a write per
    /// delivery).
    pub persist_delivery_count_before_delivery: bool,
    /// How often to check the file for changes, in ms; `None` = the broker's default (5000).
    pub config_reload_period_ms: Option<u64>,
    /// Size of a journal segment in bytes, within [`JOURNAL_FILE_SIZE_RANGE`];
    /// `None` = the store's default (8 MiB). Read at start-up.
    pub journal_file_size: Option<u64>,
    /// `global-max-size`: bytes all addresses together may hold before each
    /// address's `address-full-policy` applies.
    pub global_max_size: GlobalMaxSize,
    /// The engine of the store (`storage`); read at start-up.
    pub storage: StorageEngine,
    /// The database of `storage = "postgres"` (`postgres-url`).
    pub postgres_url: Option<String>,
    /// Most connections to it, within [`POSTGRES_POOL_SIZE_RANGE`](crate::POSTGRES_POOL_SIZE_RANGE)
    /// (`postgres-pool-size`); `None` = the store's default.
    pub postgres_pool_size: Option<usize>,
    /// PEM file with the CAs the database's certificate must chain to
    /// (`postgres-ca-file`): set, every connection uses TLS and verifies the
    /// server; read and checked as the config loads.
    pub postgres_ca_file: Option<PathBuf>,
    /// The certificate and key the broker presents to the database
    /// (`postgres-client-cert-file`, `postgres-client-key-file`); only with
    /// `postgres_ca_file`. Read and checked as the config loads.
    pub postgres_client_cert: Option<PostgresClientCert>,
    /// `[cluster]`: this broker is one node of several on one PostgreSQL
    /// database; `None` = a single broker. Read at start-up.
    pub cluster: Option<ClusterConfig>,
    /// The `[limits]` table; all defaults when absent.
    pub limits: Limits,
    /// The `[[address-settings]]` entries.
    pub address_settings: SettingsRepository,
    /// Addresses (and their queues) to create at start-up.
    pub addresses: Vec<AddressConfig>,
    /// `[tls]`: serve TLS instead of plaintext; `None` = plaintext.
    pub tls: Option<TlsConfig>,
    /// The `[[users]]`; none = security is off (see `allow_anonymous`).
    pub users: Vec<UserConfig>,
    /// Without users, serve anonymous clients on a non-loopback `listen`
    /// address too (`allow-anonymous`); on loopback they are always served.
    pub allow_anonymous: bool,
    /// The `[[security-settings]]` entries: who may do what on which
    /// addresses, when users are configured.
    pub security_settings: SecuritySettings,
}

/// The embedded default configuration (`default.toml`), used when the broker
/// is started without a file. [`Config::embedded_default`] parses it.
pub const DEFAULT_TOML: &str = include_str!("../default.toml");

impl Config {
    /// Reads and parses the file at `path`; errors name the path.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::unreadable(origin.clone(), &e))?;
        Config::parse(&text, &origin)
    }

    /// Parses configuration text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let doc = Document::new(origin, text);
        let raw: RawConfig = toml::from_str(text).map_err(|e| doc.toml_error(&e))?;
        raw.validate(&doc)
    }

    /// The built-in configuration, [`DEFAULT_TOML`].
    pub fn embedded_default() -> Config {
        Config::parse(DEFAULT_TOML, "<embedded default.toml>")
            .expect("the embedded default.toml is valid (checked by a unit test)")
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    listen: Option<Spanned<String>>,
    http_listen: Option<Spanned<String>>,
    #[serde(default)]
    http_allowed_hosts: Vec<Spanned<String>>,
    data_dir: Option<PathBuf>,
    #[serde(default)]
    persist_delivery_count_before_delivery: bool,
    config_reload_period: Option<Spanned<i64>>,
    journal_file_size: Option<Spanned<i64>>,
    global_max_size: Option<Spanned<i64>>,
    storage: Option<Spanned<String>>,
    postgres_url: Option<Spanned<String>>,
    postgres_pool_size: Option<Spanned<i64>>,
    postgres_ca_file: Option<Spanned<PathBuf>>,
    postgres_client_cert_file: Option<Spanned<PathBuf>>,
    postgres_client_key_file: Option<Spanned<PathBuf>>,
    cluster: Option<Spanned<RawCluster>>,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    address_settings: Vec<RawSettingsEntry>,
    #[serde(default)]
    addresses: Vec<RawAddress>,
    tls: Option<Spanned<RawTls>>,
    #[serde(default)]
    users: Vec<RawUser>,
    #[serde(default)]
    allow_anonymous: bool,
    #[serde(default)]
    security_settings: Vec<RawSecurityEntry>,
}

macro_rules! define_raw_settings_entry {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident : $ty:ty = $key:literal,
            $raw:ty => $check:path,
            $fallback:ident $(($why:literal))? = $default:expr $(, none = $none:literal)?;
    )*) => {
        /// One `[[address-settings]]` table as written.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct RawSettingsEntry {
            #[serde(rename = "match")]
            pattern: Spanned<String>,
            $( #[serde(rename = $key)] $field: Option<Spanned<$raw>>, )*
        }

        impl RawEntry for RawSettingsEntry {
            type Value = AddressSettings;

            fn pattern(&self) -> &Spanned<String> {
                &self.pattern
            }

            fn value(self, doc: &Document<'_>, at: &str) -> Result<AddressSettings, ConfigError> {
                Ok(AddressSettings {
                    $( $field: checked(doc, self.$field, $check, || format!("{at}.{}", $key))?, )*
                })
            }
        }
    };
}

for_each_setting!(define_raw_settings_entry);

impl RawConfig {
    fn validate(self, doc: &Document<'_>) -> Result<Config, ConfigError> {
        let tls = match self.tls {
            Some(tls) => {
                let start = tls.span().start;
                Some(tls.into_inner().validate(doc, start)?)
            }
            None => None,
        };
        let postgres_ca_file = checked(doc, self.postgres_ca_file, tls::certificate_file, || {
            "postgres-ca-file".into()
        })?;
        Ok(Config {
            listen: checked(doc, self.listen, check::host_port, || "listen".into())?,
            http_listen: checked(doc, self.http_listen, check::host_port_or_off, || {
                "http-listen".into()
            })?,
            http_allowed_hosts: self
                .http_allowed_hosts
                .into_iter()
                .enumerate()
                .map(|(i, host)| {
                    check::check_one(doc, host, check::host_name, || format!("http-allowed-hosts[{i}]"))
                })
                .collect::<Result<_, _>>()?,
            data_dir: self.data_dir,
            persist_delivery_count_before_delivery: self.persist_delivery_count_before_delivery,
            config_reload_period_ms: checked(doc, self.config_reload_period, check::positive, || {
                "config-reload-period".into()
            })?,
            journal_file_size: checked(doc, self.journal_file_size, check_journal_file_size, || {
                "journal-file-size".into()
            })?,
            global_max_size: checked(doc, self.global_max_size, check::global_max_size, || {
                "global-max-size".into()
            })?
            .unwrap_or_default(),
            storage: checked(doc, self.storage, storage::storage, || "storage".into())?.unwrap_or_default(),
            postgres_url: checked(doc, self.postgres_url, storage::postgres_url, || {
                "postgres-url".into()
            })?,
            postgres_pool_size: checked(doc, self.postgres_pool_size, storage::postgres_pool_size, || {
                "postgres-pool-size".into()
            })?,
            postgres_client_cert: storage::postgres_client_cert(
                doc,
                self.postgres_client_cert_file,
                self.postgres_client_key_file,
                postgres_ca_file.is_some(),
            )?,
            postgres_ca_file,
            cluster: match self.cluster {
                Some(cluster) => {
                    let start = cluster.span().start;
                    Some(cluster.into_inner().validate(doc, start, tls.as_ref())?)
                }
                None => None,
            },
            limits: self.limits.validate(doc)?,
            address_settings: by_pattern(doc, "address-settings", self.address_settings)?,
            addresses: addresses(doc, self.addresses)?,
            tls,
            users: users(doc, self.users)?,
            allow_anonymous: self.allow_anonymous,
            security_settings: by_pattern(doc, "security-settings", self.security_settings)?,
        })
    }
}

/// The validator of `journal-file-size`. It lives with the range it checks
/// against rather than in `check.rs`, which would then import this file.
fn check_journal_file_size(value: i64) -> Result<u64, String> {
    let range = JOURNAL_FILE_SIZE_RANGE;
    u64::try_from(value)
        .ok()
        .filter(|size| range.contains(size))
        .ok_or_else(|| {
            format!(
                "must be between {} and {} bytes (got {value})",
                range.start(),
                range.end()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::QueueConfig;
    use crate::names::MAX_MESSAGE_SIZE_LIMIT;
    use crate::routing_type::RoutingType;
    use crate::schedule::StepAction;
    use crate::settings::Source;

    fn parse(text: &str) -> Config {
        Config::parse(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(text: &str) -> ConfigError {
        Config::parse(text, "test.toml").expect_err("should be refused")
    }

    /// One `[[address-settings]]` entry matching `#` with the given body.
    fn entry_err(body: &str) -> String {
        err(&format!("[[address-settings]]\nmatch = \"#\"\n{body}\n")).to_string()
    }

    #[test]
    fn embedded_default_is_valid_and_sensible() {
        let config = Config::embedded_default();
        assert_eq!(config.listen.as_deref(), Some("127.0.0.1:61616"));
        assert_eq!(config.http_listen.as_deref(), Some("127.0.0.1:8161"));
        assert_eq!(config.data_dir.as_deref(), Some(Path::new("./data")));
        assert!(!config.persist_delivery_count_before_delivery);
        assert_eq!(config.config_reload_period_ms, None);

        let orders = config.address_settings.effective("orders");
        assert_eq!(orders.dead_letter_address.as_deref(), Some("DLQ"));
        assert_eq!(orders.expiry_address.as_deref(), Some("ExpiryQueue"));
        assert_eq!(orders.max_delivery_attempts, Some(10));
        assert_eq!(orders.redelivery_delay_ms, 0);
        for sink in ["DLQ", "ExpiryQueue"] {
            let s = config.address_settings.effective(sink);
            assert_eq!((s.dead_letter_address, s.expiry_address), (None, None), "{sink}");
            assert_eq!(s.max_delivery_attempts, None, "{sink}");
        }

        let admin = ["admin".to_owned()];
        for &permission in crate::Permission::ALL {
            assert!(config.security_settings.allows("any.address", permission, &admin));
            assert!(!config.security_settings.allows("any.address", permission, &[]));
        }

        let names: Vec<_> = config.addresses.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["DLQ", "ExpiryQueue"]);
        for address in &config.addresses {
            assert_eq!(address.routing_type, RoutingType::Anycast);
            let queue = QueueConfig {
                name: address.name.clone(),
                routing_type: RoutingType::Anycast,
                durable: true,
                filter: None,
            };
            assert_eq!(address.queues, [queue]);
        }
    }

    #[test]
    fn commented_out_keys_of_the_default_are_valid() {
        // Uncommenting every `# key = value` line of default.toml must still
        // give a valid file, so the documentation cannot rot.
        let is_key = |k: &str| k.chars().all(|c| c.is_ascii_lowercase() || c == '-');
        let uncommented: String = DEFAULT_TOML
            .lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(rest) if rest.split_once(" = ").is_some_and(|(k, _)| is_key(k)) => rest,
                _ => line,
            })
            .fold(String::new(), |text, line| text + line + "\n");
        assert_ne!(uncommented, DEFAULT_TOML);
        let config = parse(&uncommented);
        let s = config.address_settings.effective("x");
        assert_eq!(config.config_reload_period_ms, Some(5000));
        assert_eq!(config.journal_file_size, Some(8 << 20));
        assert_eq!(config.storage, StorageEngine::Sled);
        assert!(config.postgres_url.is_some());
        assert_eq!(config.postgres_pool_size, Some(8));
        assert_eq!(s.redelivery_delay_multiplier, 2.0);
        assert!(s.redelivery_schedule.is_some());
    }

    #[test]
    fn every_key_can_be_set() {
        let config = parse(
            r##"
            listen = "localhost:5672"
            data-dir = "/var/lib/rebound"
            persist-delivery-count-before-delivery = true
            config-reload-period = 250
            journal-file-size = 65536
            global-max-size = 1048576
            storage = "postgres"
            postgres-url = "postgres://u@db/rebound"
            postgres-pool-size = 8

            [[address-settings]]
            match = "a.*"
            redelivery-delay = 100
            redelivery-delay-multiplier = 2
            max-redelivery-delay = 900
            redelivery-collision-avoidance-factor = 0.5
            max-delivery-attempts = -1
            dead-letter-address = "dead"
            auto-create-dead-letter-resources = true
            dead-letter-queue-prefix = "D-"
            dead-letter-queue-suffix = "-d"
            expiry-address = "old"
            auto-create-expiry-resources = true
            expiry-queue-prefix = "E-"
            expiry-queue-suffix = "-e"
            expiry-delay = 0
            max-size-bytes = 4096
            address-full-policy = "BLOCK"
            max-block-time = 250
            default-address-routing-type = "multicast"
            auto-create-addresses = false
            auto-create-queues = false
            max-message-size = 512
            redelivery-schedule = "2:10; 4:delete"
            max-redrive = 0
            max-retry-after = 60000
            outage-threshold = 5
            outage-failure-ratio = 0.9
            outage-window = 50
            outage-pause = 500
            outage-pause-multiplier = 3.0
            max-outage-pause = 5000
            outage-counts-attempts = true
            id-cache-size = 7
            max-read-page-messages = 20
            max-read-page-bytes = 2048
            "##,
        );
        assert_eq!(config.listen.as_deref(), Some("localhost:5672"));
        assert_eq!(config.data_dir, Some(PathBuf::from("/var/lib/rebound")));
        assert!(config.persist_delivery_count_before_delivery);
        assert_eq!(config.config_reload_period_ms, Some(250));
        assert_eq!(config.journal_file_size, Some(65536));
        assert_eq!(config.global_max_size, GlobalMaxSize::Bytes(1 << 20));
        assert_eq!(config.storage, StorageEngine::Postgres);
        assert_eq!(config.postgres_url.as_deref(), Some("postgres://u@db/rebound"));
        assert_eq!(config.postgres_pool_size, Some(8));
        let resolved = config.address_settings.resolve("a.b");
        assert!(
            resolved
                .entries
                .iter()
                .all(|e| e.source == Source::Match("a.*".into()))
        );
        let s = resolved.settings;
        assert_eq!(
            (
                s.redelivery_delay_ms,
                s.redelivery_delay_multiplier,
                s.max_redelivery_delay_ms
            ),
            (100, 2.0, 900)
        );
        assert_eq!(s.redelivery_collision_avoidance_factor, 0.5);
        assert_eq!(s.max_delivery_attempts, None);
        assert_eq!(s.dead_letter_address.as_deref(), Some("dead"));
        assert!(s.auto_create_dead_letter_resources && s.auto_create_expiry_resources);
        assert_eq!(
            (
                s.dead_letter_queue_prefix.as_str(),
                s.dead_letter_queue_suffix.as_str()
            ),
            ("D-", "-d")
        );
        assert_eq!(s.expiry_address.as_deref(), Some("old"));
        assert_eq!(
            (s.expiry_queue_prefix.as_str(), s.expiry_queue_suffix.as_str()),
            ("E-", "-e")
        );
        assert_eq!((s.expiry_delay_ms, s.max_size_bytes), (Some(0), Some(4096)));
        assert_eq!(
            (s.address_full_policy, s.max_block_time_ms),
            (crate::AddressFullPolicy::Block, 250)
        );
        assert_eq!(s.default_address_routing_type, RoutingType::Multicast);
        assert!(!s.auto_create_addresses && !s.auto_create_queues);
        assert_eq!(
            (
                s.max_message_size,
                s.max_redrive,
                s.max_retry_after_ms,
                s.id_cache_size
            ),
            (512, 0, 60_000, 7)
        );
        assert_eq!((s.max_read_page_messages, s.max_read_page_bytes), (20, 2048));
        assert_eq!(
            s.redelivery_schedule.unwrap().step_for(5),
            Some(&StepAction::Delete)
        );
    }

    #[test]
    fn empty_file_is_an_empty_config() {
        let config = parse("");
        assert_eq!(config.listen, None);
        assert!(config.address_settings.is_empty());
        assert!(config.addresses.is_empty());
    }

    #[test]
    fn empty_strings_unset_inherited_values() {
        let config = parse(
            r##"
            [[address-settings]]
            match = "#"
            dead-letter-address = "DLQ"
            redelivery-schedule = "3:100"
            [[address-settings]]
            match = "raw.#"
            dead-letter-address = ""
            redelivery-schedule = " "
            "##,
        );
        let raw = config.address_settings.resolve("raw.x");
        assert_eq!(raw.settings.dead_letter_address, None);
        assert_eq!(raw.settings.redelivery_schedule, None);
        assert_eq!(raw.entries[5].key, "dead-letter-address");
        assert_eq!(raw.entries[5].source, Source::Match("raw.#".into()));
        let partial = config
            .address_settings
            .iter()
            .find(|(p, _)| p.as_str() == "raw.#")
            .unwrap()
            .1;
        assert_eq!(partial.dead_letter_address, Some(None));
        assert!(
            config
                .address_settings
                .effective("other")
                .redelivery_schedule
                .is_some()
        );
    }

    #[test]
    fn validation_errors_point_at_the_value() {
        let text = "listen = \"0.0.0.0:1\"\n\n[[address-settings]]\nmatch = \"#\"\n\n[[address-settings]]\nmatch = \"a\"\nredelivery-delay = -5\n";
        let e = err(text);
        assert_eq!(
            e.to_string(),
            "test.toml:8:20: address-settings[1].redelivery-delay: must not be negative (got -5)"
        );
        assert_eq!((e.file(), e.line(), e.column()), ("test.toml", Some(8), Some(20)));
        assert_eq!(e.key(), Some("address-settings[1].redelivery-delay"));
        assert_eq!(e.message(), "must not be negative (got -5)");
    }

    #[test]
    fn value_validation_messages() {
        let cases = [
            (
                "max-delivery-attempts = 0",
                "test.toml:3:25: address-settings[0].max-delivery-attempts: must not be 0; use -1 for unlimited",
            ),
            (
                "max-delivery-attempts = -3",
                "test.toml:3:25: address-settings[0].max-delivery-attempts: must be -1 (unlimited) or between 1 and 4294967295 (got -3)",
            ),
            (
                "redelivery-delay-multiplier = 0.5",
                "test.toml:3:31: address-settings[0].redelivery-delay-multiplier: must be a number >= 1.0 (got 0.5)",
            ),
            (
                "outage-failure-ratio = 1.5",
                "test.toml:3:24: address-settings[0].outage-failure-ratio: must be between 0.0 and 1.0 (got 1.5)",
            ),
            (
                "outage-window = 0",
                "test.toml:3:17: address-settings[0].outage-window: must be between 1 and 10000 (got 0)",
            ),
            (
                "outage-pause = 0",
                "test.toml:3:16: address-settings[0].outage-pause: must be greater than 0 (got 0)",
            ),
            (
                "redelivery-delay-multiplier = nan",
                "test.toml:3:31: address-settings[0].redelivery-delay-multiplier: must be a number >= 1.0 (got NaN)",
            ),
            (
                "redelivery-collision-avoidance-factor = 1.5",
                "test.toml:3:41: address-settings[0].redelivery-collision-avoidance-factor: must be between 0.0 and 1.0 (got 1.5)",
            ),
            (
                "max-redelivery-delay = -1",
                "test.toml:3:24: address-settings[0].max-redelivery-delay: must not be negative (got -1)",
            ),
            (
                "expiry-delay = -2",
                "test.toml:3:16: address-settings[0].expiry-delay: must be -1 (off) or >= 0 (got -2)",
            ),
            (
                "max-size-bytes = 0",
                "test.toml:3:18: address-settings[0].max-size-bytes: must be -1 (unlimited) or > 0 (got 0)",
            ),
            (
                "address-full-policy = \"page\"",
                "test.toml:3:23: address-settings[0].address-full-policy: expected \"PAGE\", \"BLOCK\", \"FAIL\" or \"DROP\" (got \"page\")",
            ),
            (
                "max-block-time = 0",
                "test.toml:3:18: address-settings[0].max-block-time: must be greater than 0 (got 0)",
            ),
            (
                "max-message-size = 0",
                "test.toml:3:20: address-settings[0].max-message-size: must be greater than 0 (got 0)",
            ),
            (
                "max-redrive = -1",
                "test.toml:3:15: address-settings[0].max-redrive: must not be negative (got -1)",
            ),
            (
                "max-redrive = 4294967296",
                "test.toml:3:15: address-settings[0].max-redrive: must be at most 4294967295 (got 4294967296)",
            ),
            (
                "default-address-routing-type = \"both\"",
                "test.toml:3:32: address-settings[0].default-address-routing-type: expected `anycast` or `multicast` (got \"both\")",
            ),
            (
                "redelivery-schedule = \"5:100; x:1\"",
                "test.toml:3:23: address-settings[0].redelivery-schedule: invalid schedule: entry 2 `x:1`: the index must be a positive integer",
            ),
            (
                "redelivery-schedule = \"5:delete; 9:100\"",
                "test.toml:3:23: address-settings[0].redelivery-schedule: invalid schedule: entry 2 `9:100`: nothing may follow the terminal step at index 5",
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(entry_err(body), expected, "{body}");
        }
    }

    #[test]
    fn names_and_limits_the_broker_needs_are_checked_at_load() {
        let whitespace = "must not contain whitespace or control characters";
        let cases = [
            (
                "dead-letter-address = \"has space\"".to_owned(),
                format!("test.toml:3:23: address-settings[0].dead-letter-address: address name \"has space\" {whitespace}"),
            ),
            (
                format!("expiry-address = \"{}\"", "e".repeat(256)),
                format!(
                    "test.toml:3:18: address-settings[0].expiry-address: address name \"{}…[truncated 156 bytes]\" must be at most 255 bytes",
                    "e".repeat(100)
                ),
            ),
            (
                "redelivery-schedule = \"2:move(queue:bad name$)\"".to_owned(),
                format!("test.toml:3:23: address-settings[0].redelivery-schedule: invalid schedule: entry 1 `2:move(queue:bad name$)`: the move target `bad name$` {whitespace}"),
            ),
            (
                "dead-letter-queue-prefix = \"D L.\"".to_owned(),
                format!("test.toml:3:28: address-settings[0].dead-letter-queue-prefix: the queue names made with it {whitespace}"),
            ),
            (
                format!("expiry-queue-suffix = \"{}\"", "s".repeat(255)),
                "test.toml:3:23: address-settings[0].expiry-queue-suffix: the queue names made with it must be at most 255 bytes".to_owned(),
            ),
            (
                "max-message-size = 99999999999".to_owned(),
                format!(
                    "test.toml:3:20: address-settings[0].max-message-size: must be at most {MAX_MESSAGE_SIZE_LIMIT} bytes, the largest message the store keeps (got 99999999999)"
                ),
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(entry_err(&body), expected, "{body}");
        }
        let at_limit = parse(&format!(
            "[[address-settings]]\nmatch = \"#\"\nmax-message-size = {MAX_MESSAGE_SIZE_LIMIT}\nexpiry-queue-prefix = \"\""
        ));
        assert_eq!(
            at_limit.address_settings.effective("a").max_message_size,
            MAX_MESSAGE_SIZE_LIMIT
        );
    }

    #[test]
    fn serde_errors_name_line_and_key() {
        let cases = [
            (
                "bogus = 1",
                "test.toml:1:1: bogus: unknown field `bogus`, expected one of `listen`, `http-listen`, `http-allowed-hosts`, `data-dir`, `persist-delivery-count-before-delivery`, `config-reload-period`, `journal-file-size`, `global-max-size`, `storage`, `postgres-url`, `postgres-pool-size`, `postgres-ca-file`, `postgres-client-cert-file`, `postgres-client-key-file`, `cluster`, `limits`, `address-settings`, `addresses`, `tls`, `users`, `allow-anonymous`, `security-settings`",
            ),
            (
                "listen = 61616",
                "test.toml:1:10: listen: invalid type: integer `61616`, expected a string",
            ),
            (
                "persist-delivery-count-before-delivery = \"yes\"",
                "test.toml:1:42: persist-delivery-count-before-delivery: invalid type: string \"yes\", expected a boolean",
            ),
            (
                "[[address-settings]]\nmatch = \"#\"\nredelivery-delay = \"5s\"",
                "test.toml:3:20: address-settings[0].redelivery-delay: invalid type: string \"5s\", expected i64",
            ),
            (
                "[[address-settings]]\nmatch = 5",
                "test.toml:2:9: address-settings[0].match: invalid type: integer `5`, expected a string",
            ),
            (
                "[[address-settings]]\nredelivery-delay = 5",
                "test.toml:1:1: address-settings[0]: missing field `match`",
            ),
            (
                "[[addresses]]\nname = \"a\"\n[[addresses.queues]]\nname = \"q\"\ndurable = 1",
                "test.toml:5:11: addresses[0].queues[0].durable: invalid type: integer `1`, expected a boolean",
            ),
            (
                "[[addresses]]\nname = \"a\"\n[[addresses.queues]]\nname = \"q\"\nexclusive = true",
                "test.toml:5:1: addresses[0].queues[0].exclusive: unknown field `exclusive`, expected one of `name`, `routing-type`, `durable`, `filter`",
            ),
            (
                "address-settings = 3",
                "test.toml:1:20: address-settings: invalid type: integer `3`, expected a sequence",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(err(text).to_string(), expected, "{text}");
        }
        let unknown = err("[[address-settings]]\nmatch = \"#\"\n\n  redelivery-dealy = 5\n");
        assert_eq!((unknown.line(), unknown.column()), (Some(4), Some(3)));
        assert_eq!(unknown.key(), Some("address-settings[0].redelivery-dealy"));
        assert!(
            unknown
                .message()
                .starts_with("unknown field `redelivery-dealy`, expected one of `match`, `redelivery-delay`")
        );
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let e = err("listen = \"a:1\"\n[[address-settings]\nmatch = \"#\"\n");
        assert_eq!((e.file(), e.line(), e.key()), ("test.toml", Some(2), None));
        let e = err("a = 1\nlisten =\n");
        assert_eq!(e.line(), Some(2));
        assert!(e.to_string().starts_with("test.toml:2:"), "{e}");
        let e = err("listen = \"x:1\"\nlisten = \"y:2\"\n");
        assert_eq!(e.line(), Some(2), "{e}");
    }

    #[test]
    fn pattern_errors() {
        let cases = [
            (
                "a.#.b",
                "test.toml:2:9: address-settings[0].match: `#` may only be the last word (in `a.#.b`)",
            ),
            (
                "news*",
                "test.toml:2:9: address-settings[0].match: wildcards must be whole words, `news*` is neither a word nor a wildcard",
            ),
            (
                "a..b",
                "test.toml:2:9: address-settings[0].match: empty word in `a..b` (leading, trailing or doubled `.`)",
            ),
            (
                "",
                "test.toml:2:9: address-settings[0].match: the pattern is empty",
            ),
        ];
        for (pattern, expected) in cases {
            let text = format!("[[address-settings]]\nmatch = \"{pattern}\"\n");
            assert_eq!(err(&text).to_string(), expected);
        }
    }

    #[test]
    fn duplicate_match_names_the_second_line() {
        let text = "[[address-settings]]\nmatch = \"a.#\"\n\n[[address-settings]]\nmatch = \"b\"\n\n[[address-settings]]\nmatch = \"a.#\"\n";
        assert_eq!(
            err(text).to_string(),
            "test.toml:8:9: address-settings[2].match: duplicate match `a.#`, first defined on line 2"
        );
    }

    #[test]
    fn a_cluster_table_names_its_node_and_lease() {
        assert_eq!(parse("").cluster, None);
        let config = parse("storage = \"postgres\"\n[cluster]\nnode-id = \"n1\"\n");
        let cluster = config.cluster.expect("a [cluster] table");
        assert_eq!(cluster.node_id, "n1");
        assert_eq!(cluster.advertise, None);
        assert_eq!(cluster.lease, crate::DEFAULT_CLUSTER_LEASE);
        let cluster = parse("[cluster]\nnode-id = \"n2\"\nadvertise = \"10.0.0.2:61616\"\nlease = \"2s\"\n")
            .cluster
            .expect("a [cluster] table");
        assert_eq!(cluster.advertise.as_deref(), Some("10.0.0.2:61616"));
        assert_eq!(cluster.lease, std::time::Duration::from_secs(2));
    }

    #[test]
    fn cluster_errors_name_line_and_key() {
        assert_eq!(
            err("\n[cluster]\nlease = \"2s\"\n").to_string(),
            "test.toml:2:1: cluster.node-id: [cluster] needs `node-id`, this node's unique and stable name"
        );
        assert_eq!(
            err("[cluster]\nnode-id = \"a b\"\n").to_string(),
            "test.toml:2:11: cluster.node-id: must be 1 to 64 letters, digits, '-', '_' or '.' (got \"a b\")"
        );
        assert_eq!(
            err("[cluster]\nnode-id = \"n\"\nlease = \"10\"\n").to_string(),
            "test.toml:3:9: cluster.lease: must be a duration such as \"10s\" or \"2500ms\" (got \"10\")"
        );
        assert_eq!(
            err("[cluster]\nnode-id = \"n\"\nadvertise = \"nowhere\"\n").key(),
            Some("cluster.advertise")
        );
        assert_eq!(
            err("[cluster]\nnode-id = \"n\"\nnodes = 3\n").key(),
            Some("cluster.nodes")
        );
    }

    #[test]
    fn broker_level_errors() {
        assert_eq!(
            err("listen = \"61616\"").to_string(),
            "test.toml:1:10: listen: expected \"host:port\" (got \"61616\")"
        );
        assert_eq!(err("listen = \"h:99999\"").key(), Some("listen"));
        assert_eq!(
            err("\nstorage = \"pg\"").to_string(),
            "test.toml:2:11: storage: must be \"sled\" or \"postgres\" (got \"pg\")"
        );
        assert_eq!(err("postgres-url = \"db:5432\"").key(), Some("postgres-url"));
        let missing = err("postgres-ca-file = \"/nonexistent/rebound/ca.pem\"").to_string();
        assert!(
            missing.starts_with(
                "test.toml:1:20: postgres-ca-file: /nonexistent/rebound/ca.pem: cannot read file: "
            ),
            "{missing}"
        );
        assert_eq!(
            err("postgres-pool-size = 1").to_string(),
            "test.toml:1:22: postgres-pool-size: must be between 2 and 256 (got 1)"
        );
        assert_eq!(err("listen = \":1\"").key(), Some("listen"));
        assert!(Config::parse("listen = \"[::1]:5672\"", "t").is_ok());
        assert_eq!(
            err("http-listen = \"8161\"").to_string(),
            "test.toml:1:15: http-listen: expected \"host:port\" (got \"8161\")"
        );
        assert_eq!(parse("http-listen = \"\"").http_listen.as_deref(), Some(""));
        assert_eq!(
            err("config-reload-period = 0").to_string(),
            "test.toml:1:24: config-reload-period: must be greater than 0 (got 0)"
        );
        assert_eq!(
            err("journal-file-size = 100").to_string(),
            "test.toml:1:21: journal-file-size: must be between 4096 and 1073741824 bytes (got 100)"
        );
        assert_eq!(err("journal-file-size = -1").key(), Some("journal-file-size"));
        assert_eq!(parse("").global_max_size, GlobalMaxSize::Auto);
        assert_eq!(
            parse("global-max-size = -1").global_max_size,
            GlobalMaxSize::Unlimited
        );
        assert_eq!(
            err("global-max-size = 0").to_string(),
            "test.toml:1:19: global-max-size: must be -1 (unlimited) or > 0 (got 0)"
        );
    }

    #[test]
    fn limits_default_and_are_checked_where_written() {
        assert_eq!(parse("").limits, Limits::default());
        assert_eq!(Config::embedded_default().limits, Limits::default());
        let limits = parse("[limits]\nmax-ids-per-settle = 5\nmax-open-transactions = 2\n").limits;
        assert_eq!((limits.max_ids_per_settle, limits.max_open_transactions), (5, 2));
        assert_eq!(
            limits.max_unread_responses,
            Limits::default().max_unread_responses
        );
        assert_eq!(
            err("[limits]\nmax-transaction-bytes = 0").to_string(),
            "test.toml:2:25: limits.max-transaction-bytes: must be greater than 0 (got 0)"
        );
        assert!(
            err("[limits]\nmax-ids = 5")
                .to_string()
                .starts_with("test.toml:2:1: limits.max-ids: unknown field")
        );
    }

    #[test]
    fn max_properties_bytes_is_at_most_what_the_store_keeps() {
        assert_eq!(Limits::default().max_properties_bytes, 65536);
        let limits = parse("[limits]\nmax-properties-bytes = 65536\nmax-selector-length = 10\n").limits;
        assert_eq!(
            (limits.max_properties_bytes, limits.max_selector_length),
            (65536, 10)
        );
        assert_eq!(
            err("[limits]\nmax-properties-bytes = 65537").to_string(),
            "test.toml:2:24: limits.max-properties-bytes: must be at most 65536 bytes, \
             the most properties the store keeps with a message (got 65537)"
        );
    }

    #[test]
    fn load_names_the_path() {
        let dir = std::env::temp_dir().join(format!("rebound-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.toml");
        std::fs::write(&good, "listen = \"127.0.0.1:1\"\n").unwrap();
        assert_eq!(
            Config::load(&good).unwrap().listen.as_deref(),
            Some("127.0.0.1:1")
        );

        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "\nmax = 1\n").unwrap();
        let e = Config::load(&bad).unwrap_err();
        assert_eq!(e.file(), bad.display().to_string());
        assert!(
            e.to_string()
                .starts_with(&format!("{}:2:1: max: unknown field", bad.display())),
            "{e}"
        );

        let missing = dir.join("missing.toml");
        let e = Config::load(&missing).unwrap_err();
        assert_eq!((e.line(), e.key()), (None, None));
        assert!(
            e.to_string()
                .starts_with(&format!("{}: cannot read file: ", missing.display())),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
