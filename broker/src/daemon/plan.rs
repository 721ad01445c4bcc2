//! The flags of `rebound serve`, and what it makes of them with the config
//! before it opens anything: the checks that keep a wide-open broker, or a
//! cluster without its shared database, from starting at all.
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use rebound_config::{ClusterConfig, Config, StorageEngine};

use super::{DEFAULT_HTTP_LISTEN, DEFAULT_LISTEN};
use crate::security::anonymous::{self, Access};

/// Arguments of `rebound serve`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// TOML config file; without it the embedded default config is used.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// Address to listen on (overrides the config's `listen`); port 0 picks a free port.
    #[arg(long)]
    pub listen: Option<String>,
    /// Address of the HTTP endpoint, health and metrics (overrides the config's
    /// `http-listen`); "" turns it off, port 0 picks a free port.
    #[arg(long)]
    pub http_listen: Option<String>,
    /// Data directory (overrides the config's `data-dir`); unused with `--storage postgres`.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Store engine: "sled" (embedded, in the data directory) or "postgres"
    /// (overrides the config's `storage`).
    #[arg(long)]
    pub storage: Option<StorageEngine>,
    /// PostgreSQL connection URL for `--storage postgres` (overrides the config's
    /// `postgres-url`).
    #[arg(long, env = "REBOUND_POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: Option<String>,
    /// Be one node of several on the PostgreSQL database, with this unique and
    /// stable id (overrides `[cluster] node-id`; with --storage postgres).
    #[arg(long, env = "REBOUND_NODE_ID")]
    pub node_id: Option<String>,
    /// host:port the other nodes reach this node's gRPC at (overrides
    /// `[cluster] advertise`; default: the address it listens on).
    #[arg(long, env = "REBOUND_ADVERTISE")]
    pub advertise: Option<String>,
    /// How long a node's queue leases last without renewal, e.g. "10s" or
    /// "2500ms" (overrides `[cluster] lease`).
    #[arg(long, value_parser = parse_lease)]
    pub cluster_lease: Option<Duration>,
}

fn parse_lease(text: &str) -> Result<Duration, String> {
    rebound_config::cluster::lease(text.to_owned())
}

/// What `serve` makes of the config and its flags before it opens anything.
pub(super) struct Plan {
    pub(super) listen: String,
    /// "" = no HTTP endpoint.
    pub(super) http_listen: String,
    pub(super) access: Access,
    pub(super) cluster: Option<ClusterConfig>,
}

/// The checks `serve` makes of `config` with the flags of `args` before it opens
/// anything: a wide-open broker must not start at all, nor a cluster without its
/// shared database. `rebound config check` runs them too ([`check`]).
pub(super) async fn plan(config: &Config, args: &ServeArgs) -> anyhow::Result<Plan> {
    let listen = args
        .listen
        .clone()
        .or_else(|| config.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let addresses: Vec<_> = tokio::net::lookup_host(listen.as_str())
        .await
        .with_context(|| format!("cannot listen on {listen}"))?
        .collect();
    let access = anonymous::access(config, "listen", &listen, &addresses)?;
    let http_listen = args
        .http_listen
        .clone()
        .or_else(|| config.http_listen.clone())
        .unwrap_or_else(|| DEFAULT_HTTP_LISTEN.to_owned());
    if !http_listen.is_empty() {
        let addresses: Vec<_> = tokio::net::lookup_host(http_listen.as_str())
            .await
            .with_context(|| format!("cannot listen for HTTP on {http_listen}"))?
            .collect();
        anonymous::access(config, "http-listen", &http_listen, &addresses)?;
    }
    let cluster = cluster_identity(
        config,
        args.node_id.clone(),
        args.advertise.clone(),
        args.cluster_lease,
    )?;
    if cluster.is_some() && args.storage.unwrap_or(config.storage) != StorageEngine::Postgres {
        anyhow::bail!(
            "a cluster ([cluster] or --node-id) needs storage = \"postgres\": the nodes share one database"
        );
    }
    Ok(Plan {
        listen,
        http_listen,
        access,
        cluster,
    })
}

/// What `serve --config` with no other flags would refuse of a `config` that
/// loaded: `rebound config check` passes no file that `serve` refuses.
pub async fn check(config: &Config) -> anyhow::Result<()> {
    plan(config, &ServeArgs::default()).await.map(drop)
}

/// This node's `[cluster]`, with the flags over the config's keys; `None`
/// without either (a single broker). The advertised address defaults to the
/// listen address once bound.
fn cluster_identity(
    config: &Config,
    node_id: Option<String>,
    advertise: Option<String>,
    lease: Option<Duration>,
) -> anyhow::Result<Option<ClusterConfig>> {
    let from_file = config.cluster.clone();
    let id = match (node_id, &from_file) {
        (Some(id), _) => {
            rebound_config::cluster::node_id(id).map_err(|e| anyhow::anyhow!("--node-id: {e}"))?
        }
        (None, Some(file)) => file.node_id.clone(),
        (None, None) => return Ok(None),
    };
    Ok(Some(ClusterConfig {
        node_id: id,
        advertise: advertise.or_else(|| from_file.as_ref().and_then(|f| f.advertise.clone())),
        ca_file: from_file.as_ref().and_then(|f| f.ca_file.clone()),
        secret_file: from_file.as_ref().and_then(|f| f.secret_file.clone()),
        lease: lease
            .or_else(|| from_file.as_ref().map(|f| f.lease))
            .unwrap_or(rebound_config::DEFAULT_CLUSTER_LEASE),
    }))
}
