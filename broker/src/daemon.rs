//! `rebound serve`: the broker as a daemon in the foreground.
//!
//! Start-up: load the config (or the embedded default), refuse a listen address
//! others can reach without `[[users]]` (see `security::anonymous`), open the store
//! (`storage`: sled in the data dir, made private first by `data_dir.rs`, or the
//! PostgreSQL database of `postgres-url`, where no data dir is created), recover
//! the queues, bind, join the cluster with `[cluster]` (or `--node-id`: one
//! node of several on the database, `crate::cluster`), and only
//! then print `rebound listening on HOST:PORT` on stdout — the line scripts and
//! tests wait for (logs go to stderr) — followed, when the HTTP endpoint is on, by
//! `rebound http listening on HOST:PORT`. Every call passes the authentication
//! layer (`security::layer`) before it reaches a service, and every HTTP request
//! but the health probes the endpoint's (`http::login`), against the same users,
//! after the check that it names this endpoint (`http::host`).
//!
//! Shutdown on SIGTERM or SIGINT, in order (as tokio's mini-redis does it):
//! 1. health turns NOT_SERVING, so balancers drain;
//! 2. the server stops accepting connections, and the engine's shutdown fires:
//!    consumer and transacted streams end (unsettled deliveries stay in storage and
//!    return on restart; open transactions are not committed), dispatchers and the
//!    config watcher stop, new sends are refused with UNAVAILABLE;
//! 3. the server waits for the calls in flight (sends under way are answered);
//!    the HTTP endpoint keeps answering meanwhile (`/health/ready` says 503), then stops;
//! 4. the engine waits for every task it runs, so settles and commits already
//!    under way finish ([`Broker::close`]);
//! 5. the store is flushed, fsynced and closed; exit 0.
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use rebound_config::{ClusterConfig, Config, StorageEngine};
use rebound_protocol::v1::{
    self as pb, admin_server::AdminServer, cluster_server::ClusterServer, messaging_server::MessagingServer,
};
use rebound_storage::{ClientIdentity, PostgresOptions, PostgresStore, SledOptions, SledStore, Store};
use tokio::net::TcpListener;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cluster::{self, Identity};
use crate::connections::handles::{self, Handles};
use crate::connections::{self, Acceptor, Guarded, HTTP2_PREFACE, Listener};
use crate::engine::Broker;
use crate::error::BrokerError;
use crate::grpc::{Nodes, admin::AdminService, cluster::ClusterService, messaging::MessagingService};
use crate::http::console::Listening;
use crate::http::host::Hosts;
use crate::http::{self, HttpState};
use crate::security::anonymous::{self, Access};
use crate::security::forwarded::NodeSecret;
use crate::security::{AuthLayer, Authenticator, Security};
use crate::tls::TlsServer;

/// Where the broker listens when neither the config nor `--listen` says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:61616";
/// Where the HTTP endpoint listens when neither the config nor `--http-listen` says.
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:8161";
/// Where the broker keeps its data when neither the config nor `--data-dir` says.
pub const DEFAULT_DATA_DIR: &str = "./data";
/// Largest gRPC message accepted; above the largest max-message-size, so that the
/// broker's own check (which names the limit and the address) is what users see.
/// Also what a node's calls to another node take and send (`grpc/cluster/nodes.rs`).
pub(crate) const MAX_GRPC_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// How long HTTP requests under way may take to finish at shutdown.
const HTTP_DRAIN: Duration = Duration::from_secs(5);
/// HTTP/2 receive windows: how much a client may send on one stream, and on one
/// connection, that the broker has not read yet. hyper's default stream window
/// (1 MiB) lets a stream the broker stops reading (at `max-publish-in-flight` or
/// `max-unread-responses`) fill h2 with tiny frames, and h2 closes the whole
/// connection (`GOAWAY ENHANCE_YOUR_CALM`) when the frames of < 256 bytes it
/// holds unread cost more than half the connection window, each 256 less its
/// size. With gRPC's usual 64 KiB, a paused stream of 10 to 20-byte frames (a
/// Publish of one tiny message, a Settle of one id) costs 0.8 to 1.6 MB of the
/// 8 MiB a 16 MiB connection window allows: five to ten such streams may be
/// paused on one connection at once (and any number sending frames of 171 bytes
/// or more). 64 KiB a round trip per stream is ample on a LAN; the connection
/// window is the most one connection can make the broker buffer.
const STREAM_WINDOW: u32 = 64 << 10;
const CONNECTION_WINDOW: u32 = 16 << 20;

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
struct Plan {
    listen: String,
    /// "" = no HTTP endpoint.
    http_listen: String,
    access: Access,
    cluster: Option<ClusterConfig>,
}

/// The checks `serve` makes of `config` with the flags of `args` before it opens
/// anything: a wide-open broker must not start at all, nor a cluster without its
/// shared database. `rebound config check` runs them too ([`check`]).
async fn plan(config: &Config, args: &ServeArgs) -> anyhow::Result<Plan> {
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

/// Runs the broker until SIGTERM or SIGINT.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::embedded_default(),
    };
    let Plan {
        listen,
        http_listen,
        access,
        cluster,
    } = plan(&config, &args).await?;
    let secret = match cluster.as_ref().and_then(|c| c.secret_file.as_ref()) {
        Some(path) => Some(Arc::new(
            NodeSecret::read(path).map_err(|e| anyhow::anyhow!("cluster.secret-file: {e}"))?,
        )),
        None => None,
    };
    let nodes = peers(&config, cluster.as_ref(), secret.clone())?;
    let handles = open_file_shares(&config);
    let (store, postgres, location) = open_store(&config, args.storage, args.data_dir, args.postgres_url)?;
    let opened = match (&cluster, &postgres) {
        (Some(_), Some(postgres)) => Broker::open_leased(&config, store, cluster::queue_ids(postgres)).await,
        _ => Broker::open(&config, store).await,
    };
    let broker = opened.map_err(|err| match (&err, &args.config) {
        // Anything but the store is the config contradicting what the data dir holds.
        (BrokerError::Storage(_), _) | (_, None) => anyhow::Error::from(err),
        (_, Some(path)) => {
            anyhow::Error::from(err).context(format!("{}: cannot apply the config", path.display()))
        }
    })?;

    let tls = match &config.tls {
        Some(tls) => Some(Arc::new(TlsServer::new(tls).map_err(
            |err| match &args.config {
                Some(path) => anyhow::anyhow!("{}: {err}", path.display()),
                None => anyhow::anyhow!(err),
            },
        )?)),
        None => None,
    };
    let listener = TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let local = listener.local_addr()?;
    let http_listener = match http_listen.as_str() {
        "" => None,
        addr => Some(
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen for HTTP on {addr}"))?,
        ),
    };
    let http_local = http_listener.as_ref().map(TcpListener::local_addr).transpose()?;
    // Where the other nodes of a cluster reach this one's gRPC and HTTP endpoint.
    let advertise = cluster
        .as_ref()
        .map(|c| c.advertise.clone().unwrap_or_else(|| local.to_string()));
    let http_advertised = advertise
        .as_deref()
        .zip(http_local)
        .and_then(|(advertise, http)| http_advertise(http, advertise));
    if let (Some(cluster), Some(store), Some(advertise)) = (cluster, postgres, advertise) {
        let identity = Identity {
            http_advertise: http_advertised.clone(),
            advertise,
            id: cluster.node_id,
            lease: cluster.lease,
        };
        cluster::start(store, &broker, identity)
            .await
            .context("cannot join the cluster in PostgreSQL")?;
    }
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<MessagingServer<MessagingService>>().await;
    health.set_serving::<AdminServer<AdminService>>().await;
    broker.spawn(report_store_health(broker.clone(), health.clone()));
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let authenticator = Arc::new(Authenticator::new(&config.users));
    let security = Arc::new(Security::new(&config));
    let nodes = Arc::new(nodes);
    let messaging = MessagingServer::new(MessagingService::new(
        broker.clone(),
        security.clone(),
        nodes.clone(),
    ))
    .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    let admin = AdminServer::new(AdminService::new(broker.clone(), security.clone(), nodes))
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    let cluster = ClusterServer::new(ClusterService::new(broker.clone()));

    if let Some(path) = args.config.clone() {
        // Armed before the ready line, so a SIGHUP right after it reloads rather than
        // kills, and a change right after it is noticed.
        let watcher = crate::reload::Watcher::arm(
            path,
            &config,
            tls.clone(),
            authenticator.clone(),
            security.clone(),
            local,
            http_local,
        )?;
        broker.spawn(watcher.run(broker.clone()));
    }
    match access {
        Access::Login => info!(users = config.users.len(), "every call must log in"),
        Access::AnonymousLoopback => warn!(
            "no [[users]] configured: anyone who can connect to {local} may do everything \
             (allowed only on a loopback address)"
        ),
        Access::AnonymousAllowed => warn!(
            "no [[users]] configured and allow-anonymous = true: anyone who can reach {local} may do everything"
        ),
    }
    let signals = StopSignals::arm().context("cannot handle SIGTERM and SIGINT")?;
    info!(%local, store = %location, tls = tls.is_some(), "serving");
    println!("rebound listening on {local}");
    let http_stop = CancellationToken::new();
    let http = match (http_listener, http_local) {
        (Some(http_listener), Some(http_local)) => {
            info!(%http_local, "HTTP endpoint (health, metrics) listening");
            println!("rebound http listening on {http_local}");
            let listening = Listening {
                grpc: local,
                http: http_local,
            };
            let state = HttpState::new(broker.clone(), listening, authenticator.clone(), security.clone());
            let hosts = Hosts::new(
                http_local.ip(),
                http_advertised.as_deref(),
                &config.http_allowed_hosts,
            );
            let router = http::router(state, hosts);
            let acceptor = Acceptor::new(broker.clone(), http_listener, Listener::Http, handles.http);
            Some(tokio::spawn(http::serve(acceptor, router, http_stop.clone())))
        }
        _ => None,
    };
    std::io::stdout().flush()?;

    let stop = {
        let broker = broker.clone();
        async move {
            signals.wait().await;
            info!("shutting down");
            health
                .set_not_serving::<MessagingServer<MessagingService>>()
                .await;
            health.set_not_serving::<AdminServer<AdminService>>().await;
            // The server as a whole (service ""), what `rebound health` and
            // `grpc_health_probe` ask by default.
            health
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
            broker.shutdown().cancel();
        }
    };
    let acceptor = Acceptor::new(broker.clone(), listener, Listener::Grpc, handles.grpc);
    let router = tonic::transport::Server::builder()
        .max_frame_size(Some(rebound_protocol::MAX_FRAME_BYTES))
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .layer(AuthLayer::new(authenticator, secret, acceptor.registry().clone()))
        .add_service(health_service)
        .add_service(reflection)
        .add_service(messaging)
        .add_service(admin)
        .add_service(cluster);
    let accepted = connections::incoming(acceptor);
    match tls {
        None => {
            let plain =
                accepted.map(|a| Ok::<_, std::io::Error>(Guarded::new(a.tcp, a.registration, HTTP2_PREFACE)));
            router.serve_with_incoming_shutdown(plain, stop).await?
        }
        Some(tls) => {
            let incoming = tls.incoming(accepted, broker.shutdown().clone());
            router.serve_with_incoming_shutdown(incoming, stop).await?;
        }
    }
    http_stop.cancel();
    if let Some(http) = http {
        // Requests under way get a moment to finish; a client that holds one open
        // does not hold up the shutdown.
        match tokio::time::timeout(HTTP_DRAIN, http).await {
            Ok(served) => served?.context("the HTTP endpoint failed")?,
            Err(_) => warn!("HTTP requests still open after {HTTP_DRAIN:?}: closed"),
        }
    }
    broker.close().await?;
    info!("stopped");
    Ok(())
}

/// How often gRPC health looks at the store.
const HEALTH_EVERY: Duration = Duration::from_secs(1);

/// Keeps gRPC health NOT_SERVING while the store fails its commits (what
/// `/health/ready` says on HTTP), SERVING otherwise, until shutdown, which
/// sets it for good.
async fn report_store_health(broker: Arc<Broker>, health: tonic_health::server::HealthReporter) {
    let mut was_failing = false;
    loop {
        tokio::select! {
            _ = broker.shutdown().cancelled() => return,
            _ = tokio::time::sleep(HEALTH_EVERY) => {}
        }
        let failing = broker.store_failing();
        if failing == was_failing {
            continue;
        }
        was_failing = failing;
        let status = match failing {
            true => tonic_health::ServingStatus::NotServing,
            false => tonic_health::ServingStatus::Serving,
        };
        let messaging = <MessagingServer<MessagingService> as tonic::server::NamedService>::NAME;
        let admin = <AdminServer<AdminService> as tonic::server::NamedService>::NAME;
        for service in ["", messaging, admin] {
            health.set_service_status(service, status).await;
        }
    }
}

/// Raises the open-file limit as far as it goes, and says how many
/// connections it leaves each listener; a WARN says when that is fewer than
/// the config's bounds (they are then lowered to it).
fn open_file_shares(config: &Config) -> Handles {
    let nofile = handles::raise_open_file_limit();
    let shares = Handles::within(nofile);
    let limits = config.limits;
    if limits.max_connections > shares.grpc || limits.max_http_connections > shares.http {
        warn!(
            nofile,
            reserve = handles::STORE_RESERVE,
            "the open-file limit leaves room for {} client and {} HTTP connections beside the store: \
             max-connections ({}) and max-http-connections ({}) are lowered to that \
             (raise `ulimit -n`, or LimitNOFILE= under systemd, for more)",
            shares.grpc,
            shares.http,
            limits.max_connections,
            limits.max_http_connections,
        );
    }
    shares
}

/// Opens the store `--storage` (or the config's `storage`) names, with the
/// flags' `--data-dir` and `--postgres-url` over the config's, and says where it
/// is for the log (never the URL, which may hold a password).
/// The store, and the same store as PostgreSQL (for a cluster node).
type OpenedStore = (Arc<dyn Store>, Option<Arc<PostgresStore>>, String);

fn open_store(
    config: &Config,
    storage: Option<StorageEngine>,
    data_dir: Option<PathBuf>,
    postgres_url: Option<String>,
) -> anyhow::Result<OpenedStore> {
    match storage.unwrap_or(config.storage) {
        StorageEngine::Sled => {
            let data_dir = data_dir
                .or_else(|| config.data_dir.clone())
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
            crate::data_dir::prepare(&data_dir)?;
            let mut options = SledOptions::default();
            if let Some(size) = config.journal_file_size {
                options.journal_segment_bytes = size;
            }
            let store = SledStore::open_with(&data_dir, options)
                .with_context(|| format!("cannot open the store in {}", data_dir.display()))?;
            Ok((Arc::new(store), None, format!("sled in {}", data_dir.display())))
        }
        StorageEngine::Postgres => {
            let url = postgres_url.or_else(|| config.postgres_url.clone()).context(
                "storage = \"postgres\" needs a database: set postgres-url in the config, \
                     or pass --postgres-url (or REBOUND_POSTGRES_URL)",
            )?;
            let mut options = PostgresOptions::new(url);
            if let Some(size) = config.postgres_pool_size {
                options.pool_size = size;
            }
            if let Some(path) = &config.postgres_ca_file {
                let roots = rebound_config::tls::read_certificates(path)
                    .map_err(|e| anyhow::anyhow!("postgres-ca-file: {e}"))?;
                options.tls_roots = Some(roots);
            }
            if let Some(client) = &config.postgres_client_cert {
                let chain = rebound_config::tls::read_certificates(&client.cert_file)
                    .map_err(|e| anyhow::anyhow!("postgres-client-cert-file: {e}"))?;
                let key = rebound_config::tls::read_private_key(&client.key_file)
                    .map_err(|e| anyhow::anyhow!("postgres-client-key-file: {e}"))?;
                options.tls_client = Some(ClientIdentity { chain, key });
            }
            let store =
                Arc::new(PostgresStore::open(&options).context("cannot open the store in PostgreSQL")?);
            Ok((store.clone(), Some(store), "postgres".to_owned()))
        }
    }
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

/// Where the other nodes of a cluster reach this node's HTTP endpoint
/// (`http`), for their consoles: where it listens, or, when it listens on
/// every interface, the host of the gRPC address it `advertise`s. `None`
/// when it listens on a loopback address and the nodes reach each other on
/// another: they could not reach it.
fn http_advertise(http: std::net::SocketAddr, advertise: &str) -> Option<String> {
    let host = advertise.rsplit_once(':').map_or(advertise, |(host, _)| host);
    let loopback_host = host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match http.ip() {
        ip if ip.is_unspecified() => Some(format!("{host}:{}", http.port())),
        ip if ip.is_loopback() && !loopback_host => None,
        _ => Some(http.to_string()),
    }
}

/// How a node reaches the other nodes (`grpc/cluster/nodes.rs`): over TLS when it
/// serves TLS, trusting `[cluster] ca-file` or else `[tls] client-ca-file`;
/// plaintext otherwise, and for a single broker (which forwards nothing).
/// With the cluster's `secret`, it vouches for callers who logged in with a
/// certificate (`security/forwarded.rs`; the config allows one only with TLS).
/// A node gives up on another that stops answering within about its lease.
fn peers(
    config: &Config,
    cluster: Option<&ClusterConfig>,
    secret: Option<Arc<NodeSecret>>,
) -> anyhow::Result<Nodes> {
    let nodes = tls_peers(config, cluster, secret)?;
    Ok(match cluster {
        Some(cluster) => nodes.within_lease(cluster.lease),
        None => nodes,
    })
}

fn tls_peers(
    config: &Config,
    cluster: Option<&ClusterConfig>,
    secret: Option<Arc<NodeSecret>>,
) -> anyhow::Result<Nodes> {
    let (Some(tls), Some(cluster)) = (&config.tls, cluster) else {
        return Ok(Nodes::default());
    };
    let (ca_file, ca_key) = match (&cluster.ca_file, &tls.client_ca_file) {
        (Some(ca), _) => (ca.clone(), "cluster.ca-file"),
        (None, Some(ca)) => (ca.clone(), "tls.client-ca-file"),
        // A [cluster] table without either is a config error; --node-id alone gets here.
        (None, None) => anyhow::bail!("{}", rebound_config::NEEDS_A_CA),
    };
    let nodes = Nodes::tls(ca_file, ca_key, tls.cert_file.clone(), tls.key_file.clone())
        .map_err(anyhow::Error::msg)?;
    Ok(match secret {
        Some(secret) => nodes.with_secret(secret),
        None => nodes,
    })
}

/// SIGTERM and SIGINT, handled from the moment this is made: made before the
/// ready line, so that a signal right after it is a clean shutdown rather than
/// the default action (death), whenever the server first polls for it.
struct StopSignals {
    term: Signal,
    interrupt: Signal,
}

impl StopSignals {
    fn arm() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::http_advertise;

    #[test]
    fn the_http_endpoint_is_advertised_where_the_other_nodes_reach_it() {
        let at = |http: &str, advertise| http_advertise(http.parse().unwrap(), advertise);
        assert_eq!(at("0.0.0.0:8161", "node-1:61616").as_deref(), Some("node-1:8161"));
        assert_eq!(
            at("[::]:8161", "[fd00::1]:61616").as_deref(),
            Some("[fd00::1]:8161")
        );
        assert_eq!(
            at("10.0.0.5:8161", "node-1:61616").as_deref(),
            Some("10.0.0.5:8161")
        );
        assert_eq!(
            at("127.0.0.1:8161", "127.0.0.2:61616").as_deref(),
            Some("127.0.0.1:8161")
        );
        assert_eq!(
            at("127.0.0.1:8161", "node-1:61616"),
            None,
            "not reachable from node-2"
        );
    }
}
