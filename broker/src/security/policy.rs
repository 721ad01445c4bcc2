//! The security in force: the users' roles and the `[[security-settings]]` of the
//! config in force, replaced whole when a config is (re)loaded.
//!
//! Roles are looked up by user name in the [`Policy`] at every check, never taken
//! from the login: a reload that takes a role from a user, or removes the user,
//! applies to that user's next operation, and to the consume streams they have open
//! (each watches [`Security::changes`] and checks again).
//!
//! Security is on when the config has users. Without users everything is allowed
//! (the broker serves anonymous clients only where `allow-anonymous` or a loopback
//! listener allows it; that is the authentication layer's concern).
use std::collections::HashMap;
use std::sync::Arc;

use rebound_config::{Config, Permission, SecuritySettings};
use tokio::sync::watch;

use super::Principal;
use crate::error::{BrokerError, Result};

/// Who holds which roles and what the roles may do, as one config says.
#[derive(Debug, Default)]
pub struct Policy {
    /// Every configured user's roles, by user name; empty = security is off.
    roles: HashMap<String, Vec<String>>,
    settings: SecuritySettings,
}

impl Policy {
    /// The policy of a config.
    pub fn new(config: &Config) -> Policy {
        Policy {
            roles: config
                .users
                .iter()
                .map(|u| (u.name.clone(), u.roles.clone()))
                .collect(),
            settings: config.security_settings.clone(),
        }
    }

    /// Whether permissions are checked at all: users are configured.
    pub fn is_on(&self) -> bool {
        !self.roles.is_empty()
    }

    /// Whether `principal` holds `permission` on `address`. With security off
    /// everyone does; with it on, an anonymous caller (one that connected before
    /// users were configured) and a user no longer configured hold nothing.
    pub fn allows(&self, principal: &Principal, permission: Permission, address: &str) -> bool {
        if !self.is_on() {
            return true;
        }
        match principal {
            Principal::Anonymous => false,
            Principal::User { name } => self
                .roles
                .get(name)
                .is_some_and(|roles| self.settings.allows(address, permission, roles)),
        }
    }

    /// [`allows`](Self::allows), as the error a denied client gets.
    pub fn check(&self, principal: &Principal, permission: Permission, address: &str) -> Result<()> {
        if self.allows(principal, permission, address) {
            return Ok(());
        }
        Err(BrokerError::PermissionDenied {
            user: user_name(principal).to_owned(),
            permission,
            address: address.to_owned(),
        })
    }
}

/// How a principal is named in errors and the audit log.
pub fn user_name(principal: &Principal) -> &str {
    match principal {
        Principal::Anonymous => "anonymous",
        Principal::User { name } => name,
    }
}

/// The policy in force, shared by the gRPC services, the config watcher and the
/// console; a reload swaps it whole.
pub struct Security {
    current: watch::Sender<Arc<Policy>>,
}

impl Security {
    /// The security of the config the broker starts with.
    pub fn new(config: &Config) -> Security {
        Security {
            current: watch::Sender::new(Arc::new(Policy::new(config))),
        }
    }

    /// The policy in force now.
    pub fn policy(&self) -> Arc<Policy> {
        self.current.borrow().clone()
    }

    /// Puts a reloaded config's users and security-settings in force; open consume
    /// streams check themselves against them at once.
    pub fn replace(&self, config: &Config) {
        self.current.send_replace(Arc::new(Policy::new(config)));
    }

    /// Tells of every [`replace`](Self::replace) from now on.
    pub fn changes(&self) -> watch::Receiver<Arc<Policy>> {
        self.current.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r##"
        [[users]]
        name = "alice"
        roles = ["producer"]

        [[users]]
        name = "bob"
        roles = ["consumer"]

        [[security-settings]]
        match = "orders.#"
        send = ["producer"]
        consume = ["consumer"]
    "##;

    fn config(text: &str) -> Config {
        Config::parse(text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
    }

    fn user(name: &str) -> Principal {
        Principal::User { name: name.into() }
    }

    #[test]
    fn without_users_everything_is_allowed() {
        let policy = Policy::new(&config("[[security-settings]]\nmatch = \"x\"\n"));
        assert!(!policy.is_on());
        for &permission in Permission::ALL {
            assert!(policy.allows(&Principal::Anonymous, permission, "orders"));
            assert!(policy.allows(&user("ghost"), permission, "orders"));
        }
    }

    #[test]
    fn roles_come_from_the_policy_not_the_login() {
        let policy = Policy::new(&config(CONFIG));
        assert!(policy.is_on());
        assert!(policy.allows(&user("alice"), Permission::Send, "orders.eu"));
        // The config in force gives bob "consumer", not "producer".
        assert!(!policy.allows(&user("bob"), Permission::Send, "orders.eu"));
        assert!(policy.allows(&user("bob"), Permission::Consume, "orders"));
        // Unknown users and anonymous callers hold nothing once security is on.
        assert!(!policy.allows(&user("carol"), Permission::Send, "orders"));
        assert!(!policy.allows(&Principal::Anonymous, Permission::Send, "orders"));
        // No entry matches `billing`: denied to everyone.
        assert!(!policy.allows(&user("alice"), Permission::Send, "billing"));
    }

    #[test]
    fn a_denial_names_user_permission_and_address() {
        let policy = Policy::new(&config(CONFIG));
        let err = policy
            .check(&user("bob"), Permission::Send, "orders.eu")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "permission denied: user 'bob' lacks the `send` permission on address 'orders.eu'"
        );
        let err = policy
            .check(&Principal::Anonymous, Permission::Browse, "x")
            .unwrap_err();
        assert!(err.to_string().contains("user 'anonymous'"), "{err}");
    }

    #[tokio::test]
    async fn a_replaced_policy_is_seen_at_once_and_announced() {
        let security = Security::new(&config(CONFIG));
        let mut changes = security.changes();
        assert!(
            security
                .policy()
                .allows(&user("bob"), Permission::Consume, "orders")
        );
        security.replace(&config(&CONFIG.replace("consume = [\"consumer\"]", "")));
        assert!(
            !security
                .policy()
                .allows(&user("bob"), Permission::Consume, "orders")
        );
        changes.changed().await.unwrap();
        assert!(
            !changes
                .borrow_and_update()
                .allows(&user("bob"), Permission::Consume, "orders")
        );
    }
}
