//! The client subcommands of the `rebound` binary.
//!
//! One file per subcommand (group), each with its clap arguments and a `run`.
//! They reach the broker only through `rebound_client`, the documented way for a
//! Rust program to talk to rebound, so the CLI is that crate's first user. Results
//! go to stdout one record per line; failures are returned as errors for
//! `main.rs` to print as a single `error: ...` line.

use rebound_client::{Client, RoutingType};

/// `writeln!` to stdout. Unlike `println!` it returns an error instead of
/// panicking when stdout is closed, e.g. piped into `head`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)
    }};
}

pub mod address;
pub mod config;
pub mod property;
pub mod queue;
pub mod receive;
mod render;
pub mod send;
pub mod settings;
mod table;

/// `--server`, taken by every subcommand that talks to a running broker.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The broker's gRPC URL, `http://host:port` or `host:port`.
    #[arg(long, value_name = "URL", env = "REBOUND_SERVER", default_value = rebound_client::DEFAULT_URL)]
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
fn routing_type(arg: Option<RoutingArg>) -> RoutingType {
    match arg {
        None => RoutingType::Unspecified,
        Some(RoutingArg::Anycast) => RoutingType::Anycast,
        Some(RoutingArg::Multicast) => RoutingType::Multicast,
    }
}
