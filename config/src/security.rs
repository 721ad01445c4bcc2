//! `[[security-settings]]`: which roles hold which permission on which
//! addresses (Artemis's security-settings).
//!
//! ```toml
//! [[security-settings]]
//! match = "orders.#"
//! send = ["producer", "admin"]
//! consume = ["consumer", "admin"]
//! browse = ["consumer", "admin"]
//! manage = ["admin"]
//! ```
//!
//! Entries are selected with the address-settings matcher ([`PatternMap`]), but
//! unlike address-settings they do not merge: as in Artemis, the single most
//! specific matching entry decides alone, and a permission it does not list is
//! held by no role — leaving a permission out of a more specific entry is how
//! one takes it away. An address that no entry matches is denied to everyone.
//! All of this applies only when users are configured; without users security
//! is off and everything is allowed.

use std::fmt;

use serde::Deserialize;
use toml::Spanned;

use crate::check::checked;
use crate::error::{ConfigError, Document};
use crate::matcher::Pattern;
use crate::pattern_map::{PatternMap, RawEntry};
use crate::users::role_name;

/// Declares the permissions once: the enum, its TOML keys and the raw entry.
macro_rules! permissions {
    ($( $(#[doc = $doc:literal])* $variant:ident = $key:literal, $field:ident; )*) => {
        /// A permission of `[[security-settings]]`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Permission {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl Permission {
            /// Every permission, in the order the config documents them.
            pub const ALL: &[Permission] = &[$(Permission::$variant),*];

            /// The TOML key, e.g. `create-address`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Permission::$variant => $key, )*
                }
            }
        }

        /// One `[[security-settings]]` table as written.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct RawSecurityEntry {
            #[serde(rename = "match")]
            pattern: Spanned<String>,
            $( #[serde(rename = $key)] $field: Option<Spanned<Vec<String>>>, )*
        }

        impl RawEntry for RawSecurityEntry {
            type Value = RoleGrants;

            fn pattern(&self) -> &Spanned<String> {
                &self.pattern
            }

            fn value(self, doc: &Document<'_>, at: &str) -> Result<RoleGrants, ConfigError> {
                let mut grants = RoleGrants::default();
                $(
                    if let Some(roles) = checked(doc, self.$field, roles, || format!("{at}.{}", $key))? {
                        grants.grant(Permission::$variant, roles);
                    }
                )*
                Ok(grants)
            }
        }
    };
}

permissions! {
    /// Send messages to the address (checked on every send).
    Send = "send", send;
    /// Attach a consumer to a queue of the address (checked when it attaches,
    /// and again for open consumers after every config reload).
    Consume = "consume", consume;
    /// Look without taking: browse, count and inspect queues, list them.
    Browse = "browse", browse;
    /// Create the address, explicitly or by a send or consumer that auto-creates it.
    CreateAddress = "create-address", create_address;
    /// Delete the address.
    DeleteAddress = "delete-address", delete_address;
    /// Create a queue on the address, explicitly or by auto-creation.
    CreateQueue = "create-queue", create_queue;
    /// Delete a queue of the address (also a forced address delete's queues).
    DeleteQueue = "delete-queue", delete_queue;
    /// Management of the queued messages: purge, remove, move and retry
    /// (from the source queue's address).
    Manage = "manage", manage;
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry's grants: per permission, the roles that hold it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleGrants {
    roles: [Vec<String>; Permission::ALL.len()],
}

impl RoleGrants {
    /// Gives `permission` to `roles` (replacing whom it was given to).
    pub fn grant(&mut self, permission: Permission, roles: Vec<String>) {
        self.roles[permission as usize] = roles;
    }

    /// The roles holding `permission`, as written.
    pub fn roles(&self, permission: Permission) -> &[String] {
        &self.roles[permission as usize]
    }

    /// Whether one of `roles` holds `permission`.
    pub fn allows(&self, permission: Permission, roles: &[String]) -> bool {
        self.roles(permission).iter().any(|r| roles.contains(r))
    }
}

/// All `[[security-settings]]` entries, in precedence order.
pub type SecuritySettings = PatternMap<RoleGrants>;

impl PatternMap<RoleGrants> {
    /// Whether one of `roles` holds `permission` on `address`: the most
    /// specific matching entry decides alone; no match denies.
    pub fn allows(&self, address: &str, permission: Permission, roles: &[String]) -> bool {
        self.most_specific(address)
            .is_some_and(|(_, grants)| grants.allows(permission, roles))
    }

    /// Who may do what on `address`, and which entry says so.
    pub fn resolve(&self, address: &str) -> ResolvedSecurity {
        let decided = self.most_specific(address);
        ResolvedSecurity {
            address: address.to_owned(),
            decided_by: decided.map(|(pattern, _)| pattern.clone()),
            grants: decided.map(|(_, grants)| grants.clone()).unwrap_or_default(),
        }
    }
}

/// The security-settings of one address; `Display` prints the table shown by
/// `rebound config resolve`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedSecurity {
    /// The address that was looked up.
    pub address: String,
    /// The `match` of the entry that decides; `None` when no entry matches
    /// (then every permission is denied to everyone).
    pub decided_by: Option<Pattern>,
    /// The deciding entry's grants (empty without one).
    pub grants: RoleGrants,
}

impl fmt::Display for ResolvedSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "security-settings for {:?}", self.address)?;
        match &self.decided_by {
            Some(pattern) => writeln!(
                f,
                "decided by match {:?} (the most specific; entries do not merge)",
                pattern.as_str()
            )?,
            None => writeln!(f, "no entry matches: denied to everyone")?,
        }
        let width = Permission::ALL
            .iter()
            .map(|p| p.as_str().len())
            .max()
            .unwrap_or(0);
        writeln!(f, "{:width$}  ROLES", "PERMISSION")?;
        for &permission in Permission::ALL {
            let roles = self.grants.roles(permission);
            let roles = if roles.is_empty() {
                "(none)".to_owned()
            } else {
                roles.join(", ")
            };
            writeln!(f, "{:width$}  {roles}", permission.as_str())?;
        }
        Ok(())
    }
}

/// A permission's role list: names as `[[users]]` roles take them, each once.
fn roles(roles: Vec<String>) -> Result<Vec<String>, String> {
    for (i, role) in roles.iter().enumerate() {
        role_name(role.clone())?;
        if roles[..i].contains(role) {
            return Err(format!("role {role:?} is listed twice"));
        }
    }
    Ok(roles)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn parse(text: &str) -> SecuritySettings {
        Config::parse(text, "test.toml")
            .unwrap_or_else(|e| panic!("{e}"))
            .security_settings
    }

    fn err(text: &str) -> String {
        Config::parse(text, "test.toml")
            .expect_err("should be refused")
            .to_string()
    }

    fn roles(names: &[&str]) -> Vec<String> {
        names.iter().map(|&n| n.to_owned()).collect()
    }

    const LAYERED: &str = r##"
        [[security-settings]]
        match = "#"
        send = ["admin"]
        consume = ["admin"]
        browse = ["admin", "ops"]
        manage = ["admin"]

        [[security-settings]]
        match = "orders.#"
        send = ["producer"]
        consume = ["consumer"]

        [[security-settings]]
        match = "orders.eu"
        consume = ["eu-consumer"]
    "##;

    #[test]
    fn the_most_specific_entry_wins_outright() {
        let s = parse(LAYERED);
        let admin = roles(&["admin"]);
        // `#` grants admin everything, but `orders.#` decides for orders.x and
        // does not list admin: entries do not merge.
        assert!(s.allows("billing", Permission::Send, &admin));
        assert!(!s.allows("orders.x", Permission::Send, &admin));
        assert!(s.allows("orders.x", Permission::Send, &roles(&["producer"])));
        assert!(!s.allows("orders.x", Permission::Browse, &roles(&["ops"])));
        // The exact entry beats `orders.#`, and lists no `send` at all.
        assert!(!s.allows("orders.eu", Permission::Send, &roles(&["producer"])));
        assert!(!s.allows("orders.eu", Permission::Consume, &roles(&["consumer"])));
        assert!(s.allows("orders.eu", Permission::Consume, &roles(&["eu-consumer", "x"])));
        assert!(s.allows("orders", Permission::Consume, &roles(&["consumer"])));
        assert!(!s.allows("billing", Permission::Send, &[]));
    }

    #[test]
    fn an_address_no_entry_matches_is_denied_to_everyone() {
        let s = parse("[[security-settings]]\nmatch = \"orders.#\"\nsend = [\"admin\"]\n");
        for &permission in Permission::ALL {
            assert!(
                !s.allows("billing", permission, &roles(&["admin"])),
                "{permission}"
            );
        }
        assert!(!SecuritySettings::default().allows("a", Permission::Send, &roles(&["admin"])));
        let resolved = s.resolve("billing");
        assert_eq!(resolved.decided_by, None);
        assert!(
            resolved
                .to_string()
                .contains("no entry matches: denied to everyone")
        );
    }

    #[test]
    fn every_permission_can_be_granted() {
        let mut text = String::from("[[security-settings]]\nmatch = \"a\"\n");
        for (i, permission) in Permission::ALL.iter().enumerate() {
            text += &format!("{} = [\"r{i}\"]\n", permission.as_str());
        }
        let s = parse(&text);
        for (i, &permission) in Permission::ALL.iter().enumerate() {
            for (j, &other) in Permission::ALL.iter().enumerate() {
                assert_eq!(
                    s.allows("a", other, &[format!("r{i}")]),
                    i == j,
                    "{permission} {other}"
                );
            }
        }
        assert_eq!(
            Permission::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            [
                "send",
                "consume",
                "browse",
                "create-address",
                "delete-address",
                "create-queue",
                "delete-queue",
                "manage"
            ]
        );
    }

    #[test]
    fn resolve_shows_roles_per_permission_and_the_deciding_match() {
        let text = parse(LAYERED).resolve("orders.x").to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "security-settings for \"orders.x\"");
        assert!(lines[1].starts_with("decided by match \"orders.#\""), "{text}");
        assert!(lines[2].starts_with("PERMISSION "), "{text}");
        assert_eq!(lines.len(), 3 + Permission::ALL.len());
        let row = |p: &str| *lines.iter().find(|l| l.starts_with(&format!("{p} "))).unwrap();
        assert!(row("send").ends_with("  producer"), "{text}");
        assert!(row("manage").ends_with("  (none)"), "{text}");
        let column = lines[2].find("ROLES").unwrap();
        assert_eq!(&row("create-address")[column..], "(none)");
        let admin = parse(LAYERED).resolve("billing").to_string();
        assert!(admin.contains("decided by match \"#\""), "{admin}");
        assert!(
            admin
                .lines()
                .any(|l| l.starts_with("browse") && l.ends_with("admin, ops")),
            "{admin}"
        );
    }

    #[test]
    fn errors_name_file_line_and_key() {
        assert_eq!(
            err("[[security-settings]]\nmatch = \"#\"\nconsume = [\"x\", \"x\"]\n"),
            "test.toml:3:11: security-settings[0].consume: role \"x\" is listed twice"
        );
        assert_eq!(
            err("[[security-settings]]\nmatch = \"#\"\nsend = [\"\"]\n"),
            "test.toml:3:8: security-settings[0].send: role name must not be blank"
        );
        assert_eq!(
            err("[[security-settings]]\nmatch = \"a.#.b\"\n"),
            "test.toml:2:9: security-settings[0].match: `#` may only be the last word (in `a.#.b`)"
        );
        assert_eq!(
            err(
                "[[security-settings]]\nmatch = \"a\"\n[[security-settings]]\nmatch = \"b\"\n[[security-settings]]\nmatch = \"a\"\n"
            ),
            "test.toml:6:9: security-settings[2].match: duplicate match `a`, first defined on line 2"
        );
        let unknown = err("[[security-settings]]\nmatch = \"#\"\nsned = [\"a\"]\n");
        assert!(
            unknown.starts_with("test.toml:3:1: security-settings[0].sned: unknown field `sned`, expected one of `match`, `send`"),
            "{unknown}"
        );
        assert!(
            err("[[security-settings]]\nmatch = \"#\"\nsend = \"admin\"\n")
                .starts_with("test.toml:3:8: security-settings[0].send: invalid type: string \"admin\", expected a sequence"),
        );
    }
}
