//! `rebound settings`: a running broker's effective address-settings.
//!
//! The offline twin is `rebound config resolve`, which computes the same table
//! from a file; this one asks the broker, so it shows what is in force now.

use std::io::Write as _;

use crate::args::ServerArgs;
use crate::table;

/// Arguments of `rebound settings`.
#[derive(Debug, clap::Args)]
pub struct SettingsArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// The address to resolve the settings of.
    #[arg(long)]
    address: String,
}

/// Runs `rebound settings`.
pub async fn run(args: SettingsArgs) -> anyhow::Result<()> {
    let settings = args.server.connect().await?.settings(&args.address).await?;
    let rows: Vec<Vec<String>> = settings
        .into_iter()
        .map(|s| vec![s.key, s.value, s.source])
        .collect();
    outln!("address-settings for {:?}", args.address)?;
    write!(
        std::io::stdout(),
        "{}",
        table::render(&["KEY", "VALUE", "SOURCE"], &rows)
    )?;
    Ok(())
}
