//! Transacted sessions: local transactions, as a JMS transacted session has them.
//!
//! A [`Session`] is one `Transact` stream. Its requests carry a `request_id` that
//! the broker's answer repeats; the broker answers them one at a time, in order. A
//! reader task hands each answer to the call waiting for it, so clones of a session
//! may pipeline requests from several tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming};

use crate::proto::transact_request::Kind as RequestKind;
use crate::proto::transact_response::Kind as ResponseKind;
use crate::{Client, Committed, Error, OutgoingMessage, Result, RolledBack, SendResponse, proto};

/// Requests queued for the stream before callers wait for room.
const REQUEST_BUFFER: usize = 64;

type Answer = oneshot::Sender<Result<ResponseKind>>;

/// The calls waiting for an answer, or why the stream ended (`None`: the broker
/// ended it cleanly).
enum Pending {
    Open(HashMap<u64, Answer>),
    Closed(Option<Status>),
}

fn closed_error(status: &Option<Status>) -> Error {
    status.clone().map_or(Error::StreamClosed, Error::from)
}

impl Client {
    /// Opens a transacted session (a `Transact` stream) for [`Session::begin`].
    pub async fn session(&self) -> Result<Session> {
        let (requests, rx) = mpsc::channel(REQUEST_BUFFER);
        let responses = self
            .messaging
            .clone()
            .transact(ReceiverStream::new(rx))
            .await?
            .into_inner();
        let pending = Arc::new(Mutex::new(Pending::Open(HashMap::new())));
        // The reader holds only `pending`, not the request sender: dropping the last
        // `Session` clone ends the request stream, and with it the broker's session.
        tokio::spawn(read_answers(responses, pending.clone()));
        Ok(Session {
            inner: Arc::new(Inner {
                requests,
                next_request: AtomicU64::new(1),
                pending,
            }),
        })
    }
}

async fn read_answers(mut responses: Streaming<proto::TransactResponse>, pending: Arc<Mutex<Pending>>) {
    let ended = loop {
        match responses.message().await {
            Ok(Some(response)) => {
                let answer = match response.kind {
                    Some(ResponseKind::Error(e)) => Err(Error::Status {
                        code: Code::from_i32(e.code),
                        message: e.message,
                    }),
                    Some(kind) => Ok(kind),
                    None => Err(Error::missing("TransactResponse.kind")),
                };
                // No one waits when the caller's future was dropped.
                if let Pending::Open(waiting) = &mut *lock(&pending)
                    && let Some(tx) = waiting.remove(&response.request_id)
                {
                    let _ = tx.send(answer);
                }
            }
            Ok(None) => break None,
            Err(status) => break Some(status),
        }
    };
    let before = std::mem::replace(&mut *lock(&pending), Pending::Closed(ended.clone()));
    if let Pending::Open(waiting) = before {
        for tx in waiting.into_values() {
            let _ = tx.send(Err(closed_error(&ended)));
        }
    }
}

fn lock(pending: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    pending.lock().unwrap_or_else(|e| e.into_inner())
}

/// A transacted session, from [`Client::session`]: the transactions begun on it
/// belong to it.
///
/// Clones share the one stream. When the last clone (including those held by its
/// [`Transaction`]s) is dropped, or the connection breaks, the broker rolls back
/// every transaction of the session that is still open.
#[derive(Debug, Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

struct Inner {
    requests: mpsc::Sender<proto::TransactRequest>,
    next_request: AtomicU64,
    pending: Arc<Mutex<Pending>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// Begins a transaction.
    pub async fn begin(&self) -> Result<Transaction> {
        match self.call(RequestKind::Begin(proto::Begin {})).await? {
            ResponseKind::Begun(b) => Ok(Transaction {
                session: self.clone(),
                id: b.transaction_id,
            }),
            other => Err(unexpected("Begun", &other)),
        }
    }

    /// Sends one request and waits for its answer; a `TransactError` becomes
    /// [`Error::Status`]. Cancel-safe: an answer no one waits for is dropped.
    async fn call(&self, kind: RequestKind) -> Result<ResponseKind> {
        let request_id = self.inner.next_request.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        match &mut *lock(&self.inner.pending) {
            Pending::Open(waiting) => waiting.insert(request_id, tx),
            Pending::Closed(status) => return Err(closed_error(status)),
        };
        let request = proto::TransactRequest {
            request_id,
            kind: Some(kind),
        };
        if self.inner.requests.send(request).await.is_err() {
            return Err(Error::StreamClosed);
        }
        // The reader answers every waiting call before it exits.
        rx.await.unwrap_or(Err(Error::StreamClosed))
    }
}

fn unexpected(wanted: &str, got: &ResponseKind) -> Error {
    Error::Protocol(format!("expected {wanted}, got {got:?}"))
}

/// A local transaction, from [`Session::begin`]: sends made through it and acks
/// made in it ([`Consumer::ack_in`](crate::Consumer::ack_in)) take effect together
/// on [`commit`](Self::commit), durably in one storage commit (after a crash either
/// all of it happened or none), or not at all on [`rollback`](Self::rollback).
///
/// Until then the sends are invisible and the acked messages are out of their
/// queue, delivered to no one else. A rollback, or the end of the session with the
/// transaction open, discards the sends and returns the acked messages with their
/// delivery count incremented; the address's redelivery settings then apply
/// (delay, max-delivery-attempts, dead-letter address).
///
/// Ordering: a rolled-back message may be redelivered to any consumer of its
/// queue, and after a redelivery delay it comes back behind messages sent later.
///
/// Once finished, the transaction cannot be used again: the broker refuses a
/// second commit or rollback, or a commit after a rollback, with
/// [`Code::FailedPrecondition`] (it names what happened), and an id it does not
/// know with [`Code::NotFound`]. Clones name the same transaction.
#[derive(Debug, Clone)]
pub struct Transaction {
    session: Session,
    id: u64,
}

impl Transaction {
    /// The broker's id of the transaction.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Sends one message in the transaction and returns the id it will have once
    /// committed.
    pub async fn send(&self, message: OutgoingMessage) -> Result<u64> {
        crate::client::only_id(self.send_batch(vec![message]).await?)
    }

    /// Sends messages in the transaction; the broker validates them now (and
    /// refuses them together) but routes them only on commit.
    pub async fn send_batch(&self, messages: Vec<OutgoingMessage>) -> Result<SendResponse> {
        let send = proto::TransactionalSend {
            transaction_id: self.id,
            messages: messages.into_iter().map(Into::into).collect(),
        };
        match self.session.call(RequestKind::Send(send)).await? {
            ResponseKind::Sent(sent) => Ok(sent),
            other => Err(unexpected("Sent", &other)),
        }
    }

    /// Commits: returns once the sends and acks are durable. A transaction with
    /// nothing in it commits too (`sent` and `acked` 0), as in JMS. If the broker
    /// cannot store it, the transaction is rolled back and the error returned.
    pub async fn commit(&self) -> Result<Committed> {
        let commit = proto::Commit {
            transaction_id: self.id,
        };
        match self.session.call(RequestKind::Commit(commit)).await? {
            ResponseKind::Committed(c) => Ok(c),
            other => Err(unexpected("Committed", &other)),
        }
    }

    /// Rolls back: discards the sends and returns the acked messages to their
    /// queues as failed deliveries.
    pub async fn rollback(&self) -> Result<RolledBack> {
        let rollback = proto::Rollback {
            transaction_id: self.id,
        };
        match self.session.call(RequestKind::Rollback(rollback)).await? {
            ResponseKind::RolledBack(r) => Ok(r),
            other => Err(unexpected("RolledBack", &other)),
        }
    }
}
