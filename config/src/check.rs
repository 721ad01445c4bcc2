//! Validators: a raw TOML value in, the typed value or a message out.
//!
//! The address-settings table in `settings.rs` names one per key (the names
//! resolve where the table expands, in `model.rs`), and the loading uses
//! them for the other keys. Being their own file, below `schedule.rs` and
//! `routing_type.rs`, lets everything that loads the file use them without
//! importing each other. [`checked`] applies one to a value from the file.

use toml::Spanned;

use crate::address_full::{AddressFullPolicy, GlobalMaxSize};
use crate::error::{ConfigError, Document};
use crate::names::{self, MAX_MESSAGE_SIZE_LIMIT, MAX_PROPERTIES_BYTES_LIMIT, PLACEHOLDER};
use crate::routing_type::RoutingType;
use crate::schedule::RedeliverySchedule;

/// Runs `check` on an optional spanned value, locating a failure at the value.
pub(crate) fn checked<R, T>(
    doc: &Document<'_>,
    value: Option<Spanned<R>>,
    check: fn(R) -> Result<T, String>,
    key: impl FnOnce() -> String,
) -> Result<Option<T>, ConfigError> {
    value.map(|value| check_one(doc, value, check, key)).transpose()
}

/// Runs `check` on a spanned value, locating a failure at the value.
pub(crate) fn check_one<R, T>(
    doc: &Document<'_>,
    value: Spanned<R>,
    check: fn(R) -> Result<T, String>,
    key: impl FnOnce() -> String,
) -> Result<T, ConfigError> {
    let start = value.span().start;
    check(value.into_inner()).map_err(|message| doc.error(start, Some(key()), message))
}

pub(crate) fn any<T>(value: T) -> Result<T, String> {
    Ok(value)
}

pub(crate) fn non_negative(value: i64) -> Result<u64, String> {
    u64::try_from(value).map_err(|_| format!("must not be negative (got {value})"))
}

pub(crate) fn positive(value: i64) -> Result<u64, String> {
    match value {
        1.. => Ok(value.unsigned_abs()),
        _ => Err(format!("must be greater than 0 (got {value})")),
    }
}

pub(crate) fn count(value: i64) -> Result<u32, String> {
    let value = non_negative(value)?;
    u32::try_from(value).map_err(|_| format!("must be at most {} (got {value})", u32::MAX))
}

pub(crate) fn multiplier(value: f64) -> Result<f64, String> {
    if value.is_finite() && value >= 1.0 {
        Ok(value)
    } else {
        Err(format!("must be a number >= 1.0 (got {value})"))
    }
}

pub(crate) fn fraction(value: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("must be between 0.0 and 1.0 (got {value})"))
    }
}

/// `0` = off.
pub(crate) fn count_or_off(value: i64) -> Result<Option<u32>, String> {
    match value {
        0 => Ok(None),
        _ => count(value).map(Some),
    }
}

/// `0.0` = off.
pub(crate) fn ratio_or_off(value: f64) -> Result<Option<f64>, String> {
    match fraction(value)? {
        0.0 => Ok(None),
        ratio => Ok(Some(ratio)),
    }
}

/// A number of recent outcomes kept per queue: bounded, as each costs memory.
pub(crate) fn window(value: i64) -> Result<u32, String> {
    match value {
        1..=10_000 => Ok(value as u32),
        _ => Err(format!("must be between 1 and 10000 (got {value})")),
    }
}

/// `-1` = unlimited. Artemis also reads `0` as unlimited, which
/// surprises people, so we refuse it.
pub(crate) fn delivery_attempts(value: i64) -> Result<Option<u32>, String> {
    match value {
        -1 => Ok(None),
        0 => Err("must not be 0; use -1 for unlimited".to_owned()),
        _ => count(value).map(Some).map_err(|_| {
            format!(
                "must be -1 (unlimited) or between 1 and {} (got {value})",
                u32::MAX
            )
        }),
    }
}

pub(crate) fn minus_one_or_non_negative(value: i64) -> Result<Option<u64>, String> {
    match value {
        -1 => Ok(None),
        _ => non_negative(value)
            .map(Some)
            .map_err(|_| format!("must be -1 (off) or >= 0 (got {value})")),
    }
}

pub(crate) fn minus_one_or_positive(value: i64) -> Result<Option<u64>, String> {
    match value {
        -1 => Ok(None),
        _ => positive(value)
            .map(Some)
            .map_err(|_| format!("must be -1 (unlimited) or > 0 (got {value})")),
    }
}

/// `max-message-size`: a message the store could not keep (with what the
/// broker adds to it) must not be promised.
pub(crate) fn message_size(value: i64) -> Result<u64, String> {
    let size = positive(value)?;
    if size > MAX_MESSAGE_SIZE_LIMIT {
        return Err(format!(
            "must be at most {MAX_MESSAGE_SIZE_LIMIT} bytes, the largest message the store keeps (got {value})"
        ));
    }
    Ok(size)
}

/// `max-properties-bytes`: properties beyond what the store keeps inline
/// (with room for a dead letter's) must not be promised.
pub(crate) fn properties_bytes(value: i64) -> Result<u64, String> {
    let size = positive(value)?;
    if size > MAX_PROPERTIES_BYTES_LIMIT {
        return Err(format!(
            "must be at most {MAX_PROPERTIES_BYTES_LIMIT} bytes, the most properties the store keeps with a message (got {value})"
        ));
    }
    Ok(size)
}

/// A dead-letter or expiry address. The empty string explicitly unsets an
/// inherited one (Artemis's convention), hence `Some(None)` once wrapped by
/// the caller; anything else must be a name the broker can create.
pub(crate) fn address_or_empty(value: String) -> Result<Option<String>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    names::check_name("address", &value)?;
    Ok(Some(value))
}

/// An auto-created queue's prefix: the names it makes must be valid for any
/// address, so it is checked in front of the shortest one.
pub(crate) fn queue_prefix(value: String) -> Result<String, String> {
    affix(format!("{value}{PLACEHOLDER}"), value)
}

/// An auto-created queue's suffix, checked like [`queue_prefix`].
pub(crate) fn queue_suffix(value: String) -> Result<String, String> {
    affix(format!("{PLACEHOLDER}{value}"), value)
}

fn affix(example: String, value: String) -> Result<String, String> {
    match names::name_problem(&example) {
        Some(problem) => Err(format!("the queue names made with it {problem}")),
        None => Ok(value),
    }
}

/// A queue's filter, parsed as the broker will; a blank one is no filter.
pub(crate) fn filter(value: String) -> Result<Option<String>, String> {
    if value.trim().is_empty() {
        return Ok(None);
    }
    rebound_selector::Selector::parse(&value).map_err(|e| format!("invalid filter: {e}"))?;
    Ok(Some(value))
}

pub(crate) fn address_full_policy(value: String) -> Result<AddressFullPolicy, String> {
    value.parse().map_err(|e| format!("{e}"))
}

/// `-1` = unlimited; `0` would refuse every message, so it is refused.
pub(crate) fn global_max_size(value: i64) -> Result<GlobalMaxSize, String> {
    match value {
        -1 => Ok(GlobalMaxSize::Unlimited),
        1.. => Ok(GlobalMaxSize::Bytes(value.unsigned_abs())),
        _ => Err(format!("must be -1 (unlimited) or > 0 (got {value})")),
    }
}

pub(crate) fn routing_type(value: String) -> Result<RoutingType, String> {
    value.parse().map_err(|e| format!("{e}"))
}

/// Like an address, an empty schedule unsets an inherited one.
pub(crate) fn schedule(value: String) -> Result<Option<RedeliverySchedule>, String> {
    if value.trim().is_empty() {
        return Ok(None);
    }
    RedeliverySchedule::parse(&value)
        .map(Some)
        .map_err(|e| format!("invalid schedule: {e}"))
}

/// `host:port`, or `""` for a listener that is off.
pub(crate) fn host_port_or_off(value: String) -> Result<String, String> {
    if value.is_empty() {
        Ok(value)
    } else {
        host_port(value)
    }
}

pub(crate) fn host_port(value: String) -> Result<String, String> {
    let valid = value
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if valid {
        Ok(value)
    } else {
        Err(format!("expected \"host:port\" (got {value:?})"))
    }
}

/// A host name (dot-separated labels of letters, digits, '-' and '_') or an IP
/// address, as `Host` headers carry them, without scheme or port: an entry of
/// `http-allowed-hosts`. Lowercased (names compare without case), an IPv6
/// address without its brackets.
pub(crate) fn host_name(value: String) -> Result<String, String> {
    let name = value.to_ascii_lowercase();
    let unbracketed = name.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = unbracketed.parse::<std::net::IpAddr>() {
        return Ok(ip.to_string());
    }
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.len() <= 253 && name.split('.').all(label) {
        Ok(name)
    } else {
        Err(format!(
            "expected a host name such as \"console.example.com\" or an IP address, without scheme or port (got {value:?})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn allowed_hosts_are_names_or_addresses_without_port() {
        let ok = |v: &str| host_name(v.to_owned());
        assert_eq!(ok("Console.Example.com").as_deref(), Ok("console.example.com"));
        assert_eq!(ok("rebound_1").as_deref(), Ok("rebound_1"));
        assert_eq!(ok("[FD00::1]").as_deref(), Ok("fd00::1"));
        assert_eq!(ok("10.0.0.5").as_deref(), Ok("10.0.0.5"));
        for bad in [
            "",
            "http://console/",
            "console:8161",
            "a..b",
            "-a",
            "a b",
            "*.example.com",
        ] {
            assert!(ok(bad).is_err(), "{bad:?}");
        }
    }
}
