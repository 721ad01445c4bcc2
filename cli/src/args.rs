//! The arguments the client subcommands share: `--server` and `--routing-type`.
//!
//! `--server` is a global flag: the top-level command declares it too (see
//! `main.rs`), so it may come before the subcommand (`rebound --server URL queue
//! list`, as users of other brokers' CLIs type it) or after it (`rebound queue list
//! --server URL`). clap hands a global flag given at any level down to the
//! subcommand that runs, which reads it from its own flattened [`ServerArgs`].

use rebound_client::{Client, RoutingType};

/// `--server`, taken by every subcommand that talks to a running broker.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The broker's gRPC URL, `http://host:port` or `host:port` (client commands).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "REBOUND_SERVER",
        default_value = rebound_client::DEFAULT_URL
    )]
    pub server: String,
}

impl ServerArgs {
    /// Connects to the broker.
    pub async fn connect(&self) -> rebound_client::Result<Client> {
        Client::connect(&self.server).await
    }
}

/// `--routing-type`. Left out, the broker applies the address's
/// `default-address-routing-type` setting.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum RoutingArg {
    /// Point-to-point: each message goes to one queue of the address.
    Anycast,
    /// Publish-subscribe: every queue of the address gets a copy.
    Multicast,
}

/// The wire routing type for an optional `--routing-type`.
pub fn routing_type(arg: Option<RoutingArg>) -> RoutingType {
    match arg {
        None => RoutingType::Unspecified,
        Some(RoutingArg::Anycast) => RoutingType::Anycast,
        Some(RoutingArg::Multicast) => RoutingType::Multicast,
    }
}
