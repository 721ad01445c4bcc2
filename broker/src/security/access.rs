//! What each operation needs, written once; the gRPC services (and the console)
//! check through here before they act, so a denied operation changes nothing.
//!
//! | operation | needs, on the address it acts on |
//! |---|---|
//! | send (also in a transaction) | `send`; plus `create-address` (and `create-queue`) when it auto-creates them |
//! | consume | `consume` on the queue's address; plus `create-queue` (and `create-address`) when it auto-creates them |
//! | browse, count, get a queue or address, its settings; list | `browse` (lists show only what the caller may browse) |
//! | create address / delete address | `create-address` / `delete-address`; a forced delete of an address with queues also `delete-queue` |
//! | create queue / delete queue | `create-queue` (and `create-address` if its address is new) / `delete-queue` |
//! | purge, remove | `manage` on the queue's address |
//! | move | `manage` on the source queue's address, and `send` on the target address (plus the create permissions if the move creates it) |
//! | retry | `manage` on the dead-letter queue's address; each message needs `send` on the address it goes back to, else it is skipped |
//! | server info | only to be logged in |
//!
//! A move or retry puts messages into another address, so it needs `send` there:
//! otherwise `manage` on one address (or `send` on a DLQ, where a forged dead
//! letter names any queue as its origin) would let a user write into addresses
//! they may not send to. Artemis does not check this; it runs management moves
//! as the broker.
//!
//! A queue that does not exist is checked on the address of its name (the one
//! auto-creating it would use), so a caller without permission learns
//! PERMISSION_DENIED, not whether the queue exists.
//!
//! A send inside a transaction is checked when it joins the transaction, not
//! again at commit. Which address an operation acts on and what it would create
//! are read from the engine just before it acts, without holding a lock across
//! the operation: a concurrent change in between (the address deleted, then
//! auto-created again by this very send) is checked as it was a moment before.
use std::sync::Arc;

use rebound_config::Permission;

use super::audit;
pub use super::operation::{Caller, Kind, Operation};
use super::policy::Policy;
use crate::engine::{Broker, Creation};
use crate::error::Result;

impl<'a> Operation<'a> {
    fn new(kind: Kind, address: String, queue: Option<&'a str>) -> Self {
        Operation {
            kind,
            address,
            queue,
            creates: Creation::default(),
            to: None,
            with_queues: false,
        }
    }

    /// A send to `address` (what it would auto-create counts).
    pub fn send(broker: &Broker, address: &'a str) -> Self {
        Operation {
            creates: broker.creation_on_send(address),
            ..Self::new(Kind::Send, address.to_owned(), None)
        }
    }

    /// A consumer attaching to `queue` (what it would auto-create counts).
    pub fn consume(broker: &Broker, queue: &'a str) -> Self {
        let (address, creates) = broker.consumer_plan(queue);
        Operation {
            creates,
            ..Self::new(Kind::Consume, address, Some(queue))
        }
    }

    /// A consumer of `queue`, on `address`, that is already attached.
    pub fn attached(queue: &'a str, address: &str) -> Self {
        Self::new(Kind::Consume, address.to_owned(), Some(queue))
    }

    /// Any operation on a queue that needs nothing else: browse, delete, purge,
    /// remove, retry.
    pub fn on_queue(broker: &Broker, kind: Kind, queue: &'a str) -> Self {
        Self::new(kind, queue_address(broker, queue), Some(queue))
    }

    /// Looking at an address (its queues, its settings).
    pub fn browse_address(address: &'a str) -> Self {
        Self::new(Kind::Browse, address.to_owned(), None)
    }

    pub fn create_address(address: &'a str) -> Self {
        Self::new(Kind::CreateAddress, address.to_owned(), None)
    }

    pub fn delete_address(broker: &Arc<Broker>, address: &'a str, force: bool) -> Self {
        let with_queues = force
            && broker
                .management()
                .address(address)
                .is_ok_and(|a| !a.queues.is_empty());
        Operation {
            with_queues,
            ..Self::new(Kind::DeleteAddress, address.to_owned(), None)
        }
    }

    pub fn create_queue(broker: &Arc<Broker>, address: &'a str, queue: &'a str) -> Self {
        let creates = Creation {
            address: broker.management().address(address).is_err(),
            queue: true,
        };
        Operation {
            creates,
            ..Self::new(Kind::CreateQueue, address.to_owned(), Some(queue))
        }
    }

    /// Moving messages of `queue` to the address `to`.
    pub fn move_to(broker: &Broker, queue: &'a str, to: &'a str) -> Self {
        Operation {
            to: Some((to, broker.creation_on_send(to))),
            ..Self::on_queue(broker, Kind::Move, queue)
        }
    }

    /// The permissions it needs, each on an address; the first is the one the
    /// operation is named after.
    pub fn needs(&self) -> Vec<(Permission, &str)> {
        let at = self.address.as_str();
        let primary = match self.kind {
            Kind::Send => Permission::Send,
            Kind::Consume => Permission::Consume,
            Kind::Browse => Permission::Browse,
            Kind::CreateAddress => Permission::CreateAddress,
            Kind::DeleteAddress => Permission::DeleteAddress,
            Kind::CreateQueue => Permission::CreateQueue,
            Kind::DeleteQueue => Permission::DeleteQueue,
            Kind::Purge | Kind::Remove | Kind::Move | Kind::Retry | Kind::Resume | Kind::Probe => {
                Permission::Manage
            }
        };
        let mut needs = Vec::new();
        let mut add = |permission, address| {
            if !needs.contains(&(permission, address)) {
                needs.push((permission, address));
            }
        };
        add(primary, at);
        creations(&mut add, self.creates, at);
        if self.with_queues {
            add(Permission::DeleteQueue, at);
        }
        if let Some((to, creates)) = self.to {
            add(Permission::Send, to);
            creations(&mut add, creates, to);
        }
        needs
    }
}

/// The create permissions of what an operation would create on `address`.
fn creations<'n>(add: &mut impl FnMut(Permission, &'n str), creates: Creation, address: &'n str) {
    if creates.address {
        add(Permission::CreateAddress, address);
    }
    if creates.queue {
        add(Permission::CreateQueue, address);
    }
}

/// The address of a queue; for one that does not exist, its own name.
fn queue_address(broker: &Broker, queue: &str) -> String {
    broker
        .queue(queue)
        .map_or_else(|_| queue.to_owned(), |q| q.address.clone())
}

/// Checks that `caller` may carry out `operation` under `policy`: every permission
/// it needs. A denial is written to the audit log and is the error to answer.
pub fn authorize(policy: &Policy, caller: &Caller, operation: &Operation<'_>) -> Result<()> {
    if !policy.is_on() {
        return Ok(());
    }
    for (permission, address) in operation.needs() {
        if let Err(err) = policy.check(&caller.principal, permission, address) {
            audit::denied(caller, operation, &err);
            return Err(err);
        }
    }
    Ok(())
}

/// Whether `caller` may browse `address`: what lists show.
pub fn may_browse(policy: &Policy, caller: &Caller, address: &str) -> bool {
    policy.allows(&caller.principal, Permission::Browse, address)
}

/// For a retry, whether a message may go back to `address`: `send` there. A
/// refusal is audited and becomes the message's skip reason.
pub fn may_return_to(policy: &Policy, caller: &Caller, queue: &str, address: &str) -> Result<(), String> {
    policy
        .check(&caller.principal, Permission::Send, address)
        .map_err(|err| {
            audit::denied(
                caller,
                &Operation::new(Kind::Retry, address.to_owned(), Some(queue)),
                &err,
            );
            err.to_string()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::Principal;
    use Permission::*;

    fn op(kind: Kind) -> Operation<'static> {
        Operation::new(kind, "a".into(), Some("q"))
    }

    const BOTH: Creation = Creation {
        address: true,
        queue: true,
    };

    #[test]
    fn each_operation_needs_its_permission_on_its_address() {
        let cases = [
            (Kind::Send, Send),
            (Kind::Consume, Consume),
            (Kind::Browse, Browse),
            (Kind::CreateAddress, CreateAddress),
            (Kind::DeleteAddress, DeleteAddress),
            (Kind::CreateQueue, CreateQueue),
            (Kind::DeleteQueue, DeleteQueue),
            (Kind::Purge, Manage),
            (Kind::Remove, Manage),
            (Kind::Move, Manage),
            (Kind::Retry, Manage),
            (Kind::Resume, Manage),
            (Kind::Probe, Manage),
        ];
        for (kind, permission) in cases {
            assert_eq!(op(kind).needs(), [(permission, "a")], "{}", kind.name());
        }
    }

    #[test]
    fn auto_creation_needs_the_create_permissions() {
        let send = Operation {
            creates: BOTH,
            ..op(Kind::Send)
        };
        assert_eq!(
            send.needs(),
            [(Send, "a"), (CreateAddress, "a"), (CreateQueue, "a")]
        );
        let consume = Operation {
            creates: Creation {
                address: false,
                queue: true,
            },
            ..op(Kind::Consume)
        };
        assert_eq!(consume.needs(), [(Consume, "a"), (CreateQueue, "a")]);
        let queue = Operation {
            creates: BOTH,
            ..op(Kind::CreateQueue)
        };
        assert_eq!(queue.needs(), [(CreateQueue, "a"), (CreateAddress, "a")]);
    }

    #[test]
    fn moves_need_send_on_the_target_and_forced_deletes_delete_queue() {
        let to = Operation {
            to: Some(("b", BOTH)),
            ..op(Kind::Move)
        };
        assert_eq!(
            to.needs(),
            [
                (Manage, "a"),
                (Send, "b"),
                (CreateAddress, "b"),
                (CreateQueue, "b")
            ]
        );
        let delete = Operation {
            with_queues: true,
            ..op(Kind::DeleteAddress)
        };
        assert_eq!(delete.needs(), [(DeleteAddress, "a"), (DeleteQueue, "a")]);
    }

    fn policy(text: &str) -> Policy {
        Policy::new(&rebound_config::Config::parse(text, "t.toml").unwrap())
    }

    fn caller(name: &str) -> Caller {
        Caller {
            principal: Principal::User { name: name.into() },
            peer: None,
        }
    }

    #[test]
    fn authorize_checks_every_need_and_names_the_first_missing() {
        let policy = policy(
            "[[users]]\nname = \"p\"\nroles = [\"p\"]\n[[security-settings]]\nmatch = \"#\"\nsend = [\"p\"]\ncreate-address = [\"p\"]\n",
        );
        let plain = op(Kind::Send);
        assert!(authorize(&policy, &caller("p"), &plain).is_ok());
        let creating = Operation {
            creates: BOTH,
            ..op(Kind::Send)
        };
        let err = authorize(&policy, &caller("p"), &creating).unwrap_err();
        assert!(err.to_string().contains("`create-queue`"), "{err}");
        let err = authorize(&policy, &caller("other"), &plain).unwrap_err();
        assert!(err.to_string().contains("user 'other' lacks the `send`"), "{err}");
        assert!(may_return_to(&policy, &caller("p"), "DLQ", "x").is_ok());
        assert!(
            may_return_to(&policy, &caller("other"), "DLQ", "x")
                .unwrap_err()
                .contains("`send`")
        );
        // Security off: everything goes.
        assert!(authorize(&Policy::default(), &caller("other"), &creating).is_ok());
    }
}
