//! `rebound send`: send copies of one message to an address, through a
//! `Publisher`: the copies share one Publish stream and go in large frames.

use std::path::PathBuf;

use anyhow::Context as _;
use bytes::Bytes;
use futures::StreamExt as _;
use rebound_client::{OutgoingMessage, PropertyValue};

use crate::args::ServerArgs;
use crate::property;

/// Sends under way at once: enough to fill the publisher's frames.
const WINDOW: usize = 1024;

/// Arguments of `rebound send`.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// The address to send to.
    #[arg(long)]
    address: String,
    /// The body as text (default: empty).
    #[arg(long, conflicts_with = "body_file")]
    body: Option<String>,
    /// Read the body from a file; any bytes.
    #[arg(long, value_name = "FILE")]
    body_file: Option<PathBuf>,
    /// A property, KEY=VALUE (int, bool, double or string, guessed from VALUE) or
    /// KEY:TYPE=VALUE with TYPE one of string, int, double, bool, bytes (base64).
    #[arg(long = "property", value_name = "KEY[:TYPE]=VALUE", value_parser = property::parse)]
    properties: Vec<(String, PropertyValue)>,
    /// How many copies to send.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Do not persist the messages: faster, but lost on a broker restart.
    #[arg(long)]
    non_durable: bool,
    /// 0 (lowest) to 9 (highest); the broker's default is 4.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=9))]
    priority: Option<u8>,
    /// The message group (`_AMQ_GROUP_ID`): a queue delivers a group's messages one
    /// at a time, in send order.
    #[arg(long, value_name = "ID")]
    group: Option<String>,
    /// Scheduled delivery: not before this many ms from when the broker receives it.
    #[arg(long, value_name = "MS", conflicts_with = "deliver_at")]
    delay_ms: Option<u64>,
    /// Scheduled delivery: not before this time, RFC 3339 (2030-01-31T08:00:00Z,
    /// or with an offset: 2030-01-31T09:00:00+01:00).
    #[arg(long, value_name = "RFC3339", value_parser = parse_rfc3339_ms)]
    deliver_at: Option<u64>,
    /// Duplicate detection: if the address remembers this id, the broker
    /// acknowledges the message without storing it again (so of `--count` copies
    /// only the first is stored).
    #[arg(long, value_name = "ID")]
    duplicate_id: Option<String>,
}

/// An RFC 3339 time as ms since the Unix epoch (0 for a time before it: due now).
fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let at = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("not an RFC 3339 time such as 2030-01-31T08:00:00Z: {e}"))?;
    Ok(u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0))
}

/// Runs `rebound send`.
pub async fn run(args: SendArgs) -> anyhow::Result<()> {
    let body = match &args.body_file {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .into(),
        None => Bytes::from(args.body.unwrap_or_default()),
    };
    let mut message = OutgoingMessage::new(args.address.clone(), body);
    for (key, value) in args.properties {
        message = message.property(key, value);
    }
    if args.non_durable {
        message = message.durable(false);
    }
    if let Some(priority) = args.priority {
        message = message.priority(priority);
    }
    if let Some(group) = args.group {
        message = message.group(group);
    }
    if let Some(at) = args.deliver_at {
        message = message.deliver_at_ms(at);
    }
    if let Some(delay) = args.delay_ms {
        message = message.delay_ms(delay);
    }
    if let Some(id) = args.duplicate_id {
        message = message.duplicate_id(id);
    }

    let publisher = args.server.connect().await?.publisher();
    let sends = (0..args.count).map(|_| publisher.send(message.clone()));
    let mut sends = futures::stream::iter(sends).buffer_unordered(WINDOW);
    let mut sent = 0;
    while let Some(result) = sends.next().await {
        result?;
        sent += 1;
    }
    let (unrouted, duplicates) = (publisher.unrouted(), publisher.duplicates());
    let plural = if sent == 1 { "" } else { "s" };
    outln!("sent {sent} message{plural} to {}", args.address)?;
    if duplicates > 0 {
        outln!("{duplicates} of them were duplicates: acknowledged, not stored again")?;
    }
    if unrouted > 0 {
        eprintln!(
            "warning: {unrouted} of them were dropped: address '{}' has no queue",
            args.address
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliver_at_is_rfc3339_with_any_offset() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.5Z"), Ok(1500));
        assert_eq!(
            parse_rfc3339_ms("2030-01-31T09:00:00+01:00"),
            Ok(1_896_076_800_000)
        );
        assert_eq!(parse_rfc3339_ms("1969-12-31T00:00:00Z"), Ok(0));
        let err = parse_rfc3339_ms("tomorrow").unwrap_err();
        assert!(err.contains("RFC 3339"), "{err}");
    }
}
