//! How much of a user's text rebound repeats or keeps: cut at a character
//! boundary, with a marker that says how much was cut.
//!
//! Error messages quote at most [`EXCERPT_BYTES`] of any input ([`excerpt`]):
//! gRPC carries them in a header, and an error bigger than a client's header
//! limit reaches it as a protocol error instead of the status that was meant;
//! a 10 KB name is not worth repeating in a config error either. The config
//! crate owns this because it is the lowest crate that quotes input; the broker
//! uses the same functions.
//!
//! Text a client controls (a body, a property, a failure reason) is shown with
//! its control characters escaped ([`escape_controls`]) wherever a person reads
//! it: in the broker's log and in the CLI's human output.
use std::borrow::Cow;

/// The most of a user's input an error message quotes, in bytes.
pub const EXCERPT_BYTES: usize = 100;

/// `text` cut to at most `max` bytes at a character boundary, with a marker that
/// says how much was cut.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    // `str::floor_char_boundary` is newer than the workspace's rust-version.
    let cut = (0..=max).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    Cow::Owned(format!("{}…[truncated {} bytes]", &text[..cut], text.len() - cut))
}

/// A user's input as an error message quotes it: at most [`EXCERPT_BYTES`] of it.
pub fn excerpt(input: &str) -> Cow<'_, str> {
    clip(input, EXCERPT_BYTES)
}

/// `text` with every control character (C0 including newline, CR and tab, DEL,
/// C1) and the Unicode line and paragraph separators escaped as Rust writes
/// them (`\n`, `\u{1b}`), so that it cannot start a line of its own (forging
/// a log line, a row of output) or drive a terminal (ESC sequences that move
/// the cursor or clear the screen, BEL). Everything else, backslashes included,
/// is kept as it is: this is for showing text safely, not for reversing it.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let escaped = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
    if !text.contains(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_other_text_kept() {
        assert_eq!(escape_controls("café 'x' \\n"), "café 'x' \\n");
        assert_eq!(
            escape_controls("ok\nFAKE\r\t\x1b[2J\x07\u{9b}\u{2028}"),
            "ok\\nFAKE\\r\\t\\u{1b}[2J\\u{7}\\u{9b}\\u{2028}"
        );
    }

    #[test]
    fn short_text_is_kept_and_long_text_is_cut_at_a_char_boundary() {
        assert_eq!(excerpt("orders"), "orders");
        let long = "é".repeat(100);
        let cut = excerpt(&long);
        assert!(cut.starts_with(&"é".repeat(50)), "{cut}");
        assert!(cut.ends_with("…[truncated 100 bytes]"), "{cut}");
    }
}
