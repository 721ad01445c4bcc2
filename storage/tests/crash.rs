//! Kill -9 recovery: a child process (this test binary, re-executed) commits
//! as fast as it can and prints every acknowledged commit; the parent kills it
//! with SIGKILL and checks that everything acknowledged survived.
//!
//! Modelled on sled's `tests/test_crash_recovery.rs`. The second test mixes
//! in 1 MiB messages, whose bodies live in files under `large/`, and also
//! checks that no orphaned body file survives a reopen. The third uses
//! journal segments of 16 KiB, so that the child changes segment and
//! checkpoints every few dozen commits and the kills land in the middle of
//! checkpoints, segment changes and recycling. The fourth also bounds the
//! memtable's tables at 2 KiB, so that tables are frozen and applied to sled
//! within a segment, without a checkpoint, and the kills land there too.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rebound_storage::large::LARGE_DIR;
use rebound_storage::{MessageRecord, Op, QueueRecord, SledOptions, SledStore, Store};

/// Set in the child's environment to the store directory.
const CHILD_DIR: &str = "REBOUND_STORAGE_CRASH_CHILD_DIR";
/// Set in the child's environment to make every fourth message 1 MiB.
const CHILD_LARGE: &str = "REBOUND_STORAGE_CRASH_CHILD_LARGE";
/// Set in the child's environment to use tiny journal segments.
const CHILD_SMALL_SEGMENTS: &str = "REBOUND_STORAGE_CRASH_CHILD_SMALL_SEGMENTS";
/// Set in the child's environment to use tiny memtable tables.
const CHILD_SMALL_TABLES: &str = "REBOUND_STORAGE_CRASH_CHILD_SMALL_TABLES";
const SOURCE: u32 = 1;
const DLQ: u32 = 2;

/// How a run stores its messages.
#[derive(Clone, Copy)]
struct Mode {
    /// Every fourth message is 1 MiB.
    mixed: bool,
    /// Journal segments of 16 KiB.
    small_segments: bool,
    /// Memtable tables of 2 KiB (estimated).
    small_tables: bool,
}

impl Mode {
    fn from_env() -> Mode {
        Mode {
            mixed: std::env::var_os(CHILD_LARGE).is_some(),
            small_segments: std::env::var_os(CHILD_SMALL_SEGMENTS).is_some(),
            small_tables: std::env::var_os(CHILD_SMALL_TABLES).is_some(),
        }
    }

    fn open(self, dir: &Path) -> SledStore {
        let mut options = SledOptions::default();
        if self.small_segments {
            options.journal_segment_bytes = 16 << 10;
        }
        if self.small_tables {
            options.memtable_table_bytes = 2 << 10;
        }
        SledStore::open_with(dir, options).unwrap()
    }
}

/// Whether message `id` is a large one in a mixed run.
fn is_large(id: u64) -> bool {
    id.is_multiple_of(4)
}

fn message(id: u64, mixed: bool) -> MessageRecord {
    let len = if mixed && is_large(id) { 1 << 20 } else { 512 };
    MessageRecord {
        message_id: id,
        address: "a".into(),
        body: Bytes::from(
            (0..len)
                .map(|i: usize| (id as usize + i / 4096) as u8)
                .collect::<Vec<u8>>(),
        ),
        ..Default::default()
    }
}

/// The child: 8 tasks commit messages into SOURCE; every third acknowledged
/// message is then moved to DLQ in one commit. Runs until killed (or 20 s).
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let mode = Mode::from_env();
    let mixed = mode.mixed;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store: Arc<dyn Store> = Arc::new(mode.open(Path::new(&dir)));
        let queues = [SOURCE, DLQ].map(|id| {
            Op::PutQueue(QueueRecord {
                id,
                name: id.to_string(),
                ..Default::default()
            })
        });
        store.commit(queues.to_vec()).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    while Instant::now() < deadline {
                        let id = store.generate_id().unwrap();
                        store
                            .commit(vec![Op::PutMessage {
                                queue: SOURCE,
                                message: message(id, mixed),
                            }])
                            .await
                            .unwrap();
                        println!("committed {SOURCE} {id}");
                        if id.is_multiple_of(3) {
                            let ops = vec![
                                Op::RemoveMessage { queue: SOURCE, id },
                                Op::PutMessage {
                                    queue: DLQ,
                                    message: message(id, mixed),
                                },
                            ];
                            store.commit(ops).await.unwrap();
                            println!("committed {DLQ} {id}");
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// Runs the child until it has acknowledged `at_least` commits, kills it, and
/// returns what it acknowledged: (queue, id) pairs, later ones last.
fn run_child_and_kill(dir: &Path, at_least: usize, mode: Mode) -> Vec<(u32, u64)> {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped());
    if mode.mixed {
        command.env(CHILD_LARGE, "1");
    }
    if mode.small_segments {
        command.env(CHILD_SMALL_SEGMENTS, "1");
    }
    if mode.small_tables {
        command.env(CHILD_SMALL_TABLES, "1");
    }
    let mut child = command.spawn().unwrap();
    let mut acked = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("committed ") {
            let (queue, id) = rest.split_once(' ').unwrap();
            acked.push((queue.parse().unwrap(), id.parse().unwrap()));
            if acked.len() >= at_least {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    acked
}

#[test]
fn acknowledged_commits_survive_sigkill() {
    let mode = Mode {
        mixed: false,
        small_segments: false,
        small_tables: false,
    };
    kill_and_check(&[300, 1000, 50], mode);
}

#[test]
fn acknowledged_large_commits_survive_sigkill_without_orphans() {
    let mode = Mode {
        mixed: true,
        small_segments: false,
        small_tables: false,
    };
    kill_and_check(&[100, 400, 20, 250], mode);
}

#[test]
fn acknowledged_commits_survive_sigkill_across_checkpoints() {
    let mode = Mode {
        mixed: false,
        small_segments: true,
        small_tables: false,
    };
    kill_and_check(&[700, 2000, 90, 1500, 333, 3000], mode);
}

#[test]
fn acknowledged_commits_survive_sigkill_across_tables_frozen_within_segments() {
    let mode = Mode {
        mixed: false,
        small_segments: true,
        small_tables: true,
    };
    kill_and_check(&[700, 2000, 90, 1500, 333, 3000], mode);
}

/// Kills a child after each of `rounds` acknowledged-commit counts and
/// checks what survived.
fn kill_and_check(rounds: &[usize], mode: Mode) {
    let mixed = mode.mixed;
    let dir = tempfile::tempdir().unwrap();
    let mut in_source = BTreeSet::new();
    let mut in_dlq = BTreeSet::new();
    for (round, &at_least) in rounds.iter().enumerate() {
        let acked = run_child_and_kill(dir.path(), at_least, mode);
        assert!(
            acked.len() >= at_least,
            "round {round}: child acknowledged only {} commits",
            acked.len()
        );
        for (queue, id) in acked {
            if queue == SOURCE {
                in_source.insert(id);
            } else {
                in_source.remove(&id);
                in_dlq.insert(id);
            }
        }

        let store = mode.open(dir.path());
        let recovered = store.recover().unwrap();
        let ids = |queue: u32| -> BTreeSet<u64> {
            let q = recovered.queues.iter().find(|q| q.record.id == queue).unwrap();
            q.messages.iter().map(|m| m.id).collect()
        };
        let (source, dlq) = (ids(SOURCE), ids(DLQ));
        assert!(
            source.is_disjoint(&dlq),
            "round {round}: a moved message is in both queues"
        );
        // Every acknowledged move is in the DLQ; every acknowledged put is in
        // one of the two queues (its move may have landed unacknowledged).
        assert!(
            dlq.is_superset(&in_dlq),
            "round {round}: lost DLQ moves {:?}",
            in_dlq.difference(&dlq)
        );
        let missing: Vec<_> = in_source
            .iter()
            .filter(|id| !source.contains(id) && !dlq.contains(id))
            .collect();
        assert!(missing.is_empty(), "round {round}: lost messages {missing:?}");
        for id in &dlq {
            assert_eq!(store.read_message(DLQ, *id).unwrap(), Some(message(*id, mixed)));
        }
        if mixed {
            for id in &source {
                assert_eq!(
                    store.read_message(SOURCE, *id).unwrap(),
                    Some(message(*id, mixed)),
                    "round {round}: message {id}"
                );
            }
            // The sweep at open left exactly the bodies of the large messages
            // recovered, one file each.
            let files = std::fs::read_dir(dir.path().join(LARGE_DIR)).unwrap().count();
            let large = source.iter().chain(&dlq).filter(|id| is_large(**id)).count();
            assert_eq!(files, large, "round {round}: orphaned body files");
            assert!(large > 0, "round {round}: no large message was committed");
        }
        // What the child did unacknowledged counts from here on.
        in_source = source;
        in_dlq = dlq;
        store.close().unwrap();
    }
}
