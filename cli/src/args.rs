//! The arguments the client subcommands share: `--server` (with the TLS flags
//! `--ca-cert`, `--client-cert`, `--client-key`, and the login `--user`,
//! `--password`) and `--routing-type`.
//!
//! The password is best given by `REBOUND_PASSWORD`: a command line shows in
//! `ps`, the environment does not, and `--help` never prints its value.
//!
//! `--server` is a global flag: the top-level command declares it too (see
//! `main.rs`), so it may come before the subcommand (`rebound --server URL queue
//! list`, as users of other brokers' CLIs type it) or after it (`rebound queue list
//! --server URL`). clap hands a global flag given at any level down to the
//! subcommand that runs, which reads it from its own flattened [`ServerArgs`].

use std::path::PathBuf;

use rebound_client::{Client, ConnectOptions, Credentials, Error, RoutingType, TlsOptions};

/// `--server`, taken by every subcommand that talks to a running broker.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The broker's gRPC URL, `http://host:port`, `host:port`, or `https://host:port` for TLS
    /// (needs --ca-cert) (client commands).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "REBOUND_SERVER",
        default_value = rebound_client::DEFAULT_URL
    )]
    pub server: String,
    /// PEM file with the CA certificate that signed the broker's (for an https:// server).
    #[arg(long, global = true, value_name = "FILE", env = "REBOUND_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// PEM file with this client's certificate, for a broker that requires one (mutual TLS).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "REBOUND_CLIENT_CERT",
        requires = "client_key"
    )]
    pub client_cert: Option<PathBuf>,
    /// PEM file with the private key of --client-cert.
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "REBOUND_CLIENT_KEY",
        requires = "client_cert"
    )]
    pub client_key: Option<PathBuf>,
    /// User to log in as, for a broker with users (with --password; a client
    /// certificate whose CN names a user logs in without either).
    #[arg(long, global = true, value_name = "NAME", env = "REBOUND_USER")]
    pub user: Option<String>,
    /// Password of --user. Prefer the environment variable: a command line shows in `ps`.
    #[arg(
        long,
        global = true,
        value_name = "PASSWORD",
        env = "REBOUND_PASSWORD",
        hide_env_values = true
    )]
    pub password: Option<String>,
}

impl ServerArgs {
    /// Connects to the broker (over TLS for an `https://` URL), logging in as --user.
    pub async fn connect(&self) -> rebound_client::Result<Client> {
        Client::connect_with_options(&self.server, &self.options()?).await
    }

    /// The connection options of the flags: TLS and credentials.
    pub fn options(&self) -> rebound_client::Result<ConnectOptions> {
        let credentials = match (&self.user, &self.password) {
            (Some(user), Some(password)) => Some(Credentials::new(user, password)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(Error::Credentials(
                    "--user needs --password (or REBOUND_PASSWORD)".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(Error::Credentials(
                    "--password needs --user (or REBOUND_USER)".into(),
                ));
            }
        };
        let tls = TlsOptions {
            ca_cert: self.ca_cert.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
        };
        Ok(ConnectOptions { tls, credentials })
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
