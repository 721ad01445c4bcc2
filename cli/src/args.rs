//! The arguments the client subcommands share: `--server` (with the TLS flags
//! `--ca-cert`, `--client-cert`, `--client-key`, and the login `--user`,
//! `--password`) and `--routing-type`.
//!
//! The password is best given by `REBOUND_PASSWORD`: a command line shows in
//! `ps`, the environment does not, and `--help` never prints its value.
//!
//! Only the subcommands that talk to a broker declare these flags (each
//! flattens [`ServerArgs`]), so that `rebound serve --help` lists none of them.
//! They may still come before the subcommand (`rebound --server URL queue
//! list`, as users of other brokers' CLIs type it): [`connection_flags_last`]
//! moves them after it before clap parses the command line.

use std::ffi::OsString;
use std::path::PathBuf;

use rebound_client::{Client, ConnectOptions, Credentials, Error, RoutingType, TlsOptions};

/// `--server`, taken by every subcommand that talks to a running broker.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The broker's gRPC URL, `http://host:port`, `host:port`, or `https://host:port` for TLS
    /// (needs --ca-cert) (client commands).
    #[arg(
        long,
        value_name = "URL",
        env = "REBOUND_SERVER",
        default_value = rebound_client::DEFAULT_URL
    )]
    pub server: String,
    /// PEM file with the CA certificate that signed the broker's (for an https:// server).
    #[arg(long, value_name = "FILE", env = "REBOUND_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// PEM file with this client's certificate, for a broker that requires one (mutual TLS).
    #[arg(
        long,
        value_name = "FILE",
        env = "REBOUND_CLIENT_CERT",
        requires = "client_key"
    )]
    pub client_cert: Option<PathBuf>,
    /// PEM file with the private key of --client-cert.
    #[arg(
        long,
        value_name = "FILE",
        env = "REBOUND_CLIENT_KEY",
        requires = "client_cert"
    )]
    pub client_key: Option<PathBuf>,
    /// User to log in as, for a broker with users (with --password; a client
    /// certificate whose CN names a user logs in without either).
    #[arg(long, value_name = "NAME", env = "REBOUND_USER")]
    pub user: Option<String>,
    /// Password of --user. Prefer the environment variable: a command line shows in `ps`.
    #[arg(
        long,
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

/// The flags of [`ServerArgs`], each of which takes a value.
const CONNECTION_FLAGS: [&str; 6] = [
    "--server",
    "--ca-cert",
    "--client-cert",
    "--client-key",
    "--user",
    "--password",
];

/// The command line with the connection flags given before the command that
/// runs (`rebound --server URL queue list`, `rebound queue --server URL list`)
/// moved after it, where that command takes them: flags may come in any order.
/// `cli` is the command tree, which says where the command that runs starts.
pub fn connection_flags_last(cli: &clap::Command, args: Vec<OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let mut path: Vec<OsString> = args.next().into_iter().collect();
    let mut moved = Vec::new();
    let mut command = cli;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        let name = text.split_once('=').map_or(&*text, |(name, _)| name);
        if CONNECTION_FLAGS.contains(&name) {
            let inline = text.contains('=');
            moved.push(arg);
            if !inline && let Some(value) = args.next() {
                moved.push(value);
            }
            continue;
        }
        let sub = command.find_subcommand(&*text);
        path.push(arg);
        match sub {
            Some(sub) if sub.has_subcommands() => command = sub,
            // The command that runs: its own arguments follow, as given.
            _ => break,
        }
    }
    path.extend(moved);
    path.extend(args);
    path
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

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(line: &str) -> String {
        let cli = clap::Command::new("rebound")
            .subcommand(clap::Command::new("queue").subcommand(clap::Command::new("list")))
            .subcommand(clap::Command::new("send"))
            .subcommand(clap::Command::new("serve"));
        let args = line.split(' ').map(OsString::from).collect();
        let args: Vec<String> = connection_flags_last(&cli, args)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        args.join(" ")
    }

    #[test]
    fn connection_flags_before_the_subcommand_move_after_it() {
        assert_eq!(
            moved("rebound --server u queue list"),
            "rebound queue list --server u"
        );
        assert_eq!(
            moved("rebound queue --server u list -v"),
            "rebound queue list --server u -v"
        );
        assert_eq!(
            moved("rebound --server=u --user a --password p send --body --server"),
            "rebound send --server=u --user a --password p --body --server",
            "a value after the command is its own"
        );
        assert_eq!(
            moved("rebound queue list --server u"),
            "rebound queue list --server u"
        );
        assert_eq!(moved("rebound serve --config f"), "rebound serve --config f");
    }

    #[test]
    fn the_flags_moved_are_those_of_the_connection() {
        use clap::Args as _;
        let command = ServerArgs::augment_args(clap::Command::new("x"));
        let mut longs: Vec<String> = command
            .get_arguments()
            .filter_map(|a| a.get_long())
            .map(|l| format!("--{l}"))
            .collect();
        longs.sort();
        let mut flags = CONNECTION_FLAGS.map(str::to_owned).to_vec();
        flags.sort();
        assert_eq!(longs, flags);
    }
}
