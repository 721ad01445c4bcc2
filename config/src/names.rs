//! The one rule for address and queue names, and the largest message and
//! properties sizes.
//!
//! Both are the broker's rules, but the config crate owns them so that a
//! config file is refused at load, pointing at the offending value, for
//! exactly what the broker would refuse at run time. Before, a name the
//! broker cannot create (`dead-letter-address = "has space"`) loaded fine and
//! every dead letter was then dropped. The broker calls [`check_name`] for
//! every name a client sends, so there is one rule, not two.
//!
//! Besides whitespace and control characters, a name may not contain a format
//! character (Unicode general category Cf: zero-width space U+200B, the
//! right-to-left override U+202E, the byte order mark U+FEFF...). They are
//! invisible or reorder what is shown, so `DLQ` followed by a zero-width space
//! would pass for `DLQ` in every listing and log line.

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use crate::text::excerpt;

/// The longest address or queue name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// The largest `max-message-size` accepted: the largest record the store
/// keeps (16 MiB) minus 64 KiB for what the broker adds to a message (a dead
/// letter's `_AMQ_ORIG_*` properties and failures). The config crate cannot
/// depend on the store, so the broker asserts at compile time that this agrees
/// with the store's limit.
pub const MAX_MESSAGE_SIZE_LIMIT: u64 = (16 << 20) - (64 << 10);

/// The largest `max-properties-bytes` accepted (and its default): half of
/// what the store keeps of a record inline (128 KiB), the other half being
/// room for the record's own fields and what a dead letter adds. The broker
/// asserts at compile time that this agrees with the store's limit.
pub const MAX_PROPERTIES_BYTES_LIMIT: u64 = 64 << 10;

/// The word a name pattern's placeholder (`$` in a schedule's move target, the
/// address between a dead-letter queue's prefix and suffix) is checked with:
/// one byte, the shortest any address can be, so a pattern refused with it
/// is refused for every address.
pub(crate) const PLACEHOLDER: &str = "x";

/// Checks an address or queue name (`kind` says which, for the message):
/// non-empty, at most [`MAX_NAME_BYTES`] bytes, no whitespace or control
/// characters (they make names impossible to type in a CLI or a config), no
/// invisible or bidirectional format characters (see the module docs).
pub fn check_name(kind: &str, name: &str) -> Result<(), String> {
    match name_problem(name) {
        None => Ok(()),
        Some(problem) if name.is_empty() => Err(format!("{kind} name {problem}")),
        Some(problem) => Err(format!("{kind} name {:?} {problem}", excerpt(name))),
    }
}

/// What is wrong with a name, if anything: [`check_name`]'s rule, for
/// messages that show the name their own way.
pub(crate) fn name_problem(name: &str) -> Option<String> {
    // No ASCII character is a format character: the lookup is for the others
    // (it showed in the profile of a send, which checks its address).
    let format = || {
        name.char_indices()
            .filter(|(_, c)| !c.is_ascii())
            .find(|(_, c)| c.general_category() == GeneralCategory::Format)
    };
    if name.is_empty() {
        Some("must not be empty".into())
    } else if name.len() > MAX_NAME_BYTES {
        Some("must be at most 255 bytes".into())
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("must not contain whitespace or control characters".into())
    } else if let Some((at, c)) = format() {
        Some(format!(
            "must not contain invisible or bidirectional format characters \
             (U+{:04X} at byte {at})",
            u32::from(c)
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(check_name("queue", "orders.eu"), Ok(()));
        assert_eq!(check_name("queue", &"x".repeat(255)), Ok(()));
        for bad in ["", "a b", "tab\there", "nl\n", "bell\u{7}", &"x".repeat(256)] {
            assert!(check_name("queue", bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            check_name("address", "a b").unwrap_err(),
            "address name \"a b\" must not contain whitespace or control characters"
        );
        let long = check_name("address", &"y".repeat(10_000)).unwrap_err();
        assert_eq!(
            long,
            format!(
                "address name \"{}…[truncated 9900 bytes]\" must be at most 255 bytes",
                "y".repeat(100)
            )
        );
        assert_eq!(
            check_name("address", "").unwrap_err(),
            "address name must not be empty"
        );
        assert_eq!(check_name("address", PLACEHOLDER), Ok(()));
    }

    #[test]
    fn no_ascii_character_is_a_format_character() {
        // What lets `name_problem` skip the lookup for ASCII.
        assert!((0u8..128).all(|b| char::from(b).general_category() != GeneralCategory::Format));
    }

    #[test]
    fn invisible_and_bidirectional_characters_are_refused() {
        assert_eq!(
            check_name("queue", "DLQ\u{200B}").unwrap_err(),
            "queue name \"DLQ\\u{200b}\" must not contain invisible or bidirectional format \
             characters (U+200B at byte 3)"
        );
        for (name, code) in [
            ("a\u{202E}b", "U+202E"),
            ("\u{FEFF}q", "U+FEFF"),
            ("x\u{2066}y", "U+2066"),
            ("soft\u{AD}hyphen", "U+00AD"),
            ("tag\u{E0041}", "U+E0041"),
        ] {
            let err = check_name("address", name).unwrap_err();
            assert!(err.contains(code), "{err}");
        }
        // Visible letters of any script, and symbols, stay allowed.
        for good in ["заказы", "注文", "Ünïcødé", "a.b-c_d/e", "#", "emoji🙂"] {
            assert_eq!(check_name("address", good), Ok(()), "{good}");
        }
    }
}
