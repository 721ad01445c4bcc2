//! What only [`PostgresStore`] does: the database going away and coming
//! back. The store reaches the test database through a TCP proxy that the
//! test stops (every connection cut, nothing listening) and starts again on
//! the same port.

mod pg;

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pg::TestSchema;
use rebound_storage::{MessageRecord, Op, PostgresOptions, PostgresStore, QueueRecord, StorageError, Store};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// Forwards every connection to `listener` to `target` until aborted, which
/// drops (and so cuts) every forwarded connection.
fn proxy(listener: TcpListener, target: SocketAddr) -> JoinHandle<()> {
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

fn put(id: u64) -> Op {
    Op::PutMessage {
        queue: 1,
        message: MessageRecord {
            message_id: id,
            body: Bytes::from_static(b"body"),
            durable: true,
            ..Default::default()
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_fail_unavailable_while_the_database_is_away_and_work_again_once_it_is_back() {
    let Some(schema) = TestSchema::create("postgres outage") else {
        return;
    };
    let config = tokio_postgres::Config::from_str(&schema.url()).unwrap();
    let target = match (&config.get_hosts()[0], config.get_ports()[0]) {
        (tokio_postgres::config::Host::Tcp(host), port) => format!("{host}:{port}"),
        other => panic!("REBOUND_TEST_POSTGRES_URL must name a TCP host, not {other:?}"),
    };
    let target = tokio::net::lookup_host(&target).await.unwrap().next().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let running = proxy(listener, target);
    let url = pg::url_with_schema(
        &format!(
            "postgres://{}@127.0.0.1:{port}/{}",
            config.get_user().unwrap_or("postgres"),
            config.get_dbname().unwrap_or("postgres")
        ),
        schema.name(),
    );
    let store = PostgresStore::open(&PostgresOptions::new(url)).unwrap();
    store
        .commit(vec![
            Op::PutQueue(QueueRecord {
                id: 1,
                name: "q".into(),
                ..Default::default()
            }),
            put(1),
        ])
        .await
        .unwrap();

    running.abort();
    let _ = running.await;
    let failed = store.commit(vec![put(2)]).await;
    assert!(matches!(failed, Err(StorageError::Unavailable(_))), "{failed:?}");
    let failed = store.commit(vec![put(3)]).await;
    assert!(matches!(failed, Err(StorageError::Unavailable(_))), "{failed:?}");

    let _running = proxy(TcpListener::bind(("127.0.0.1", port)).await.unwrap(), target);
    // The same store, not reopened: the next group connects again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match store.commit(vec![put(4)]).await {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("still failing once the database is back: {e}"),
        }
    }
    let store2 = std::sync::Arc::new(store);
    let recovered = tokio::task::spawn_blocking(move || store2.recover())
        .await
        .unwrap()
        .unwrap();
    let ids: Vec<u64> = recovered.queues[0].messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 4], "what failed is not stored");
}
