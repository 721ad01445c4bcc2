//! Parsing `--property` arguments.
//!
//! `key=value` guesses the type the way a shell user expects (`3` is an int,
//! `true` a bool, `1.5` a double, anything else a string); `key:type=value`
//! says it explicitly, which is the only way to send e.g. the string `"3"` or
//! raw bytes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rebound_client::PropertyValue;

/// Parses `key=value` or `key:type=value` (type: string, int, double, bool,
/// bytes with a base64 value). The error is one line, shown by clap.
pub fn parse(arg: &str) -> Result<(String, PropertyValue), String> {
    let (name, text) = arg
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE or KEY:TYPE=VALUE, got '{arg}'"))?;
    let (key, value) = match name.rsplit_once(':') {
        Some((key, ty)) => (key, typed(ty, text)?),
        None => (name, inferred(text)),
    };
    if key.is_empty() {
        return Err(format!("property name missing in '{arg}'"));
    }
    Ok((key.to_owned(), value))
}

fn inferred(text: &str) -> PropertyValue {
    if let Ok(i) = text.parse::<i64>() {
        return PropertyValue::Int(i);
    }
    match text {
        "true" => return PropertyValue::Bool(true),
        "false" => return PropertyValue::Bool(false),
        _ => {}
    }
    match text.parse::<f64>() {
        Ok(d) if text.contains('.') => PropertyValue::Double(d),
        _ => PropertyValue::String(text.to_owned()),
    }
}

fn typed(ty: &str, text: &str) -> Result<PropertyValue, String> {
    let invalid = |what: &str| format!("'{text}' is not {what}");
    Ok(match ty {
        "string" => PropertyValue::String(text.to_owned()),
        "int" => PropertyValue::Int(text.parse().map_err(|_| invalid("a 64-bit integer"))?),
        "double" => PropertyValue::Double(text.parse().map_err(|_| invalid("a number"))?),
        "bool" => PropertyValue::Bool(text.parse().map_err(|_| invalid("true or false"))?),
        "bytes" => PropertyValue::Bytes(BASE64.decode(text).map_err(|_| invalid("base64"))?.into()),
        _ => {
            return Err(format!(
                "unknown property type '{ty}' (string, int, double, bool, bytes)"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(arg: &str) -> PropertyValue {
        parse(arg).unwrap().1
    }

    #[test]
    fn infers_types() {
        assert_eq!(value("k=42"), PropertyValue::Int(42));
        assert_eq!(value("k=-7"), PropertyValue::Int(-7));
        assert_eq!(value("k=true"), PropertyValue::Bool(true));
        assert_eq!(value("k=1.5"), PropertyValue::Double(1.5));
        assert_eq!(value("k=1e5"), PropertyValue::String("1e5".into()));
        assert_eq!(value("k=a=b"), PropertyValue::String("a=b".into()));
        assert_eq!(value("k="), PropertyValue::String(String::new()));
    }

    #[test]
    fn typed_form_forces_the_type() {
        assert_eq!(value("k:string=42"), PropertyValue::String("42".into()));
        assert_eq!(value("k:double=2"), PropertyValue::Double(2.0));
        assert_eq!(value("k:bool=false"), PropertyValue::Bool(false));
        assert_eq!(value("k:bytes=AAE="), PropertyValue::Bytes(vec![0, 1].into()));
        assert_eq!(parse("a:b:int=1").unwrap(), ("a:b".into(), PropertyValue::Int(1)));
    }

    #[test]
    fn bad_syntax_is_one_line() {
        for (arg, expected) in [
            ("novalue", "expected KEY=VALUE or KEY:TYPE=VALUE, got 'novalue'"),
            ("=1", "property name missing in '=1'"),
            ("k:int=x", "'x' is not a 64-bit integer"),
            ("k:bytes=!!", "'!!' is not base64"),
            (
                "k:float=1",
                "unknown property type 'float' (string, int, double, bool, bytes)",
            ),
        ] {
            assert_eq!(parse(arg).unwrap_err(), expected);
        }
    }
}
