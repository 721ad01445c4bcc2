//! `rebound queue`: create, delete, inspect, browse and purge queues.

use std::io::Write as _;

use rebound_client::QueueInfo;

use super::render::{BrowsedJson, QueueJson, browsed_line, plain, queue_fields, routing_name};
use super::{RoutingArg, ServerArgs, routing_type, table};

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
        /// At most this many messages (default: the broker's, 200).
        #[arg(long)]
        limit: Option<u32>,
        /// One JSON object per message.
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

/// Columns of `queue list`: the counters that matter at a glance, in
/// [`queue_fields`] order.
const LIST_COLUMNS: [&str; 14] = [
    "name",
    "address",
    "routing_type",
    "durable",
    "messages",
    "delivering",
    "scheduled",
    "consumers",
    "added",
    "acked",
    "redelivered",
    "dead_lettered",
    "dropped",
    "expired",
];

fn list_table(queues: &[QueueInfo]) -> String {
    let headers = LIST_COLUMNS.map(|column| column.replace('_', "-").to_uppercase());
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|queue| {
            let fields = queue_fields(queue).into_iter();
            fields
                .filter(|(key, _)| LIST_COLUMNS.contains(key))
                .map(|(_, value)| plain(&value))
                .collect()
        })
        .collect();
    table::render(&headers, &rows)
}

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
            if json {
                for queue in &queues {
                    outln!("{}", serde_json::to_string(&QueueJson(queue))?)?;
                }
            } else {
                write!(std::io::stdout(), "{}", list_table(&queues))?;
            }
        }
        QueueCommand::Stat { server, queue, json } => {
            let info = server.connect().await?.queue(&queue).await?;
            if json {
                outln!("{}", serde_json::to_string(&QueueJson(&info))?)?;
            } else {
                for (key, value) in queue_fields(&info) {
                    outln!("{key}: {}", plain(&value))?;
                }
            }
        }
        QueueCommand::Browse {
            server,
            queue,
            limit,
            json,
        } => {
            let messages = server.connect().await?.browse(&queue, limit.unwrap_or(0)).await?;
            for browsed in &messages {
                if json {
                    outln!("{}", serde_json::to_string(&BrowsedJson::new(browsed, &queue))?)?;
                } else {
                    outln!("{}", browsed_line(browsed))?;
                }
            }
        }
        QueueCommand::Purge { server, queue } => {
            let removed = server.connect().await?.purge(&queue).await?;
            outln!("purged {removed} messages from {queue}")?;
        }
    }
    Ok(())
}
