//! Live configuration: re-reading the config file on SIGHUP and whenever it changes.
//!
//! As Artemis's `configuration-file-refresh-period`, the file is checked every
//! `config-reload-period` ms (default 5000) and re-read when its modification time
//! changes; SIGHUP re-reads it at once. A new file applies its address-settings to
//! every queue without a restart and without dropping consumers, and creates the
//! addresses and queues it declares. A reload is all or nothing: a file that does
//! not load (it is validated exactly as at start-up and by `rebound config check`)
//! is rejected with an error naming file, line and key, one that declares what
//! contradicts what exists (a queue on another address, an address of another
//! routing type) with what differs; either way one log line says so and nothing
//! changes.
//!
//! With `[tls]`, a reload (SIGHUP, or a change of the config file itself) also
//! re-reads the certificate, key and client CA files, so a renewed certificate
//! needs no restart: new connections get it, open ones keep theirs. Files that do
//! not make a valid TLS configuration reject the whole reload.
//!
//! Users, roles and `[[security-settings]]` are swapped in with the rest, after the
//! broker accepted the config (a rejected reload leaves them as they were), and
//! apply from the next call; open consume streams of users who lost `consume` end.
//! A file that removes every user is rejected unless it says `allow-anonymous = true`,
//! and so is one without users while the broker listens (gRPC or HTTP) on a
//! non-loopback address without it (see `security::anonymous`).
//!
//! `listen`, `http-listen`, `http-allowed-hosts`, `data-dir`, `journal-file-size`, `storage`,
//! the `postgres-*` keys (their files too), `[cluster]` (the files that `grpc/cluster/nodes.rs` reads
//! again for every connection to another node aside) and whether `[tls]` is there at all are
//! read only at start-up ([`needs_restart`]): a reload that changes them from what the broker
//! started with applies the rest and says in a WARN which of them wait for a restart.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rebound_config::Config;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tracing::{error, info, warn};

use crate::engine::Broker;
use crate::error::BrokerError;
use crate::security::{Authenticator, Security, anonymous};
use crate::tls::TlsServer;

/// Checks the file every this many ms when the config does not say.
pub const DEFAULT_RELOAD_PERIOD_MS: u64 = 5000;

/// Watches a config file; armed at start-up, run until the broker shuts down.
pub struct Watcher {
    path: PathBuf,
    period: Duration,
    seen: Option<SystemTime>,
    hangup: Signal,
    /// The config the broker started with, for the keys read only at start-up.
    started: Config,
    tls: Option<Arc<TlsServer>>,
    authenticator: Arc<Authenticator>,
    security: Arc<Security>,
    /// The addresses the broker listens on (gRPC, HTTP), for the anonymous-access rule.
    local: SocketAddr,
    http: Option<SocketAddr>,
}

impl Watcher {
    /// Installs the SIGHUP handler and notes the file's modification time; `config`
    /// is the one loaded from it at start-up.
    pub fn arm(
        path: PathBuf,
        config: &Config,
        tls: Option<Arc<TlsServer>>,
        authenticator: Arc<Authenticator>,
        security: Arc<Security>,
        local: SocketAddr,
        http: Option<SocketAddr>,
    ) -> std::io::Result<Watcher> {
        Ok(Watcher {
            tls,
            authenticator,
            security,
            local,
            http,
            seen: modified(&path),
            period: Duration::from_millis(config.config_reload_period_ms.unwrap_or(DEFAULT_RELOAD_PERIOD_MS)),
            started: config.clone(),
            hangup: signal(SignalKind::hangup())?,
            path,
        })
    }

    pub async fn run(mut self, broker: Arc<Broker>) {
        let path = self.path.clone();
        loop {
            tokio::select! {
                _ = self.hangup.recv() => info!(path = %path.display(), "SIGHUP: reloading the config"),
                _ = tokio::time::sleep(self.period) => {
                    if modified(&path) == self.seen {
                        continue;
                    }
                    info!(path = %path.display(), "config file changed: reloading");
                }
                _ = broker.shutdown().cancelled() => return,
            }
            self.seen = modified(&path);
            match Config::load(&path) {
                Ok(config) => {
                    let login = !self.authenticator.is_open();
                    if let Err(err) = anonymous::reload(&config, login, &self.listeners()) {
                        error!(
                            "config reload rejected, the settings in force stay: {}: {err}",
                            path.display()
                        );
                        broker.metrics().reloaded(false);
                        continue;
                    }
                    let acceptor = match (&self.tls, &config.tls) {
                        (Some(_), Some(tls)) => match TlsServer::prepare(tls) {
                            Ok(acceptor) => Some(acceptor),
                            Err(err) => {
                                error!(
                                    "config reload rejected, the settings and certificate in force stay: {}: {err}",
                                    path.display()
                                );
                                broker.metrics().reloaded(false);
                                continue;
                            }
                        },
                        // Added or removed, [tls] waits for a restart (`needs_restart`).
                        _ => None,
                    };
                    let result = broker.reload(&config).await;
                    broker.metrics().reloaded(result.is_ok());
                    match result {
                        Ok(()) => {
                            self.authenticator.install(&config.users);
                            self.security.replace(&config);
                            if let (Some(tls), Some(acceptor)) = (&self.tls, acceptor) {
                                tls.install(acceptor);
                                info!(path = %path.display(), "TLS certificate re-read");
                            }
                            self.period = Duration::from_millis(
                                config.config_reload_period_ms.unwrap_or(DEFAULT_RELOAD_PERIOD_MS),
                            );
                            match needs_restart(&self.started, &config).as_slice() {
                                [] => info!(path = %path.display(), "config reloaded"),
                                keys => warn!(
                                    path = %path.display(),
                                    "config reloaded, but not its change of {}: read only at start-up, \
                                     it takes effect at the next start",
                                    keys.join(", ")
                                ),
                            }
                        }
                        // Only the store can fail once the reload was checked and begun.
                        Err(err @ BrokerError::Storage(_)) => {
                            error!(%err, "applying the reloaded config failed")
                        }
                        Err(err) => error!(
                            "config reload rejected, the settings in force stay: {}: {err}",
                            path.display()
                        ),
                    }
                }
                Err(err) => {
                    error!("config reload rejected, the settings in force stay: {err}");
                    broker.metrics().reloaded(false);
                }
            }
        }
    }
}

impl Watcher {
    /// The listeners the broker has, by config key, for `security::anonymous`.
    fn listeners(&self) -> Vec<(&'static str, SocketAddr)> {
        let http = self.http.map(|http| ("http-listen", http));
        [("listen", self.local)].into_iter().chain(http).collect()
    }
}

/// The keys read only at start-up whose value `new` changes from the one the
/// broker `started` with (for `[tls]`: whether it is there).
fn needs_restart(started: &Config, new: &Config) -> Vec<&'static str> {
    let changed = [
        ("listen", started.listen != new.listen),
        ("http-listen", started.http_listen != new.http_listen),
        (
            "http-allowed-hosts",
            started.http_allowed_hosts != new.http_allowed_hosts,
        ),
        ("data-dir", started.data_dir != new.data_dir),
        (
            "journal-file-size",
            started.journal_file_size != new.journal_file_size,
        ),
        ("storage", started.storage != new.storage),
        ("postgres-url", started.postgres_url != new.postgres_url),
        (
            "postgres-pool-size",
            started.postgres_pool_size != new.postgres_pool_size,
        ),
        (
            "postgres-ca-file",
            started.postgres_ca_file != new.postgres_ca_file,
        ),
        (
            "postgres-client-cert-file",
            started.postgres_client_cert != new.postgres_client_cert,
        ),
        ("[cluster]", started.cluster != new.cluster),
        ("[tls]", started.tls.is_some() != new.tls.is_some()),
    ];
    changed
        .into_iter()
        .filter_map(|(key, differs)| differs.then_some(key))
        .collect()
}

fn modified(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, "t.toml").unwrap()
    }

    #[test]
    fn a_reload_names_the_keys_that_wait_for_a_restart() {
        let started = config("listen = \"127.0.0.1:1\"\ndata-dir = \"a\"\n");
        let reloadable = config("listen = \"127.0.0.1:1\"\ndata-dir = \"a\"\nconfig-reload-period = 10\n");
        assert!(needs_restart(&started, &reloadable).is_empty());
        let moved = config("listen = \"127.0.0.1:2\"\ndata-dir = \"b\"\n");
        assert_eq!(needs_restart(&started, &moved), ["listen", "data-dir"]);
    }
}
