//! `rebound health`: is the broker serving? The standard gRPC health check, for a
//! container's HEALTHCHECK or a script: prints the status (`SERVING`,
//! `NOT_SERVING` while the broker shuts down) and exits 0 only for `SERVING`. A
//! broker that cannot be reached, or does not answer within [`TIMEOUT`], is an
//! error (exit 1) too.

use std::time::Duration;

use anyhow::{Context, bail};
use rebound_client::HealthStatus;

use crate::args::ServerArgs;

/// How long the check may take in all, connecting included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments of `rebound health`.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    #[command(flatten)]
    server: ServerArgs,
}

/// Runs `rebound health`.
pub async fn run(args: HealthArgs) -> anyhow::Result<()> {
    let check = async { args.server.connect().await?.health().await };
    let status = tokio::time::timeout(TIMEOUT, check)
        .await
        .with_context(|| format!("{} did not answer within {TIMEOUT:?}", args.server.server))??;
    outln!("{}", status.as_str_name())?;
    if status != HealthStatus::Serving {
        bail!("{} is not serving: {}", args.server.server, status.as_str_name());
    }
    Ok(())
}
