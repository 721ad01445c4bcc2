//! Entries keyed by [`Pattern`], looked up most specific first.
//!
//! Address-settings and security-settings select their entries for an address
//! the same way: every entry whose `match` matches, in [`Pattern`]'s precedence.
//! They differ only in what they do with the hits — address-settings merge them
//! key by key, security-settings take the first one outright — so the lookup is
//! this one generic map, and each kind of entry adds its own reading on top
//! (`settings.rs`, `security.rs`). Loading is shared too: [`by_pattern`] builds
//! a map from a TOML array of tables, refusing a bad or repeated `match`.

use std::collections::HashMap;

use toml::Spanned;

use crate::error::{ConfigError, Document};
use crate::matcher::Pattern;

/// A second entry used a `match` that is already present.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("duplicate match `{0}`")]
pub struct DuplicatePattern(pub Pattern);

/// Entries of type `T` by pattern, kept in precedence order.
#[derive(Clone, Debug, PartialEq)]
pub struct PatternMap<T> {
    /// Sorted by [`Pattern`]'s ordering: exact patterns first (by text, so
    /// they can be binary-searched), then wildcards most specific first.
    entries: Vec<(Pattern, T)>,
}

impl<T> Default for PatternMap<T> {
    fn default() -> Self {
        PatternMap { entries: Vec::new() }
    }
}

impl<T> PatternMap<T> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry; refuses a pattern that is already present.
    pub fn insert(&mut self, pattern: Pattern, value: T) -> Result<(), DuplicatePattern> {
        match self.entries.binary_search_by(|(p, _)| p.cmp(&pattern)) {
            Ok(_) => Err(DuplicatePattern(pattern)),
            Err(at) => {
                self.entries.insert(at, (pattern, value));
                Ok(())
            }
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All entries, in precedence order.
    pub fn iter(&self) -> impl Iterator<Item = (&Pattern, &T)> {
        self.entries.iter().map(|(p, v)| (p, v))
    }

    /// The entries matching `address`, most specific first: the exact entry
    /// if any, then the matching wildcards.
    pub fn matching<'a>(&'a self, address: &'a str) -> impl Iterator<Item = (&'a Pattern, &'a T)> {
        let wildcards_from = self.entries.partition_point(|(p, _)| !p.is_wildcard());
        let (exact, wildcards) = self.entries.split_at(wildcards_from);
        let exact = exact
            .binary_search_by(|(p, _)| p.as_str().cmp(address))
            .ok()
            .map(|i| &exact[i]);
        exact
            .into_iter()
            .chain(wildcards.iter().filter(move |(p, _)| p.matches(address)))
            .map(|(p, v)| (p, v))
    }

    /// The most specific entry matching `address`, if any.
    pub fn most_specific<'a>(&'a self, address: &'a str) -> Option<(&'a Pattern, &'a T)> {
        self.matching(address).next()
    }
}

/// One table of a `[[section]]` array keyed by `match`, as written.
pub(crate) trait RawEntry {
    /// What the entry becomes once validated.
    type Value;
    /// The `match` string.
    fn pattern(&self) -> &Spanned<String>;
    /// Validates everything but the `match`; `at` is the entry's key path.
    fn value(self, doc: &Document<'_>, at: &str) -> Result<Self::Value, ConfigError>;
}

/// Validates the entries of `[[section]]` into a map: each `match` must parse
/// and appear once (a repeat names the line of the first).
pub(crate) fn by_pattern<R: RawEntry>(
    doc: &Document<'_>,
    section: &str,
    raw: Vec<R>,
) -> Result<PatternMap<R::Value>, ConfigError> {
    let mut map = PatternMap::new();
    let mut first_lines = HashMap::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let at = format!("{section}[{i}]");
        let start = entry.pattern().span().start;
        let fail = |message: String| doc.error(start, Some(format!("{at}.match")), message);
        let pattern = Pattern::parse(entry.pattern().get_ref()).map_err(|e| fail(e.to_string()))?;
        let value = entry.value(doc, &at)?;
        let text = pattern.as_str().to_owned();
        map.insert(pattern, value).map_err(|duplicate| {
            fail(format!(
                "{duplicate}, first defined on line {}",
                first_lines[&text]
            ))
        })?;
        first_lines.insert(text, doc.line(start));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::tests::{address, artemis_compare, pattern};
    use proptest::prelude::*;

    fn map(patterns: &[&str]) -> PatternMap<String> {
        let mut map = PatternMap::new();
        for &text in patterns {
            map.insert(Pattern::parse(text).unwrap(), text.to_owned())
                .unwrap();
        }
        map
    }

    #[test]
    fn duplicate_patterns_are_refused() {
        let mut m = map(&["a.#", "a"]);
        let dup = m.insert(Pattern::parse("a.#").unwrap(), "again".into());
        assert_eq!(dup.unwrap_err().to_string(), "duplicate match `a.#`");
        assert!(m.insert(Pattern::parse("a").unwrap(), "again".into()).is_err());
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn matching_lists_exact_first_then_wildcards() {
        let m = map(&["#", "a.b", "a.*", "a.#", "a.c", "a"]);
        let hits = |address| -> Vec<&str> { m.matching(address).map(|(p, _)| p.as_str()).collect() };
        assert_eq!(hits("a.b"), ["a.b", "a.*", "a.#", "#"]);
        assert_eq!(hits("a"), ["a", "a.#", "#"]);
        assert_eq!(hits("zzz"), ["#"]);
        assert_eq!(m.most_specific("a.c").map(|(_, v)| v.as_str()), Some("a.c"));
        assert_eq!(m.most_specific("a.d").map(|(_, v)| v.as_str()), Some("a.*"));
        assert!(map(&["a.#"]).most_specific("b").is_none());
    }

    proptest! {
        #[test]
        fn most_specific_outranks_every_other_match(
            patterns in prop::collection::vec(pattern(), 0..12),
            address in address(),
        ) {
            let mut m = PatternMap::new();
            for p in patterns {
                let _ = m.insert(p, ());
            }
            let hits: Vec<&Pattern> = m.iter().map(|(p, _)| p).filter(|p| p.matches(&address)).collect();
            match m.most_specific(&address) {
                None => prop_assert!(hits.is_empty()),
                Some((winner, _)) => {
                    prop_assert!(winner.matches(&address));
                    for other in hits.into_iter().filter(|p| *p != winner) {
                        // Exact beats wildcard; among wildcards Artemis's comparator.
                        let ok = match (winner.is_wildcard(), other.is_wildcard()) {
                            (false, _) => true,
                            (true, false) => false,
                            (true, true) => artemis_compare(winner.as_str(), other.as_str()) <= 0,
                        };
                        prop_assert!(ok, "{} won over {} for {}", winner, other, address);
                    }
                }
            }
        }
    }
}
