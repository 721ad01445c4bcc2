//! A schema of its own in the test database, for each test that needs
//! PostgreSQL. The database is named by `REBOUND_TEST_POSTGRES_URL` (CI's
//! `.ci/postgres.sh` starts one); without it a test fails under `CI=true`
//! and is skipped elsewhere, saying so. Shared by the storage tests and the
//! black-box tests (`tests/blackbox/support.rs` includes this file).

// Each test binary that includes this file uses a part of it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

/// A schema created for one test and dropped with it.
pub struct TestSchema {
    admin_url: String,
    name: String,
}

impl TestSchema {
    /// A new empty schema, or `None` (after saying why) when no database is
    /// configured outside CI.
    pub fn create(test: &str) -> Option<TestSchema> {
        let admin_url = database_url(test)?;
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
        admin(&admin_url, format!("CREATE SCHEMA {name}"));
        Some(TestSchema { admin_url, name })
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
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

/// `url` with `schema` as the search path of its connections.
pub fn url_with_schema(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

/// Runs `sql` on a connection of its own, from a thread of its own (the
/// caller may be inside a runtime).
fn admin(url: &str, sql: String) {
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
                client.batch_execute(&sql).await.unwrap();
            })
    })
    .join()
    .unwrap();
}
