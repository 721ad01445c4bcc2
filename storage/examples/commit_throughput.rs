//! Durable commit throughput of `SledStore` with 1, 8 and 64 concurrent
//! committers, each awaiting one 1 KiB `PutMessage` per commit.
//!
//! `cargo run --release -p rebound-storage --example commit_throughput [seconds] [dir] [body_bytes] [committers,...]`
//!
//! With `body_bytes` above `LARGE_BODY_THRESHOLD` (e.g. 1048576) it measures
//! large messages, whose bodies go to their own fsynced files.
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
    let body_bytes: usize = args.next().map_or(1024, |s| s.parse().expect("body_bytes"));
    let committer_counts: Vec<usize> = args.next().map_or(vec![1, 8, 64], |s| {
        s.split(',').map(|n| n.parse().expect("committers")).collect()
    });
    let body = Bytes::from(vec![0x5a; body_bytes]);
    for committers in committer_counts {
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
                let (store, stop, body) = (Arc::clone(&store), Arc::clone(&stop), body.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let message = MessageRecord {
                            message_id: store.generate_id().unwrap(),
                            address: "bench".into(),
                            body: body.clone(),
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
            "body={body_bytes}  committers={committers:>2}  msgs/s={:>8.0}  MiB/s={:>7.1}  commits={commits}  syncs={syncs}  syncs/commit={:.3}",
            commits as f64 / elapsed,
            commits as f64 * body_bytes as f64 / elapsed / f64::from(1 << 20),
            syncs as f64 / commits as f64,
        );
        store.close().unwrap();
    }
}
