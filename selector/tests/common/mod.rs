//! Helpers shared by the integration tests.

use std::collections::BTreeMap;

use rebound_selector::{OwnedValue, Selector};

/// A property map from `(name, value)` pairs.
pub fn props<const N: usize>(pairs: [(&str, OwnedValue); N]) -> BTreeMap<String, OwnedValue> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// Whether `selector` (which must parse) selects a message with `pairs`.
pub fn selects<const N: usize>(selector: &str, pairs: [(&str, OwnedValue); N]) -> bool {
    Selector::parse(selector)
        .unwrap_or_else(|e| panic!("{selector:?}: {e}"))
        .matches(&props(pairs))
}

/// Shorthand for a string value.
pub fn s(text: &str) -> OwnedValue {
    text.to_owned().into()
}
