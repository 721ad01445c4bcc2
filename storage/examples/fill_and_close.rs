//! Liveness stress of `SledStore`: fills a fresh store with a backlog as fast
//! as it commits (four tasks, 500-message commits of 100 B bodies, as the
//! `backlog` benchmark does), closes it, and starts over, `rounds` times. A
//! watchdog ends the process with exit code 3 (after printing its id, so that
//! `gdb -p` can look first) if nothing moves for 15 s.
//!
//! `cargo run --release -p rebound-storage --example fill_and_close [rounds] [messages] [dir]`
//!
//! This is how sled 0.34.7's hang in `flush()` after a large run of writes
//! was found and how the checkpointer's flushing every few thousand writes
//! was checked (`sled_store/kv.rs`, `FLUSH_EVERY_WRITES`): without it, 2 rounds
//! of 44 hung at the close; with it, none of 204.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rebound_storage::{MessageRecord, Op, QueueRecord, SledStore, Store};

const BATCH: u64 = 500;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: u64 = args.next().map_or(20, |s| s.parse().expect("rounds"));
    let messages: u64 = args.next().map_or(500_000, |s| s.parse().expect("messages"));
    let parent = args.next().map_or_else(std::env::temp_dir, Into::into);
    let progress = Arc::new(AtomicU64::new(0));
    watchdog(Arc::clone(&progress));
    for round in 1..=rounds {
        let dir = tempfile::tempdir_in(&parent).unwrap();
        let started = Instant::now();
        let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path()).unwrap());
        let queue = QueueRecord {
            id: 1,
            name: "q".into(),
            ..Default::default()
        };
        store.commit(vec![Op::PutQueue(queue)]).await.unwrap();
        let claimed = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let (store, claimed, progress) =
                    (Arc::clone(&store), Arc::clone(&claimed), Arc::clone(&progress));
                tokio::spawn(async move {
                    let body = Bytes::from(vec![0x5a; 100]);
                    while claimed.fetch_add(BATCH, Ordering::Relaxed) < messages {
                        let ops = (0..BATCH)
                            .map(|_| Op::PutMessage {
                                queue: 1,
                                message: MessageRecord {
                                    message_id: store.generate_id().unwrap(),
                                    address: "q".into(),
                                    body: body.clone(),
                                    ..Default::default()
                                },
                            })
                            .collect();
                        store.commit(ops).await.unwrap();
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let filled = started.elapsed();
        store.close().unwrap();
        progress.fetch_add(1, Ordering::Relaxed);
        println!(
            "round {round}: filled in {:.2} s, closed after {:.2} s",
            filled.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    }
}

/// Exits with code 3 once `progress` has not moved for 15 s.
fn watchdog(progress: Arc<AtomicU64>) {
    std::thread::spawn(move || {
        let (mut seen, mut since) = (0, Instant::now());
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = progress.load(Ordering::Relaxed);
            if now != seen {
                (seen, since) = (now, Instant::now());
            } else if since.elapsed() > Duration::from_secs(15) {
                eprintln!("stuck for 15 s (pid {}); exiting", std::process::id());
                std::thread::sleep(Duration::from_secs(30));
                std::process::exit(3);
            }
        }
    });
}
