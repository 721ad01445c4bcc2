//! The selector grammar (rust-peg), from text to [`Expr`].

use crate::ast::{ArithOp, CmpOp, Expr, Predicate};
use crate::error::SelectorError;
use crate::like::LikePattern;
use crate::value::{OwnedValue, Value};

/// How deeply parentheses, `NOT` and unary signs may nest. The parser,
/// evaluator and destructor all recurse that deep, so the bound keeps a
/// hostile selector (`((((...`) from overflowing a thread's stack.
const MAX_DEPTH: usize = 100;
/// The parser's complaint when [`MAX_DEPTH`] is exceeded.
const TOO_DEEP: &str = "at most 100 levels of nesting";

/// Keywords are case-insensitive and never identifiers.
const KEYWORDS: [&str; 11] = [
    "NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE",
];

/// Parses a whole selector.
pub(crate) fn parse(text: &str) -> Result<Expr, SelectorError> {
    grammar::selector(text).map_err(|e| {
        // peg's own rendering calls the end "EOF"; the found side says "end of input".
        let mut tokens: Vec<_> = e
            .expected
            .tokens()
            .map(|t| if t == "EOF" { "end of input" } else { t })
            .collect();
        tokens.sort_unstable();
        let expected = match tokens.as_slice() {
            // Every failure in the grammar is labelled; this is a safeguard.
            [] => "a valid selector".to_owned(),
            [one] => (*one).to_owned(),
            many => format!("one of {}", many.join(", ")),
        };
        SelectorError::new(text, e.location.offset, expected)
    })
}

fn is_keyword(word: &str) -> bool {
    KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word))
}

/// Wraps two or more operands with `make`; a lone operand stands for itself.
fn join(first: Expr, rest: Vec<Expr>, make: fn(Vec<Expr>) -> Expr) -> Expr {
    if rest.is_empty() {
        return first;
    }
    let mut operands = Vec::with_capacity(rest.len() + 1);
    operands.push(first);
    operands.extend(rest);
    make(operands)
}

fn chain(first: Expr, rest: Vec<(ArithOp, Expr)>) -> Expr {
    if rest.is_empty() {
        first
    } else {
        Expr::Arith(Box::new(first), rest)
    }
}

/// An integer literal's value. Like Artemis (which falls back to
/// `BigDecimal`), one too large for `i64` becomes a float instead of an error.
fn integer(digits: &str, radix: u32) -> OwnedValue {
    if let Ok(i) = i64::from_str_radix(digits, radix) {
        return Value::Int(i);
    }
    Value::Float(if radix == 10 {
        // Correctly rounded; a digit string always parses (at worst to inf).
        digits.parse().unwrap_or(f64::INFINITY)
    } else {
        digits
            .chars()
            .filter_map(|c| c.to_digit(radix))
            .fold(0.0, |acc, d| acc * f64::from(radix) + f64::from(d))
    })
}

// Error messages come from peg's furthest-failure tracking. Tokens that
// merely *start* an alternative are `quiet!` and the alternatives share one
// `expected!` label, so a message says "expected expression" rather than
// listing every token an expression may begin with.
peg::parser! {
    grammar grammar() for str {
        pub rule selector() -> Expr = _ e:or(0) _ { e }

        rule or(d: usize) -> Expr
            = first:and(d) rest:(_ kw("OR") _ e:and(d) { e })* { join(first, rest, Expr::Or) }

        rule and(d: usize) -> Expr
            = first:not(d) rest:(_ kw("AND") _ e:not(d) { e })* { join(first, rest, Expr::And) }

        rule not(d: usize) -> Expr
            = quiet!{kw("NOT")} _ deeper(d) e:not(d + 1) { Expr::Not(Box::new(e)) }
            / predicate(d)

        rule predicate(d: usize) -> Expr
            = operand:sum(d) test:(_ t:test(d) { t })? {
                match test {
                    Some(test) => Expr::Predicate(Box::new(operand), test),
                    None => operand,
                }
            }

        rule test(d: usize) -> Predicate
            = op:comparison() _ right:sum(d) { Predicate::Compare(op, Box::new(right)) }
            / negated:negation() kw("BETWEEN") _ low:sum(d) _ kw("AND") _ high:sum(d) {
                Predicate::Between { negated, low: Box::new(low), high: Box::new(high) }
            }
            / negated:negation() kw("LIKE") _ pattern:string_arg()
              escape:(_ kw("ESCAPE") _ c:escape_char() { c })? {
                Predicate::Like { negated, pattern: LikePattern::new(pattern, escape) }
            }
            / negated:negation() kw("IN") _ "(" _ list:(string_arg() ++ (_ "," _)) _ ")" {
                Predicate::In { negated, list }
            }
            / kw("IS") _ negated:negation() kw("NULL") { Predicate::IsNull { negated } }

        rule negation() -> bool = n:(kw("NOT") _)? { n.is_some() }

        rule comparison() -> CmpOp
            = quiet!{
                "<>" { CmpOp::Ne } / "<=" { CmpOp::Le } / ">=" { CmpOp::Ge }
                / "<" { CmpOp::Lt } / ">" { CmpOp::Gt } / "=" { CmpOp::Eq }
            }
            / expected!("comparison operator")

        rule sum(d: usize) -> Expr
            = first:product(d) rest:(_ op:additive() _ e:product(d) { (op, e) })* { chain(first, rest) }

        rule additive() -> ArithOp
            = quiet!{"+" { ArithOp::Add } / "-" { ArithOp::Sub }} / expected!("arithmetic operator")

        rule product(d: usize) -> Expr
            = first:unary(d) rest:(_ op:multiplicative() _ e:unary(d) { (op, e) })* { chain(first, rest) }

        rule multiplicative() -> ArithOp
            = quiet!{"*" { ArithOp::Mul } / "/" { ArithOp::Div }} / expected!("arithmetic operator")

        rule unary(d: usize) -> Expr
            = quiet!{"-"} _ deeper(d) e:unary(d + 1) { Expr::Negate(Box::new(e)) }
            // Unary plus is the identity, as in Artemis.
            / quiet!{"+"} _ deeper(d) e:unary(d + 1) { e }
            / primary(d)

        rule primary(d: usize) -> Expr
            = quiet!{"("} _ deeper(d) e:or(d + 1) _ ")" { e }
            / s:string() { Expr::Literal(Value::from(s)) }
            / quiet!{
                v:number() { Expr::Literal(v) }
                / kw("TRUE") { Expr::Literal(Value::Bool(true)) }
                / kw("FALSE") { Expr::Literal(Value::Bool(false)) }
                / kw("NULL") { Expr::Null }
                / name:identifier() { Expr::Property(name.to_owned()) }
            }
            / expected!("expression")

        rule deeper(d: usize) = {? if d < MAX_DEPTH { Ok(()) } else { Err(TOO_DEEP) } }

        rule string() -> String
            = quiet!{"'"} chars:string_char()* closing_quote() { chars.into_iter().collect() }

        rule string_char() -> char = quiet!{ "''" { '\'' } / c:[ch if ch != '\''] { c } }

        rule closing_quote() = quiet!{"'"} / expected!("closing quote")

        rule string_arg() -> String = string() / expected!("string literal")

        rule escape_char() -> char
            = quiet!{"'" c:string_char() "'" { c }} / expected!("one-character string")

        // Java literal syntax, as JMS specifies: floats need a `.`, an
        // exponent or an F/D suffix; `0x` is hexadecimal, other leading
        // zeros octal; `L` marks a long, which changes nothing here.
        rule number() -> OwnedValue
            = s:$(float_text()) ['f' | 'F' | 'd' | 'D']? !ident_char() {?
                s.parse().map(Value::Float).or(Err("number"))
            }
            / "0" ['x' | 'X'] h:$(['0'..='9' | 'a'..='f' | 'A'..='F']+) int_end() { integer(h, 16) }
            / "0" o:$(['0'..='7']+) int_end() { integer(o, 8) }
            / s:$("0" / ['1'..='9'] ['0'..='9']*) int_end() { integer(s, 10) }

        rule float_text()
            = digits() "." digits()? exponent()?
            / "." digits() exponent()?
            / digits() exponent()
            / digits() &['f' | 'F' | 'd' | 'D']

        rule exponent() = ['e' | 'E'] ['+' | '-']? digits()

        rule digits() = ['0'..='9']+

        rule int_end() = ['l' | 'L']? !ident_char()

        rule identifier() -> &'input str
            = s:$(ident_start() ident_char()*) {? if is_keyword(s) { Err("identifier") } else { Ok(s) } }

        rule ident_start() = [c if c.is_alphabetic() || c == '_' || c == '$']

        rule ident_char() = [c if c.is_alphanumeric() || c == '_' || c == '$']

        // A `{?}` failure is reported where the match ended, so the check is
        // quiet and the label is reported at the keyword's start instead.
        rule kw(k: &'static str)
            = quiet!{ s:$([_]*<{k.len()}>) !ident_char() {?
                if s.eq_ignore_ascii_case(k) { Ok(()) } else { Err(k) }
            } }
            / expected!(k)

        rule _() = quiet!{[c if c.is_whitespace()]*}
    }
}
