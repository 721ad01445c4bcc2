//! Whether the broker's store takes its commits, for readiness, liveness and
//! the log: the last commit's outcome beside what the store says of its
//! background writes ([`Store::health`]).
//!
//! A failed commit makes the broker not ready for [`NOT_READY_FOR`], or until
//! a commit succeeds: a broker that no longer gets work (a balancer took it
//! out) would otherwise never find out that its store works again.
//!
//! The first commit to succeed after failures wakes whoever waits for the
//! store to work again ([`CommitHealth::recovered`]): a queue's dispatcher
//! backing off after failed rounds, which would otherwise sleep through a
//! short recovery, and find the store failing again when it woke (a disk that
//! fills up again and again kept a queue from delivering for 56 s).
//!
//! Every failed commit is counted (`rebound_store_commit_failures_total`);
//! the log says so at most once per [`WARN_EVERY`], with the count since the
//! last line, so that a store refusing thousands of commits a second cannot
//! flood the log.
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use rebound_storage::{StorageError, Store, StoreHealth};
use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tracing::warn;

use crate::log_every::LogEvery;

/// At most one WARN line about failed commits per this long.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// How long a failed commit keeps the broker not ready, unless one succeeds.
const NOT_READY_FOR: Duration = Duration::from_secs(5);

/// The outcome of the broker's commits.
#[derive(Debug, Default)]
pub struct CommitHealth {
    /// When the last commit failed, if none succeeded since.
    failed_at: Mutex<Option<Instant>>,
    /// The WARN about failed commits.
    warned: Mutex<LogEvery>,
    /// Every commit that failed.
    pub failures: Counter,
    /// Woken by the first commit to succeed after failures.
    recovered: Notify,
}

impl CommitHealth {
    /// Records a commit's outcome.
    pub fn record(&self, result: &Result<(), StorageError>) {
        let failed = result.as_ref().err();
        let was_failing = std::mem::replace(
            &mut *self.failed_at.lock().unwrap_or_else(PoisonError::into_inner),
            failed.map(|_| Instant::now()),
        )
        .is_some();
        let Some(error) = failed else {
            if was_failing {
                self.recovered.notify_waiters();
            }
            return;
        };
        self.failures.inc();
        let due = self
            .warned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .event(WARN_EVERY);
        if let Some(failed) = due {
            warn!(%error, failed, "store commits fail; the broker reports itself not ready");
        }
    }

    /// Resolves when a commit succeeds after failures, from now on.
    pub fn recovered(&self) -> Notified<'_> {
        self.recovered.notified()
    }

    /// Whether the broker should take no work now: a commit failed lately
    /// and none succeeded since, or the store retries or gave up its writes.
    pub fn failing(&self, store: &dyn Store) -> bool {
        let failed_at = *self.failed_at.lock().unwrap_or_else(PoisonError::into_inner);
        failed_at.is_some_and(|at| at.elapsed() < NOT_READY_FOR)
            || !matches!(store.health(), StoreHealth::Healthy)
    }
}

/// The error the store gave up on, if it did: it refuses every commit until
/// a restart, so the process is no longer live.
pub fn store_failed(store: &dyn Store) -> Option<StorageError> {
    match store.health() {
        StoreHealth::Failed(error) => Some(error),
        StoreHealth::Healthy | StoreHealth::Retrying(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn failed() -> Result<(), StorageError> {
        Err(StorageError::Closed)
    }

    #[test]
    fn the_first_commit_to_succeed_after_failures_wakes_the_waiters() {
        let health = CommitHealth::default();
        let mut cx = Context::from_waker(Waker::noop());
        let mut waiting = pin!(health.recovered());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        health.record(&Ok(()));
        assert!(waiting.as_mut().poll(&mut cx).is_pending(), "nothing had failed");
        health.record(&failed());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        health.record(&Ok(()));
        assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Ready(()));
    }
}
