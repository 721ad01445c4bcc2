//! The one error type of the storage layer.
//!
//! Errors of the database under a store (sled, PostgreSQL) are boxed into
//! [`StorageError::Engine`] so that none of its types appears in a signature
//! (the tikv `engine_traits` rule). The error is
//! `Clone` because one failed group commit answers every waiter in the group
//! with the same error; sources are therefore held in `Arc`s.

use std::sync::Arc;

/// Everything that can go wrong in the storage layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    /// The database under the store (sled, PostgreSQL) reported an error.
    /// (Its message is in ours, so it
    /// is not also a `source`: an error chain would print it twice.)
    #[error("storage engine error: {0}")]
    Engine(Arc<dyn std::error::Error + Send + Sync>),
    /// A file operation of our own (the fdatasync of the journal) failed. The
    /// context of an fsync or fdatasync says `sync`, and no other does
    /// (see [`StorageError::is_transient`]).
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: &'static str,
        /// The OS error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A stored key or value could not be decoded.
    #[error("corrupt record under key {key}: {reason}")]
    Corrupt {
        /// The key, in hex.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The journal has a gap or a damaged record before its end: commits that
    /// were acknowledged cannot be recovered. The store does not open.
    #[error("journal segment {file} is damaged at byte {offset}: {reason}")]
    CorruptJournal {
        /// The segment file.
        file: String,
        /// Where in it.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A run file (a run of queued messages, or the manifest that lists
    /// the runs, `crate::runs`) is damaged; what it holds cannot be read.
    #[error("run file {file} is damaged at byte {offset}: {reason}")]
    CorruptPage {
        /// The file.
        file: String,
        /// Where in it.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A record is bigger than [`MAX_RECORD_BYTES`](crate::MAX_RECORD_BYTES);
    /// nothing of the commit was written.
    #[error("record under key {key} is {size} bytes, the limit is {max}")]
    RecordTooLarge {
        /// The key, in hex.
        key: String,
        /// Encoded size of key plus value.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The store was opened with journal segments too small to hold a
    /// record; nothing was opened.
    #[error("journal segments of {size} bytes cannot hold a record; the minimum is {min} bytes")]
    JournalSegmentTooSmall {
        /// The size asked for.
        size: u64,
        /// The smallest size the journal's format can use.
        min: u64,
    },
    /// The database could not be reached or dropped the connection
    /// (PostgreSQL store): nothing of the commit was written, or, for a
    /// failure during `COMMIT`, the outcome is unknown. Later commits try
    /// again; the broker answers `UNAVAILABLE`. (Not a `source`, as `Engine`.)
    #[error("the database is unavailable: {0}")]
    Unavailable(Arc<dyn std::error::Error + Send + Sync>),
    /// The database holds a schema newer than this build knows (PostgreSQL
    /// store): a newer rebound migrated it. Nothing was opened.
    #[error("the database schema is version {found}, this build knows up to {known}: upgrade rebound")]
    SchemaTooNew {
        /// The version in the database.
        found: i32,
        /// The newest version this build can migrate to.
        known: i32,
    },
    /// A commit wrote the state of a queue (an ack, a delivery state) under a
    /// lease that is gone: this node's, or the one it claimed of the node that
    /// held acks for its transaction ([`crate::Op::Claim`]); another node took
    /// the queue over (PostgreSQL store, several brokers on one database).
    /// Nothing of the commit was written; the queue's new owner has the
    /// message.
    #[error("queue {queue} is served by another node now: the lease its commit was made under is gone")]
    Fenced {
        /// The queue.
        queue: crate::QueueId,
    },
    /// A commit stored duplicate ids another commit had stored already
    /// (PostgreSQL store: the database keeps one row per id and address,
    /// whichever node stored it). Nothing of the commit was written.
    #[error("duplicate ids already stored: {}", describe_ids(ids))]
    DuplicateIds {
        /// The ids found stored, with their address.
        ids: Vec<(String, bytes::Bytes)>,
    },
    /// Another process registered this node's id since this one did
    /// (PostgreSQL store, several brokers on one database): two nodes run
    /// with one `node-id`, or this one was replaced after a stall.
    #[error("node {node} was registered again by another process: node ids must be unique")]
    NodeReplaced {
        /// The node id.
        node: String,
    },
    /// Every queue id (a `u32`) has been handed out.
    #[error("no queue id is left to allocate")]
    QueueIdsExhausted,
    /// The committer thread panicked; commits queued behind it were lost.
    #[error("the committer thread panicked")]
    CommitterPanicked,
    /// The store was closed (or its committer stopped); nothing was written.
    #[error("the store is closed")]
    Closed,
}

impl StorageError {
    /// Wraps an I/O error with what we were doing.
    pub(crate) fn io(context: &'static str, source: std::io::Error) -> StorageError {
        StorageError::Io {
            context,
            source: Arc::new(source),
        }
    }

    /// Whether the operation can be tried again once the cause clears,
    /// losing nothing: the process or system was out of file handles (which
    /// only opening a file can meet), or the disk out of space for a write. A
    /// failed sync never is: the kernel may have dropped the data it could
    /// not write, and a sync tried again can succeed without it.
    pub fn is_transient(&self) -> bool {
        let StorageError::Io { context, source } = self else {
            return false;
        };
        match source.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE) => true,
            Some(libc::ENOSPC | libc::EDQUOT) => !context.contains("sync"),
            _ => false,
        }
    }

    /// A database error that is only its message: options the store cannot
    /// work with.
    pub(crate) fn refused(message: impl Into<String>) -> StorageError {
        StorageError::Engine(Arc::new(std::io::Error::other(message.into())))
    }
}

fn describe_ids(ids: &[(String, bytes::Bytes)]) -> String {
    let ids: Vec<String> = ids
        .iter()
        .map(|(address, id)| format!("{} on {address}", String::from_utf8_lossy(id)))
        .collect();
    ids.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(context: &'static str, errno: i32) -> StorageError {
        StorageError::io(context, std::io::Error::from_raw_os_error(errno))
    }

    #[test]
    fn out_of_handles_or_space_clears_but_a_failed_sync_does_not() {
        assert!(io("writing a run file", libc::EMFILE).is_transient());
        assert!(io("syncing the runs' directory", libc::ENFILE).is_transient());
        assert!(io("writing a run file", libc::ENOSPC).is_transient());
        assert!(io("writing the runs' manifest", libc::EDQUOT).is_transient());
        assert!(!io("syncing a run file", libc::ENOSPC).is_transient());
        assert!(!io("fdatasync of the journal", libc::EIO).is_transient());
        assert!(!io("writing a run file", libc::EIO).is_transient());
        assert!(!StorageError::Closed.is_transient());
    }
}
