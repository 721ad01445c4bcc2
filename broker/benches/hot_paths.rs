//! Micro-benchmarks of the pure functions on the broker's per-message paths:
//! address-settings resolution (every send and every failed delivery resolves
//! its address), the redelivery delay, and selector evaluation (every message
//! offered to a filtered consumer or queue).
//!
//! Run locally with `cargo bench -p rebound-broker --bench hot_paths`; CI only
//! checks that they build (`cargo bench --no-run`): wall-clock numbers on a
//! shared 2-core machine are too noisy to gate on.

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rebound_config::{AddressSettings, Pattern, SettingsRepository};
use rebound_selector::{OwnedValue, Selector};

/// ~50 patterns of the shapes real configs have: exact names, `*` and `#`
/// wildcards at several depths, each setting a different subset of keys.
fn repository() -> SettingsRepository {
    let mut repo = SettingsRepository::new();
    let mut add = |pattern: String, i: u64| {
        let settings = AddressSettings {
            redelivery_delay_ms: i.is_multiple_of(2).then_some(i * 100),
            max_delivery_attempts: i.is_multiple_of(3).then_some(Some(5)),
            dead_letter_address: i.is_multiple_of(5).then(|| Some(format!("DLQ.{i}"))),
            redelivery_delay_multiplier: i.is_multiple_of(7).then_some(2.0),
            ..AddressSettings::default()
        };
        let pattern = Pattern::parse(&pattern).expect("valid pattern");
        repo.insert(pattern, settings).expect("unique pattern");
    };
    add("#".into(), 0);
    for (i, region) in ["eu", "us", "apac", "latam", "mea"].into_iter().enumerate() {
        let i = i as u64 * 10;
        add(format!("orders.{region}.#"), i + 1);
        add(format!("orders.{region}.*"), i + 2);
        add(format!("orders.{region}.priority"), i + 3);
        add(format!("payments.{region}.#"), i + 4);
        add(format!("payments.*.{region}"), i + 5);
        add(format!("events.{region}.*.audit"), i + 6);
        add(format!("events.{region}.#"), i + 7);
        add(format!("inventory.{region}"), i + 8);
        add(format!("inventory.{region}.#"), i + 9);
    }
    add("orders.#".into(), 60);
    add("payments.#".into(), 61);
    add("events.#".into(), 62);
    add("*.dlq".into(), 63);
    repo
}

fn settings_resolution(c: &mut Criterion) {
    let repo = repository();
    assert!(repo.len() >= 49, "{} patterns", repo.len());
    let mut group = c.benchmark_group("SettingsRepository::effective");
    for address in ["orders.eu.priority", "events.us.shop.audit", "unmatched.address"] {
        group.bench_function(address, |b| b.iter(|| repo.effective(black_box(address))));
    }
    group.finish();
}

fn redelivery_delay(c: &mut Criterion) {
    let mut settings = SettingsRepository::new().effective("q");
    settings.redelivery_delay_ms = 100;
    settings.redelivery_delay_multiplier = 2.0;
    settings.max_redelivery_delay_ms = 60_000;
    let mut rng = StdRng::seed_from_u64(1);
    c.bench_function("delay_after_failure", |b| {
        b.iter(|| rebound_broker::redelivery::delay_after_failure(&settings, black_box(4), &mut rng))
    });
    settings.redelivery_collision_avoidance_factor = 0.1;
    c.bench_function("delay_after_failure with jitter", |b| {
        b.iter(|| rebound_broker::redelivery::delay_after_failure(&settings, black_box(4), &mut rng))
    });
}

fn selector_matching(c: &mut Criterion) {
    let properties: HashMap<String, OwnedValue> = [
        ("color", OwnedValue::from("red".to_owned())),
        ("weight", OwnedValue::from(7)),
        ("region", OwnedValue::from("eu-west".to_owned())),
        ("price", OwnedValue::from(12.5)),
        ("express", OwnedValue::from(true)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut group = c.benchmark_group("Selector::matches");
    for text in [
        "color = 'red'",
        "color = 'red' AND weight > 2 AND express",
        "region LIKE 'eu-%' AND price BETWEEN 10 AND 20 OR color IN ('blue', 'green')",
        "missing IS NULL AND NOT (weight < 3)",
    ] {
        let selector = Selector::parse(text).expect("valid selector");
        group.bench_function(text, |b| b.iter(|| selector.matches(black_box(&properties))));
    }
    group.finish();
}

criterion_group!(benches, settings_resolution, redelivery_delay, selector_matching);
criterion_main!(benches);
