//! rebound's configuration: the TOML file, Artemis-style address-settings
//! matching and merging, and validation.
//!
//! The broker reads one TOML file (or, without one, the embedded
//! [`DEFAULT_TOML`]). Besides a few broker-wide keys it holds
//! `[[address-settings]]` entries, which work like Artemis's: each applies to
//! the addresses its `match` pattern matches, and an address's effective
//! settings are merged key by key from the most specific matching entry
//! that sets the key. [`SettingsRepository::resolve`] also tells where each
//! value came from, which is what `rebound config resolve` prints.
//!
//! Errors point into the file: `rebound.toml:12:1:
//! address-settings[2].redelivery-delay: must not be negative (got -5)`.
//! A config that loads is one the broker can carry out: every address and
//! queue name (declared, dead-letter, expiry, a schedule's move target) obeys
//! the broker's name rule ([`check_name`]), every queue filter parses, and
//! `max-message-size` fits the store. `rebound config check`, `serve` and a
//! reload all run exactly this validation.
//!
//! | file | what |
//! |---|---|
//! | `model.rs` | `Config` and its loading from TOML: the broker-wide keys and the `[[address-settings]]` |
//! | `settings.rs` | address-settings: partial entries, merging, and where each value came from |
//! | `matcher.rs` | match patterns and their precedence |
//! | `pattern_map.rs` | entries keyed by pattern, looked up most specific first |
//! | `check.rs` | validators: a raw TOML value in, the typed value or a message out |
//! | `schedule.rs` | step redelivery schedules (`redelivery-schedule`) |
//! | `address_full.rs` | what a full address does: `address-full-policy`, `global-max-size` |
//! | `routing_type.rs` | `RoutingType`, which schedules, settings and declarations share |
//! | `address.rs` | `[[addresses]]`: the addresses and queues to create at start-up |
//! | `security.rs` | `[[security-settings]]`: which roles hold which permission on which addresses |
//! | `users.rs` | `[[users]]`: who may log in, how, and with which roles |
//! | `tls.rs` | `[tls]`: the broker's certificate and key, and the CA of client certificates |
//! | `cluster.rs` | `[cluster]`: this broker as one node of several sharing a database |
//! | `limits.rs` | `[limits]`: bounds on what one client can make the broker hold or do |
//! | `storage.rs` | `storage` and the `postgres-*` keys: where the durable state lives |
//! | `names.rs` | the rule for address and queue names; the largest message and properties sizes |
//! | `text.rs` | how much of a user's text is repeated or kept, cut with a marker |
//! | `error.rs` | `ConfigError`: every loading error, pointing at its spot in the file |
//!
//! # Format
//!
//! All keys are kebab-case and optional; unknown keys are errors.
//!
//! ```toml
//! listen = "127.0.0.1:61616"      # "host:port"
//! http-listen = "127.0.0.1:8161"  # health and metrics over HTTP; "" = off
//! http-allowed-hosts = ["console.example.com"]  # Host names it answers to besides its own
//! data-dir = "./data"
//! persist-delivery-count-before-delivery = false
//! config-reload-period = 5000     # ms between checks of the file (default 5000)
//! journal-file-size = 8388608     # bytes per journal segment (default 8 MiB)
//! storage = "sled"                # or "postgres": the store in a PostgreSQL database
//! postgres-url = "postgres://rebound@127.0.0.1:5432/rebound"  # with storage = "postgres"
//! postgres-pool-size = 8          # connections to it (2 to 256, default 8)
//! postgres-ca-file = "ca.pem"     # TLS to it, verifying its certificate (default: plain)
//! postgres-client-cert-file = "db-client.pem"  # a certificate to present to it (with postgres-ca-file)
//! postgres-client-key-file = "db-client.key"   # its private key (both or neither)
//! allow-anonymous = false         # without [[users]]: serve anyone on a non-loopback listen too
//!
//! [cluster]                       # optional, with storage = "postgres"; see the `cluster` module
//! node-id = "node-1"
//! lease = "10s"
//! ca-file = "nodes-ca.pem"        # with [tls]: the other nodes' CA (default: [tls] client-ca-file)
//! secret-file = "cluster.secret"  # with [tls]: lets nodes vouch for certificate callers they forward
//!
//! [limits]                        # bounds against abusive clients (see default.toml)
//! max-ids-per-settle = 10000
//!
//! [tls]                           # optional; see the `tls` module
//! # cert-file = "server.pem"
//! # key-file = "server.key"
//!
//! [[users]]                       # optional; none = no login ([`UserConfig`])
//! name = "alice"
//! password-hash = "$argon2id$v=19$..."  # `rebound user hash-password`
//! roles = ["producers"]
//!
//! [[address-settings]]
//! match = "#"                     # every address
//! dead-letter-address = "DLQ"
//! max-delivery-attempts = 10      # -1 = unlimited
//! redelivery-delay = 1000         # ms
//!
//! [[address-settings]]
//! match = "orders.#"              # orders, orders.eu, orders.eu.vip, ...
//! redelivery-delay = 5000
//! redelivery-delay-multiplier = 2.0
//! redelivery-schedule = "3:1000; 10:move(queue:parked.$)"
//!
//! [[address-settings]]
//! match = "orders.eu"             # exact: beats every wildcard
//! max-delivery-attempts = 3
//!
//! [[security-settings]]          # with [[users]]: who may do what (see `security`)
//! match = "orders.#"
//! send = ["producer"]
//! consume = ["consumer"]
//!
//! [[addresses]]
//! name = "orders.eu"
//! routing-type = "anycast"        # or "multicast"; default anycast
//!   [[addresses.queues]]
//!   name = "orders.eu"
//!   durable = true                # default true
//!   filter = "color = 'red'"      # optional selector, checked at load
//! ```
//!
//! Here `orders.eu` gets 3 attempts (exact entry), a 5000 ms delay doubling
//! per failure (`orders.#`), dead-letter address `DLQ` (`#`) and a maximum
//! delay of 50 000 ms (derived: 10 × the merged delay).
//!
//! `[[security-settings]]` ([`security`]) use the same `match` patterns, but the
//! most specific matching entry decides alone: they give, per permission, the
//! roles that hold it. Both kinds of entry live in a [`PatternMap`].
//!
//! The fields of [`EffectiveSettings`] document every address-settings key
//! and its default ([`settings::SETTING_KEYS`] lists the TOML names);
//! [`matcher`] describes the pattern syntax and precedence, [`schedule`] the
//! `redelivery-schedule` format. `default.toml` documents every key in place.
//!
//! ```
//! use rebound_config::{Config, Source};
//!
//! let config = Config::parse(r##"
//! [[address-settings]]
//! match = "orders.#"
//! redelivery-delay = 5000
//! "##, "example.toml").unwrap();
//! let resolved = config.address_settings.resolve("orders.eu");
//! assert_eq!(resolved.settings.max_redelivery_delay_ms, 50_000);
//! assert_eq!(resolved.entries[0].source, Source::Match("orders.#".into()));
//! ```

mod address;
mod address_full;
mod check;
pub mod cluster;
mod error;
mod limits;
pub mod matcher;
mod model;
mod names;
pub mod pattern_map;
mod routing_type;
pub mod schedule;
pub mod security;
pub mod settings;
pub mod storage;
mod text;
pub mod tls;
mod users;

pub use address::{AddressConfig, QueueConfig};
pub use address_full::{AddressFullPolicy, GlobalMaxSize, UnknownAddressFullPolicy};
pub use cluster::{
    CLUSTER_LEASE_RANGE, ClusterConfig, DEFAULT_CLUSTER_LEASE, MAX_NODE_ID_BYTES, MIN_SECRET_BYTES,
    NEEDS_A_CA,
};
pub use error::ConfigError;
pub use limits::Limits;
pub use matcher::{Pattern, PatternError};
pub use model::{Config, DEFAULT_TOML, JOURNAL_FILE_SIZE_RANGE};
pub use names::{MAX_MESSAGE_SIZE_LIMIT, MAX_NAME_BYTES, MAX_PROPERTIES_BYTES_LIMIT, check_name};
pub use pattern_map::{DuplicatePattern, PatternMap};
pub use routing_type::{RoutingType, UnknownRoutingType};
pub use schedule::{MoveKind, MoveTarget, RedeliverySchedule, ScheduleError, StepAction};
pub use security::{Permission, ResolvedSecurity, RoleGrants, SecuritySettings};
pub use settings::{
    AddressSettings, EffectiveSettings, ResolvedSettings, SettingEntry, SettingsRepository, Source,
};
pub use storage::{POSTGRES_POOL_SIZE_RANGE, PostgresClientCert, StorageEngine};
pub use text::{EXCERPT_BYTES, clip, escape_controls, excerpt};
pub use tls::TlsConfig;
pub use users::UserConfig;
