//! The store contract (`tests/contract/`) run against every store. A new
//! store joins with a [`Harness`] and one `store_contract!` line.

#[macro_use]
mod contract;
mod pg;

use std::sync::Arc;

use contract::Harness;
use pg::TestSchema;
use rebound_storage::{MemoryStore, PostgresOptions, PostgresStore, SledStore, Store};
use tempfile::TempDir;

/// [`MemoryStore`]: a reopen is [`MemoryStore::reopen`].
#[derive(Default)]
struct Memory {
    current: Option<Arc<MemoryStore>>,
}

impl Harness for Memory {
    fn open(&mut self) -> Arc<dyn Store> {
        self.current.insert(Arc::new(MemoryStore::new())).clone()
    }

    fn reopen(&mut self, store: Arc<dyn Store>) -> Arc<dyn Store> {
        drop(store);
        let current = self.current.as_ref().expect("opened");
        let reopened = Arc::new(current.reopen());
        self.current.insert(reopened).clone()
    }
}

/// [`SledStore`] in a temporary directory, with default options.
struct Sled {
    dir: TempDir,
}

impl Sled {
    fn new() -> Sled {
        Sled {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

impl Harness for Sled {
    fn open(&mut self) -> Arc<dyn Store> {
        Arc::new(SledStore::open(self.dir.path()).unwrap())
    }

    fn reopen(&mut self, store: Arc<dyn Store>) -> Arc<dyn Store> {
        // The directory is ours again only once the last handle is gone.
        assert_eq!(
            Arc::strong_count(&store),
            1,
            "a handle of the old store is still alive"
        );
        drop(store);
        self.open()
    }
}

/// [`PostgresStore`] in a schema of its own; a reopen is a new store on the
/// same schema. The expression returns from the test when it is skipped.
struct Postgres {
    schema: TestSchema,
}

impl Postgres {
    fn new() -> Option<Postgres> {
        TestSchema::create("postgres contract").map(|schema| Postgres { schema })
    }
}

impl Harness for Postgres {
    fn open(&mut self) -> Arc<dyn Store> {
        Arc::new(PostgresStore::open(&PostgresOptions::new(self.schema.url())).unwrap())
    }

    fn reopen(&mut self, store: Arc<dyn Store>) -> Arc<dyn Store> {
        drop(store);
        self.open()
    }
}

store_contract!(memory, Memory::default());
store_contract!(sled, Sled::new());
store_contract!(
    postgres,
    match Postgres::new() {
        Some(harness) => harness,
        None => return,
    }
);
