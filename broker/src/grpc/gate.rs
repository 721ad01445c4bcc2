//! Who may send: the permission check of every send, whether it comes as a
//! `Send` call, a request of a Publish stream or a send of a transacted
//! session. The streams check each request against the security in force
//! when it arrives, so a reload that revokes `send` takes effect at once.
use std::sync::Arc;

use rebound_protocol::v1 as pb;
use tonic::Request;

use crate::engine::Broker;
use crate::error::Result;
use crate::security::Security;
use crate::security::access::{self, Caller, Operation};

/// A caller, and the security its sends are checked against.
pub(super) struct Gate {
    security: Arc<Security>,
    caller: Caller,
}

impl Gate {
    /// The gate of `request`'s caller.
    pub(super) fn of<T>(security: &Arc<Security>, request: &Request<T>) -> Gate {
        Gate {
            security: security.clone(),
            caller: Caller::of(request),
        }
    }

    /// Checks that the caller may send every message of a request, on each
    /// address once.
    pub(super) fn authorize_sends(&self, broker: &Broker, messages: &[pb::OutgoingMessage]) -> Result<()> {
        let policy = self.security.policy();
        if !policy.is_on() {
            return Ok(());
        }
        let mut addresses: Vec<&str> = messages.iter().map(|m| m.address.as_str()).collect();
        addresses.sort_unstable();
        addresses.dedup();
        for address in addresses {
            access::authorize(&policy, &self.caller, &Operation::send(broker, address))?;
        }
        Ok(())
    }
}
