//! `queue retry` in chunks, so that the operator sees progress and, when the retry
//! is interrupted (Ctrl-C) or the broker fails, how far it got.
//!
//! One `RetryMessages` call for a whole dead-letter queue says nothing until it
//! returns, and nothing at all if it never does. So the CLI asks the broker to move
//! at most `chunk` messages per call (the request's `limit`) and calls again while
//! a call moved that many, printing `retried N of M` to stderr after each. Each
//! message's move is one atomic commit on the broker, so a retry cut off anywhere
//! leaves every message in exactly one queue; what the operator needs is the count,
//! which the CLI prints however the retry ends:
//!
//! - a broker error (or crash) fails the command with the number retried before it,
//!   plus the size of the call under way, whose moves the broker may or may not
//!   have made;
//! - the first Ctrl-C lets the call under way finish (it is bounded by the chunk),
//!   prints the report of what was done and fails the command with the count; a
//!   second Ctrl-C quits at once, printing the count known so far.
//!
//! Messages the broker skips (not a dead letter, `max-redrive` reached, the original
//! queue gone) stay on the queue and do not count towards a chunk, so every call
//! reports them again; they are merged by message id into one report.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::anyhow;
use rebound_client::{Client, RetryMessagesResponse, Selection};

/// What a chunked retry did, and why it stopped early if it did.
pub struct Retried {
    /// The calls' outcomes merged as one response.
    pub report: RetryMessagesResponse,
    /// Set when the retry stopped before the end (a broker error or Ctrl-C); it
    /// names how many messages were retried. Print `report`, then fail with it.
    pub stopped: Option<anyhow::Error>,
}

/// Retries `selection` at `rate` messages per second (0: unlimited), at most
/// `chunk` messages per call. Progress goes to stderr. An error before any call
/// succeeded is returned as such (nothing was retried).
pub async fn in_chunks(
    client: &Client,
    selection: &Selection,
    rate: u32,
    chunk: u32,
) -> anyhow::Result<Retried> {
    let queue = &selection.queue;
    let total = client.count_messages(selection).await?;
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(watch_interrupts(
        done.clone(),
        stop.clone(),
        format!("{total} messages from {queue}"),
        chunk,
    ));
    let mut merged = Merged::default();
    let mut calls = 0;
    let stopped = loop {
        let response = match client.retry_messages_up_to(selection, false, rate, chunk).await {
            Ok(response) => response,
            Err(err) if calls == 0 => {
                watcher.abort();
                return Err(err.into());
            }
            Err(err) => {
                break Some(anyhow::Error::new(err).context(format!(
                    "retried {} of {total} messages from {queue} before this error; the call under way \
                     may have moved up to {chunk} more (see `rebound queue stat`)",
                    merged.response.moved
                )));
            }
        };
        calls += 1;
        let last = response.moved < u64::from(chunk);
        merged.add(response);
        done.store(merged.response.moved, Ordering::Relaxed);
        eprintln!(
            "retried {} of {total} messages from {queue} ({} skipped)",
            merged.response.moved,
            merged.skipped.len()
        );
        if last {
            break None;
        }
        if stop.load(Ordering::Relaxed) {
            break Some(anyhow!(
                "interrupted: retried {} of {total} messages from {queue}",
                merged.response.moved
            ));
        }
    };
    watcher.abort();
    Ok(Retried {
        report: merged.finish(),
        stopped,
    })
}

/// The first Ctrl-C asks the loop to stop after the call under way; the second
/// exits at once (130, as a shell reports SIGINT) with the count so far.
async fn watch_interrupts(done: Arc<AtomicU64>, stop: Arc<AtomicBool>, what: String, chunk: u32) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    stop.store(true, Ordering::Relaxed);
    eprintln!(
        "interrupted: stopping after the call under way (at most {chunk} messages); Ctrl-C again to quit now"
    );
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    eprintln!(
        "error: interrupted: retried {} of {what}; the call under way may have moved up to {chunk} more",
        done.load(Ordering::Relaxed)
    );
    std::process::exit(130);
}

/// The outcomes of several calls as one response.
#[derive(Default)]
struct Merged {
    response: RetryMessagesResponse,
    /// Where each skipped message's outcome is in `response.outcomes`.
    skipped: HashMap<u64, usize>,
}

impl Merged {
    fn add(&mut self, response: RetryMessagesResponse) {
        self.response.moved += response.moved;
        for outcome in response.outcomes {
            let id = outcome.message_id;
            let moved = outcome.skipped.is_empty();
            match self.skipped.get(&id) {
                // Skipped before: keep its place, with the latest word on it.
                Some(&at) => {
                    self.response.outcomes[at] = outcome;
                    if moved {
                        self.skipped.remove(&id);
                    }
                }
                None => {
                    if !moved {
                        self.skipped.insert(id, self.response.outcomes.len());
                    }
                    self.response.outcomes.push(outcome);
                }
            }
        }
    }

    fn finish(mut self) -> RetryMessagesResponse {
        self.response.skipped = self.skipped.len() as u64;
        self.response
    }
}

#[cfg(test)]
mod tests {
    use rebound_client::RetryOutcome;

    use super::*;

    fn outcome(id: u64, skipped: &str) -> RetryOutcome {
        RetryOutcome {
            message_id: id,
            to_address: "a".into(),
            to_queue: "a".into(),
            skipped: skipped.into(),
        }
    }

    #[test]
    fn skipped_messages_reported_by_every_call_count_once() {
        let mut merged = Merged::default();
        merged.add(RetryMessagesResponse {
            moved: 2,
            skipped: 1,
            outcomes: vec![outcome(1, ""), outcome(2, "max-redrive"), outcome(3, "")],
        });
        merged.add(RetryMessagesResponse {
            moved: 1,
            skipped: 1,
            outcomes: vec![outcome(2, "max-redrive"), outcome(4, "")],
        });
        let report = merged.finish();
        assert_eq!((report.moved, report.skipped), (3, 1));
        let ids: Vec<u64> = report.outcomes.iter().map(|o| o.message_id).collect();
        assert_eq!(ids, [1, 2, 3, 4]);
    }

    #[test]
    fn a_message_skipped_then_moved_counts_as_moved() {
        let mut merged = Merged::default();
        merged.add(RetryMessagesResponse {
            moved: 0,
            skipped: 1,
            outcomes: vec![outcome(7, "it is being delivered or is gone")],
        });
        merged.add(RetryMessagesResponse {
            moved: 1,
            skipped: 0,
            outcomes: vec![outcome(7, "")],
        });
        let report = merged.finish();
        assert_eq!((report.moved, report.skipped, report.outcomes.len()), (1, 0, 1));
    }
}
