//! `rebound queue`: create, delete, inspect, browse and purge queues, and count,
//! remove, move or retry (dead letters) selected messages.
//!
//! | file | what |
//! |---|---|
//! | `retry.rs` | `queue retry` in chunks: progress, and how far an interrupted retry got |

use std::io::Write as _;

use rebound_client::{QueueInfo, RetryMessagesResponse, Selection};

use crate::args::{RoutingArg, ServerArgs, routing_type};
use crate::render::{BrowsedJson, browsed_table, plain, print_list, print_stat, queue_fields, routing_name};
use crate::table;

mod retry;

/// `rebound queue` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum QueueCommand {
    /// Create a queue bound to an address (the address is created if missing).
    Create {
        #[command(flatten)]
        server: ServerArgs,
        /// The address to bind to.
        #[arg(long)]
        address: String,
        /// The queue name.
        #[arg(long)]
        queue: String,
        /// Default: the address's `default-address-routing-type` setting.
        #[arg(long, value_enum)]
        routing_type: Option<RoutingArg>,
        /// Keep the queue and its messages in memory only; lost on restart.
        #[arg(long)]
        non_durable: bool,
    },
    /// Delete a queue and its messages.
    Delete {
        #[command(flatten)]
        server: ServerArgs,
        /// The queue name.
        #[arg(long)]
        queue: String,
    },
    /// List every queue with its counters.
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// One JSON object per queue.
        #[arg(long)]
        json: bool,
    },
    /// Show one queue's counters.
    Stat {
        #[command(flatten)]
        server: ServerArgs,
        /// The queue name.
        #[arg(long)]
        queue: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Show messages without consuming them or changing their delivery counts.
    Browse {
        #[command(flatten)]
        server: ServerArgs,
        /// The queue name.
        #[arg(long)]
        queue: String,
        /// Only messages this selector matches, e.g. "color = 'red'".
        #[arg(long, value_name = "SELECTOR")]
        filter: Option<String>,
        /// At most this many messages (default: the broker's, 200).
        #[arg(long)]
        limit: Option<u32>,
        /// One JSON object per message.
        #[arg(long)]
        json: bool,
    },
    /// Count the selected messages (those being delivered are not counted).
    Count {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        selection: SelectionArgs,
    },
    /// Remove the selected messages (counted as removed).
    Remove {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        selection: SelectionArgs,
    },
    /// Move the selected messages to another address, routed like a send there.
    Move {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        selection: SelectionArgs,
        /// The address to move them to.
        #[arg(long)]
        to_address: String,
    },
    /// Send dead letters back to exactly the queue each failed on, with a fresh
    /// delivery count.
    Retry {
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        selection: SelectionArgs,
        /// Show where each message would go; move nothing.
        #[arg(long)]
        dry_run: bool,
        /// At most this many messages per second (default: as fast as possible).
        #[arg(long, value_name = "PER_SECOND")]
        rate: Option<u32>,
        /// Messages moved per call to the broker; progress goes to stderr after
        /// each (default: --rate's value, at most 1000; 1000 without --rate).
        #[arg(long, value_name = "MESSAGES", value_parser = clap::value_parser!(u32).range(1..))]
        chunk: Option<u32>,
        /// One JSON object: moved, skipped and the outcome of each message.
        #[arg(long)]
        json: bool,
    },
    /// Remove every message that is not being delivered.
    Purge {
        #[command(flatten)]
        server: ServerArgs,
        /// The queue name.
        #[arg(long)]
        queue: String,
    },
}

/// Which messages of a queue a command applies to.
#[derive(Debug, clap::Args)]
pub struct SelectionArgs {
    /// The queue.
    #[arg(long)]
    queue: String,
    /// Only messages this selector matches, e.g. "color = 'red'".
    #[arg(long, value_name = "SELECTOR", conflicts_with = "message_id")]
    filter: Option<String>,
    /// Only this message, by its id on the queue.
    #[arg(long, value_name = "ID")]
    message_id: Option<u64>,
}

impl From<SelectionArgs> for Selection {
    fn from(args: SelectionArgs) -> Self {
        Selection {
            queue: args.queue,
            filter: args.filter,
            message_id: args.message_id,
        }
    }
}

/// Columns of `queue list`: the counters that matter at a glance, in
/// [`queue_fields`] order.
const LIST_COLUMNS: [&str; 15] = [
    "name",
    "address",
    "routing_type",
    "durable",
    "messages",
    "delivering",
    "scheduled",
    "consumers",
    "state",
    "added",
    "acked",
    "redelivered",
    "dead_lettered",
    "dropped",
    "expired",
];

fn list_table(queues: &[QueueInfo]) -> String {
    let mut columns = LIST_COLUMNS.to_vec();
    // On a cluster, which node serves each queue ("-": none known yet).
    if queues.iter().any(|q| !q.served_by.is_empty()) {
        columns.push("served_by");
    }
    let headers: Vec<String> = columns
        .iter()
        .map(|column| column.replace('_', "-").to_uppercase())
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|queue| {
            let fields = queue_fields(queue).into_iter();
            fields
                .filter(|(key, _)| columns.contains(key))
                .map(|(_, value)| match value {
                    serde_json::Value::Null => "-".to_owned(),
                    value => plain(&value),
                })
                .collect()
        })
        .collect();
    table::render(&headers, &rows)
}

/// `queue retry --json`: the response as one object.
fn retry_json(response: &RetryMessagesResponse) -> serde_json::Value {
    let outcomes: Vec<serde_json::Value> = response
        .outcomes
        .iter()
        .map(|o| {
            serde_json::json!({
                "message_id": o.message_id,
                "to_address": o.to_address,
                "to_queue": o.to_queue,
                "skipped": (!o.skipped.is_empty()).then_some(&o.skipped),
            })
        })
        .collect();
    serde_json::json!({ "moved": response.moved, "skipped": response.skipped, "outcomes": outcomes })
}

/// `queue retry`'s text: a summary line, then a line per skipped message (with
/// `--dry-run`: a line per message, saying where it would go).
fn retry_report(response: &RetryMessagesResponse, queue: &str, dry_run: bool) -> String {
    let mut out = if dry_run {
        let movable = response.outcomes.len() as u64 - response.skipped;
        format!(
            "dry run: would move {movable} messages from {queue}, skip {}\n",
            response.skipped
        )
    } else {
        format!(
            "moved {} messages from {queue}, skipped {}\n",
            response.moved, response.skipped
        )
    };
    for o in &response.outcomes {
        if !o.skipped.is_empty() {
            out.push_str(&format!("#{} skipped: {}\n", o.message_id, o.skipped));
        } else if dry_run {
            out.push_str(&format!("#{} → {}/{}\n", o.message_id, o.to_address, o.to_queue));
        }
    }
    out
}

/// Messages a `queue retry` moves per call when neither `--chunk` nor `--rate`
/// says otherwise: about a second's work, and a reply far below any size limit.
const RETRY_CHUNK: u32 = 1000;

/// Runs a `rebound queue` subcommand.
pub async fn run(command: QueueCommand) -> anyhow::Result<()> {
    match command {
        QueueCommand::Create {
            server,
            address,
            queue,
            routing_type: routing,
            non_durable,
        } => {
            let client = server.connect().await?;
            let info = client
                .create_queue(&address, &queue, routing_type(routing), !non_durable)
                .await?;
            let durability = if info.durable { "durable" } else { "non-durable" };
            let routing = routing_name(info.routing_type());
            outln!(
                "created queue {} ({routing}, {durability}) on address {}",
                info.name,
                info.address
            )?;
        }
        QueueCommand::Delete { server, queue } => {
            server.connect().await?.delete_queue(&queue).await?;
            outln!("deleted queue {queue}")?;
        }
        QueueCommand::List { server, json } => {
            let queues = server.connect().await?.list_queues().await?;
            print_list(&queues, json, list_table)?;
        }
        QueueCommand::Stat { server, queue, json } => {
            print_stat(&server.connect().await?.queue(&queue).await?, json)?;
        }
        QueueCommand::Browse {
            server,
            queue,
            filter,
            limit,
            json,
        } => {
            let client = server.connect().await?;
            let messages = client
                .browse_filtered(&queue, filter.as_deref().unwrap_or_default(), limit.unwrap_or(0))
                .await?;
            if json {
                for browsed in &messages {
                    outln!("{}", serde_json::to_string(&BrowsedJson::new(browsed, &queue))?)?;
                }
            } else {
                write!(std::io::stdout(), "{}", browsed_table(&messages))?;
            }
        }
        QueueCommand::Count { server, selection } => {
            let count = server.connect().await?.count_messages(&selection.into()).await?;
            outln!("{count}")?;
        }
        QueueCommand::Remove { server, selection } => {
            let selection = Selection::from(selection);
            let removed = server.connect().await?.remove_messages(&selection).await?;
            outln!("removed {removed} messages from {}", selection.queue)?;
        }
        QueueCommand::Move {
            server,
            selection,
            to_address,
        } => {
            let selection = Selection::from(selection);
            let moved = server
                .connect()
                .await?
                .move_messages(&selection, &to_address)
                .await?;
            outln!("moved {moved} messages from {} to {to_address}", selection.queue)?;
        }
        QueueCommand::Retry {
            server,
            selection,
            dry_run,
            rate,
            chunk,
            json,
        } => {
            let selection = Selection::from(selection);
            let client = server.connect().await?;
            let rate = rate.unwrap_or(0);
            let (response, stopped) = if dry_run {
                (client.retry_messages(&selection, true, rate).await?, None)
            } else {
                let chunk = chunk.unwrap_or(if rate > 0 {
                    rate.min(RETRY_CHUNK)
                } else {
                    RETRY_CHUNK
                });
                let retried = retry::in_chunks(&client, &selection, rate, chunk).await?;
                (retried.report, retried.stopped)
            };
            if json {
                outln!("{}", retry_json(&response))?;
            } else {
                write!(
                    std::io::stdout(),
                    "{}",
                    retry_report(&response, &selection.queue, dry_run)
                )?;
            }
            if let Some(stopped) = stopped {
                return Err(stopped);
            }
        }
        QueueCommand::Purge { server, queue } => {
            let removed = server.connect().await?.purge(&queue).await?;
            outln!("purged {removed} messages from {queue}")?;
        }
    }
    Ok(())
}
