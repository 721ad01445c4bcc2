//! Address-settings match patterns and their precedence.
//!
//! Artemis selects address-settings by matching the address against the
//! `match` of every entry, then merges the hits from most to least specific.
//! That order is the whole point of the feature, so it lives here, next to
//! the syntax, as the [`Ord`] of [`Pattern`]: sorting patterns ascending puts
//! the most specific first.
//!
//! Syntax: words are separated by `.`, `*` stands for exactly one word and
//! `#` for zero or more words. Unlike Artemis we insist that wildcards are
//! whole words (`news*` is refused, not treated as a prefix) and that `#` is
//! the last word, so every accepted pattern means what it looks like.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Matches exactly one word.
const ONE_WORD: &str = "*";
/// Matches zero or more words; only allowed as the last word.
const ANY_WORDS: &str = "#";

/// Why a `match` string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The pattern is the empty string.
    #[error("the pattern is empty")]
    Empty,
    /// Two dots in a row, or a leading or trailing dot.
    #[error("empty word in `{0}` (leading, trailing or doubled `.`)")]
    EmptyWord(String),
    /// `#` somewhere other than the last word.
    #[error("`#` may only be the last word (in `{0}`)")]
    AnyWordsNotLast(String),
    /// A wildcard glued to other characters, like `news*`.
    #[error("wildcards must be whole words, `{0}` is neither a word nor a wildcard")]
    PartialWildcard(String),
}

/// A validated address-settings `match` string.
///
/// Equality is by text. The ordering is precedence, most specific first:
///
/// 1. patterns without wildcards (they only ever match themselves);
/// 2. patterns with `*` but no `#`, compared word by word from the left: at
///    the first position where one has `*` and the other a literal word, the
///    literal wins; if one runs out of words first, the longer one wins;
/// 3. patterns with `#`: the longer string wins; at equal length the
///    word-by-word rule of 2. decides.
///
/// Remaining ties (which never involve two patterns matching the same
/// address) are broken by the pattern text, making this a total order.
/// Steps 1–3 are Artemis's `MatchComparator`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pattern {
    text: String,
}

impl Pattern {
    /// Parses and validates a pattern.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        if text.is_empty() {
            return Err(PatternError::Empty);
        }
        let mut words = text.split('.').peekable();
        while let Some(word) = words.next() {
            if word.is_empty() {
                return Err(PatternError::EmptyWord(text.to_owned()));
            }
            if word == ANY_WORDS && words.peek().is_some() {
                return Err(PatternError::AnyWordsNotLast(text.to_owned()));
            }
            if word != ONE_WORD && word != ANY_WORDS && word.contains(['*', '#']) {
                return Err(PatternError::PartialWildcard(word.to_owned()));
            }
        }
        Ok(Pattern {
            text: text.to_owned(),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern contains `*` or `#`; if not, it only matches the
    /// address spelled the same.
    pub fn is_wildcard(&self) -> bool {
        self.tier() != Tier::Exact
    }

    /// Whether `address` is matched. `*` needs a non-empty word; `#` also
    /// matches zero words, so `a.b.#` matches `a.b` but not `a.babc`.
    pub fn matches(&self, address: &str) -> bool {
        let mut address_words = address.split('.');
        for word in self.words() {
            match (word, address_words.next()) {
                (ANY_WORDS, _) => return true,
                (ONE_WORD, Some(actual)) if !actual.is_empty() => {}
                (literal, Some(actual)) if literal == actual => {}
                _ => return false,
            }
        }
        address_words.next().is_none()
    }

    fn words(&self) -> std::str::Split<'_, char> {
        self.text.split('.')
    }

    fn tier(&self) -> Tier {
        if self.text.ends_with(ANY_WORDS) {
            Tier::AnyWords
        } else if self.words().any(|w| w == ONE_WORD) {
            Tier::OneWord
        } else {
            Tier::Exact
        }
    }

    /// Word by word from the left, a literal beats `*`; the pattern with more
    /// words wins if all shared positions agree.
    fn cmp_words(&self, other: &Self) -> Ordering {
        let mut left = self.words();
        let mut right = other.words();
        loop {
            match (left.next(), right.next()) {
                (None, None) => return Ordering::Equal,
                (Some(_), None) => return Ordering::Less,
                (None, Some(_)) => return Ordering::Greater,
                (Some(l), Some(r)) => match (l == ONE_WORD, r == ONE_WORD) {
                    (false, true) => return Ordering::Less,
                    (true, false) => return Ordering::Greater,
                    _ => {}
                },
            }
        }
    }
}

/// Coarse precedence classes, most specific first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    Exact,
    OneWord,
    AnyWords,
}

impl Ord for Pattern {
    fn cmp(&self, other: &Self) -> Ordering {
        let tier = self.tier();
        tier.cmp(&other.tier())
            .then_with(|| match tier {
                Tier::Exact => Ordering::Equal,
                Tier::OneWord => self.cmp_words(other),
                Tier::AnyWords => {
                    (other.text.len().cmp(&self.text.len())).then_with(|| self.cmp_words(other))
                }
            })
            .then_with(|| self.text.cmp(&other.text))
    }
}

impl PartialOrd for Pattern {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for Pattern {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pattern::parse(s)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(text: &str) -> Pattern {
        Pattern::parse(text).unwrap()
    }

    /// Most specific first, as the repository would merge them.
    fn ranked<'a>(patterns: &[&'a str], address: &str) -> Vec<&'a str> {
        let mut hits: Vec<_> = patterns
            .iter()
            .copied()
            .filter(|t| p(t).matches(address))
            .collect();
        hits.sort_by_key(|t| p(t));
        hits
    }

    #[test]
    fn refuses_malformed_patterns() {
        use PatternError::*;
        let err = |t: &str| Pattern::parse(t).unwrap_err();
        assert_eq!(err(""), Empty);
        assert_eq!(err("a..b"), EmptyWord("a..b".into()));
        assert_eq!(err(".a"), EmptyWord(".a".into()));
        assert_eq!(err("a."), EmptyWord("a.".into()));
        assert_eq!(err("a.#.b"), AnyWordsNotLast("a.#.b".into()));
        assert_eq!(err("hjhjhjhjh.#.hhh"), AnyWordsNotLast("hjhjhjhjh.#.hhh".into()));
        assert_eq!(err("#.#"), AnyWordsNotLast("#.#".into()));
        assert_eq!(err("news*"), PartialWildcard("news*".into()));
        assert_eq!(err("a.b#"), PartialWildcard("b#".into()));
        assert_eq!(err("a.**"), PartialWildcard("**".into()));
        assert!(err("news*").to_string().contains("whole words"));
    }

    #[test]
    fn accepts_well_formed_patterns() {
        for t in [
            "#",
            "*",
            "a",
            "a.b",
            "a.*",
            "*.*.#",
            "a.b.#",
            "DLQ",
            "orders-eu.x_y",
        ] {
            assert_eq!(p(t).as_str(), t);
        }
        assert!(!p("a.b").is_wildcard());
        assert!(p("a.*").is_wildcard());
        assert!(p("#").is_wildcard());
    }

    #[test]
    fn matching_follows_artemis_docs() {
        let ab = p("a.b.#");
        assert!(ab.matches("a.b"));
        assert!(ab.matches("a.b.c"));
        assert!(ab.matches("a.b.c.d"));
        assert!(!ab.matches("a.babc"));
        assert!(!ab.matches("a"));
        let news = p("news.*");
        assert!(news.matches("news.europe"));
        assert!(!news.matches("news"));
        assert!(!news.matches("news.europe.sport"));
        assert!(!news.matches("news."));
        assert!(p("#").matches(""));
        assert!(p("#").matches("z.z.z.z.z"));
        assert!(p("orders").matches("orders"));
        assert!(!p("orders").matches("orders.eu"));
        assert!(!p("*").matches("a.b"));
        assert!(p("*.b.*").matches("a.b.c"));
    }

    #[test]
    fn repository_test_matching_docs() {
        // RepositoryTest#testMatchingDocs: the winning match per address.
        let patterns = ["a.b.#", "a.b.d.#", "#"];
        let winner = |address| ranked(&patterns, address)[0];
        assert_eq!(winner("a.b"), "a.b.#");
        assert_eq!(winner("a.b.c"), "a.b.#");
        assert_eq!(winner("a.b.d.lll"), "a.b.d.#");
        assert_eq!(winner("a.b.d"), "a.b.d.#");
        assert_eq!(winner("a.babc"), "#");
        assert_eq!(winner("a.b.dabc"), "a.b.#");
        assert_eq!(winner("z.z.z.z.z"), "#");
    }

    #[test]
    fn repository_test_merge_order() {
        // RepositoryTest#testRepositoryMerge.
        let patterns = [
            "#", "a.#", "b.#", "a.b.#", "b.c.#", "a.b.c.#", "a.b.*.d", "a.b.c.*",
        ];
        assert_eq!(
            ranked(&patterns, "a.b.c.d"),
            ["a.b.c.*", "a.b.*.d", "a.b.c.#", "a.b.#", "a.#", "#"]
        );
        assert_eq!(ranked(&patterns, "a.b.c"), ["a.b.c.#", "a.b.#", "a.#", "#"]);
        assert_eq!(ranked(&patterns, "z"), ["#"]);
    }

    #[test]
    fn comparator_rules() {
        let before = |a: &str, b: &str| assert!(p(a) < p(b), "{a} should rank before {b}");
        before("a.b.c.d", "a.b.c.*");
        before("*.*.*.*", "a.b.c.#");
        before("a.b.c.#", "a.b.#");
        before("a.b.#", "a.#");
        before("a.#", "#");
        before("a.b.c.d.e.*", "a.*.*.*.*.*");
        before("*.b.c.d.*.f", "*.b.*.d.*.f");
        before("a.*.*", "a.*");
        before("a.b.#", "a.*.#");
        assert_eq!(p("a.b").cmp(&p("a.b")), Ordering::Equal);
    }

    /// Addresses of 1–4 words over a tiny alphabet, so patterns collide often.
    pub(crate) fn address() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..5).prop_map(|w| w.join("."))
    }

    /// Any valid pattern over the same alphabet.
    pub(crate) fn pattern() -> impl Strategy<Value = Pattern> {
        (
            prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "*"]), 0..5),
            any::<bool>(),
        )
            .prop_filter_map("empty pattern", |(mut words, hash)| {
                if hash {
                    words.push("#");
                }
                Pattern::parse(&words.join(".")).ok()
            })
    }

    /// A transcription of Artemis's `MatchComparator` (negative: `a` first),
    /// used as an independent reference. Meaningful only for two wildcard
    /// patterns that match the same address.
    pub(crate) fn artemis_compare(a: &str, b: &str) -> i64 {
        let (ha, hb) = (a.contains('#'), b.contains('#'));
        if ha != hb {
            return if ha { 1 } else { -1 };
        }
        if ha {
            return b.len() as i64 - a.len() as i64;
        }
        let (sa, sb) = (a.contains('*'), b.contains('*'));
        if sa != sb {
            return if sa { 1 } else { -1 };
        }
        if sa {
            let right: Vec<_> = b.split('.').collect();
            for (i, left) in a.split('.').enumerate() {
                let Some(right) = right.get(i) else { return -1 };
                match (left == "*", *right == "*") {
                    (true, false) => return 1,
                    (false, true) => return -1,
                    _ => {}
                }
            }
        }
        a.len() as i64 - b.len() as i64
    }

    /// A wildcard pattern matching `address`: some words replaced by `*`,
    /// possibly cut short by `#`.
    fn wildcard_for(address: &str, stars: &[bool], cut: Option<usize>) -> String {
        let mut words: Vec<&str> = address
            .split('.')
            .zip(stars.iter().chain(std::iter::repeat(&false)))
            .map(|(w, &star)| if star { "*" } else { w })
            .collect();
        if let Some(cut) = cut {
            words.truncate(cut.min(words.len()));
            words.push("#");
        } else if !words.contains(&"*") {
            words[0] = "*";
        }
        words.join(".")
    }

    proptest! {
        #[test]
        fn literal_beats_any_matching_wildcard(
            address in address(),
            stars in prop::collection::vec(any::<bool>(), 4),
            cut in prop::option::of(0usize..5),
        ) {
            let wildcard = p(&wildcard_for(&address, &stars, cut));
            prop_assert!(wildcard.matches(&address), "{wildcard} vs {address}");
            let exact = p(&address);
            prop_assert!(exact.matches(&address));
            prop_assert!(exact < wildcard);
        }

        #[test]
        fn any_words_alone_matches_everything(address in address()) {
            prop_assert!(p("#").matches(&address));
        }

        #[test]
        fn ordering_is_a_strict_total_order(a in pattern(), b in pattern(), c in pattern()) {
            prop_assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
            prop_assert_eq!(a.cmp(&b) == Ordering::Equal, a == b);
            if a < b && b < c {
                prop_assert!(a < c);
            }
        }

        #[test]
        fn ordering_agrees_with_artemis(
            address in address(),
            stars in prop::collection::vec(any::<bool>(), 8),
            cuts in (prop::option::of(0usize..5), prop::option::of(0usize..5)),
        ) {
            let a = p(&wildcard_for(&address, &stars[..4], cuts.0));
            let b = p(&wildcard_for(&address, &stars[4..], cuts.1));
            let artemis = artemis_compare(a.as_str(), b.as_str());
            if artemis != 0 {
                prop_assert_eq!(a < b, artemis < 0, "{} vs {}", a, b);
            }
        }
    }
}
