//! The parsed form of a selector, and its fully parenthesised rendering.

use std::fmt::{self, Display, Formatter};

use crate::like::LikePattern;
use crate::value::{OwnedValue, Value};

/// An expression; selectors are untyped until evaluated, as in JMS.
///
/// `AND`, `OR` and arithmetic chains are n-ary rather than left-nested so
/// that a long generated `a = 1 OR a = 2 OR ...` stays shallow: evaluating,
/// rendering and dropping recurse only as deep as the source nests.
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    Null,
    Literal(OwnedValue),
    Property(String),
    /// Two or more operands.
    Or(Vec<Expr>),
    /// Two or more operands.
    And(Vec<Expr>),
    Not(Box<Expr>),
    Negate(Box<Expr>),
    /// A left-associative chain of operators of one precedence level.
    Arith(Box<Expr>, Vec<(ArithOp, Expr)>),
    /// An operand and the test applied to it.
    Predicate(Box<Expr>, Predicate),
}

/// What a comparison-level operator does with the operand on its left.
#[derive(Debug, Clone)]
pub(crate) enum Predicate {
    Compare(CmpOp, Box<Expr>),
    Between {
        negated: bool,
        low: Box<Expr>,
        high: Box<Expr>,
    },
    Like {
        negated: bool,
        pattern: LikePattern,
    },
    In {
        negated: bool,
        list: Vec<String>,
    },
    IsNull {
        negated: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl Display for CmpOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        })
    }
}

impl Display for ArithOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
        })
    }
}

/// Renders valid selector text that parses back to the same tree: every
/// compound expression in parentheses, keywords in upper case.
impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Null => f.write_str("NULL"),
            Expr::Literal(value) => write_literal(f, value),
            Expr::Property(name) => f.write_str(name),
            Expr::Or(operands) => write_joined(f, operands, " OR "),
            Expr::And(operands) => write_joined(f, operands, " AND "),
            Expr::Not(operand) => write!(f, "(NOT {operand})"),
            Expr::Negate(operand) => write!(f, "(-{operand})"),
            Expr::Arith(first, rest) => {
                write!(f, "({first}")?;
                for (op, operand) in rest {
                    write!(f, " {op} {operand}")?;
                }
                f.write_str(")")
            }
            Expr::Predicate(operand, predicate) => {
                write!(f, "({operand} ")?;
                match predicate {
                    Predicate::Compare(op, right) => write!(f, "{op} {right}")?,
                    Predicate::Between { negated, low, high } => {
                        write!(f, "{}BETWEEN {low} AND {high}", not(*negated))?;
                    }
                    Predicate::Like { negated, pattern } => {
                        write!(f, "{}LIKE ", not(*negated))?;
                        write_string(f, &pattern.pattern)?;
                        if let Some(escape) = pattern.escape {
                            f.write_str(" ESCAPE ")?;
                            write_string(f, escape.encode_utf8(&mut [0; 4]))?;
                        }
                    }
                    Predicate::In { negated, list } => {
                        write!(f, "{}IN (", not(*negated))?;
                        for (i, item) in list.iter().enumerate() {
                            if i > 0 {
                                f.write_str(", ")?;
                            }
                            write_string(f, item)?;
                        }
                        f.write_str(")")?;
                    }
                    Predicate::IsNull { negated } => write!(f, "IS {}NULL", not(*negated))?,
                }
                f.write_str(")")
            }
        }
    }
}

fn not(negated: bool) -> &'static str {
    if negated { "NOT " } else { "" }
}

fn write_joined(f: &mut Formatter<'_>, operands: &[Expr], separator: &str) -> fmt::Result {
    f.write_str("(")?;
    for (i, operand) in operands.iter().enumerate() {
        if i > 0 {
            f.write_str(separator)?;
        }
        write!(f, "{operand}")?;
    }
    f.write_str(")")
}

fn write_literal(f: &mut Formatter<'_>, value: &OwnedValue) -> fmt::Result {
    match value {
        Value::String(s) => write_string(f, s),
        Value::Int(i) => write!(f, "{i}"),
        // The grammar has no infinity; a literal too large for f64 is how
        // one arises, and any such literal reads back as infinity.
        Value::Float(x) if x.is_infinite() => f.write_str("1e999"),
        // Debug, unlike Display, always prints a `.` or an exponent, so the
        // text reads back as a float and never as an integer.
        Value::Float(x) => write!(f, "{x:?}"),
        Value::Bool(true) => f.write_str("TRUE"),
        Value::Bool(false) => f.write_str("FALSE"),
    }
}

fn write_string(f: &mut Formatter<'_>, s: &str) -> fmt::Result {
    write!(f, "'{}'", s.replace('\'', "''"))
}
