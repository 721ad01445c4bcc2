//! `rebound address`: create, delete, list and inspect addresses.

use rebound_client::AddressInfo;

use crate::args::{RoutingArg, ServerArgs, routing_type};
use crate::render::{address_fields, plain, print_list, print_stat};
use crate::table;

/// `rebound address` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum AddressCommand {
    /// Create an address.
    Create {
        #[command(flatten)]
        server: ServerArgs,
        /// The address name.
        #[arg(long)]
        name: String,
        /// Default: the address's `default-address-routing-type` setting.
        #[arg(long, value_enum)]
        routing_type: Option<RoutingArg>,
    },
    /// Delete an address.
    Delete {
        #[command(flatten)]
        server: ServerArgs,
        /// The address name.
        #[arg(long)]
        name: String,
        /// Also delete its queues and their messages (otherwise an address with
        /// queues is refused).
        #[arg(long)]
        force: bool,
    },
    /// List every address with its routing types, queues and their summed gauges.
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// One JSON object per address.
        #[arg(long)]
        json: bool,
    },
    /// Show one address: routing types, queues and their summed gauges.
    Stat {
        #[command(flatten)]
        server: ServerArgs,
        /// The address name.
        #[arg(long)]
        name: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `rebound address` subcommand.
pub async fn run(command: AddressCommand) -> anyhow::Result<()> {
    match command {
        AddressCommand::Create {
            server,
            name,
            routing_type: routing,
        } => {
            let created = server
                .connect()
                .await?
                .create_address(&name, routing_type(routing))
                .await?;
            if created {
                outln!("created address {name}")?;
            } else {
                outln!("address {name} exists already")?;
            }
        }
        AddressCommand::Delete { server, name, force } => {
            server.connect().await?.delete_address(&name, force).await?;
            outln!("deleted address {name}")?;
        }
        AddressCommand::List { server, json } => {
            let addresses = server.connect().await?.list_addresses().await?;
            print_list(&addresses, json, list_table)?;
        }
        AddressCommand::Stat { server, name, json } => {
            print_stat(&server.connect().await?.address(&name).await?, json)?;
        }
    }
    Ok(())
}

/// `address list`'s table: every field of [`address_fields`] but the queue names,
/// which are counted instead (`address stat` names them).
fn list_table(addresses: &[AddressInfo]) -> String {
    let headers = [
        "NAME",
        "ROUTING-TYPES",
        "AUTO-CREATED",
        "QUEUES",
        "MESSAGES",
        "DELIVERING",
        "SCHEDULED",
        "CONSUMERS",
        "BYTES",
        "MAX-SIZE-BYTES",
        "FULL-POLICY",
        "BLOCKED",
        "DROPPED",
    ];
    let rows: Vec<Vec<String>> = addresses
        .iter()
        .map(|address| {
            address_fields(address)
                .into_iter()
                .map(|(key, value)| match key {
                    "queues" => address.queues.len().to_string(),
                    // Comma-free, so that the table splits on whitespace.
                    "routing_types" => plain(&value).replace(", ", ","),
                    _ => plain(&value),
                })
                .collect()
        })
        .collect();
    table::render(&headers, &rows)
}
