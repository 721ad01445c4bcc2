//! What selectors select: operators, precedence and three-valued logic.

mod common;

use std::collections::HashMap;

use common::{props, s, selects};
use rebound_selector::{OwnedValue, Selector, Value};

#[test]
fn artemis_address_filter() {
    let sel = "_AMQ_ORIG_ADDRESS = 'orders'";
    assert!(selects(sel, [("_AMQ_ORIG_ADDRESS", s("orders"))]));
    assert!(!selects(sel, [("_AMQ_ORIG_ADDRESS", s("Orders"))]));
    assert!(!selects(sel, []));
}

#[test]
fn color_and_weight() {
    let sel = "color = 'red' AND weight > 2.5";
    assert!(selects(sel, [("color", s("red")), ("weight", 3.into())]));
    assert!(selects(sel, [("color", s("red")), ("weight", 2.6.into())]));
    assert!(!selects(sel, [("color", s("red")), ("weight", 2.5.into())]));
    assert!(!selects(sel, [("color", s("blue")), ("weight", 3.into())]));
    assert!(!selects(sel, [("color", s("red"))]));
    assert!(!selects(sel, [("color", s("red")), ("weight", s("3"))]));
}

#[test]
fn comparisons_on_numbers() {
    let n = || [("n", OwnedValue::Int(5))];
    assert!(selects("n = 5", n()));
    assert!(selects("n <> 4", n()));
    assert!(selects("n < 6", n()));
    assert!(selects("n <= 5", n()));
    assert!(selects("n > 4", n()));
    assert!(selects("n >= 5", n()));
    assert!(!selects("n < 5", n()));
    assert!(!selects("n > 5", n()));
    assert!(!selects("n <> 5", n()));
}

#[test]
fn int_and_float_promote() {
    assert!(selects("n = 5.0", [("n", 5.into())]));
    assert!(selects("x = 5", [("x", 5.0.into())]));
    assert!(selects("x < 6", [("x", 5.5.into())]));
    assert!(
        selects("n / 2 = 2", [("n", 5.into())]),
        "integer division truncates"
    );
    assert!(selects("n / 2.0 = 2.5", [("n", 5.into())]));
    assert!(selects("n * 1.5 = 7.5", [("n", 5.into())]));
}

#[test]
fn strings_and_booleans_compare_for_equality_only() {
    assert!(selects("c = 'red'", [("c", s("red"))]));
    assert!(selects("c <> 'blue'", [("c", s("red"))]));
    assert!(!selects("c < 'z'", [("c", s("red"))]));
    assert!(!selects("NOT c < 'z'", [("c", s("red"))]), "unknown, not false");
    assert!(selects("b = TRUE", [("b", true.into())]));
    assert!(selects("b <> true", [("b", false.into())]));
    assert!(!selects("b > FALSE", [("b", true.into())]));
}

#[test]
fn type_mismatch_is_unknown() {
    for sel in [
        "c = 5",
        "c <> 5",
        "n = '5'",
        "n <> '5'",
        "b = 1",
        "c + 1 = 1",
        "-c = 1",
    ] {
        let message = [("c", s("5")), ("n", 5.into()), ("b", true.into())];
        assert!(!selects(sel, message.clone()), "{sel}");
        assert!(!selects(&format!("NOT ({sel})"), message), "NOT ({sel})");
    }
}

#[test]
fn boolean_properties_are_conditions() {
    assert!(selects("urgent", [("urgent", true.into())]));
    assert!(!selects("urgent", [("urgent", false.into())]));
    assert!(selects("NOT urgent", [("urgent", false.into())]));
    assert!(!selects("urgent", [("urgent", 1.into())]));
    assert!(!selects("NOT urgent", [("urgent", 1.into())]));
    assert!(selects("TRUE", []));
    assert!(!selects("FALSE", []));
    assert!(!selects("1 + 2", []), "not a condition: never TRUE");
}

#[test]
fn arithmetic() {
    assert!(selects(
        "a + b * c = 7",
        [("a", 1.into()), ("b", 2.into()), ("c", 3.into())]
    ));
    assert!(selects(
        "(a + b) * c = 9",
        [("a", 1.into()), ("b", 2.into()), ("c", 3.into())]
    ));
    assert!(selects(
        "a - b - c = -4",
        [("a", 1.into()), ("b", 2.into()), ("c", 3.into())]
    ));
    assert!(selects(
        "a / b / c = 1",
        [("a", 12.into()), ("b", 2.into()), ("c", 6.into())]
    ));
    assert!(selects("-a = 0 - 1", [("a", 1.into())]));
    assert!(selects("+a = - -1", [("a", 1.into())]));
    assert!(selects("- a * 2 = -2", [("a", 1.into())]));
}

#[test]
fn division_by_zero_is_unknown() {
    for sel in ["n / 0 = 1", "n / 0.0 = 1", "x / 0 > 0", "NOT n / 0 = 1"] {
        assert!(!selects(sel, [("n", 1.into()), ("x", 1.5.into())]), "{sel}");
    }
    assert!(selects("n / 0 IS NULL", [("n", 1.into())]));
}

#[test]
fn overflow_promotes_to_float() {
    let max = [("m", OwnedValue::Int(i64::MAX))];
    assert!(selects("m + m > 0", max.clone()));
    // Promotion is to f64, which cannot tell i64::MAX from i64::MAX + 1.
    assert!(selects("m + 1 = m", max.clone()));
    assert!(selects("m * m > 0", max.clone()));
    assert!(selects("-m - 2 < 0", max.clone()));
    assert!(selects("-(-m - 1) > 0", max.clone()));
    assert!(selects("(-m - 1) / -1 > 0", max));
    assert!(selects("n = 9223372036854775808", [("n", 2f64.powi(63).into())]));
}

#[test]
fn numeric_literal_forms() {
    let n = |v: i64| [("n", OwnedValue::Int(v))];
    assert!(selects("n = 0x1F", n(31)));
    assert!(selects("n = 0X1f", n(31)));
    assert!(selects("n = 017", n(15)));
    assert!(selects("n = 0", n(0)));
    assert!(selects("n = 42L", n(42)));
    assert!(selects("n = 42l", n(42)));
    assert!(selects("n = 1e3", n(1000)));
    assert!(selects("n = 1.5e3", n(1500)));
    assert!(selects("n = 2F", n(2)));
    assert!(selects("n = 2.D", n(2)));
    assert!(selects("n * 2 = .5E1 + 5", n(5)));
}

#[test]
fn string_literal_quotes() {
    assert!(selects("q = 'it''s'", [("q", s("it's"))]));
    assert!(selects("q = ''", [("q", s(""))]));
    assert!(selects("q = ''''", [("q", s("'"))]));
}

#[test]
fn keywords_are_case_insensitive_identifiers_are_not() {
    assert!(selects(
        "a = 1 and b = 2 Or c",
        [("a", 1.into()), ("b", 2.into())]
    ));
    assert!(selects("x iS nOt NuLl", [("x", 1.into())]));
    assert!(!selects("Color = 'red'", [("color", s("red"))]));
    assert!(selects(
        "ANDY = 1 AND ORDER = 2",
        [("ANDY", 1.into()), ("ORDER", 2.into())]
    ));
}

#[test]
fn precedence() {
    // a OR (b AND c)
    let sel = "a OR b AND c";
    assert!(selects(
        sel,
        [("a", true.into()), ("b", false.into()), ("c", false.into())]
    ));
    assert!(!selects(
        sel,
        [("a", false.into()), ("b", true.into()), ("c", false.into())]
    ));
    // NOT (a = 1), not (NOT a) = 1
    assert!(selects("NOT a = 1", [("a", 2.into())]));
    assert!(!selects("NOT a = 1", [("a", 1.into())]));
    // (NOT a) AND b
    assert!(selects("NOT a AND b", [("a", false.into()), ("b", true.into())]));
    assert!(!selects(
        "NOT a AND b",
        [("a", false.into()), ("b", false.into())]
    ));
    assert!(selects("NOT NOT a", [("a", true.into())]));

    let normal = |sel: &str| Selector::parse(sel).unwrap().normalized();
    assert_eq!(normal("a OR b AND c"), "(a OR (b AND c))");
    assert_eq!(normal("NOT a = 1"), "(NOT (a = 1))");
    assert_eq!(normal("a = 1 + 2 * -b"), "(a = (1 + (2 * (-b))))");
    assert_eq!(normal("a OR b OR c AND d AND e"), "(a OR b OR (c AND d AND e))");
    assert_eq!(
        normal("x between 1 and 2 and y not like 'a%' escape '!' or z is null"),
        "(((x BETWEEN 1 AND 2) AND (y NOT LIKE 'a%' ESCAPE '!')) OR (z IS NULL))"
    );
}

/// A truth value: `None` is unknown.
type Truth = Option<bool>;
const T: Truth = Some(true);
const F: Truth = Some(false);
const U: Truth = None;

/// (a, b, a AND b, a OR b)
const TRUTH_TABLE: [[Truth; 4]; 9] = [
    [T, T, T, T],
    [T, F, F, T],
    [T, U, U, T],
    [F, T, F, T],
    [F, F, F, F],
    [F, U, F, U],
    [U, T, U, T],
    [U, F, F, U],
    [U, U, U, U],
];

/// Whether `condition` (over `a` and `b`) is TRUE, FALSE or unknown, found
/// by testing it and its negation; `None` properties are left missing.
fn truth(condition: &str, a: Truth, b: Truth) -> Truth {
    let mut message = HashMap::<String, OwnedValue>::new();
    for (name, value) in [("a", a), ("b", b)] {
        if let Some(v) = value {
            message.insert(name.into(), v.into());
        }
    }
    let is = Selector::parse(condition).unwrap().matches(&message);
    let is_not = Selector::parse(&format!("NOT ({condition})"))
        .unwrap()
        .matches(&message);
    assert!(!(is && is_not), "{condition} both TRUE and FALSE");
    (is || is_not).then_some(is)
}

#[test]
fn three_valued_and_or_not() {
    for [a, b, and, or] in TRUTH_TABLE {
        assert_eq!(truth("a AND b", a, b), and, "{a:?} AND {b:?}");
        assert_eq!(truth("a OR b", a, b), or, "{a:?} OR {b:?}");
        assert_eq!(truth("NOT a", a, b), a.map(|a| !a), "NOT {a:?}");
    }
}

#[test]
fn unknown_from_comparisons_combines_like_null() {
    // `missing = 1` is unknown, like a missing boolean.
    assert!(selects("missing = 1 OR TRUE", []));
    assert!(!selects("missing = 1 OR FALSE", []));
    assert!(!selects("NOT (missing = 1 AND TRUE)", []));
    assert!(selects("NOT (missing = 1 AND FALSE)", []));
    assert!(!selects("missing = missing", []));
    assert!(!selects("NULL = NULL", []));
}

#[test]
fn like_wildcards_and_escape() {
    let p = |v: &str| [("p", s(v))];
    assert!(selects("p LIKE '12%3'", p("123")));
    assert!(selects("p LIKE '12%3'", p("12993")));
    assert!(!selects("p LIKE '12%3'", p("1234")));
    assert!(selects("p LIKE 'l_se'", p("lose")));
    assert!(!selects("p LIKE 'l_se'", p("loose")));
    assert!(selects("p NOT LIKE 'l_se'", p("loose")));
    assert!(selects(r"p LIKE '100\%' ESCAPE '\'", p("100%")));
    assert!(!selects(r"p LIKE '100\%' ESCAPE '\'", p("1000")));
    assert!(selects(r"p LIKE '\_%' ESCAPE '\'", p("_foo")));
    assert!(!selects(r"p LIKE '\_%' ESCAPE '\'", p("xfoo")));
    // With `'` as the escape, `''''` in the text is an escaped quote.
    assert!(selects("p LIKE 'it''''s%' ESCAPE ''''", p("it's me")));
    assert!(
        !selects("p LIKE 'it''s%' ESCAPE ''''", p("it's me")),
        "'s is an escaped s"
    );
}

#[test]
fn like_on_missing_or_non_string_is_unknown() {
    for sel in ["p LIKE '%'", "p NOT LIKE 'x'"] {
        assert!(!selects(sel, []), "{sel} with p missing");
        assert!(!selects(sel, [("p", 5.into())]), "{sel} with p = 5");
    }
}

#[test]
fn between() {
    let n = |v: OwnedValue| [("n", v)];
    assert!(selects("n BETWEEN 1 AND 3", n(1.into())));
    assert!(selects("n BETWEEN 1 AND 3", n(3.into())));
    assert!(selects("n BETWEEN 1 AND 3", n(2.5.into())));
    assert!(!selects("n BETWEEN 1 AND 3", n(4.into())));
    assert!(!selects("n BETWEEN 3 AND 1", n(2.into())));
    assert!(selects("n NOT BETWEEN 1 AND 3", n(4.into())));
    assert!(!selects("n NOT BETWEEN 1 AND 3", n(2.into())));
    assert!(selects("n BETWEEN 1 + 1 AND 2 * 2 AND n > 0", n(2.into())));
    for sel in ["n BETWEEN 1 AND 3", "n NOT BETWEEN 1 AND 3"] {
        assert!(!selects(sel, []), "{sel} with n missing");
        assert!(!selects(sel, n(s("2"))), "{sel} with n = '2'");
    }
    // One bound unknown, the other decisive.
    assert!(!selects("n BETWEEN missing AND 3", n(2.into())));
    assert!(selects("n NOT BETWEEN missing AND 3", n(4.into())));
}

#[test]
fn in_lists() {
    let c = |v: &str| [("c", s(v))];
    assert!(selects("c IN ('UK', 'US', 'France')", c("US")));
    assert!(!selects("c IN ('UK', 'US', 'France')", c("Peru")));
    assert!(selects("c NOT IN ('UK', 'US', 'France')", c("Peru")));
    assert!(!selects("c NOT IN ('UK', 'US', 'France')", c("UK")));
    assert!(selects("c IN('single')", c("single")));
}

#[test]
fn in_with_missing_or_non_string_is_unknown() {
    for sel in ["c IN ('UK', 'US')", "c NOT IN ('UK', 'US')"] {
        assert!(!selects(sel, []), "{sel} with c missing");
        assert!(!selects(sel, [("c", 1.into())]), "{sel} with c = 1");
        assert!(
            !selects(&format!("NOT ({sel})"), []),
            "NOT ({sel}) with c missing"
        );
    }
}

#[test]
fn is_null() {
    assert!(selects("x IS NULL", []));
    assert!(!selects("x IS NULL", [("x", 0.into())]));
    assert!(selects("x IS NOT NULL", [("x", s(""))]));
    assert!(!selects("x IS NOT NULL", []));
    assert!(selects("NOT x IS NULL", [("x", false.into())]));
}

#[test]
fn headers_are_ordinary_identifiers() {
    let message = props([
        ("JMSPriority", 7.into()),
        ("JMSDeliveryMode", s("PERSISTENT")),
        ("JMSMessageID", s("ID:1")),
    ]);
    let sel =
        Selector::parse("JMSPriority > 4 AND JMSDeliveryMode = 'PERSISTENT' AND JMSMessageID LIKE 'ID:%'")
            .unwrap();
    assert!(sel.matches(&message));
    assert!(sel.matches(&message as &dyn rebound_selector::Properties));
}

#[test]
fn unicode_identifiers_and_strings() {
    assert!(selects(
        "größe = 'groß' AND $x_1 = 1",
        [("größe", s("groß")), ("$x_1", 1.into())]
    ));
    assert!(selects("s LIKE '_ü_'", [("s", s("aüb"))]));
}

#[test]
fn text_round_trips_through_display_and_from_str() {
    let text = "  color = 'red'   AND weight > 2.5 ";
    let sel: Selector = text.parse().unwrap();
    assert_eq!(sel.as_str(), text);
    assert_eq!(sel.to_string(), text);
    assert_eq!(sel.normalized(), "((color = 'red') AND (weight > 2.5))");
}

#[test]
fn borrowed_values_work_as_properties() {
    struct Record(Vec<(String, String)>);
    impl rebound_selector::Properties for Record {
        fn get(&self, name: &str) -> Option<Value<'_>> {
            self.0
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| Value::from(v.as_str()))
        }
    }
    let record = Record(vec![("k".into(), "v".into())]);
    assert!(Selector::parse("k = 'v'").unwrap().matches(&record));
}
