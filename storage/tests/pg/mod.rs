//! A schema of its own in the test database, for each test that needs
//! PostgreSQL. The database is named by `REBOUND_TEST_POSTGRES_URL` (CI's
//! `.ci/postgres.sh` starts one); without it a test fails under `CI=true`
//! and is skipped elsewhere, saying so. Shared by the storage tests and the
//! black-box tests (`tests/blackbox/support.rs` includes this file).

// Each test binary that includes this file uses a part of it.
#![allow(dead_code)]

pub mod server;

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// A schema created for one test and dropped with it.
pub struct TestSchema {
    admin_url: String,
    name: String,
}

impl TestSchema {
    /// A new empty schema, or `None` (after saying why) when no database is
    /// configured outside CI.
    pub fn create(test: &str) -> Option<TestSchema> {
        Some(TestSchema::create_in(database_url(test)?, None))
    }

    /// A new empty schema in the database of `admin_url`, owned by `owner`
    /// when given (else by the admin).
    fn create_in(admin_url: String, owner: Option<&str>) -> TestSchema {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let authorization = owner
            .map(|role| format!(" AUTHORIZATION {role}"))
            .unwrap_or_default();
        admin(&admin_url, format!("CREATE SCHEMA {name}{authorization}"));
        TestSchema { admin_url, name }
    }

    /// The URL of the test database with this schema as the search path.
    pub fn url(&self) -> String {
        url_with_schema(&self.admin_url, &self.name)
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        admin(&self.admin_url, format!("DROP SCHEMA {} CASCADE", self.name));
    }
}

/// The test database's URL, or `None` (after saying why) when none is
/// configured outside CI; under `CI=true` a missing URL fails the test.
pub fn database_url(test: &str) -> Option<String> {
    let Ok(url) = std::env::var("REBOUND_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "REBOUND_TEST_POSTGRES_URL is not set: CI must run the PostgreSQL tests (.ci/postgres.sh)"
        );
        println!("SKIPPED: {test}: REBOUND_TEST_POSTGRES_URL is not set (bash .ci/postgres.sh CMD)");
        return None;
    };
    Some(url)
}

/// The PEM file of the CA of the test database's certificate
/// (`.ci/postgres.sh` turns TLS on and names it in `REBOUND_TEST_POSTGRES_CA`),
/// or `None` (after saying why) outside CI when there is none; under
/// `CI=true` it must be there.
pub fn database_ca_file(test: &str) -> Option<std::path::PathBuf> {
    let Ok(path) = std::env::var("REBOUND_TEST_POSTGRES_CA") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "REBOUND_TEST_POSTGRES_CA is not set: CI must run the PostgreSQL tests with TLS (.ci/postgres.sh)"
        );
        println!("SKIPPED: {test}: REBOUND_TEST_POSTGRES_CA is not set (bash .ci/postgres.sh CMD)");
        return None;
    };
    Some(path.into())
}

/// A schema of its own in the database of the test role that logs in only
/// with a client certificate over TLS (`.ci/postgres.sh`: pg_hba `cert`),
/// and that certificate.
pub struct CertLogin {
    /// The URL of the schema, as that role.
    pub url: String,
    /// PEM: the CA of the server's certificate.
    pub ca: std::path::PathBuf,
    /// PEM: the client certificate, from the same CA.
    pub cert: std::path::PathBuf,
    /// PEM: its private key.
    pub key: std::path::PathBuf,
    /// Dropped with the login.
    _schema: TestSchema,
}

/// The [`CertLogin`] of the test database, or `None` (after saying why)
/// outside CI when there is none; under `CI=true` it must be there.
pub fn cert_login(test: &str) -> Option<CertLogin> {
    let admin_url = database_url(test)?;
    let vars = [
        "REBOUND_TEST_POSTGRES_CERT_URL",
        "REBOUND_TEST_POSTGRES_CA",
        "REBOUND_TEST_POSTGRES_CLIENT_CERT",
        "REBOUND_TEST_POSTGRES_CLIENT_KEY",
    ];
    let values: Result<Vec<String>, _> = vars.iter().map(std::env::var).collect();
    let Ok([url, ca, cert, key]) = values.map(|v| <[String; 4]>::try_from(v).expect("four")) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{vars:?} are not all set: CI must run the PostgreSQL tests with .ci/postgres.sh"
        );
        println!("SKIPPED: {test}: {vars:?} are not all set (bash .ci/postgres.sh CMD)");
        return None;
    };
    // The admin (a superuser, trusted over plain TCP) in the role's database,
    // whose name ends the role's URL as it ends the admin's.
    let database = |url: &str| {
        url.rsplit_once('/')
            .expect("a URL ending in /database")
            .1
            .to_owned()
    };
    let admin_base = admin_url.rsplit_once('/').expect("a URL ending in /database").0;
    let role = tokio_postgres::Config::from_str(&url)
        .unwrap()
        .get_user()
        .map(str::to_owned);
    let schema = TestSchema::create_in(format!("{admin_base}/{}", database(&url)), role.as_deref());
    Some(CertLogin {
        url: url_with_schema(&url, &schema.name),
        ca: ca.into(),
        cert: cert.into(),
        key: key.into(),
        _schema: schema,
    })
}

/// `url` with `schema` as the search path of its connections.
pub fn url_with_schema(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

impl TestSchema {
    /// The first column of the first row of `sql`, on an admin connection.
    pub fn query_i64(&self, sql: &str) -> i64 {
        admin_query(&self.admin_url, sql.to_owned())
    }
}

/// Runs `sql` on a connection of its own, from a thread of its own (the
/// caller may be inside a runtime).
fn admin(url: &str, sql: String) {
    on_admin_connection(url, move |client| async move {
        client.batch_execute(&sql).await.unwrap()
    })
}

fn admin_query(url: &str, sql: String) -> i64 {
    on_admin_connection(url, move |client| async move {
        client.query_one(sql.as_str(), &[]).await.unwrap().get(0)
    })
}

fn on_admin_connection<T, F>(url: &str, work: impl FnOnce(tokio_postgres::Client) -> F + Send + 'static) -> T
where
    T: Send + 'static,
    F: std::future::Future<Output = T>,
{
    let url = url.to_owned();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
                tokio::spawn(connection);
                work(client).await
            })
    })
    .join()
    .unwrap()
}

/// A TCP proxy on 127.0.0.1 in front of the test database, which a test cuts
/// (every connection closed, nothing listening: the database is away) and
/// resumes on the same port.
pub struct DatabaseProxy {
    port: u16,
    target: SocketAddr,
    running: Option<JoinHandle<()>>,
    /// The URL of `schema` through the proxy.
    url: String,
}

impl DatabaseProxy {
    /// Starts forwarding to the database of `schema`, which must be reached
    /// over TCP.
    pub async fn start(schema: &TestSchema) -> DatabaseProxy {
        let config = tokio_postgres::Config::from_str(&schema.admin_url).unwrap();
        let target = match (&config.get_hosts()[0], config.get_ports()[0]) {
            (tokio_postgres::config::Host::Tcp(host), port) => format!("{host}:{port}"),
            other => panic!("REBOUND_TEST_POSTGRES_URL must name a TCP host, not {other:?}"),
        };
        let target = tokio::net::lookup_host(&target).await.unwrap().next().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = url_with_schema(
            &format!(
                "postgres://{}@127.0.0.1:{port}/{}",
                config.get_user().unwrap_or("postgres"),
                config.get_dbname().unwrap_or("postgres")
            ),
            &schema.name,
        );
        DatabaseProxy {
            port,
            target,
            running: Some(forward(listener, target)),
            url,
        }
    }

    /// The URL of the schema through the proxy.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Cuts every connection and stops listening.
    pub async fn cut(&mut self) {
        if let Some(running) = self.running.take() {
            running.abort();
            let _ = running.await;
        }
    }

    /// Listens again, on the same port.
    pub async fn resume(&mut self) {
        assert!(self.running.is_none(), "the proxy is running");
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
        self.running = Some(forward(listener, self.target));
    }
}

impl Drop for DatabaseProxy {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.abort();
        }
    }
}

/// Forwards every connection to `listener` to `target` until aborted, which
/// drops (and so closes) every forwarded connection.
fn forward(listener: TcpListener, target: SocketAddr) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                continue;
            };
            connections.spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    })
}
