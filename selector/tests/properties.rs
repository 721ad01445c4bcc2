//! Property tests: the parser and evaluator never panic, and the normalized
//! form of a selector is a fixed point that selects the same messages.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::sample::select;
use rebound_selector::{OwnedValue, Selector};

const NAMES: [&str; 6] = ["a", "b", "color", "weight", "_AMQ_ORIG_ADDRESS", "$x"];

fn value() -> impl Strategy<Value = OwnedValue> {
    prop_oneof![
        any::<i64>().prop_map(OwnedValue::Int),
        (-3i64..3).prop_map(OwnedValue::Int),
        any::<f64>().prop_map(OwnedValue::Float),
        any::<bool>().prop_map(OwnedValue::Bool),
        "[a-c%_']{0,3}".prop_map(OwnedValue::from),
    ]
}

fn message() -> impl Strategy<Value = BTreeMap<String, OwnedValue>> {
    prop::collection::btree_map(select(&NAMES[..]).prop_map(str::to_owned), value(), 0..5)
}

/// A keyword in upper, lower or mixed case.
fn kw(word: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        Just(word.to_owned()),
        Just(word.to_lowercase()),
        Just(format!("{}{}", &word[..1], word[1..].to_lowercase())),
    ]
}

fn not() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), kw("NOT").prop_map(|n| format!("{n} "))]
}

fn string_literal() -> impl Strategy<Value = String> {
    "'([a-c%_!]|''){0,4}'"
}

/// Selector text for a value: literals, properties and arithmetic.
fn operand() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        select(&NAMES[..]).prop_map(str::to_owned),
        "0|[1-9][0-9]{0,20}",
        "0[xX][0-9a-fA-F]{1,17}[lL]?",
        "0[0-7]{1,3}",
        "[0-9]{1,3}\\.[0-9]{0,3}([eE][+-]?[0-9]{1,3})?[fFdD]?",
        "\\.[0-9]{1,3}",
        string_literal(),
        kw("TRUE"),
        kw("FALSE"),
        kw("NULL"),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), select(&["+", "-", "*", "/"][..]), inner.clone())
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            (select(&["-", "+", "- "][..]), inner.clone()).prop_map(|(sign, a)| format!("{sign}{a}")),
            inner.prop_map(|a| format!("({a})")),
        ]
    })
}

/// Selector text for a condition.
fn condition() -> impl Strategy<Value = String> {
    let comparison = select(&["=", "<>", "<", "<=", ">", ">="][..]);
    let leaf = prop_oneof![
        (operand(), comparison, operand()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        (operand(), not(), kw("BETWEEN"), operand(), kw("AND"), operand())
            .prop_map(|(x, n, b, lo, and, hi)| format!("{x} {n}{b} {lo} {and} {hi}")),
        (
            operand(),
            not(),
            kw("LIKE"),
            string_literal(),
            prop::option::of("'[!\\\\%]'")
        )
            .prop_map(|(x, n, like, p, esc)| match esc {
                Some(e) => format!("{x} {n}{like} {p} ESCAPE {e}"),
                None => format!("{x} {n}{like} {p}"),
            }),
        (
            operand(),
            not(),
            kw("IN"),
            prop::collection::vec(string_literal(), 1..4)
        )
            .prop_map(|(x, n, kw_in, list)| format!("{x} {n}{kw_in} ({})", list.join(", "))),
        (operand(), kw("IS"), not(), kw("NULL")).prop_map(|(x, is, n, null)| format!("{x} {is} {n}{null}")),
        select(&NAMES[..]).prop_map(str::to_owned),
        kw("TRUE"),
    ];
    leaf.prop_recursive(3, 16, 2, |inner| {
        prop_oneof![
            (inner.clone(), prop_oneof![kw("AND"), kw("OR")], inner.clone())
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            (kw("NOT"), inner.clone()).prop_map(|(n, a)| format!("{n} {a}")),
            inner.prop_map(|a| format!("({a})")),
        ]
    })
}

/// Fragments of selector syntax, valid or not, for gluing together.
const TOKENS: [&str; 40] = [
    "(",
    ")",
    "'",
    "''",
    "'x'",
    "'%_'",
    ",",
    "=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "AND",
    "or",
    "Not",
    "BETWEEN",
    "LIKE",
    "ESCAPE",
    "IN",
    "IS",
    "NULL",
    "TRUE",
    "false",
    "a",
    "color",
    "$x",
    "0",
    "0x",
    "0x1F",
    "017",
    "1.5e3",
    ".5",
    "9223372036854775808",
    "1e999",
    "1L",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec((select(&TOKENS[..]), select(&["", " "][..])), 0..16)
        .prop_map(|parts| parts.into_iter().map(|(t, sep)| format!("{t}{sep}")).collect())
}

proptest! {
    #[test]
    fn parse_never_panics_on_arbitrary_text(text in any::<String>()) {
        let _ = Selector::parse(&text);
    }

    /// An error goes back to a client in a header: it stays short whatever the
    /// text, however long a word or deep a nesting it has (the longest list of
    /// expected tokens and 32 escaped characters of a word fit in 512 bytes).
    #[test]
    fn errors_are_short_whatever_the_text(
        text in prop_oneof![
            any::<String>(),
            ("[a-z]{0,3}", any::<char>(), 0usize..50_000).prop_map(|(head, c, n)| format!("{head} {}", c.to_string().repeat(n))),
            ("[(]{0,5000}", "[-+ ]{0,5000}", "NOT ?|[a-z]{0,2}").prop_map(|(a, b, c)| format!("{a}{b}{c}")),
        ]
    ) {
        if let Err(e) = Selector::parse(&text) {
            prop_assert!(e.to_string().len() <= 512, "{e}");
        }
    }

    #[test]
    fn parse_and_match_never_panic_on_token_soup(text in token_soup(), message in message()) {
        if let Ok(selector) = Selector::parse(&text) {
            let _ = selector.matches(&message);
            let normalized = selector.normalized();
            let reparsed = Selector::parse(&normalized);
            prop_assert!(reparsed.is_ok(), "{text:?} normalized to unparsable {normalized:?}");
        }
    }

    #[test]
    fn errors_point_inside_the_text(text in token_soup()) {
        if let Err(e) = Selector::parse(&text) {
            prop_assert!((1..=text.chars().count() + 1).contains(&e.column()), "{e}");
        }
    }

    #[test]
    fn generated_selectors_parse(text in condition()) {
        let parsed = Selector::parse(&text);
        prop_assert!(parsed.is_ok(), "{text:?}: {}", parsed.unwrap_err());
    }

    #[test]
    fn normalized_form_is_a_fixed_point(text in condition()) {
        let normalized = Selector::parse(&text).unwrap().normalized();
        let again = Selector::parse(&normalized);
        prop_assert!(again.is_ok(), "{normalized:?}: {}", again.unwrap_err());
        prop_assert_eq!(again.unwrap().normalized(), normalized);
    }

    #[test]
    fn normalized_form_selects_the_same(
        text in condition(),
        messages in prop::collection::vec(message(), 1..8),
    ) {
        let selector = Selector::parse(&text).unwrap();
        let normalized = Selector::parse(&selector.normalized()).unwrap();
        for message in &messages {
            prop_assert_eq!(
                selector.matches(message),
                normalized.matches(message),
                "{} vs {}", text, selector.normalized()
            );
        }
    }

    #[test]
    fn negation_never_selects_what_the_selector_does(text in condition(), message in message()) {
        let selector = Selector::parse(&text).unwrap();
        let negated = Selector::parse(&format!("NOT ({text})")).unwrap();
        prop_assert!(!(selector.matches(&message) && negated.matches(&message)));
    }
}
