//! Evaluation with SQL's three-valued logic.
//!
//! An expression evaluates to `Option<Value>`, where `None` is NULL: a
//! missing property, or the result of any operation JMS leaves undefined
//! (type mismatch, division by zero). As a truth value `None` is *unknown*.

use std::cmp::Ordering;

use crate::ast::{ArithOp, CmpOp, Expr, Predicate};
use crate::value::{Properties, Value};

/// Whether `expr` is TRUE for `message`; FALSE and unknown both reject.
pub(crate) fn matches(expr: &Expr, message: &(impl Properties + ?Sized)) -> bool {
    truth(eval(expr, message)) == Some(true)
}

fn eval<'a>(expr: &'a Expr, message: &'a (impl Properties + ?Sized)) -> Option<Value<'a>> {
    match expr {
        Expr::Null => None,
        Expr::Literal(value) => Some(value.borrowed()),
        Expr::Property(name) => message.get(name),
        Expr::Or(operands) => {
            let mut result = Some(false);
            for operand in operands {
                match truth(eval(operand, message)) {
                    Some(true) => return bool(Some(true)),
                    Some(false) => {}
                    None => result = None,
                }
            }
            bool(result)
        }
        Expr::And(operands) => {
            let mut result = Some(true);
            for operand in operands {
                match truth(eval(operand, message)) {
                    Some(false) => return bool(Some(false)),
                    Some(true) => {}
                    None => result = None,
                }
            }
            bool(result)
        }
        Expr::Not(operand) => bool(truth(eval(operand, message)).map(|b| !b)),
        Expr::Negate(operand) => match eval(operand, message)? {
            Value::Int(i) => Some(i.checked_neg().map_or(Value::Float(-(i as f64)), Value::Int)),
            Value::Float(x) => Some(Value::Float(-x)),
            Value::String(_) | Value::Bool(_) => None,
        },
        Expr::Arith(first, rest) => {
            let mut acc = eval(first, message)?;
            for (op, operand) in rest {
                acc = arith(*op, acc, eval(operand, message)?)?;
            }
            Some(acc)
        }
        Expr::Predicate(operand, predicate) => bool(test(eval(operand, message), predicate, message)),
    }
}

fn test<'a>(
    operand: Option<Value<'a>>,
    predicate: &'a Predicate,
    message: &'a (impl Properties + ?Sized),
) -> Option<bool> {
    match predicate {
        Predicate::Compare(op, right) => compare(*op, operand.as_ref(), eval(right, message).as_ref()),
        Predicate::Between { negated, low, high } => {
            let operand = operand.as_ref();
            let above = compare(CmpOp::Ge, operand, eval(low, message).as_ref());
            let below = compare(CmpOp::Le, operand, eval(high, message).as_ref());
            let between = match (above, below) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            between.map(|b| b != *negated)
        }
        Predicate::Like { negated, pattern } => match operand? {
            Value::String(s) => Some(pattern.matches(&s) != *negated),
            _ => None,
        },
        Predicate::In { negated, list } => match operand? {
            Value::String(s) => Some(list.iter().any(|item| *item == *s) != *negated),
            _ => None,
        },
        Predicate::IsNull { negated } => Some(operand.is_none() != *negated),
    }
}

/// Compares numbers (an int meeting a float is promoted to float), and
/// strings or booleans for `=` and `<>` only; anything else, NULL and NaN
/// included, is unknown.
fn compare(op: CmpOp, left: Option<&Value<'_>>, right: Option<&Value<'_>>) -> Option<bool> {
    let equality = matches!(op, CmpOp::Eq | CmpOp::Ne);
    let ordering = match (left?, right?) {
        (Value::Int(a), Value::Int(b)) => a.cmp(b),
        (Value::Int(a), Value::Float(b)) => (*a as f64).partial_cmp(b)?,
        (Value::Float(a), Value::Int(b)) => a.partial_cmp(&(*b as f64))?,
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b)?,
        (Value::String(a), Value::String(b)) if equality => a.cmp(b),
        (Value::Bool(a), Value::Bool(b)) if equality => a.cmp(b),
        _ => return None,
    };
    Some(match op {
        CmpOp::Eq => ordering == Ordering::Equal,
        CmpOp::Ne => ordering != Ordering::Equal,
        CmpOp::Lt => ordering == Ordering::Less,
        CmpOp::Le => ordering != Ordering::Greater,
        CmpOp::Gt => ordering == Ordering::Greater,
        CmpOp::Ge => ordering != Ordering::Less,
    })
}

/// Integer arithmetic as in Java (division truncates), except that
/// overflow promotes to float instead of wrapping; division by zero is
/// unknown for floats too, rather than infinity.
fn arith(op: ArithOp, left: Value<'_>, right: Value<'_>) -> Option<Value<'static>> {
    if let (Value::Int(a), Value::Int(b)) = (&left, &right) {
        let exact = match op {
            ArithOp::Add => a.checked_add(*b),
            ArithOp::Sub => a.checked_sub(*b),
            ArithOp::Mul => a.checked_mul(*b),
            ArithOp::Div if *b == 0 => return None,
            ArithOp::Div => a.checked_div(*b),
        };
        if let Some(i) = exact {
            return Some(Value::Int(i));
        }
    }
    let (a, b) = (float(&left)?, float(&right)?);
    Some(Value::Float(match op {
        ArithOp::Add => a + b,
        ArithOp::Sub => a - b,
        ArithOp::Mul => a * b,
        ArithOp::Div if b == 0.0 => return None,
        ArithOp::Div => a / b,
    }))
}

fn float(value: &Value<'_>) -> Option<f64> {
    match value {
        Value::Int(i) => Some(*i as f64),
        Value::Float(x) => Some(*x),
        Value::String(_) | Value::Bool(_) => None,
    }
}

/// A boolean operand's truth; a non-boolean is as unknown as NULL.
fn truth(value: Option<Value<'_>>) -> Option<bool> {
    match value? {
        Value::Bool(b) => Some(b),
        _ => None,
    }
}

fn bool(truth: Option<bool>) -> Option<Value<'static>> {
    truth.map(Value::Bool)
}
