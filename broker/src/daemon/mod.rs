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
//!
//! This file runs both in that order ([`run`]); the pieces of it that are an
//! idea of their own are files of their own:
//!
//! | file | what |
//! |---|---|
//! | `plan.rs` | the flags of `rebound serve`, and the checks of the config made before anything opens |
//! | `store.rs` | opening the store: sled in the data dir, or PostgreSQL |
//! | `nodes.rs` | how the nodes of a cluster reach each other: the advertised HTTP endpoint, the client to the others |
//! | `health.rs` | gRPC health while serving, following the store's commits |
//! | `signals.rs` | SIGTERM and SIGINT, armed before the ready line |
mod health;
mod nodes;
mod plan;
mod signals;
mod store;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use rebound_config::Config;
use rebound_protocol::v1::{
    self as pb, admin_server::AdminServer, cluster_server::ClusterServer, messaging_server::MessagingServer,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use health::report_store_health;
use nodes::{http_advertise, nodes};
use plan::{Plan, plan};
pub use plan::{ServeArgs, check};
use signals::StopSignals;
use store::open_store;

use crate::cluster::{self, Identity};
use crate::connections::handles::{self, Handles};
use crate::connections::{self, Acceptor, Guarded, HTTP2_PREFACE, Listener};
use crate::engine::Broker;
use crate::error::BrokerError;
use crate::grpc::{
    MAX_GRPC_MESSAGE_BYTES, admin::AdminService, cluster::ClusterService, messaging::MessagingService,
};
use crate::http::console::Listening;
use crate::http::host::Hosts;
use crate::http::{self, HttpState};
use crate::security::anonymous::Access;
use crate::security::forwarded::NodeSecret;
use crate::security::{AuthLayer, Authenticator, Security};
use crate::tls::TlsServer;

/// Where the broker listens when neither the config nor `--listen` says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:61616";
/// Where the HTTP endpoint listens when neither the config nor `--http-listen` says.
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:8161";
/// Where the broker keeps its data when neither the config nor `--data-dir` says.
pub const DEFAULT_DATA_DIR: &str = "./data";
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
    let nodes = nodes(&config, cluster.as_ref(), secret.clone())?;
    let handles = open_file_shares(&config);
    let (store, postgres, location) = open_store(&config, args.storage, args.data_dir, args.postgres_url)?;
    let opened = match (&cluster, &postgres) {
        (Some(_), Some(postgres)) => {
            crate::time::follow_database(postgres.clock());
            Broker::open_leased(&config, store, cluster::queue_ids(postgres)).await
        }
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
