//! The `[[users]]` entries: who may log in, how, and with which roles.
//!
//! ```toml
//! [[users]]
//! name = "alice"
//! password-hash = "$argon2id$v=19$m=19456,t=2,p=1$..."   # from `rebound user hash-password`
//! roles = ["producers", "operators"]
//!
//! [[users]]
//! name = "billing-service"      # no password: logs in only by a client certificate
//! roles = ["consumers"]         # whose subject CN is this name (mutual TLS)
//! ```
//!
//! Only hashes are stored, never passwords, and only argon2id ones: a hash is
//! parsed at load (PHC string format, algorithm `argon2id`, parameters argon2
//! accepts), so a typo is a config error naming the key rather than a user who
//! silently cannot log in. Roles are plain names; the `[[security-settings]]`
//! entries say what each role may do.

use std::collections::HashMap;

use argon2::password_hash::PasswordHash;
use serde::Deserialize;
use toml::Spanned;

use crate::check::checked;
use crate::error::{ConfigError, Document};

/// A configured user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserConfig {
    /// The login name, unique; also what a client certificate's subject CN
    /// must say to log in as this user.
    pub name: String,
    /// An argon2id PHC string; `None` = the user can log in only by certificate.
    pub password_hash: Option<String>,
    /// The roles the user has; permissions are granted to roles.
    pub roles: Vec<String>,
}

/// One `[[users]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawUser {
    name: Spanned<String>,
    password_hash: Option<Spanned<String>>,
    #[serde(default)]
    roles: Vec<Spanned<String>>,
}

/// Validates the `[[users]]` tables: names non-empty and unique, hashes
/// argon2id, roles non-empty.
pub(crate) fn users(doc: &Document<'_>, raw: Vec<RawUser>) -> Result<Vec<UserConfig>, ConfigError> {
    let mut lines = HashMap::new();
    raw.into_iter()
        .enumerate()
        .map(|(i, user)| {
            let at = format!("users[{i}]");
            let start = user.name.span().start;
            let name = checked(doc, Some(user.name), user_name, || format!("{at}.name"))?.unwrap_or_default();
            if let Some(line) = lines.insert(name.clone(), doc.line(start)) {
                return Err(doc.error(
                    start,
                    Some(format!("{at}.name")),
                    format!("duplicate user `{name}`, first defined on line {line}"),
                ));
            }
            let password_hash = checked(doc, user.password_hash, password_hash, || {
                format!("{at}.password-hash")
            })?;
            let roles = user
                .roles
                .into_iter()
                .enumerate()
                .map(|(j, role)| {
                    checked(doc, Some(role), role_name, || format!("{at}.roles[{j}]"))
                        .map(Option::unwrap_or_default)
                })
                .collect::<Result<_, _>>()?;
            Ok(UserConfig {
                name,
                password_hash,
                roles,
            })
        })
        .collect()
}

/// A user name: not empty, no control characters, and no `:`, which HTTP
/// basic credentials use to separate the name from the password.
fn user_name(value: String) -> Result<String, String> {
    if value.is_empty() {
        Err("user name must not be empty".into())
    } else if value.chars().any(|c| c.is_control() || c == ':') {
        Err(format!(
            "user name {value:?} must not contain `:` or control characters"
        ))
    } else {
        Ok(value)
    }
}

/// A role name, in `[[users]]` and `[[security-settings]]` alike: not blank.
pub(crate) fn role_name(value: String) -> Result<String, String> {
    if value.trim().is_empty() {
        Err("role name must not be blank".into())
    } else {
        Ok(value)
    }
}

/// An argon2id hash in PHC string format whose parameters argon2 accepts.
fn password_hash(value: String) -> Result<String, String> {
    let hash = PasswordHash::new(&value)
        .map_err(|e| format!("not a PHC password hash ({e}); make one with `rebound user hash-password`"))?;
    if hash.algorithm != argon2::ARGON2ID_IDENT {
        return Err(format!(
            "must be an argon2id hash (got algorithm `{}`); make one with `rebound user hash-password`",
            hash.algorithm
        ));
    }
    argon2::Params::try_from(&hash).map_err(|e| format!("invalid argon2id parameters: {e}"))?;
    if hash.hash.is_none() {
        return Err("the PHC string has no hash part".into());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use crate::Config;

    // A well-formed argon2id hash (the default parameters), of no password in particular.
    const HASH: &str =
        "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$7o6/tIrNRnOYFJnbJ8j4zLAoP2hb/J81Cw4tkQ0NgU4";

    fn err(text: &str) -> String {
        Config::parse(text, "test.toml")
            .expect_err("should be refused")
            .to_string()
    }

    #[test]
    fn users_load_with_hashes_and_roles() {
        let config = Config::parse(
            &format!(
                "allow-anonymous = true\n[[users]]\nname = \"alice\"\npassword-hash = \"{HASH}\"\nroles = [\"a\", \"b\"]\n[[users]]\nname = \"CN Only\"\n"
            ),
            "test.toml",
        )
        .unwrap();
        assert!(config.allow_anonymous);
        assert_eq!(config.users.len(), 2);
        assert_eq!(config.users[0].name, "alice");
        assert_eq!(config.users[0].password_hash.as_deref(), Some(HASH));
        assert_eq!(config.users[0].roles, ["a", "b"]);
        assert_eq!(config.users[1].password_hash, None);
        assert!(config.users[1].roles.is_empty());
        let none = Config::parse("", "test.toml").unwrap();
        assert!(none.users.is_empty() && !none.allow_anonymous);
    }

    #[test]
    fn bad_users_are_refused_with_their_key() {
        let user = |body: &str| format!("[[users]]\n{body}\n");
        let cases = [
            (
                user("name = \"\""),
                "test.toml:2:8: users[0].name: user name must not be empty",
            ),
            (
                user("name = \"a:b\""),
                "test.toml:2:8: users[0].name: user name \"a:b\" must not contain `:` or control characters",
            ),
            (
                format!("{}{}", user("name = \"a\""), user("name = \"a\"")),
                "test.toml:4:8: users[1].name: duplicate user `a`, first defined on line 2",
            ),
            (
                user("name = \"a\"\nroles = [\"x\", \" \"]"),
                "test.toml:3:15: users[0].roles[1]: role name must not be blank",
            ),
            (
                user("name = \"a\"\npassword-hash = \"secret\""),
                "test.toml:3:17: users[0].password-hash: not a PHC password hash",
            ),
            (
                user(&format!(
                    "name = \"a\"\npassword-hash = \"{}\"",
                    HASH.replace("argon2id", "argon2i")
                )),
                "test.toml:3:17: users[0].password-hash: must be an argon2id hash (got algorithm `argon2i`)",
            ),
            (
                user(&format!(
                    "name = \"a\"\npassword-hash = \"{}\"",
                    HASH.replace("m=19456", "m=1")
                )),
                "test.toml:3:17: users[0].password-hash: invalid argon2id parameters",
            ),
            (
                user("roles = []"),
                "test.toml:1:1: users[0]: missing field `name`",
            ),
            (
                user("name = \"a\"\npassword = \"x\""),
                "test.toml:3:1: users[0].password: unknown field",
            ),
        ];
        for (text, expected) in cases {
            let err = err(&text);
            assert!(err.starts_with(expected), "{err}\nexpected: {expected}");
        }
    }
}
