//! `rebound address`: create and delete addresses.

use crate::args::{RoutingArg, ServerArgs, routing_type};

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
    }
    Ok(())
}
