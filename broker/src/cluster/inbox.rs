//! The node's inbox task: brings the messages other nodes stored for the
//! queues this node serves into their memory (`rebound_storage::postgres`'s
//! inbox). It wakes on a notification naming those queues, when this node's
//! own sends joined the inbox of one it serves, and every [`POLL`] looks at
//! all of them, for notifications lost while the listening connection was
//! down and for queues it just loaded.
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rebound_storage::{InboxNotice, PostgresStore, QueueId, StorageError};
use tracing::{debug, warn};

use crate::engine::Broker;

/// How often the inbox of every served queue is looked at anyway.
pub const POLL: Duration = Duration::from_secs(1);

/// Runs until the broker shuts down.
pub async fn run(store: Arc<PostgresStore>, broker: Arc<Broker>) {
    let mut notices = store.inbox_notices();
    let cluster = broker.cluster();
    loop {
        let mut named = BTreeSet::new();
        let mut every = false;
        tokio::select! {
            notice = notices.recv() => {
                let mut next = notice;
                while let Some(notice) = next {
                    match notice {
                        InboxNotice::Queues(queues) => named.extend(queues),
                        InboxNotice::Any => every = true,
                    }
                    next = notices.try_recv().ok();
                }
            }
            joined = cluster.inbox_joined() => named.extend(joined),
            _ = tokio::time::sleep(POLL) => every = true,
            _ = broker.shutdown().cancelled() => return,
        }
        let served = broker.cluster().served_queue_ids();
        let queues = match every {
            true => match store.inbox_queues(served).await {
                Ok(queues) => queues,
                Err(err) => {
                    debug!(%err, "cannot look at the inbox");
                    continue;
                }
            },
            false => served.into_iter().filter(|q| named.contains(q)).collect(),
        };
        for queue in queues {
            take(&store, &broker, queue).await;
        }
    }
}

/// Takes `queue`'s inbox into its memory, if this node serves it.
pub(super) async fn take(store: &PostgresStore, broker: &Arc<Broker>, queue: QueueId) {
    match broker
        .cluster()
        .take_inbox(queue, || store.drain_inbox(queue))
        .await
    {
        Ok(_) => {}
        // The queue moved meanwhile: its new owner takes them.
        Err(crate::error::BrokerError::Storage(StorageError::Fenced { .. })) => {}
        Err(err) => warn!(queue, %err, "taking messages from the inbox failed; trying again shortly"),
    }
}
