//! `rebound config`: work with a configuration file without a broker.
//!
//! Errors are `rebound_config::ConfigError`s, which name file:line:column and
//! the key; `main.rs` exits with 2 for them. `check` also refuses what `serve`
//! would refuse of the file before opening anything (`daemon::check`: a listen
//! address without users, a cluster without PostgreSQL), with `serve`'s message
//! and exit code.

use std::io::Write as _;
use std::path::PathBuf;

use rebound_config::Config;

/// `rebound config` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Show an address's effective address-settings and which entry supplied each
    /// value, then its security-settings: per permission the roles that hold it, and
    /// the `match` that decides.
    Resolve {
        /// The TOML config file.
        #[arg(long, short = 'c')]
        config: PathBuf,
        /// The address to resolve.
        #[arg(long)]
        address: String,
    },
    /// Validate a config file: exit 0 only if `rebound serve --config` would start with it.
    Check {
        /// The TOML config file.
        #[arg(long, short = 'c')]
        config: PathBuf,
    },
    /// Print the built-in default configuration, a documented starting point.
    PrintDefault,
}

/// Runs a `rebound config` subcommand.
pub async fn run(command: ConfigCommand) -> anyhow::Result<()> {
    match command {
        ConfigCommand::Resolve { config, address } => {
            let config = Config::load(&config)?;
            let mut out = std::io::stdout();
            write!(out, "{}", config.address_settings.resolve(&address))?;
            write!(out, "\n{}", config.security_settings.resolve(&address))?;
        }
        ConfigCommand::Check { config } => {
            rebound_broker::daemon::check(&Config::load(&config)?).await?;
            outln!("ok")?;
        }
        ConfigCommand::PrintDefault => write!(std::io::stdout(), "{}", rebound_config::DEFAULT_TOML)?,
    }
    Ok(())
}
