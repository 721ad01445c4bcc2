//! Who asks ([`Caller`]) and what for ([`Operation`]): what a permission check
//! ([`super::access`], which says what each operation needs) and an audit line
//! ([`super::audit`]) are about. Apart from both, so that neither imports the other.
use std::net::SocketAddr;

use super::Principal;
use super::policy::user_name;
use crate::engine::Creation;

/// Who is asking, and from where: what every check and audit line needs.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: Principal,
    pub peer: Option<SocketAddr>,
}

impl Caller {
    /// The caller of a gRPC request: the [`Principal`] authentication put in its
    /// extensions (none, as in engine tests, counts as anonymous) and its peer.
    pub fn of<T>(request: &tonic::Request<T>) -> Caller {
        Caller {
            principal: request
                .extensions()
                .get::<Principal>()
                .cloned()
                .unwrap_or(Principal::Anonymous),
            peer: request.remote_addr(),
        }
    }

    /// The user name, or `anonymous`.
    pub fn user(&self) -> &str {
        user_name(&self.principal)
    }
}

/// What kind of operation: what it is called in the audit log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Send,
    Consume,
    Browse,
    CreateAddress,
    DeleteAddress,
    CreateQueue,
    DeleteQueue,
    Purge,
    Remove,
    Move,
    Retry,
    /// End a queue's outage.
    Resume,
    /// Send an outage's next probe now.
    Probe,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Send => "send",
            Kind::Consume => "consume",
            Kind::Browse => "browse",
            Kind::CreateAddress => "create-address",
            Kind::DeleteAddress => "delete-address",
            Kind::CreateQueue => "create-queue",
            Kind::DeleteQueue => "delete-queue",
            Kind::Purge => "purge",
            Kind::Remove => "remove",
            Kind::Move => "move",
            Kind::Retry => "retry",
            Kind::Resume => "resume",
            Kind::Probe => "probe-now",
        }
    }
}

/// An operation with what its permissions depend on, read from the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation<'a> {
    pub kind: Kind,
    /// The address it acts on; a queue operation's is the queue's.
    pub address: String,
    pub queue: Option<&'a str>,
    /// What it would create on `address`.
    pub creates: Creation,
    /// A move's target address, and what the move would create there.
    pub to: Option<(&'a str, Creation)>,
    /// A forced delete of an address that still has queues.
    pub with_queues: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_a_principal_is_anonymous() {
        let request = tonic::Request::new(());
        assert_eq!(Caller::of(&request).principal, Principal::Anonymous);
        assert_eq!(Caller::of(&request).user(), "anonymous");
        let mut request = tonic::Request::new(());
        request
            .extensions_mut()
            .insert(Principal::User { name: "bob".into() });
        assert_eq!(Caller::of(&request).user(), "bob");
    }
}
