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

    let publisher = args.server.connect().await?.publisher();
    let sends = (0..args.count).map(|_| publisher.send(message.clone()));
    let mut sends = futures::stream::iter(sends).buffer_unordered(WINDOW);
    let mut sent = 0;
    while let Some(result) = sends.next().await {
        result?;
        sent += 1;
    }
    let unrouted = publisher.unrouted();
    let plural = if sent == 1 { "" } else { "s" };
    outln!("sent {sent} message{plural} to {}", args.address)?;
    if unrouted > 0 {
        eprintln!(
            "warning: {unrouted} of them were dropped: address '{}' has no queue",
            args.address
        );
    }
    Ok(())
}
