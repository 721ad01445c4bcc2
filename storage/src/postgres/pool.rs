//! [`Database`]: the store's own tokio runtime, the connection pool that
//! lives on it, and how a database error becomes a [`StorageError`].
//!
//! The runtime is the store's, not the broker's, so that the synchronous
//! reads of [`Store`](crate::Store) can wait for it from any thread (`docs/storage.md`,
//! "Reads are synchronous"), and so that the committer keeps running however
//! busy the broker's workers are.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{NoTls, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::PostgresOptions;
use crate::error::StorageError;

/// How long connecting, or waiting for a free connection, may take before
/// the operation fails with [`StorageError::Unavailable`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a session may sit idle inside a transaction before the server
/// ends it. The broker's transactions send their statements back to back, so
/// only a stalled node (stopped, frozen, swapped out) waits this long, and
/// the row locks it holds (a group's `FOR SHARE` of its leases, `fence.rs`)
/// would otherwise keep another node from taking its queues over until it
/// woke up. Below the default lease, so that they are gone by the time the
/// lease is.
const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(5);

/// The runtime and the pool on it.
pub(super) struct Database {
    /// `Some` until dropped.
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    /// How to connect, for a connection of its own (`LISTEN`).
    config: tokio_postgres::Config,
    /// With `postgres-ca-file`: TLS (and the client certificate), for that
    /// connection too.
    tls: Option<MakeRustlsConnect>,
}

impl Database {
    /// Builds the runtime and the pool; connects nothing yet.
    pub(super) fn connect(options: &PostgresOptions) -> Result<Database, StorageError> {
        let mut config = tokio_postgres::Config::from_str(&options.url)
            .map_err(|e| StorageError::Engine(Arc::new(Described(e))))?;
        // Durable at COMMIT whatever the server's or the role's default.
        let extra = format!(
            "-c synchronous_commit=on -c idle_in_transaction_session_timeout={}",
            IDLE_IN_TRANSACTION.as_millis()
        );
        let options_string = match config.get_options() {
            Some(given) if !given.is_empty() => format!("{given} {extra}"),
            _ => extra,
        };
        config.options(options_string).connect_timeout(CONNECT_TIMEOUT);
        // What `pg_stat_activity` shows, unless the URL names it (a node, say).
        if config.get_application_name().is_none() {
            config.application_name("rebound");
        }
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let tls = match &options.tls_roots {
            Some(roots) => {
                config.ssl_mode(SslMode::Require);
                Some(super::tls::connector(roots, options.tls_client.as_ref())?)
            }
            None if options.tls_client.is_some() => {
                return Err(StorageError::refused(
                    "a client certificate for the database needs the CA that signed the \
                     database's certificate (postgres-ca-file)",
                ));
            }
            None if config.get_ssl_mode() == SslMode::Require => {
                return Err(StorageError::refused(
                    "the URL asks for TLS (sslmode=require): give the CA that signed the \
                     database's certificate (postgres-ca-file)",
                ));
            }
            None => None,
        };
        let manager = match &tls {
            Some(tls) => Manager::from_config(config.clone(), tls.clone(), manager_config),
            None => Manager::from_config(config.clone(), NoTls, manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(2))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StorageError::Engine(Arc::new(e)))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rebound-postgres")
            .enable_all()
            .build()
            .map_err(|e| StorageError::io("starting the PostgreSQL runtime", e))?;
        Ok(Database {
            runtime: Some(runtime),
            pool,
            config,
            tls,
        })
    }

    /// Runs `task` on the store's runtime.
    pub(super) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.runtime().spawn(task);
    }

    /// Runs `work` with the pool on the store's runtime and blocks the
    /// calling thread until it is done. Never call it from that runtime.
    pub(super) fn block<T, F>(&self, work: impl FnOnce(Pool) -> F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StorageError>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let future = work(self.pool.clone());
        self.runtime().spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().unwrap_or(Err(StorageError::Closed))
    }

    /// Runs `work` with the pool on the store's runtime; the future waits
    /// for it without blocking a thread (for the broker's async callers).
    pub(super) fn run<T, F>(
        &self,
        work: impl FnOnce(Pool) -> F,
    ) -> impl Future<Output = Result<T, StorageError>> + Send + 'static
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StorageError>> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let future = work(self.pool.clone());
        self.runtime().spawn(async move {
            let _ = tx.send(future.await);
        });
        async move { rx.await.unwrap_or(Err(StorageError::Closed)) }
    }

    /// The payloads of the notifications on `channel`, from a connection of
    /// its own that `LISTEN`s, connected again a second after it fails (a
    /// notification sent meanwhile is lost: listeners poll as a backstop).
    /// Stops once the receiver is dropped.
    pub(super) fn listen(&self, channel: &'static str) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let config = self.config.clone();
        let tls = self.tls.clone();
        self.spawn(async move {
            while !tx.is_closed() {
                let listened = match &tls {
                    Some(tls) => listen_once(&config, tls.clone(), channel, &tx).await,
                    None => listen_once(&config, NoTls, channel, &tx).await,
                };
                if let Err(err) = listened {
                    tracing::debug!(%err, channel, "listening for notifications failed; again in a second");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        rx
    }

    /// The pool, for the committer.
    pub(super) fn pool(&self) -> Pool {
        self.pool.clone()
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("the runtime lives until drop")
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // Without waiting: the store may be dropped inside the broker's
        // runtime, where blocking on another runtime's shutdown panics.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One connection's `LISTEN` on `channel`, until it fails or nobody listens.
async fn listen_once<T>(
    config: &tokio_postgres::Config,
    tls: T,
    channel: &str,
    tx: &tokio::sync::mpsc::UnboundedSender<String>,
) -> Result<(), tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send,
{
    let (client, mut connection) = config.connect(tls).await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let sql = format!("LISTEN {channel}");
    let listen = client.batch_execute(&sql);
    tokio::pin!(listen);
    let mut listening = false;
    loop {
        tokio::select! {
            done = &mut listen, if !listening => {
                done?;
                listening = true;
            }
            message = futures::StreamExt::next(&mut messages) => match message {
                Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                    if tx.send(n.payload().to_owned()).is_err() {
                        return Ok(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(err),
                None => return Ok(()),
            },
            _ = tx.closed() => return Ok(()),
        }
    }
}

/// A database error: [`StorageError::Unavailable`] when the database could
/// not be reached or dropped the connection (no SQLSTATE, or classes 08
/// connection exception, 53 insufficient resources, 57P operator
/// intervention such as a shutdown), [`StorageError::Engine`] otherwise.
pub(super) fn db_error(err: tokio_postgres::Error) -> StorageError {
    let unavailable = err.code().is_none_or(|state| {
        let code = state.code();
        code.starts_with("08") || code.starts_with("53") || code.starts_with("57P")
    });
    if unavailable {
        StorageError::Unavailable(Arc::new(Described(err)))
    } else {
        StorageError::Engine(Arc::new(Described(err)))
    }
}

/// A tokio-postgres error whose message carries its causes ("error
/// performing TLS handshake: invalid peer certificate: UnknownIssuer"):
/// tokio-postgres prints only the first, and [`StorageError`]'s messages
/// are what the log and the client see.
#[derive(Debug)]
struct Described(tokio_postgres::Error);

impl std::fmt::Display for Described {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = std::error::Error::source(&self.0);
        while let Some(next) = cause {
            write!(f, ": {next}")?;
            cause = next.source();
        }
        Ok(())
    }
}

impl std::error::Error for Described {}

/// An error getting a connection from the pool.
pub(super) fn pool_error(err: PoolError) -> StorageError {
    match err {
        PoolError::Backend(err) => db_error(err),
        PoolError::Closed => StorageError::Closed,
        other => StorageError::Unavailable(Arc::new(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_url_is_an_engine_error_naming_it() {
        let err = Database::connect(&PostgresOptions::new("postgres://h:notaport/db"))
            .err()
            .expect("refused");
        assert!(matches!(err, StorageError::Engine(_)), "{err}");
        assert!(err.to_string().contains("invalid"), "{err}");
    }

    #[test]
    fn a_url_asking_for_tls_needs_a_ca() {
        let err = Database::connect(&PostgresOptions::new("postgres://u@h/db?sslmode=require"))
            .err()
            .expect("refused");
        assert!(err.to_string().contains("postgres-ca-file"), "{err}");
    }

    #[test]
    fn a_client_certificate_needs_a_ca() {
        let made = rcgen::generate_simple_self_signed(vec!["rebound".to_owned()]).unwrap();
        let mut options = PostgresOptions::new("postgres://u@h/db");
        options.tls_client = Some(crate::ClientIdentity {
            chain: vec![made.cert.der().clone()],
            key: rustls_pki_types::PrivateKeyDer::try_from(made.signing_key.serialize_der()).unwrap(),
        });
        let err = Database::connect(&options).err().expect("refused");
        assert!(err.to_string().contains("postgres-ca-file"), "{err}");
    }

    #[tokio::test]
    async fn a_closed_port_is_unavailable() {
        // Bound and dropped: nothing listens there now.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let db =
            Database::connect(&PostgresOptions::new(format!("postgres://u@127.0.0.1:{port}/db"))).unwrap();
        let pool = db.pool();
        let (tx, rx) = tokio::sync::oneshot::channel();
        db.spawn(async move {
            let _ = tx.send(pool.get().await.map(drop).map_err(pool_error));
        });
        let err = rx.await.unwrap().expect_err("nothing listens");
        assert!(matches!(err, StorageError::Unavailable(_)), "{err}");
        assert!(
            err.to_string().starts_with("the database is unavailable"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_transaction_left_idle_is_ended_by_the_server() {
        let Some(schema) = crate::postgres::test_pg::TestSchema::create("postgres idle transaction") else {
            return;
        };
        let db = Database::connect(&PostgresOptions::new(schema.url())).unwrap();
        let pool = db.pool();
        let (tx, rx) = tokio::sync::oneshot::channel();
        db.spawn(async move {
            let ended = async {
                let mut client = pool.get().await.map_err(pool_error)?;
                let transaction = client.transaction().await.map_err(db_error)?;
                transaction.batch_execute("SELECT 1").await.map_err(db_error)?;
                tokio::time::sleep(IDLE_IN_TRANSACTION + Duration::from_secs(1)).await;
                transaction.batch_execute("SELECT 1").await.map_err(db_error)
            };
            let _ = tx.send(ended.await);
        });
        rx.await.unwrap().expect_err("the server ended the session");
    }
}
