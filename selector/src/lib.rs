//! JMS message selectors (Artemis "filters"): parse once, then test each
//! message against them.
//!
//! ```
//! use std::collections::BTreeMap;
//! use rebound_selector::{OwnedValue, Selector};
//!
//! let selector: Selector = "color = 'red' AND weight > 2.5".parse()?;
//! let mut message = BTreeMap::<String, OwnedValue>::new();
//! message.insert("color".into(), "red".to_owned().into());
//! message.insert("weight".into(), 3.into());
//! assert!(selector.matches(&message));
//!
//! // `weight` missing: `weight > 2.5` is unknown, so the AND is unknown and
//! // the message is not selected.
//! message.remove("weight");
//! assert!(!selector.matches(&message));
//! # Ok::<(), rebound_selector::SelectorError>(())
//! ```
//!
//! # Language
//!
//! The JMS 2.0 selector syntax, a subset of SQL-92 conditional expressions,
//! as Artemis implements it:
//!
//! - literals: strings `'it''s'` (a doubled quote escapes one); integers
//!   `42`, `42L`, `0x2A`, `052` (octal); floats `1.5`, `1.`, `.5`, `1e3`,
//!   `1.5F`, `2D`; `TRUE`, `FALSE`, `NULL`. An integer too large for 64 bits
//!   becomes a float, as in Artemis.
//! - identifiers: Java identifiers (a letter, `_` or `$`, then also digits),
//!   case-sensitive; headers such as `JMSPriority` are just identifiers,
//!   which the caller's [`Properties`] resolves.
//! - keywords, case-insensitive and reserved: `NULL TRUE FALSE NOT AND OR
//!   BETWEEN LIKE IN IS ESCAPE`.
//! - operators, tightest first: unary `+ -`; `* /`; `+ -`; the comparisons
//!   `= <> < <= > >=`, `[NOT] BETWEEN a AND b`, `[NOT] IN ('a', ...)`,
//!   `[NOT] LIKE 'pattern' [ESCAPE 'c']` (`%` any sequence, `_` one
//!   character) and `IS [NOT] NULL`, none of which chain; `NOT`; `AND`;
//!   `OR`. Parentheses group.
//!
//! # Three-valued logic
//!
//! A missing property is NULL, and so is the result of anything JMS leaves
//! undefined: comparing a string with a number, ordering strings or booleans
//! with `<`, `LIKE` or `IN` on a non-string, arithmetic on a non-number,
//! division by zero. As a condition NULL is *unknown*, and the logical
//! operators follow SQL:
//!
//! | `a`     | `b`     | `a AND b` | `a OR b` | `NOT a` |
//! |---------|---------|-----------|----------|---------|
//! | unknown | TRUE    | unknown   | TRUE     | unknown |
//! | unknown | FALSE   | FALSE     | unknown  | unknown |
//! | unknown | unknown | unknown   | unknown  | unknown |
//!
//! A message is selected only when the selector is TRUE, so with `size`
//! missing neither `size > 10` nor `NOT size > 10` selects it, and neither
//! does `size NOT IN ('S', 'M')`; `size IS NULL` does.
//!
//! Numbers compare by value, an int meeting a float being promoted to float.
//! Integer arithmetic that would overflow is done in floating point instead.
//! A selector that is not a condition at all (`1 + 2`) parses, but as it is
//! never TRUE it selects nothing.
//!
//! # Parser
//!
//! The grammar is written with [rust-peg](https://docs.rs/peg): it reads as
//! the grammar it implements, one rule per precedence level, is compiled to
//! a plain recursive-descent parser by a proc macro with no runtime
//! dependencies, and reports the furthest failure with its offset and the
//! set of expected tokens, from which [`SelectorError`] is made. The
//! combinator crates (nom, winnow, chumsky) would spread the grammar across
//! Rust code for no gain at this size, and pest would add a separate grammar
//! file and a tree-walking pass.
//!
//! # Files
//!
//! | file | what |
//! |---|---|
//! | `parser.rs` | the grammar (rust-peg), from text to the parsed form |
//! | `ast.rs` | the parsed form, and its fully parenthesised rendering |
//! | `eval.rs` | evaluation with SQL's three-valued logic |
//! | `like.rs` | `LIKE` patterns |
//! | `value.rs` | the values a selector compares, and how a message hands them over |
//! | `error.rs` | the error for a selector that does not parse |

mod ast;
mod error;
mod eval;
mod like;
mod parser;
mod value;

use std::fmt::{self, Display, Formatter};
use std::str::FromStr;

pub use error::SelectorError;
pub use value::{OwnedValue, Properties, Value};

/// A parsed message selector.
///
/// An empty or blank selector is an error: "no selector" is the caller's
/// `Option::None`, which selects every message.
#[derive(Debug, Clone)]
pub struct Selector {
    text: String,
    expr: ast::Expr,
}

impl Selector {
    /// Parses `text`, reporting the column of the first error.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let expr = parser::parse(text)?;
        Ok(Self {
            text: text.to_owned(),
            expr,
        })
    }

    /// Whether the selector is TRUE for `message`; FALSE and unknown are not.
    pub fn matches(&self, message: &(impl Properties + ?Sized)) -> bool {
        eval::matches(&self.expr, message)
    }

    /// The text the selector was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The selector fully parenthesised with keywords in upper case, which
    /// shows how precedence grouped it: `a OR b AND NOT c = 1` gives
    /// `(a OR (b AND (NOT (c = 1))))`. It parses back to the same selector.
    pub fn normalized(&self) -> String {
        self.expr.to_string()
    }
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, SelectorError> {
        Self::parse(text)
    }
}

/// Displays the original text.
impl Display for Selector {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
