//! The address-settings in force, and a cache of their effect per address.
//!
//! Resolving an address against the repository walks every matching pattern; a
//! send and every failed delivery need the result, so it is kept per address until
//! the settings change (a reload replaces the repository and empties the cache at
//! once, and the next lookup sees the new values).
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rebound_config::{Config, EffectiveSettings, Limits, ResolvedSettings, SettingsRepository};

use crate::memory;

/// The broker's settings: address-settings and the broker-wide switches that a
/// reload may change.
pub struct Settings {
    repository: RwLock<Arc<SettingsRepository>>,
    cache: Mutex<HashMap<String, Arc<EffectiveSettings>>>,
    persist_count_before_delivery: AtomicBool,
    limits: RwLock<Limits>,
    /// `global-max-size` in bytes; `u64::MAX` = unlimited.
    global_max_size: AtomicU64,
}

impl Settings {
    pub fn new(config: &Config) -> Settings {
        Settings {
            repository: RwLock::new(Arc::new(config.address_settings.clone())),
            cache: Mutex::new(HashMap::new()),
            persist_count_before_delivery: AtomicBool::new(config.persist_delivery_count_before_delivery),
            limits: RwLock::new(config.limits),
            global_max_size: AtomicU64::new(global_max_size(config)),
        }
    }

    /// The effective address-settings of an address.
    pub fn for_address(&self, address: &str) -> Arc<EffectiveSettings> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = cache.get(address) {
            return s.clone();
        }
        let s = Arc::new(self.repository().effective(address));
        cache.insert(address.to_owned(), s.clone());
        s
    }

    /// Every address an `address-settings` entry names as its dead-letter address.
    pub fn dead_letter_addresses(&self) -> HashSet<String> {
        self.repository()
            .iter()
            .filter_map(|(_, entry)| entry.dead_letter_address.clone().flatten())
            .collect()
    }

    /// The effective settings of an address with where each value came from.
    pub fn resolve(&self, address: &str) -> ResolvedSettings {
        self.repository().resolve(address)
    }

    /// `persist-delivery-count-before-delivery`.
    pub fn persist_count_before_delivery(&self) -> bool {
        self.persist_count_before_delivery.load(Ordering::Relaxed)
    }

    /// The `[limits]` in force.
    pub fn limits(&self) -> Limits {
        *self.limits.read().unwrap_or_else(|e| e.into_inner())
    }

    /// `global-max-size` in bytes (the default resolved); `None` = unlimited.
    pub fn global_max_size(&self) -> Option<u64> {
        Some(self.global_max_size.load(Ordering::Relaxed)).filter(|&bytes| bytes != u64::MAX)
    }

    /// Puts a new config's settings in force.
    pub fn replace(&self, config: &Config) {
        *self.repository.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(config.address_settings.clone());
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.persist_count_before_delivery
            .store(config.persist_delivery_count_before_delivery, Ordering::Relaxed);
        *self.limits.write().unwrap_or_else(|e| e.into_inner()) = config.limits;
        self.global_max_size
            .store(global_max_size(config), Ordering::Relaxed);
    }

    fn repository(&self) -> Arc<SettingsRepository> {
        self.repository.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A config's `global-max-size` in bytes, `u64::MAX` for unlimited.
fn global_max_size(config: &Config) -> u64 {
    memory::global_max_size(config.global_max_size).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, "test.toml").unwrap()
    }

    #[test]
    fn a_replaced_config_is_seen_at_once_despite_the_cache() {
        let settings = Settings::new(&config(
            "[[address-settings]]\nmatch = \"#\"\nmax-delivery-attempts = 5\n",
        ));
        assert_eq!(settings.for_address("orders").max_delivery_attempts, Some(5));
        settings.replace(&config(
            "persist-delivery-count-before-delivery = true\n[[address-settings]]\nmatch = \"#\"\nmax-delivery-attempts = 2\n",
        ));
        assert_eq!(settings.for_address("orders").max_delivery_attempts, Some(2));
        assert!(settings.persist_count_before_delivery());
        assert!(
            settings.global_max_size().is_some(),
            "half of the memory by default"
        );
        settings.replace(&config("global-max-size = -1\n"));
        assert_eq!(settings.global_max_size(), None);
    }
}
