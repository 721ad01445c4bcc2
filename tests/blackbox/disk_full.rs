//! A store that fails on an error that clears (issue 31): a full disk stops
//! its writes and the broker says it is not ready; once space is freed the
//! store writes again by itself, and every acknowledged message is there
//! exactly once.
use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use rebound_client::{Client, OutgoingMessage};

use crate::support::{Broker, cli, http_get, sample, skipped};

/// Small journal segments, so that the store's own files (run files, written
/// at each segment's end) need the space the test takes away.
const CONFIG: &str = "journal-file-size = 262144\n";
const MESSAGES: usize = 4_000;

/// Fills the file system of `dir` with one file, up to its last byte.
fn fill(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).expect("create the filler");
    let block = vec![0u8; 64 << 10];
    while file.write_all(&block).is_ok() {}
    while file.write_all(&block[..512]).is_ok() {}
    path
}

async fn ready(broker: &Broker) -> u16 {
    http_get(&format!("{}/health/ready", broker.http_url().await))
        .await
        .0
}

/// Waits (bounded) until `/health/ready` answers `status`.
async fn wait_ready(broker: &Broker, status: u16, within: Duration) -> bool {
    tokio::time::timeout(within, async {
        while ready(broker).await != status {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .is_ok()
}

/// Waits (bounded) until `rebound health` prints `status`.
async fn wait_grpc_health(broker: &Broker, status: &str) -> bool {
    tokio::time::timeout(Duration::from_secs(10), async {
        while cli(broker, ["health"]).await.stdout.trim() != status {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_on_a_full_disk_writes_again_once_space_is_freed() {
    let broker = match Broker::start_on_tmpfs(CONFIG, 48 << 20).await {
        Ok(broker) => broker,
        Err(reason) => return skipped(&reason),
    };
    let client = broker.client().await;
    let filler = fill(&broker.data_dir());

    // Sends while the disk is full: each is acknowledged, refused, or left
    // waiting (the store holds commits once its writes are behind).
    let body = "x".repeat(1000);
    let mut acknowledged = Vec::new();
    for i in 0..MESSAGES {
        let message = OutgoingMessage::new("ledger", format!("{i:05} {body}"));
        match tokio::time::timeout(Duration::from_secs(2), client.send(message)).await {
            Ok(Ok(_)) => acknowledged.push(i),
            Ok(Err(_)) => {}
            Err(_) => break,
        }
    }
    assert!(
        wait_ready(&broker, 503, Duration::from_secs(20)).await,
        "the broker stayed ready on a full disk; log:\n{}",
        broker.log()
    );

    // gRPC health says so too, for a supervisor that probes it.
    assert!(
        wait_grpc_health(&broker, "NOT_SERVING").await,
        "gRPC health kept SERVING on a full disk"
    );

    std::fs::remove_file(filler).expect("free the space");
    // Each failed commit is counted; the log says so at most every 10 s.
    let failures = sample(&broker.scrape().await, "rebound_store_commit_failures_total", &[]);
    assert!(failures.is_some_and(|n| n >= 1.0), "{failures:?}");
    let log = broker.log();
    assert!(log.matches("store commits fail").count() <= 2, "{log}");

    // Ready again by itself: nothing needs to send for it to find out.
    assert!(
        wait_ready(&broker, 200, Duration::from_secs(30)).await,
        "the broker did not become ready again once space was freed; log:\n{}",
        broker.log()
    );
    let after = tokio::time::timeout(
        Duration::from_secs(30),
        client.send(OutgoingMessage::new("ledger", "after")),
    )
    .await
    .expect("a send once space was freed answers in time");
    after.unwrap_or_else(|e| panic!("a send once space was freed: {e}; log:\n{}", broker.log()));
    assert!(
        wait_grpc_health(&broker, "SERVING").await,
        "gRPC health stayed NOT_SERVING"
    );

    // Every acknowledged message is there, none twice.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let fresh = Client::connect(&broker.url()).await.unwrap();
    let mut consumer = fresh.consume("ledger", 500).await.unwrap();
    while let Some(delivery) = consumer.next_timeout(Duration::from_secs(3)).await.unwrap() {
        let text = String::from_utf8_lossy(&delivery.message.body).into_owned();
        *seen
            .entry(text.split(' ').next().unwrap_or_default().to_owned())
            .or_default() += 1;
        consumer.ack(&[delivery.id]).await.unwrap();
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "stored twice: {twice:?}");
    let lost: Vec<_> = acknowledged
        .iter()
        .filter(|i| !seen.contains_key(&format!("{i:05}")))
        .collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
    assert!(seen.contains_key("after"));
}
