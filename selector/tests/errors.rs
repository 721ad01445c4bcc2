//! Where and why malformed selectors are rejected.

use rebound_selector::Selector;

/// The error message for `text`, which must not parse.
fn error(text: &str) -> String {
    match Selector::parse(text) {
        Ok(sel) => panic!("{text:?} parsed as {}", sel.normalized()),
        Err(e) => e.to_string(),
    }
}

fn column(text: &str) -> usize {
    Selector::parse(text).unwrap_err().column()
}

#[test]
fn missing_operand() {
    assert_eq!(
        error("color ="),
        "invalid selector at column 8: expected expression found end of input"
    );
}

#[test]
fn unterminated_string() {
    assert_eq!(
        error("a = 'unterminated"),
        "invalid selector at column 18: expected closing quote found end of input"
    );
}

#[test]
fn empty_in_list() {
    assert_eq!(
        error("a IN ()"),
        "invalid selector at column 7: expected string literal found \")\""
    );
}

#[test]
fn like_needs_a_string_pattern() {
    assert_eq!(
        error("a LIKE 5"),
        "invalid selector at column 8: expected string literal found \"5\""
    );
}

#[test]
fn between_needs_and() {
    assert_eq!(
        error("a BETWEEN 1"),
        "invalid selector at column 12: expected one of AND, arithmetic operator found end of input"
    );
}

#[test]
fn leading_keyword() {
    assert_eq!(
        error("AND x"),
        "invalid selector at column 1: expected expression found \"AND\""
    );
}

#[test]
fn empty_and_blank() {
    assert_eq!(
        error(""),
        "invalid selector at column 1: expected expression found end of input"
    );
    assert_eq!(column("   "), 4);
}

#[test]
fn columns_count_characters_not_bytes() {
    assert_eq!(column("größe = = 1"), 9);
}

#[test]
fn other_malformed_selectors() {
    let cases = [
        ("a b", 3),
        ("a = 1 AND", 10),
        ("(a = 1", 7),
        ("a = 1)", 6),
        ("a IN ('x',)", 11),
        ("a IN ('x' 'y')", 11),
        ("a IN (1)", 7),
        ("a LIKE 'x' ESCAPE 'ab'", 19),
        ("a LIKE 'x' ESCAPE ''", 19),
        ("a IS 5", 6),
        ("a = 1 = 2", 7),
        ("a NOT = 1", 7),
        ("a = 1abc", 5),
        ("a = 09", 5),
        ("a = 'x' OR", 11),
        ("NOT", 4),
        ("a = #", 5),
        ("1 = 1 2", 7),
    ];
    for (text, expected) in cases {
        assert_eq!(column(text), expected, "{text:?}: {}", error(text));
    }
}

#[test]
fn error_parts_are_exposed() {
    let e = Selector::parse("a LIKE 5").unwrap_err();
    assert_eq!(
        (e.column(), e.expected(), e.found()),
        (8, "string literal", "\"5\"")
    );
}

#[test]
fn nesting_is_bounded() {
    let ok = format!("{}a{}", "(".repeat(100), ")".repeat(100));
    let message = std::collections::BTreeMap::new();
    assert!(!Selector::parse(&ok).unwrap().matches(&message));
    let deepest_not = format!("{}a IS NULL", "NOT ".repeat(100));
    assert!(Selector::parse(&deepest_not).unwrap().matches(&message));
    let deep = format!("{}a{}", "(".repeat(100_000), ")".repeat(100_000));
    let e = Selector::parse(&deep).unwrap_err();
    // Just inside the 101st parenthesis.
    assert_eq!(e.column(), 102);
    assert_eq!(e.expected(), "at most 100 levels of nesting");
    assert!(Selector::parse(&"NOT ".repeat(100_000)).is_err());
    assert!(Selector::parse(&format!("{}1 = 1", "-".repeat(100_000))).is_err());
}

#[test]
fn errors_quote_a_bounded_part_of_the_input() {
    let word = "x".repeat(100_000);
    let e = Selector::parse(&format!("a = 1 {word}")).unwrap_err();
    assert_eq!(e.found(), format!("\"{}…\"", "x".repeat(32)));
    assert!(e.to_string().len() < 200, "{e}");
    let e = Selector::parse(&"(".repeat(10_000)).unwrap_err();
    assert!(e.to_string().len() < 200, "{e}");
}

#[test]
fn long_flat_chains_are_fine() {
    let ors = vec!["a = 1"; 20_000].join(" OR ");
    let sums = format!("{} = 1", vec!["1"; 20_000].join(" + "));
    let message = std::collections::BTreeMap::new();
    assert!(!Selector::parse(&ors).unwrap().matches(&message));
    assert!(!Selector::parse(&sums).unwrap().matches(&message));
}

#[test]
fn trailing_junk_expects_end_of_input() {
    assert_eq!(
        error("a = 1)"),
        "invalid selector at column 6: expected one of AND, OR, arithmetic operator, end of input found \")\""
    );
}
