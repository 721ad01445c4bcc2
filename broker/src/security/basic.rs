//! HTTP basic credentials, as clients send them in the `authorization` metadata:
//! `Basic base64(user ":" password)` (RFC 7617).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A user name and password from an `authorization` value; `None` if it is not
/// well-formed basic credentials (which the caller answers as a wrong password).
pub fn parse(header: &[u8]) -> Option<(String, String)> {
    let (scheme, encoded) = header.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim_ascii()).ok()?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_parse() {
        let header = |text: &str| format!("Basic {}", STANDARD.encode(text));
        assert_eq!(
            parse(header("alice:pa:ss").as_bytes()),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(
            parse(format!("basic  {}", STANDARD.encode("a:")).as_bytes()),
            Some(("a".into(), String::new()))
        );
        assert_eq!(parse(header("no-colon").as_bytes()), None);
        assert_eq!(parse(b"Bearer abc"), None);
        assert_eq!(parse(b"Basic !!!"), None);
        assert_eq!(parse(b"Basic"), None);
    }
}
