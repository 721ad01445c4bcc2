//! Opening the store `rebound serve` keeps its messages in: sled in the data
//! dir, or a PostgreSQL database.
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use rebound_config::{Config, StorageEngine};
use rebound_storage::{ClientIdentity, PostgresOptions, PostgresStore, SledOptions, SledStore, Store};

use super::DEFAULT_DATA_DIR;

/// The store, and the same store as PostgreSQL (for a cluster node).
pub(super) type OpenedStore = (Arc<dyn Store>, Option<Arc<PostgresStore>>, String);

/// Opens the store `--storage` (or the config's `storage`) names, with the
/// flags' `--data-dir` and `--postgres-url` over the config's, and says where it
/// is for the log (never the URL, which may hold a password).
pub(super) fn open_store(
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
