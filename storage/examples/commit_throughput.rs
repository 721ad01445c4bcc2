//! Durable commit throughput of `SledStore` with 1, 8 and 64 concurrent
//! committers, each awaiting one 1 KiB `PutMessage` per commit.
//!
//! `cargo run --release -p rebound-storage --example commit_throughput [seconds] [dir]`
//!
//! The store goes in a temporary directory under `dir` (default: the system
//! temp dir); use a directory on the disk you want to measure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rebound_storage::{MessageRecord, Op, QueueRecord, SledStore, Store};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map_or(3, |s| s.parse().expect("seconds"));
    let parent = args.next().map_or_else(std::env::temp_dir, Into::into);
    for committers in [1, 8, 64] {
        let dir = tempfile::tempdir_in(&parent).unwrap();
        let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path()).unwrap());
        store
            .commit(vec![Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            })])
            .await
            .unwrap();
        let before = store.stats();
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let tasks: Vec<_> = (0..committers)
            .map(|_| {
                let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let message = MessageRecord {
                            message_id: store.generate_id().unwrap(),
                            address: "bench".into(),
                            body: Bytes::from_static(&[0x5a; 1024]),
                            durable: true,
                            ..Default::default()
                        };
                        store
                            .commit(vec![Op::PutMessage { queue: 1, message }])
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.unwrap();
        }
        let elapsed = started.elapsed().as_secs_f64();
        let stats = store.stats();
        let commits = stats.commits - before.commits;
        let syncs = stats.syncs - before.syncs;
        println!(
            "committers={committers:>2}  msgs/s={:>8.0}  commits={commits}  syncs={syncs}  syncs/commit={:.3}",
            commits as f64 / elapsed,
            syncs as f64 / commits as f64,
        );
        store.close().unwrap();
    }
}
