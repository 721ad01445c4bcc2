//! The audit log of authorization: every management operation and every denial,
//! on the tracing target [`AUDIT_TARGET`] (`rebound::audit`, where failed logins
//! go too), so it can be filtered, routed or kept apart from the rest (`RUST_LOG=rebound::audit=info`; one JSON object per line
//! with `--log-format json`).
//!
//! A line says who (`user`, "anonymous" when security is off), from where
//! (`peer`), what (`operation`), on which `address` and `queue`, how many
//! `messages` (left out for operations on addresses and queues themselves, as
//! is `queue` for operations on an address), and the `result`. Names are
//! string fields: quoted and escaped in text, JSON strings in JSON. Message
//! bodies and passwords never reach this file: its functions take none.
use std::fmt::Display;

use tracing::{info, warn};

use super::AUDIT_TARGET;
use super::operation::{Caller, Operation};
use crate::error::BrokerError;

/// A check refused `operation` to `caller`.
pub fn denied(caller: &Caller, operation: &Operation<'_>, err: &BrokerError) {
    let (permission, on) = match err {
        BrokerError::PermissionDenied {
            permission, address, ..
        } => (permission.as_str(), address.as_str()),
        _ => ("", ""),
    };
    warn!(
        target: AUDIT_TARGET,
        user = caller.user(),
        peer = %Peer(caller),
        operation = operation.kind.name(),
        address = operation.address.as_str(),
        queue = operation.queue,
        permission,
        denied_on = on,
        result = "denied",
        "permission denied"
    );
}

/// A management operation was carried out (or failed): `messages` is how many it
/// removed, moved or retried, when it works on messages.
pub fn managed<T>(
    caller: &Caller,
    operation: &Operation<'_>,
    messages: Option<u64>,
    result: &Result<T, BrokerError>,
) {
    let outcome = match result {
        Ok(_) => "ok".to_owned(),
        Err(err) => format!("failed: {err}"),
    };
    info!(
        target: AUDIT_TARGET,
        user = caller.user(),
        peer = %Peer(caller),
        operation = operation.kind.name(),
        address = operation.address.as_str(),
        queue = operation.queue,
        messages,
        result = outcome.as_str(),
        "management operation"
    );
}

/// Carries out `work`, a management operation already authorized, and writes
/// its [`managed`] line; `messages` reads how many messages it worked on from
/// its result. Both edges (gRPC Admin, the console) act through here.
pub async fn carried_out<T>(
    caller: &Caller,
    operation: &Operation<'_>,
    messages: impl FnOnce(&T) -> Option<u64>,
    work: impl Future<Output = Result<T, BrokerError>>,
) -> Result<T, BrokerError> {
    let result = work.await;
    let count = result.as_ref().ok().and_then(messages);
    managed(caller, operation, count, &result);
    result
}

/// A caller's peer address, or `-` (as the login lines write it).
struct Peer<'a>(&'a Caller);

impl Display for Peer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.peer {
            Some(peer) => write!(f, "{peer}"),
            None => f.write_str("-"),
        }
    }
}
