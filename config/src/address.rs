//! The `[[addresses]]` section: addresses and their queues to create at
//! start-up, as declared and as read from TOML.
//!
//! Apart from `model.rs` because it is its own concern, with its own rules
//! (names unique, a queue inherits its address's routing type) and tests.

use std::collections::HashMap;

use serde::Deserialize;
use toml::Spanned;

use crate::check::{self, checked};
use crate::error::{ConfigError, Document};
use crate::names::check_name;
use crate::routing_type::RoutingType;

/// An address declared in the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressConfig {
    /// The address name.
    pub name: String,
    /// How messages sent to the address reach its queues.
    pub routing_type: RoutingType,
    /// Queues bound to the address.
    pub queues: Vec<QueueConfig>,
}

/// A queue declared under an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// The queue name, unique across all addresses.
    pub name: String,
    /// Defaults to the address's routing type.
    pub routing_type: RoutingType,
    /// Whether messages survive a restart.
    pub durable: bool,
    /// A message selector, kept as written (a blank one is `None`); it is
    /// parsed at load, so the broker's own parse of it cannot fail.
    pub filter: Option<String>,
}

/// One `[[addresses]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawAddress {
    name: Spanned<String>,
    routing_type: Option<Spanned<String>>,
    #[serde(default)]
    queues: Vec<RawQueue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawQueue {
    name: Spanned<String>,
    routing_type: Option<Spanned<String>>,
    #[serde(default = "yes")]
    durable: bool,
    filter: Option<Spanned<String>>,
}

fn yes() -> bool {
    true
}

/// Validates the `[[addresses]]` tables as written.
pub(crate) fn addresses(doc: &Document<'_>, raw: Vec<RawAddress>) -> Result<Vec<AddressConfig>, ConfigError> {
    // Names must be unique: addresses among addresses, queues across all of
    // them (a queue is looked up by name alone). Values: line first seen.
    let mut address_lines = HashMap::new();
    let mut queue_lines = HashMap::new();
    let mut addresses = Vec::with_capacity(raw.len());
    for (i, address) in raw.into_iter().enumerate() {
        let at = format!("addresses[{i}]");
        let name = unique_name(
            doc,
            address.name,
            &format!("{at}.name"),
            "address",
            &mut address_lines,
        )?;
        let routing_type = checked(doc, address.routing_type, check::routing_type, || {
            format!("{at}.routing-type")
        })?
        .unwrap_or(RoutingType::Anycast);
        let mut queues = Vec::with_capacity(address.queues.len());
        for (j, queue) in address.queues.into_iter().enumerate() {
            let at = format!("{at}.queues[{j}]");
            queues.push(QueueConfig {
                name: unique_name(doc, queue.name, &format!("{at}.name"), "queue", &mut queue_lines)?,
                routing_type: checked(doc, queue.routing_type, check::routing_type, || {
                    format!("{at}.routing-type")
                })?
                .unwrap_or(routing_type),
                durable: queue.durable,
                filter: checked(doc, queue.filter, check::filter, || format!("{at}.filter"))?.flatten(),
            });
        }
        addresses.push(AddressConfig {
            name,
            routing_type,
            queues,
        });
    }
    Ok(addresses)
}

/// Checks that `name` is a valid name (`names.rs`) and not yet in `seen`
/// (name → line).
fn unique_name(
    doc: &Document<'_>,
    name: Spanned<String>,
    key: &str,
    what: &str,
    seen: &mut HashMap<String, usize>,
) -> Result<String, ConfigError> {
    let start = name.span().start;
    let name = name.into_inner();
    let problem = match check_name(what, &name) {
        Err(problem) => Some(problem),
        Ok(()) => seen
            .get(&name)
            .map(|line| format!("duplicate {what} `{name}`, first defined on line {line}")),
    };
    if let Some(message) = problem {
        return Err(doc.error(start, Some(key.to_owned()), message));
    }
    seen.insert(name.clone(), doc.line(start));
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loads a file's `[[addresses]]` as `Config::parse` does.
    fn load(text: &str) -> Result<Vec<AddressConfig>, ConfigError> {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            addresses: Vec<RawAddress>,
        }
        let doc = Document::new("test.toml", text);
        let file: File = toml::from_str(text).map_err(|e| doc.toml_error(&e))?;
        addresses(&doc, file.addresses)
    }

    #[test]
    fn queue_defaults_follow_the_address() {
        let addresses = load(
            r##"
            [[addresses]]
            name = "news"
            routing-type = "multicast"
              [[addresses.queues]]
              name = "news.all"
              [[addresses.queues]]
              name = "news.red"
              durable = false
              filter = "color = 'red'"
              routing-type = "anycast"
            [[addresses]]
            name = "jobs"
            "##,
        )
        .unwrap();
        let news = &addresses[0];
        assert_eq!(news.routing_type, RoutingType::Multicast);
        assert_eq!(news.queues[0].routing_type, RoutingType::Multicast);
        assert!(news.queues[0].durable);
        assert_eq!(news.queues[0].filter, None);
        assert_eq!(news.queues[1].routing_type, RoutingType::Anycast);
        assert!(!news.queues[1].durable);
        assert_eq!(news.queues[1].filter.as_deref(), Some("color = 'red'"));
        assert_eq!(addresses[1].routing_type, RoutingType::Anycast);
        assert!(addresses[1].queues.is_empty());
    }

    #[test]
    fn address_errors() {
        let cases = [
            (
                "[[addresses]]\nname = \"a\"\n[[addresses]]\nname = \"a\"",
                "test.toml:4:8: addresses[1].name: duplicate address `a`, first defined on line 2",
            ),
            (
                "[[addresses]]\nname = \"\"",
                "test.toml:2:8: addresses[0].name: address name must not be empty",
            ),
            (
                "[[addresses]]\nname = \"a\"\nrouting-type = \"fanout\"",
                "test.toml:3:16: addresses[0].routing-type: expected `anycast` or `multicast` (got \"fanout\")",
            ),
            (
                "[[addresses]]\nname = \"a\"\n[[addresses.queues]]\nname = \"q\"\n[[addresses]]\nname = \"b\"\n[[addresses.queues]]\nname = \"q\"",
                "test.toml:8:8: addresses[1].queues[0].name: duplicate queue `q`, first defined on line 4",
            ),
            (
                "[[addresses]]\nname = \"a\"\n[[addresses.queues]]\nname = \"q\"\nrouting-type = \"x\"",
                "test.toml:5:16: addresses[0].queues[0].routing-type: expected `anycast` or `multicast` (got \"x\")",
            ),
            (
                "[[addresses]]\nrouting-type = \"anycast\"",
                "test.toml:1:1: addresses[0]: missing field `name`",
            ),
            (
                "[[addresses]]\nname = \"a\"\n[[addresses.queues]]\nname = \"DLQ\u{200B}\"",
                "test.toml:4:8: addresses[0].queues[0].name: queue name \"DLQ\\u{200b}\" must not \
                 contain invisible or bidirectional format characters (U+200B at byte 3)",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(load(text).unwrap_err().to_string(), expected, "{text}");
        }
    }

    #[test]
    fn names_and_filters_are_checked_at_load() {
        let queue = |name: &str, filter: &str| {
            format!(
                "[[addresses]]\nname = \"a\"\n[[addresses.queues]]\nname = \"{name}\"\nfilter = \"{filter}\""
            )
        };
        let cases = [
            (
                "[[addresses]]\nname = \"a b\"".to_owned(),
                "test.toml:2:8: addresses[0].name: address name \"a b\" must not contain whitespace or control characters".to_owned(),
            ),
            (
                format!("[[addresses]]\nname = \"{}\"", "n".repeat(10_000)),
                format!(
                    "test.toml:2:8: addresses[0].name: address name \"{}…[truncated 9900 bytes]\" must be at most 255 bytes",
                    "n".repeat(100)
                ),
            ),
            (
                queue("q\\t", "x = 1"),
                "test.toml:4:8: addresses[0].queues[0].name: queue name \"q\\t\" must not contain whitespace or control characters".to_owned(),
            ),
            (
                queue("q", "a = = 1"),
                "test.toml:5:10: addresses[0].queues[0].filter: invalid filter: ".to_owned(),
            ),
        ];
        for (text, expected) in cases {
            let err = load(&text).unwrap_err().to_string();
            assert!(err.starts_with(&expected), "{err}\nexpected: {expected}");
        }
        let blank = load(&queue("q", " ")).unwrap();
        assert_eq!(blank[0].queues[0].filter, None, "a blank filter is none");
    }
}
