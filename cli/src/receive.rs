//! `rebound receive`: consume, settle and print messages from a queue.
//!
//! Every message is settled (acked, or nacked with `--nack`) as it is printed,
//! and the command flushes before it exits, so once it returns the outcome is on
//! the broker's disk: a message shown is a message consumed.

use std::time::Duration;

use crate::args::ServerArgs;
use crate::render::{MessageJson, delivery_line};

/// Most credit granted at once, so that a large `--count` does not make the
/// broker push a huge backlog at us.
const MAX_CREDIT: u64 = 1000;

/// Arguments of `rebound receive`.
#[derive(Debug, clap::Args)]
pub struct ReceiveArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// The queue to consume from.
    #[arg(long)]
    queue: String,
    /// Only messages this selector matches, e.g. "color = 'red'"; the others stay
    /// on the queue.
    #[arg(long, value_name = "SELECTOR")]
    filter: Option<String>,
    /// Stop after this many messages.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Stop when no message arrived for this long.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    timeout_ms: u64,
    /// Reject the messages (a failed delivery attempt) instead of acknowledging them.
    #[arg(long)]
    nack: bool,
    /// One JSON object per message.
    #[arg(long)]
    json: bool,
}

/// Runs `rebound receive`.
pub async fn run(args: ReceiveArgs) -> anyhow::Result<()> {
    let client = args.server.connect().await?;
    let mut granted = args.count.min(MAX_CREDIT);
    let mut consumer = client
        .consumer(&args.queue)
        .manual_credit(granted as u32)
        .filter(args.filter.unwrap_or_default())
        .open()
        .await?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let mut received = 0;
    while received < args.count {
        let Some(delivery) = consumer.next_timeout(timeout).await? else {
            break;
        };
        if args.json {
            outln!("{}", serde_json::to_string(&MessageJson::delivery(&delivery))?)?;
        } else {
            outln!("{}", delivery_line(&delivery))?;
        }
        if args.nack {
            consumer
                .nack(&[delivery.id], "rejected by rebound receive --nack")
                .await?;
        } else {
            consumer.ack(&[delivery.id]).await?;
        }
        received += 1;
        // Credit is spent per delivery: top it up until `count` deliveries are covered.
        if granted < args.count {
            consumer.grant(1).await?;
            granted += 1;
        }
    }
    let unknown = consumer.close().await?;
    anyhow::ensure!(
        unknown.is_empty(),
        "the broker did not know deliveries {unknown:?}"
    );
    if received < args.count {
        eprintln!("received {received} of {} messages", args.count);
    }
    Ok(())
}
