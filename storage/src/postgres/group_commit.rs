//! The committer: one task on the store's runtime that writes every commit,
//! a group of them per transaction.
//!
//! 1. [`Committer::submit`] checks the size limits on the caller's thread
//!    (a bad commit is refused before it can fail a group) and queues the
//!    ops with a oneshot sender; the caller awaits the [`Commit`].
//! 2. The committer waits for the first request, then takes whatever else
//!    is queued, up to the sled committer's bounds
//!    ([`MAX_GROUP_REQUESTS`] requests, [`MAX_GROUP_BYTES`] bytes), or up
//!    to a request storing a duplicate id the group stores, which starts
//!    the next group (`duplicate_ids.rs`).
//! 3. It folds the group ([`Writes`]), writes it in one transaction on one
//!    pooled connection, COMMITs, and answers every waiter with the result.
//!
//! Several groups may be in the database at once (up to the pool size less
//! one, which is left to reads), each on its own connection: while one waits
//! for its WAL flush, the next is written, and PostgreSQL flushes the commit
//! records of the groups waiting together, which is where a COMMIT's cost
//! goes. Their order then is the server's, so a group goes only once no group
//! in flight touches the same rows ([`Footprint`]: the same message, a queue
//! it writes or wipes, an address or its duplicate ids); disjoint groups
//! commute, and a group whose commit fails was never acknowledged. A commit
//! issued after another resolved is always ordered after it.
//! In a cluster, a group that writes under a lease that is gone fails
//! only the commits that claimed it (`fence.rs`), and one that stores a
//! duplicate id stored already only the commits that carried it
//! (`duplicate_ids.rs`); the others are written again without them.
//! A failed group fails its waiters only: the committer carries on, and the
//! next group takes a connection from the pool, which replaces a broken one,
//! so commits work again once the database does.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use deadpool_postgres::Pool;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

use super::duplicate_ids::{self, Ids};
use super::fence::{Claims, Fence, Lease, Sorted};
use super::pool::{Database, pool_error};
use super::writes::{Footprint, Writes};
use crate::error::StorageError;
use crate::group_commit::{MAX_GROUP_BYTES, MAX_GROUP_REQUESTS};
use crate::{Commit, MessageId, Op, QueueId, limits};

/// A queued commit.
struct Request {
    ops: Vec<Op>,
    /// How many ops it carried (for the counters, once `ops` is folded).
    ops_count: u64,
    /// Rough encoded size, for the group's byte bound.
    bytes: usize,
    /// The leases its owner writes were made under (`fence.rs`).
    claims: Option<Claims>,
    /// The messages it stores for queues other nodes hold.
    inbox: Vec<(QueueId, MessageId)>,
    /// The messages it stores for queues this node holds.
    owned: Vec<(QueueId, MessageId)>,
    /// The duplicate ids it stores and deletes.
    ids: Ids,
    /// Answered with those of `owned` that joined their queue's inbox.
    done: oneshot::Sender<Result<Vec<(QueueId, MessageId)>, StorageError>>,
}

enum Message {
    Commit(Request),
    /// Finish what was queued before, then stop and say so.
    Close(std::sync::mpsc::SyncSender<()>),
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    ops: AtomicU64,
    syncs: AtomicU64,
}

/// The handle of the committer task.
pub(super) struct Committer {
    queue: mpsc::UnboundedSender<Message>,
    fence: Arc<Fence>,
    closed: AtomicBool,
    counters: Arc<Counters>,
}

impl Committer {
    /// Starts the committer on `db`'s runtime, with at most `depth` groups
    /// in the database at once.
    pub(super) fn start(db: &Database, depth: usize, fence: Arc<Fence>) -> Committer {
        let (queue, requests) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        db.spawn(run(db.pool(), requests, Arc::clone(&counters), depth.max(1)));
        Committer {
            queue,
            fence,
            closed: AtomicBool::new(false),
            counters,
        }
    }

    /// Queues `ops`; the [`Commit`] resolves once their group is committed.
    pub(super) fn submit(&self, ops: Vec<Op>) -> Commit {
        if self.closed.load(Ordering::SeqCst) {
            return Commit::ready(Err(StorageError::Closed));
        }
        if let Err(e) = ops.iter().try_for_each(limits::check_op) {
            return Commit::ready(Err(e));
        }
        let Sorted { claims, inbox, owned } = match self.fence.sort(&ops) {
            Ok(sorted) => sorted,
            Err(e) => return Commit::ready(Err(e)),
        };
        let bytes = ops.iter().map(op_bytes).sum();
        let ids = Ids::of(&ops);
        let (done, commit) = oneshot::channel();
        let inboxed = inbox.clone();
        // A committer that stopped drops the sender: the commit is Closed.
        let _ = self.queue.send(Message::Commit(Request {
            ops_count: ops.len() as u64,
            ops,
            bytes,
            claims,
            inbox,
            owned,
            ids,
            done,
        }));
        Commit::joining(commit, inboxed)
    }

    /// Lets the committer finish what is queued and stop; later commits fail
    /// with [`StorageError::Closed`]. Blocks until it has stopped.
    pub(super) fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let (ack, stopped) = std::sync::mpsc::sync_channel(1);
        if self.queue.send(Message::Close(ack)).is_ok() {
            let _ = stopped.recv();
        }
    }

    /// Commits, ops and transactions so far.
    pub(super) fn counters(&self) -> (u64, u64, u64) {
        let c = &self.counters;
        (
            c.commits.load(Ordering::Relaxed),
            c.ops.load(Ordering::Relaxed),
            c.syncs.load(Ordering::Relaxed),
        )
    }
}

/// What an op adds to a group's byte bound: message bodies dominate.
fn op_bytes(op: &Op) -> usize {
    match op {
        Op::PutMessage { message, .. } => prost::Message::encoded_len(message),
        _ => 64,
    }
}

async fn run(
    pool: Pool,
    mut requests: mpsc::UnboundedReceiver<Message>,
    counters: Arc<Counters>,
    depth: usize,
) {
    // Groups in the database, each with its number and footprint.
    let mut in_flight = FuturesUnordered::new();
    let mut footprints: Vec<(u64, Footprint)> = Vec::new();
    let mut numbers = 0_u64..;
    let mut closing = None;
    // A commit storing a duplicate id that the group being made stores
    // already: it starts the next group (`duplicate_ids.rs`).
    let mut carried = None;
    while closing.is_none() {
        let first = match carried.take() {
            Some(request) => Some(Message::Commit(request)),
            None => loop {
                tokio::select! {
                    message = requests.recv() => break message,
                    Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                        footprints.retain(|(number, _)| *number != done);
                    }
                }
            },
        };
        let Some(first) = first else { break };
        let mut group = Vec::new();
        let mut ids = HashSet::new();
        let mut bytes = 0;
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Close(ack) => closing = Some(ack),
                Message::Commit(request) if request.ids.stored.iter().any(|id| ids.contains(id)) => {
                    carried = Some(request);
                }
                Message::Commit(request) => {
                    ids.extend(request.ids.stored.iter().cloned());
                    bytes += request.bytes;
                    group.push(request);
                    if group.len() < MAX_GROUP_REQUESTS && bytes < MAX_GROUP_BYTES {
                        next = requests.try_recv().ok();
                    }
                }
            }
        }
        if group.is_empty() {
            continue;
        }
        let writes = fold(&mut group);
        let footprint = writes.footprint();
        while in_flight.len() >= depth || footprints.iter().any(|(_, f)| f.overlaps(&footprint)) {
            if let Some(done) = in_flight.next().await {
                footprints.retain(|(number, _)| *number != done);
            }
        }
        let number = numbers.next().expect("unbounded");
        footprints.push((number, footprint));
        let (pool, counters) = (pool.clone(), Arc::clone(&counters));
        in_flight.push(async move {
            commit_group(&pool, writes, group, &counters).await;
            number
        });
    }
    while in_flight.next().await.is_some() {}
    if let Some(ack) = closing {
        let _ = ack.send(());
    }
}

/// Whether a failed `group` may be to blame on some of its commits only, and
/// be written again without them: one fenced, or storing duplicate ids.
fn refusable(group: &[Request]) -> bool {
    group
        .iter()
        .any(|r| r.claims.is_some() || !r.ids.stored.is_empty())
}

/// Folds the ops of `group` into one set of writes. A [`refusable`] group
/// keeps its ops, to write them again without a commit whose lease was lost
/// or whose id was stored already.
fn fold(group: &mut [Request]) -> Writes {
    let keep = refusable(group);
    let mut writes = Writes::default();
    for request in group {
        let ops = match keep {
            true => request.ops.clone(),
            false => std::mem::take(&mut request.ops),
        };
        ops.into_iter().for_each(|op| writes.add(op));
        writes.add_inbox(&request.inbox);
        writes.add_owned(&request.owned);
    }
    writes
}

async fn commit_group(pool: &Pool, writes: Writes, group: Vec<Request>, counters: &Counters) {
    let claims = Claims::merge(group.iter().filter_map(|r| r.claims.as_ref()));
    let result = write(pool, writes, claims.as_ref()).await;
    match result {
        Err(e) if refusable(&group) => without_refused(pool, group, claims, e, counters).await,
        result => answer(group, result, counters),
    }
}

/// After a group failed with `error`: fails the commits that wrote under a
/// lease that is gone with [`StorageError::Fenced`] and those that stored
/// an id stored already with [`StorageError::DuplicateIds`], and writes the
/// others again (as often as that happens while it does); when no commit is
/// to blame, fails the group with `error`.
async fn without_refused(
    pool: &Pool,
    mut group: Vec<Request>,
    mut claims: Option<Claims>,
    mut error: StorageError,
    counters: &Counters,
) {
    loop {
        let (lost, stored) = match pool.get().await.map_err(pool_error) {
            Ok(client) => (
                lost_leases(&client, claims.as_ref()).await,
                stored_ids(&client, &group).await,
            ),
            Err(_) => Default::default(),
        };
        if lost.is_empty() && stored.is_empty() {
            return answer(group, Err(error), counters);
        }
        let mut rest = Vec::with_capacity(group.len());
        for request in group {
            let claims = request.claims.as_ref();
            if let Some(queue) = lost
                .iter()
                .find(|l| claims.is_some_and(|c| c.leases.contains(l)))
                .map(|l| l.queue)
            {
                tracing::info!(queue, "a commit under a lease that is gone is refused");
                let _ = request.done.send(Err(StorageError::Fenced { queue }));
                continue;
            }
            let ids: Vec<_> = request
                .ids
                .stored
                .iter()
                .filter(|i| stored.contains(*i))
                .cloned()
                .collect();
            if !ids.is_empty() {
                tracing::debug!(
                    ids = ids.len(),
                    "a commit of duplicate ids stored already is refused"
                );
                let _ = request.done.send(Err(StorageError::DuplicateIds { ids }));
                continue;
            }
            rest.push(request);
        }
        group = rest;
        if group.is_empty() {
            return;
        }
        let writes = fold(&mut group);
        claims = Claims::merge(group.iter().filter_map(|r| r.claims.as_ref()));
        match write(pool, writes, claims.as_ref()).await {
            Ok(joined) => return answer(group, Ok(joined), counters),
            Err(e) => error = e,
        }
    }
}

/// The leases of `claims` that no longer hold (none when that cannot
/// be read).
async fn lost_leases(client: &deadpool_postgres::Client, claims: Option<&Claims>) -> Vec<Lease> {
    let Some(claims) = claims else {
        return Vec::new();
    };
    match claims.held(client).await {
        Ok(held) => claims.leases.difference(&held).cloned().collect(),
        Err(_) => Vec::new(),
    }
}

/// The duplicate ids `group` stores that the database holds already, but for
/// those the group deletes first (none when that cannot be read).
async fn stored_ids(client: &deadpool_postgres::Client, group: &[Request]) -> BTreeSet<(String, Bytes)> {
    let deleted: BTreeSet<_> = group.iter().flat_map(|r| r.ids.deleted.iter()).collect();
    let candidates: BTreeSet<(String, Bytes)> = group
        .iter()
        .flat_map(|r| r.ids.stored.iter())
        .filter(|id| !deleted.contains(id))
        .cloned()
        .collect();
    if candidates.is_empty() {
        return BTreeSet::new();
    }
    duplicate_ids::stored(client, &candidates)
        .await
        .unwrap_or_default()
}

/// Answers every waiter of `group` with `result` (each with the messages
/// of its own that `joined` an inbox), and counts it.
fn answer(
    group: Vec<Request>,
    result: Result<BTreeSet<(QueueId, MessageId)>, StorageError>,
    counters: &Counters,
) {
    match &result {
        Ok(_) => {
            let ops = group.iter().map(|r| r.ops_count).sum();
            counters.commits.fetch_add(group.len() as u64, Ordering::Relaxed);
            counters.ops.fetch_add(ops, Ordering::Relaxed);
            counters.syncs.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => tracing::warn!(commits = group.len(), "a group commit to PostgreSQL failed: {e}"),
    }
    for request in group {
        let answer = match &result {
            Ok(joined) => Ok(request.owned.into_iter().filter(|m| joined.contains(m)).collect()),
            Err(e) => Err(e.clone()),
        };
        let _ = request.done.send(answer);
    }
}

async fn write(
    pool: &Pool,
    writes: Writes,
    claims: Option<&Claims>,
) -> Result<BTreeSet<(QueueId, MessageId)>, StorageError> {
    let client = pool.get().await.map_err(pool_error)?;
    writes.write(&client, claims).await
}
